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

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

const BURST: usize = 16;

/// Serves one HTTP/2 connection on loopback (coalescing or not), sends it one request and
/// then `BURST` more in a single write, and returns how many writes the server made for the
/// burst's answers.
async fn writes_for_a_burst(coalesce: bool) -> usize {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = writes.clone();
    let server = tokio::spawn(async move {
        let (io, _) = listener.accept().await.expect("accept");
        let unstarted = Arc::new(Unstarted::default());
        let io = Coalescing::new(CountingWrites { io, writes: counted }, unstarted.clone());
        let answer = hyper::service::service_fn(|_: Request<hyper::body::Incoming>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"answer"))))
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
    let mut connection = std::pin::pin!(connection);
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
    let burst: Vec<_> = (0..BURST).map(|_| ask(&mut client)).collect();
    let answered = futures::future::join_all(burst);
    tokio::select! {
        responses = answered => {
            assert!(responses.into_iter().all(|r| r.is_ok_and(|r| r.status() == 200)));
        }
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
    let plain = writes_for_a_burst(false).await;
    let coalesced = writes_for_a_burst(true).await;
    eprintln!("answers to {BURST} requests: {plain} writes plain, {coalesced} coalesced");
    assert!(coalesced <= 2, "{coalesced} writes for {BURST} answers, coalescing");
    assert!(plain > coalesced, "without coalescing there were {plain} writes, with it {coalesced}");
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
    unstarted.0.fetch_add(1, Ordering::AcqRel);
    drop(FirstPoll { future: std::future::ready(()), unstarted: Some(unstarted.clone()) });
    assert!(!unstarted.waiting());
}

#[test]
fn outside_a_connection_nothing_is_counted_and_nothing_waits() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let (tx, rx) = tokio::sync::oneshot::channel();
        hyper::rt::Executor::execute(&StreamExecutor, async move {
            let _ = tx.send(());
        });
        rx.await.expect("the spawned future ran");
    });
}

/// A write is put off at most once in a row, whatever still waits.
#[test]
fn a_write_is_put_off_once_at_most() {
    let unstarted = Arc::new(Unstarted::default());
    unstarted.0.fetch_add(1, Ordering::AcqRel);
    let mut io = Coalescing::new(Vec::<u8>::new(), unstarted.clone());
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(Pin::new(&mut io).poll_write(&mut cx, b"a").is_pending(), "put off");
    assert!(matches!(Pin::new(&mut io).poll_write(&mut cx, b"b"), Poll::Ready(Ok(1))), "then written");
    assert!(Pin::new(&mut io).poll_write(&mut cx, b"c").is_pending(), "put off again, once");
    started(&mut Some(unstarted));
    assert!(matches!(Pin::new(&mut io).poll_write(&mut cx, b"d"), Poll::Ready(Ok(1))), "nothing waits");
    assert_eq!(io.io, b"bd");
}
