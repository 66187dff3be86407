//! Graceful shutdown, in the order a load balancer needs it.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tonic_health::server::HealthReporter;

use crate::core::Core;
use crate::proto::SERVICE_NAME;

/// A running server's drain, from [`Running::drain`](super::Running::drain).
pub struct Drain {
    /// The core, to stop new calls, end streams and, at the deadline, cancel tasks.
    pub(super) core: Arc<Core>,
    /// `grpc.health.v1`, set to NOT_SERVING first.
    pub(super) health: HealthReporter,
    /// `/readyz`, set to 503 first.
    pub(super) ready: Arc<AtomicBool>,
    /// Tells the listeners to stop accepting.
    pub(super) stop: watch::Sender<bool>,
    /// How long in-flight unary calls may take before running tasks are cancelled.
    pub(super) timeout: Duration,
}

impl Drain {
    /// Health goes NOT_SERVING and `/readyz` 503; new calls are refused and open streams end
    /// with UNAVAILABLE (clients resubscribe elsewhere); in a fleet, tasks waiting for their
    /// client hibernate to the shared store at once; the listeners stop accepting and wait
    /// for in-flight calls; if that takes longer than the timeout, running tasks are cancelled,
    /// which answers every blocked call, and the process exits soon after.
    pub async fn run(self) {
        tracing::info!(timeout = ?self.timeout, "draining");
        self.health.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        self.health.set_service_status(SERVICE_NAME, tonic_health::ServingStatus::NotServing).await;
        self.ready.store(false, Ordering::Relaxed);
        self.core.begin_shutdown();
        if self.core.fleet().is_some() {
            // The other replicas serve waiting tasks from the shared store from now on.
            self.core.park_waiting();
        }
        let _ = self.stop.send(true);
        tokio::time::sleep(self.timeout).await;
        tracing::warn!("drain timeout passed; cancelling running tasks");
        self.core.cancel_all().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        tracing::error!("calls still open 5 s after cancelling every task; exiting");
        std::process::exit(1);
    }
}
