//! The accept loop of one listening socket: a cap on open connections, accept errors backed
//! off (never a busy loop when descriptors run out), and graceful shutdown (stop accepting,
//! tell every connection to finish, wait for them). Each connection is served by
//! `connection.rs`.
//!
//! Stopping, the loop first accepts every connection already waiting in the listen backlog
//! (their handshake is done: the client may have sent its request already) and serves them
//! like the open ones; only then does it close the socket. Closing a socket with a backlog
//! resets those connections, and a load balancer that sent a request on one cannot know
//! whether it was acted on. After the close a connect is refused, which a balancer retries on
//! another server.
//!
//! At the cap the loop stops calling `accept`: new connections wait in the kernel's listen
//! backlog (and, once it is full, their SYNs go unanswered and clients retry) until an open
//! connection closes. Accepting and closing them at once would answer sooner but costs a
//! descriptor and a wake-up per attempt exactly when the server is busiest.
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use super::connection::{self, Routes, Shared};
use super::send_budget::Unsent;
use super::tls::Tls;
use crate::error::BoxError;

/// The connection-level limits and timeouts of a server's listeners.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Connections open at once, per listener; more wait in the listen backlog.
    pub max_connections: usize,
    /// A connection with no request in flight for this long is closed (HTTP/2: GOAWAY first);
    /// `None`: never. Covers connections that never send a byte or stop halfway through the
    /// HTTP/2 preface. Streams (SubscribeToTask, SSE) are requests in flight.
    pub idle_timeout: Option<Duration>,
    /// HTTP/1.1: the time a client has to send a request's headers, from their first byte (a
    /// kept-alive connection waiting for its next request is under the idle timeout instead).
    pub header_read_timeout: Duration,
    /// The time a client has to send a request's body, from its headers on; then the body
    /// fails and the request with it. `None`: no limit.
    pub body_read_timeout: Option<Duration>,
    /// HTTP/2 streams a client may open at once on one connection.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 PING interval on a quiet connection, to find dead peers (and keep NAT and
    /// load-balancer state warm); `None`: no pings.
    pub http2_keepalive_interval: Option<Duration>,
    /// How long a PING may go unanswered before the connection is closed.
    pub http2_keepalive_timeout: Duration,
    /// The pause after an accept error that is not about one connection (EMFILE, ENFILE,
    /// ENOBUFS, ENOMEM): the server sleeps instead of retrying at once.
    pub accept_backoff: Duration,
    /// HTTP/2 GOAWAY on every connection after this age (streams in flight finish); `None`:
    /// never.
    pub max_connection_age: Option<Duration>,
    /// While the server drains: how long a connection with nothing in flight stays open before
    /// the server closes it. Its HTTP/1.1 answers meanwhile say `Connection: close`, so a load
    /// balancer about to reuse it still gets its answer; HTTP/2 gets a GOAWAY at once.
    pub drain_keepalive_grace: Duration,
    /// An answer that holds unsent bytes and makes no write progress for this long is cut
    /// (HTTP/2: its stream reset; HTTP/1.1: its connection closed) and what it held freed;
    /// `None`: never. See `send_watch.rs`.
    pub send_timeout: Option<Duration>,
    /// Bytes of answers encoded and not yet written that one connection may hold; an answer
    /// that does not fit is refused with RESOURCE_EXHAUSTED. See `send_budget.rs`.
    pub max_unsent_bytes_per_connection: usize,
    /// The same, for the whole server (every listener together).
    pub max_unsent_bytes: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(descriptor_limit()),
            idle_timeout: Some(Duration::from_secs(120)),
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Some(Duration::from_secs(60)),
            http2_max_concurrent_streams: 1000,
            http2_keepalive_interval: Some(Duration::from_secs(30)),
            http2_keepalive_timeout: Duration::from_secs(20),
            accept_backoff: Duration::from_millis(100),
            max_connection_age: None,
            drain_keepalive_grace: Duration::from_millis(1000),
            send_timeout: Some(Duration::from_secs(30)),
            max_unsent_bytes_per_connection: 32 << 20,
            max_unsent_bytes: 64 << 20,
        }
    }
}

/// The process's soft limit on open files (`RLIMIT_NOFILE`), if it can be read.
pub fn descriptor_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    #[allow(unsafe_code)]
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    read.then_some(if limit.rlim_cur == libc::RLIM_INFINITY { u64::MAX } else { limit.rlim_cur })
}

