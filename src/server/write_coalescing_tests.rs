use std::convert::Infallible;
use std::sync::atomic::AtomicUsize;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// The server's socket, counting the writes that reach it.
struct CountingWrites {
    io: TcpStream,
    writes: Arc<AtomicUsize>,
}

impl AsyncRead for CountingWrites {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountingWrites {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

const BURST: usize = 16;

/// Serves one HTTP/2 connection on loopback (coalescing or not) whose answers are `size`
/// bytes, sends it one request and then `burst` more in a single write, and returns how many
/// writes the server made for the burst's answers. The answers together stay within the
/// client's flow-control window, so that all of them can be sent before any is read.
async fn writes_for_a_burst(coalesce: bool, size: usize, burst: usize) -> usize {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = writes.clone();
    let server = tokio::spawn(async move {
        let (io, _) = listener.accept().await.expect("accept");
        let unstarted = Arc::new(Unstarted::default());
        let io = Coalescing::new(CountingWrites { io, writes: counted }, unstarted.clone());
        let body = Bytes::from(vec![b'a'; size]);
        let answer = hyper::service::service_fn(move |_: Request<hyper::body::Incoming>| {
            let body = body.clone();
            async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
        });
        let connection = hyper::server::conn::http2::Builder::new(StreamExecutor)
            .serve_connection(TokioIo::new(io), answer);
        // Without the scope the executor counts nothing, and no write is ever put off.
        let served = match coalesce {
            true => counting(unstarted, connection).await,
            false => connection.await,
        };
        served.expect("the connection serves");
    });

    let tcp = TcpStream::connect(address).await.expect("connect");
    let (mut client, connection) = h2::client::handshake(tcp).await.expect("handshake");
    let mut connection = Box::pin(connection);
    let request = || Request::post("http://test/answer").body(()).expect("request");
    let ask =
        |client: &mut h2::client::SendRequest<Bytes>| client.send_request(request(), true).expect("send").0;
    // One call first, so that the settings exchange is over before the burst.
    let first = ask(&mut client);
    tokio::select! {
        response = first => assert_eq!(response.expect("answered").status(), 200),
        _ = connection.as_mut() => panic!("the connection ended"),
    }
    let before = writes.load(Ordering::Relaxed);
    // Queued before the connection is polled again: they go out in one write.
    let burst: Vec<_> = (0..burst).map(|_| ask(&mut client)).collect();
    let answered = futures::future::join_all(burst);
    tokio::select! {
        responses = answered => for response in responses {
            let mut body = response.expect("answered").into_body();
            let mut received = 0;
            while let Some(chunk) = body.data().await {
                let chunk = chunk.expect("a chunk");
                received += chunk.len();
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            assert_eq!(received, size);
        },
        _ = connection.as_mut() => panic!("the connection ended"),
    }
    let burst_writes = writes.load(Ordering::Relaxed) - before;
    drop(client);
    let _ = connection.await;
    server.await.expect("the server ran");
    burst_writes
}

/// One runtime worker, so that the streams hyper spawns queue on the worker that runs the
/// connection, as they do under load (a stream spawned from a worker runs there first).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_burst_of_quick_answers_leaves_in_fewer_writes() {
    // Small answers (gRPC's) and answers of a JSON task's size share writes.
    for size in [6, 500] {
        let plain = writes_for_a_burst(false, size, BURST).await;
        let coalesced = writes_for_a_burst(true, size, BURST).await;
        eprintln!("{BURST} answers of {size} B: {plain} writes plain, {coalesced} coalesced");
        assert!(coalesced <= 2, "{size} B: {coalesced} writes for {BURST} answers, coalescing");
        assert!(plain > coalesced, "{size} B: {plain} writes without coalescing, {coalesced} with it");
    }
    // Answers too large to gather, which the codec keeps apart and writes at once: each in
    // one vectored write with what was buffered before it, not two.
    let coalesced = writes_for_a_burst(true, 5_000, 8).await;
    eprintln!("8 answers of 5000 B: {coalesced} writes coalesced");
    assert!(coalesced <= 8, "{coalesced} writes for 8 answers of 5,000 B");
}

#[tokio::test]
async fn a_stream_counts_until_its_first_poll_ends() {
    let unstarted = Arc::new(Unstarted::default());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    counting(unstarted.clone(), async {
        hyper::rt::Executor::execute(&StreamExecutor, async move {
            let _ = rx.await;
        });
    })
    .await;
    assert!(unstarted.waiting(), "spawned, not yet polled");
    // The stream's first poll waits on `rx`, and it stops counting then.
    for _ in 0..100 {
        if !unstarted.waiting() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(!unstarted.waiting(), "polled once");
    drop(tx);
}

#[test]
fn a_stream_dropped_unpolled_stops_counting() {
    let unstarted = Arc::new(Unstarted::default());
    unstarted.spawn();
    drop(FirstPoll { future: std::future::ready(()), unstarted: Some(unstarted.clone()) });
    assert!(!unstarted.waiting());
}

/// Outside a connection's scope (nothing there to count it in) a future is still spawned.
#[test]
fn outside_a_connection_the_executor_still_spawns() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let (tx, rx) = tokio::sync::oneshot::channel();
        hyper::rt::Executor::execute(&StreamExecutor, async move {
            let _ = tx.send(());
        });
        rx.await.expect("the spawned future ran");
    });
}

