//! `--redis-replicas N`: N more `redis-server`s replicating the fleet's single Redis, so that
//! servers run with `--redis-wait-replicas` (a group-commit `WAIT`) have replicas to wait for,
//! and so that the rows show what replication costs: the replicas' CPU per unit of work next to
//! the primary's. The servers under test still get only the primary's URL, as they would behind
//! Sentinel. Every replica is a child of the benchmark, killed when it drops, like the primary.
//!
//! A replica answers PING before its first sync is done, and `WAIT` counts only replicas that
//! are online: so the fleet starts only once the primary lists every replica `state=online`,
//! or the first measurements would time out on `WAIT` instead of measuring it.
use std::time::{Duration, Instant};

use futures::future::try_join_all;

use super::redis::{NodeMark, RedisProcess, Role, info_bytes};
use crate::BoxError;

/// How long the replicas may take to finish their first sync and be listed online.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The replicas of the fleet's primary (none without `--redis-replicas`).
#[derive(Default)]
pub struct RedisReplicas {
    nodes: Vec<RedisProcess>,
}

impl RedisReplicas {
    /// Starts `count` replicas of `primary` (persistence off, like it) and waits until the
    /// primary lists each of them online. On an error, those started so far drop and are killed.
    pub async fn start(program: &str, primary: &RedisProcess, count: usize) -> Result<Self, BoxError> {
        if count == 0 {
            return Ok(Self::default());
        }
        // With persistence off the primary syncs diskless, and by default waits 5 s for more
        // replicas to share one transfer: nothing is worth waiting for here.
        let mut delay = redis::cmd("CONFIG");
        delay.arg("SET").arg("repl-diskless-sync-delay").arg(0);
        primary.query::<()>(&delay).await?;
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            nodes.push(RedisProcess::start(program, Role::ReplicaOf(primary.port)).await?);
        }
        let replicas = Self { nodes };
        replicas.wait_online(primary).await?;
        Ok(replicas)
    }

    /// How many replicas there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// For the log: which process is where.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("redis-server (pid {}) on {}", node.pid, node.address()))
            .collect();
        nodes.join("; ")
    }

    /// Every replica's counters, read concurrently (their CPU is what the rows use: their
    /// commands are the primary's, replayed).
    pub async fn mark(&self) -> Result<Vec<NodeMark>, BoxError> {
        try_join_all(self.nodes.iter().map(RedisProcess::mark)).await
    }

    /// Kills every replica and reaps it.
    pub async fn stop(self) {
        for node in self.nodes {
            node.stop().await;
        }
    }

    /// Polls the primary's `INFO replication` until it says `connected_slaves:N` and lists each
    /// of our replicas (by port) `state=online`, or `SYNC_TIMEOUT` passes.
    async fn wait_online(&self, primary: &RedisProcess) -> Result<(), BoxError> {
        let want: Vec<u16> = self.nodes.iter().map(|node| node.port).collect();
        let deadline = Instant::now() + SYNC_TIMEOUT;
        loop {
            let mut info = redis::cmd("INFO");
            info.arg("replication");
            let text = String::from_utf8_lossy(&info_bytes(primary.query(&info).await?)).into_owned();
            let seen = Replication::parse(&text);
            if seen.all_online(&want) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the Redis replicas on ports {want:?} were not all online within {SYNC_TIMEOUT:?}: \
                     the primary on {} says connected_slaves:{}, {}",
                    primary.address(),
                    seen.connected.map_or("?".into(), |n| n.to_string()),
                    seen.describe(),
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What a primary's `INFO replication` says of its replicas.
#[derive(Debug, Default, PartialEq)]
struct Replication {
    /// `connected_slaves`.
    connected: Option<usize>,
    /// Each `slaveK:ip=…,port=P,state=S,…` line's port and state.
    slaves: Vec<(u16, String)>,
}

impl Replication {
    fn parse(info: &str) -> Self {
        let mut out = Self::default();
        for line in info.lines().map(str::trim) {
            if let Some(n) = line.strip_prefix("connected_slaves:") {
                out.connected = n.parse().ok();
                continue;
            }
            // `slave0:…`, not `slave_read_only:…` and the like (those are a replica's own).
            let Some((key, fields)) = line.split_once(':') else { continue };
            let is_slave = key
                .strip_prefix("slave")
                .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
            if !is_slave {
                continue;
            }
            let field = |name: &str| fields.split(',').find_map(|f| f.strip_prefix(name)?.strip_prefix('='));
            if let (Some(port), Some(state)) = (field("port").and_then(|p| p.parse().ok()), field("state")) {
                out.slaves.push((port, state.to_owned()));
            }
        }
        out
    }

    /// Exactly `ports.len()` replicas connected, and each of `ports` among them and online.
    fn all_online(&self, ports: &[u16]) -> bool {
        self.connected == Some(ports.len())
            && ports.iter().all(|port| self.slaves.iter().any(|(p, state)| p == port && state == "online"))
    }

    /// `port 1234 wait_bgsave, port 1235 online` (or `no replica listed`), for an error.
    fn describe(&self) -> String {
        if self.slaves.is_empty() {
            return "no replica listed".into();
        }
        let slaves: Vec<String> =
            self.slaves.iter().map(|(port, state)| format!("port {port} {state}")).collect();
        slaves.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_primarys_replication_info() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
                    slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n\
                    slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
                    master_failover_state:no-failover\r\nmaster_repl_offset:42\r\n";
        let seen = Replication::parse(info);
        assert_eq!(seen.connected, Some(2));
        assert_eq!(seen.slaves, [(7001, "online".to_owned()), (7002, "wait_bgsave".to_owned())]);
        assert!(!seen.all_online(&[7001, 7002]));
        assert!(!seen.all_online(&[7001]), "two connected where one was started");
        let online = info.replace("wait_bgsave", "online");
        assert!(Replication::parse(&online).all_online(&[7002, 7001]));
        assert!(!Replication::parse(&online).all_online(&[7001, 7003]));
        assert_eq!(seen.describe(), "port 7001 online, port 7002 wait_bgsave");
    }

    #[test]
    fn a_replicas_own_fields_are_not_slaves() {
        let info = "role:slave\r\nslave_read_only:1\r\nslave_priority:100\r\nconnected_slaves:0\r\n";
        assert_eq!(Replication::parse(info), Replication { connected: Some(0), slaves: Vec::new() });
        assert!(Replication::parse(info).all_online(&[]));
    }
}