/// The default connection cap for a descriptor limit: the limit less a quarter of it (at least
/// 32, at most 1024) kept for everything else the process opens — webhooks, the store, exec
/// agents' pipes, files. 768 at the common limit of 1024.
pub fn default_max_connections(limit: Option<u64>) -> usize {
    let limit = limit.unwrap_or(1024).min(1 << 24);
    let headroom = (limit / 4).clamp(32, 1024);
    usize::try_from(limit.saturating_sub(headroom).max(1)).unwrap_or(usize::MAX)
}

/// Serves `routes` on `listener` until `shutdown` resolves, then waits for the open
/// connections to finish.
pub(super) async fn serve(
    listener: TcpListener,
    routes: Routes,
    shutdown: impl Future<Output = ()> + Send,
    settings: ConnectionSettings,
    tls: Option<Arc<Tls>>,
    unsent: Arc<Unsent>,
) -> Result<(), BoxError> {
    let permits = Arc::new(Semaphore::new(settings.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let backoff = settings.accept_backoff;
    let shared = Arc::new(Shared::new(routes, settings, tls, unsent));
    // Each connection holds a receiver: the loop signals through it and waits until all are
    // dropped.
    let (signal, connections) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    let mut at_cap = Warning::new("connection cap reached; new connections wait in the listen backlog");
    let mut failing = Warning::new("accept failed; backing off");
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                at_cap.log(None);
                tokio::select! {
                    () = &mut shutdown => break,
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                tokio::spawn(connection::serve(shared, stream, peer, connections.clone(), permit));
            }
            // The client gave up before it was accepted: nothing to wait for.
            Err(error) if is_about_one_connection(&error) => {}
            Err(error) => {
                // EMFILE and the like: retrying at once would spin (the listener stays
                // readable); wait for descriptors to come back.
                failing.log(Some(&error));
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(backoff) => {}
                }
            }
        }
    }
    accept_backlog(listener, &permits, &shared, &connections);
    let _ = signal.send(());
    drop(connections);
    signal.closed().await;
    Ok(())
}

/// Accepts, without waiting, the connections whose handshake the kernel has completed, and
/// serves them; then closes the socket, so the kernel refuses connections from now on. Past the
/// connection cap the rest are reset by the close, as before.
fn accept_backlog(
    listener: TcpListener,
    permits: &Arc<Semaphore>,
    shared: &Arc<Shared>,
    connections: &watch::Receiver<()>,
) {
    // Out of tokio, an accept that would block says so instead of waiting for readiness the
    // runtime may not have seen yet.
    let Ok(listener) = listener.into_std() else { return };
    let mut accepted = 0usize;
    while let Ok(permit) = permits.clone().try_acquire_owned() {
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(error) if is_about_one_connection(&error) => continue,
            Err(_) => break,
        };
        // An accepted socket does not inherit the listener's non-blocking mode.
        let Ok(stream) = stream.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(stream))
        else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection::serve(shared.clone(), stream, peer, connections.clone(), permit));
        accepted += 1;
    }
    if accepted > 0 {
        tracing::debug!(accepted, "served the connections waiting in the listen backlog");
    }
    // Dropping the socket closes it: the kernel stops completing handshakes for us.
}

/// Errors `accept` returns for one failed incoming connection, after which the next accept
/// may well succeed.
fn is_about_one_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(error.kind(), ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted)
        || error.raw_os_error() == Some(libc::EPROTO)
}

/// A warning logged at most once per [`Warning::EVERY`], saying how often it happened since.
struct Warning {
    what: &'static str,
    last: Option<Instant>,
    since: u64,
}

impl Warning {
    const EVERY: Duration = Duration::from_secs(10);

    fn new(what: &'static str) -> Self {
        Self { what, last: None, since: 0 }
    }

    fn log(&mut self, error: Option<&std::io::Error>) {
        self.since += 1;
        if self.last.is_some_and(|last| last.elapsed() < Self::EVERY) {
            return;
        }
        match error {
            Some(error) => tracing::warn!(%error, times = self.since, "{}", self.what),
            None => tracing::warn!(times = self.since, "{}", self.what),
        }
        self.last = Some(Instant::now());
        self.since = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_leaves_headroom_below_the_descriptor_limit() {
        assert_eq!(default_max_connections(Some(1024)), 768);
        assert_eq!(default_max_connections(Some(64)), 32);
        assert_eq!(default_max_connections(Some(65_536)), 64_512);
        assert_eq!(default_max_connections(Some(10)), 1);
        assert!(default_max_connections(Some(u64::MAX)) < usize::MAX);
        assert!(descriptor_limit().is_some_and(|limit| limit > 0));
    }
}