/// A writer that records each write, taking at most `take` bytes a call; `full` makes its
/// next write wait, as a full socket does.
struct Recorder {
    writes: Vec<Vec<u8>>,
    take: usize,
    full: bool,
}

impl AsyncWrite for Recorder {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if std::mem::take(&mut self.full) {
            return Poll::Pending;
        }
        let n = buf.len().min(self.take);
        self.writes.push(buf[..n].to_vec());
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).take(self.take).collect();
        let n = joined.len();
        self.writes.push(joined);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn recording(take: usize) -> (Coalescing<Recorder>, Arc<Unstarted>) {
    let unstarted = Arc::new(Unstarted::default());
    (Coalescing::new(Recorder { writes: Vec::new(), take, full: false }, unstarted.clone()), unstarted)
}

/// Writes `buf` in full, as a codec does.
fn write_all(io: &mut Coalescing<Recorder>, cx: &mut Context<'_>, mut buf: &[u8]) {
    while !buf.is_empty() {
        match Pin::new(&mut *io).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) if n > 0 => buf = &buf[n..],
            other => panic!("write: {other:?}"),
        }
    }
}

fn flush(io: &mut Coalescing<Recorder>, cx: &mut Context<'_>) {
    assert!(matches!(Pin::new(&mut *io).poll_flush(cx), Poll::Ready(Ok(()))));
}

#[test]
fn what_one_flush_writes_goes_out_in_one_call() {
    let (mut io, _) = recording(usize::MAX);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    write_all(&mut io, &mut cx, b"head");
    write_all(&mut io, &mut cx, b"ers");
    assert!(io.io.writes.is_empty(), "gathered until the flush");
    flush(&mut io, &mut cx);
    // A large payload the codec kept apart goes with what was gathered, in one vectored call.
    write_all(&mut io, &mut cx, b"frame head ");
    write_all(&mut io, &mut cx, &[b'p'; GATHER_BYTES]);
    flush(&mut io, &mut cx);
    // A large first write goes out as it is.
    write_all(&mut io, &mut cx, &[b'q'; GATHER_BYTES]);
    flush(&mut io, &mut cx);
    let expected: Vec<Vec<u8>> = vec![
        b"headers".to_vec(),
        [&b"frame head "[..], &[b'p'; GATHER_BYTES]].concat(),
        vec![b'q'; GATHER_BYTES],
    ];
    assert_eq!(io.io.writes, expected);
    assert_eq!(io.gathered.capacity(), 0, "nothing held between flushes");
}

#[test]
fn short_writes_lose_nothing_and_keep_the_order() {
    let (mut io, _) = recording(7);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let large: Vec<u8> = (0..GATHER_BYTES + 100).map(|i| (i % 251) as u8).collect();
    write_all(&mut io, &mut cx, b"0123456789abc");
    write_all(&mut io, &mut cx, &large);
    write_all(&mut io, &mut cx, b"tail");
    flush(&mut io, &mut cx);
    let sent: Vec<u8> = io.io.writes.concat();
    assert_eq!(sent, [&b"0123456789abc"[..], &large, b"tail"].concat());
}

/// Counts the wake-ups a task gets.
struct Wakes(AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A batch of spawned streams puts off one write, which wakes the connection's task to come
/// back; the writes after it go out, however long the streams wait, and a new batch puts off
/// one write again.
#[test]
fn a_batch_of_streams_puts_off_one_write() {
    let (mut io, unstarted) = recording(usize::MAX);
    let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
    let waker = std::task::Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    let woken = || wakes.0.load(Ordering::Relaxed);
    unstarted.spawn();
    assert!(Pin::new(&mut io).poll_write(&mut cx, b"a").is_pending(), "put off");
    assert_eq!(woken(), 1, "and its task woken to come back");
    write_all(&mut io, &mut cx, b"a");
    write_all(&mut io, &mut cx, b"b");
    flush(&mut io, &mut cx);
    // The stream still waits, but it has put off its write already.
    write_all(&mut io, &mut cx, b"c");
    flush(&mut io, &mut cx);
    unstarted.spawn();
    assert!(Pin::new(&mut io).poll_write(&mut cx, b"d").is_pending(), "a new batch puts one off");
    assert_eq!(woken(), 2);
    write_all(&mut io, &mut cx, b"d");
    flush(&mut io, &mut cx);
    assert_eq!(io.io.writes, vec![b"ab".to_vec(), b"c".to_vec(), b"d".to_vec()]);
}

/// A write put off, then held up by a full socket, is not put off again when the socket
/// drains, even if more streams were spawned meanwhile.
#[test]
fn a_write_is_never_put_off_twice_in_a_row() {
    let (mut io, unstarted) = recording(usize::MAX);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let large = vec![b'x'; GATHER_BYTES];
    unstarted.spawn();
    assert!(Pin::new(&mut io).poll_write(&mut cx, &large).is_pending(), "put off");
    io.io.full = true;
    assert!(Pin::new(&mut io).poll_write(&mut cx, &large).is_pending(), "the socket is full");
    unstarted.spawn();
    write_all(&mut io, &mut cx, &large);
    flush(&mut io, &mut cx);
    assert_eq!(io.io.writes, vec![large.clone()]);
    // Written: the next batch may put a write off again.
    assert!(Pin::new(&mut io).poll_write(&mut cx, b"e").is_pending());
}
