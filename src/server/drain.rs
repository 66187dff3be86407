//! Graceful shutdown, in the order a load balancer needs it.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tonic_health::server::HealthReporter;

use crate::core::Core;
use crate::proto::SERVICE_NAME;

/// How often a draining fleet replica hibernates the tasks that have come to wait for input
/// since it last looked (a task started by a call served during the drain, or one whose agent
/// asked for input), so none of them waits here to be cancelled at the drain timeout.
const PARK_EVERY: Duration = Duration::from_millis(200);

/// A running server's drain, from [`Running::drain`](super::Running::drain).
pub struct Drain {
    /// The core, to end streams and, at the deadline, cancel tasks.
    pub(super) core: Arc<Core>,
    /// `grpc.health.v1`, set to NOT_SERVING first.
    pub(super) health: HealthReporter,
    /// `/readyz`, set to 503 first.
    pub(super) ready: Arc<AtomicBool>,
    /// Tells the listeners to stop accepting.
    pub(super) stop: watch::Sender<bool>,
    /// How long in-flight calls and running tasks may take, from the signal, before running
    /// tasks are cancelled.
    pub(super) timeout: Duration,
    /// How long the listeners keep accepting after health went NOT_SERVING.
    pub(super) delay: Duration,
}

impl Drain {
    /// Keeps accepting connections for `delay` after health and readiness went NOT_SERVING
    /// (default: none), for load balancers that probe them: they stop sending new
    /// connections here before the listener closes. The calls that arrive meanwhile are served.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Health goes NOT_SERVING and `/readyz` 503; open streams end with the resumable close
    /// (clients resubscribe elsewhere); in a fleet, tasks waiting for their client hibernate to
    /// the shared store, now and whenever another comes to wait. After the delay the listeners
    /// serve the connections already waiting in their backlog and close, and every connection
    /// closes gracefully (HTTP/2 GOAWAY; HTTP/1.1 answers `Connection: close`, and idle ones
    /// close after a grace): calls that reach the server on its open connections meanwhile are
    /// served, never refused. Once the timeout passes, running tasks are cancelled, which
    /// answers every blocked call, and the process exits soon after.
    pub async fn run(self) {
        tracing::info!(timeout = ?self.timeout, delay = ?self.delay, "draining");
        let deadline = tokio::time::Instant::now() + self.timeout;
        self.health.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        self.health.set_service_status(SERVICE_NAME, tonic_health::ServingStatus::NotServing).await;
        self.ready.store(false, Ordering::Relaxed);
        self.core.begin_shutdown();
        let in_fleet = self.core.fleet().is_some();
        let mut park = tokio::time::interval(PARK_EVERY);
        let stop_at = tokio::time::Instant::now() + self.delay;
        let mut stopped = false;
        loop {
            tokio::select! {
                biased;
                _ = park.tick(), if in_fleet => {
                    // The other replicas serve waiting tasks from the shared store from now on.
                    self.core.park_waiting();
                }
                () = tokio::time::sleep_until(stop_at), if !stopped => {
                    stopped = true;
                    let _ = self.stop.send(true);
                }
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        let _ = self.stop.send(true);
        tracing::warn!("drain timeout passed; cancelling running tasks");
        self.core.cancel_all().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        tracing::error!("calls still open 5 s after cancelling every task; exiting");
        std::process::exit(1);
    }
}
