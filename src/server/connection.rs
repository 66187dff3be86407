//! One accepted connection, from the TLS handshake (when configured) to its close: HTTP/1.1 or
//! HTTP/2 (h2c prior knowledge, or ALPN `h2`) on the same socket, served by the routes, and
//! closed when it has had no request in flight for the idle timeout, when it reaches its
//! maximum age (GOAWAY; calls in flight finish), or when the server stops.
//!
//! Closing is graceful first (HTTP/2 GOAWAY; HTTP/1.1 closes between requests; a connection
//! still deciding its protocol closes at once); a connection still open a tenth of the idle
//! timeout after that, with still nothing in flight, is dropped. The idle timeout counts from
//! the end of the connection's last request, so an idle connection closes at the timeout, not
//! up to twice it.
//!
//! When the server drains, no request a client has already sent is lost: an HTTP/2 connection
//! gets its GOAWAY at once (hyper's graceful GOAWAY still serves the streams the client opened
//! before it saw it); an HTTP/1.1 connection (or one that has sent nothing yet) stays open, its
//! answers saying `Connection: close`, until it has had nothing in flight for
//! [`ConnectionSettings::drain_keepalive_grace`]. Closing an idle kept-alive connection at once
//! would race a load balancer that is writing its next request on it, and that request would
//! fail unanswered (nginx never resends a POST it has sent).
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::rt::{Read, Write};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, watch};

use super::answer::Answers;
use super::direct_grpc::DirectGrpc;
use super::http1_guard::Http1Guard;
use super::in_flight::{Activity, InFlight};
use super::listener::ConnectionSettings;
use super::send_budget::{self, SendBudget, Unsent};
use super::send_watch::{self, SendWatch, Sends, Written};
use super::tls::{self, Tls};
use super::write_coalescing::{self, Coalescing, StreamExecutor, Unstarted};
use crate::auth::ClientCertificate;

/// What one listener serves: the router, and the A2A gRPC service its plain gRPC calls take
/// directly when the listener serves gRPC (see `direct_grpc.rs`).
#[derive(Clone)]
pub(super) struct Routes {
    pub(super) router: axum::Router,
    pub(super) direct: Option<DirectGrpc>,
}

/// What every connection of one listener shares.
pub(super) struct Shared {
    builder: auto::Builder<StreamExecutor>,
    routes: Routes,
    settings: ConnectionSettings,
    tls: Option<Arc<Tls>>,
    /// The server's count of unsent answer bytes (`send_budget.rs`).
    unsent: Arc<Unsent>,
}

impl Shared {
    pub(super) fn new(
        routes: Routes,
        settings: ConnectionSettings,
        tls: Option<Arc<Tls>>,
        unsent: Arc<Unsent>,
    ) -> Self {
        let mut builder = auto::Builder::new(StreamExecutor);
        builder
            .http1()
            .timer(TokioTimer::new())
            // The guard times request heads from their first byte instead (see http1_guard.rs).
            .header_read_timeout(None)
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(settings.http2_max_concurrent_streams)
            // What h2 queues per stream beyond the send budget's count: two chunks, so a
            // peer that opens its window and then stops reading pins little per stream.
            .max_send_buf_size(2 * send_budget::CHUNK)
            .keep_alive_interval(settings.http2_keepalive_interval)
            .keep_alive_timeout(settings.http2_keepalive_timeout);
        Self { builder, routes, settings, tls, unsent }
    }

    /// A connection's byte stream, guarded (see `http1_guard.rs`) and ready for hyper.
    /// `unstarted` counts the connection's streams not yet polled (see `write_coalescing.rs`).
    /// `written` hears of every write to the socket (an HTTP/1.1 answer's progress).
    fn guard<S>(
        &self,
        stream: S,
        unstarted: Arc<Unstarted>,
        written: Arc<SendWatch>,
    ) -> TokioIo<Coalescing<Http1Guard<Written<S>>>> {
        let guarded = Http1Guard::new(Written::new(stream, written), Some(self.settings.header_read_timeout));
        TokioIo::new(Coalescing::new(guarded, unstarted))
    }
}

