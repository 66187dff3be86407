//! A fleet replica is only as healthy as its shared store: while Redis does not answer,
//! `grpc.health.v1` says NOT_SERVING and `/readyz` 503, so load balancers send calls to
//! replicas that can serve them; both come back by themselves when Redis does.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::core::Core;
use crate::proto::SERVICE_NAME;
use crate::task::fleet::Fleet;

/// How often the store is asked while it answers.
const PERIOD: Duration = Duration::from_secs(1);

/// How often it is asked while it does not: a replica refuses calls while it sees the store
/// down (fast UNAVAILABLE, not a hang), so it must see it back soon after it is.
const RECHECK: Duration = Duration::from_millis(100);

/// Checks the store every [`PERIOD`] for as long as the server runs, and reports changes; a
/// draining server stays NOT_SERVING whatever the store says.
pub(super) async fn watch(
    fleet: Arc<dyn Fleet>,
    core: Arc<Core>,
    health: HealthReporter,
    ready: Arc<AtomicBool>,
) {
    let mut serving = true;
    loop {
        tokio::time::sleep(if serving { PERIOD } else { RECHECK }).await;
        if core.is_draining() {
            return;
        }
        let healthy = fleet.healthy().await;
        if healthy == serving || core.is_draining() {
            continue;
        }
        serving = healthy;
        let status = if healthy { ServingStatus::Serving } else { ServingStatus::NotServing };
        if healthy {
            metrics::counter!("a2a_redis_recoveries_total").increment(1);
            tracing::info!("the task store answers again; serving");
        } else {
            tracing::error!("the task store does not answer; not serving until it does");
        }
        health.set_service_status("", status).await;
        health.set_service_status(SERVICE_NAME, status).await;
        ready.store(healthy, Ordering::Relaxed);
    }
}
