//! (e): the Redis primary dies (`kill -9`) under traffic; three Sentinels promote a replica.
//! Its replicas were paused for [`LAG`] before (replication that fell behind, as under load or
//! a slow network), so without acknowledgements the answers given in that time would be lost
//! with the primary. The replicas run with `--redis-wait-replicas 1`, so every answer and event
//! the clients got was on a second node before it left: none may be lost, no generation forked,
//! and no task failed as if its replica had died. Every replica must be SERVING again (grpc.health) within
//! [`BACK_WITHIN`] of the kill.
use std::sync::Arc;
use std::time::Duration;

use a2a_server::proto::TaskState;
use tokio::time::Instant;
use tonic_health::pb::health_check_response::ServingStatus;

use crate::common::redis::RedisSentinels;
use crate::ledger::{Ledger, Policy, Row};
use crate::{Backend, DURING_OUTAGE, Fault, Stage, clients};

/// How long the replicas lag behind the primary before it dies.
const LAG: Duration = Duration::from_millis(700);

/// The longest a replica may stay out of service after the primary's death.
const BACK_WITHIN: Duration = Duration::from_secs(30);

pub async fn primary_kill9(fault: Fault) -> Row {
    let sentinels = tokio::task::block_in_place(RedisSentinels::start).expect("redis-server");
    let mut stage = Stage::start(fault, Backend::Sentinels(sentinels), &["--redis-wait-replicas", "1"]);
    let policy = Policy { excused: DURING_OUTAGE, expected_end: TaskState::Completed };
    let ledger = Arc::new(Ledger::new(policy));
    let clients = clients(&stage, &ledger);
    let handles = clients.start(3, 6);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let Backend::Sentinels(topology) = &mut stage.redis else { unreachable!() };
    let old = tokio::task::block_in_place(|| topology.kill9_primary(LAG));
    let killed = Instant::now();
    let new = tokio::task::block_in_place(|| topology.wait_failover(old));
    let promoted = killed.elapsed();
    let promoted = format!("Sentinels promoted {new} {promoted:.1?} after the kill");
    stage.note(
        fault,
        &format!("replicas paused {LAG:?}, then kill -9 of the primary on port {old}; {promoted}"),
    );
    for (r, replica) in stage.replicas.iter().enumerate() {
        loop {
            if replica.health().await == Some(ServingStatus::Serving) {
                break;
            }
            if killed.elapsed() > BACK_WITHIN {
                ledger.late(format!("r{}: not SERVING {BACK_WITHIN:?} after the primary died", r + 1));
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    ledger.failed_after(killed.elapsed());
    stage.note(fault, &format!("every replica SERVING {:.1?} after the kill", killed.elapsed()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    stage.finish(fault, &clients, handles).await
}