/// Serves one accepted connection until it closes; `_permit` is its place under the cap, and
/// `stop` changes when the server stops.
pub(super) async fn serve(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    stop: watch::Receiver<()>,
    _permit: OwnedSemaphorePermit,
) {
    let unstarted = Arc::new(Unstarted::default());
    let sends = Arc::new(Sends::new(shared.settings.send_timeout));
    let http1 = Arc::new(SendWatch::default());
    let Some(tls) = &shared.tls else {
        let io = shared.guard(stream, unstarted.clone(), http1.clone());
        let run = run(&shared, io, Peer { certificate: None }, stop, (sends.clone(), http1));
        return write_coalescing::counting(unstarted, send_watch::connection(sends, run)).await;
    };
    // Not cut when the server stops: a connection accepted just before is served like any
    // open one (see `run`), and the handshake has its own timeout.
    let handshake = tokio::time::timeout(tls.settings().handshake_timeout, tls.acceptor().accept(stream));
    let stream = match handshake.await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => return tracing::debug!(%peer, %error, "TLS handshake failed"),
        Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
    };
    let certificate = tls::client_certificate(stream.get_ref().1);
    let io = shared.guard(stream, unstarted.clone(), http1.clone());
    let run = run(&shared, io, Peer { certificate }, stop, (sends.clone(), http1));
    write_coalescing::counting(unstarted, send_watch::connection(sends, run)).await;
}

/// Who is at the other end of a connection, as far as its requests need to know.
pub(super) struct Peer {
    /// The client certificate TLS verified, a credential for the auth layer.
    pub(super) certificate: Option<Arc<ClientCertificate>>,
}

/// Serves a connection; `sends` is what its HTTP/2 streams report stalls to, `http1` the
/// watch of its HTTP/1.1 answer.
async fn run<I>(
    shared: &Shared,
    io: I,
    peer: Peer,
    mut stop: watch::Receiver<()>,
    (sends, http1): (Arc<Sends>, Arc<SendWatch>),
) where
    I: Read + Write + Unpin + Send + 'static,
{
    let settings = &shared.settings;
    let activity = Arc::new(Activity::default());
    let budget = SendBudget::new(
        settings.max_unsent_bytes_per_connection,
        shared.unsent.clone(),
        settings.send_timeout,
    );
    let answers = Arc::new(Answers { budget, http1 });
    let mut stalled = std::pin::pin!(send_watch::stalled(answers.http1.clone(), settings.send_timeout));
    let service =
        InFlight::new(shared.routes.clone(), activity.clone(), settings.body_read_timeout, peer, answers);
    let connection = shared.builder.serve_connection(io, TowerToHyperService::new(service));
    let mut connection = std::pin::pin!(connection);
    let mut age = std::pin::pin!(after(settings.max_connection_age));
    let mut idle = std::pin::pin!(idle(activity.clone(), settings.idle_timeout));
    let (mut aged, mut stopping, mut closing, mut stalled_streams) = (false, false, false, false);
    loop {
        tokio::select! {
            // In this order: `stalled` must look after the connection's answer was polled.
            biased;
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            // HTTP/1.1 cannot cut one answer and go on: the connection goes with it.
            () = &mut stalled => {
                tracing::debug!("HTTP/1.1 answer stalled; closing the connection");
                return;
            }
            // A stalled HTTP/2 stream was reset: once nothing else is in flight (now, or when
            // the rest of its answers have stalled or ended too), the peer reads nothing at all.
            // Cuts may come together and be heard as one, so this waits for quiet, not a count.
            () = sends.cut(), if !stalled_streams => stalled_streams = true,
            () = activity.quiet(), if stalled_streams => {
                tracing::debug!("every answer on the connection stalled or ended; closing it");
                return;
            }
            () = &mut age, if !aged => {
                aged = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = stop.changed(), if !stopping => {
                stopping = true;
                activity.drain();
                if activity.is_http2() {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
                // HTTP/1.1 (or nothing yet): closed once quiet for the grace; HTTP/2: dropped
                // if still open after a quiet grace past its GOAWAY.
                idle.set(self::idle(activity.clone(), Some(settings.drain_keepalive_grace)));
            }
            () = &mut idle => {
                if closing {
                    tracing::debug!("idle connection did not close; dropping it");
                    return;
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
                let timeout =
                    if stopping { Some(settings.drain_keepalive_grace) } else { settings.idle_timeout.map(|t| t / 10) };
                idle.set(self::idle(activity.clone(), timeout));
            }
        }
    }
}

/// Resolves after `duration`, or never.
async fn after(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

/// Resolves once the connection has had no request in flight for `timeout` (never without one),
/// counted from its last request's end or from now, whichever is later.
fn idle(activity: Arc<Activity>, timeout: Option<Duration>) -> impl Future<Output = ()> {
    let from = tokio::time::Instant::now();
    async move {
        let Some(timeout) = timeout else { return std::future::pending().await };
        loop {
            activity.quiet().await;
            let seen = (activity.requests(), activity.quiet_since());
            let since = seen.1.map_or(from, |at| at.max(from));
            tokio::time::sleep_until(since + timeout).await;
            if activity.in_flight() == 0 && (activity.requests(), activity.quiet_since()) == seen {
                return;
            }
        }
    }
}
