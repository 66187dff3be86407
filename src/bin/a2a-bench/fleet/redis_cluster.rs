//! The fleet's Redis: one `redis-server` (the default), or with `--redis-cluster NODES` that
//! many cluster-enabled nodes joined into a Redis Cluster of masters only, the 16384 slots in
//! NODES contiguous, equal ranges, as `redis-cli --cluster create` gives them (its rounding
//! moves a boundary by one slot at most). A single node may have replicas
//! (`--redis-replicas`, [`super::redis_replicas`]). Every node is a child of the benchmark,
//! killed when it drops.
use std::time::{Duration, Instant};

use futures::future::try_join_all;

use super::probe::Mark;
use super::redis::{RedisProcess, Role, info_bytes};
use super::redis_replicas::RedisReplicas;
use crate::BoxError;

/// Hash slots in a Redis Cluster.
const SLOTS: usize = 16_384;

/// How long the nodes may take to agree that the cluster is whole (`cluster_state:ok`).
const FORM_TIMEOUT: Duration = Duration::from_secs(30);

/// One `redis-server` (with its replicas, if any) or a cluster of them.
pub struct RedisNodes {
    nodes: Vec<RedisProcess>,
    cluster: bool,
    /// Replicas of the single node; none on a cluster.
    replicas: RedisReplicas,
}

impl RedisNodes {
    /// One node (`cluster: None`) with `replicas` replicas online, or `Some(n)` nodes formed
    /// into a cluster and ready: every node says `cluster_state:ok` and knows the others.
    pub async fn start(program: &str, cluster: Option<usize>, replicas: usize) -> Result<Self, BoxError> {
        let Some(count) = cluster else {
            let primary = RedisProcess::start(program, Role::Alone).await?;
            let replicas = RedisReplicas::start(program, &primary, replicas).await?;
            return Ok(Self { nodes: vec![primary], cluster: false, replicas });
        };
        if replicas > 0 {
            // The cluster's nodes are masters only, and a server refuses `--redis-wait-replicas`
            // on a cluster, so replicas there would measure nothing the flag is for.
            return Err("--redis-replicas needs the single redis-server, not --redis-cluster \
                        (a cluster's nodes are masters only; the server's --redis-wait-replicas \
                        refuses a cluster)"
                .into());
        }
        if count == 0 {
            return Err("--redis-cluster needs at least 1 node".into());
        }
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            // On an error the nodes started so far drop, and so are killed.
            nodes.push(RedisProcess::start(program, Role::ClusterNode).await?);
        }
        form(&nodes).await?;
        Ok(Self { nodes, cluster: true, replicas: RedisReplicas::default() })
    }

    /// What replicas get for `--store`: `redis://…/0`, or `redis+cluster://h1:p1,h2:p2,…`.
    pub fn url(&self) -> String {
        let addresses: Vec<String> = self.nodes.iter().map(RedisProcess::address).collect();
        if self.cluster {
            format!("redis+cluster://{}", addresses.join(","))
        } else {
            format!("redis://{}/0", addresses.join(","))
        }
    }

    /// For the log: which process is where, and which slots each node serves.
    pub fn describe(&self) -> String {
        let n = self.nodes.len();
        let nodes = self.nodes.iter().enumerate().map(|(i, node)| {
            let (first, last) = slot_range(i, n);
            let slots = if self.cluster { format!(", slots {first}-{last}") } else { String::new() };
            format!("redis-server (pid {}) on {}{slots}", node.pid, node.address())
        });
        let nodes: Vec<String> = nodes.collect();
        if self.cluster {
            format!("a {n}-node Redis Cluster: {}", nodes.join("; "))
        } else if !self.replicas.is_empty() {
            let r = self.replicas.len();
            format!("{} with {r} replica(s) online: {}", nodes.join("; "), self.replicas.describe())
        } else {
            nodes.join("; ")
        }
    }

    /// Every node's counters, read concurrently, in slot order (node 1 in the rows serves the
    /// first slots), and the replicas'.
    pub async fn mark(&self) -> Result<Mark, BoxError> {
        let (nodes, replicas) = futures::try_join!(
            try_join_all(self.nodes.iter().map(RedisProcess::mark)),
            self.replicas.mark()
        )?;
        Ok(Mark { nodes, replicas })
    }

    /// Kills every node and reaps it, the replicas before the primary they follow.
    pub async fn stop(self) {
        self.replicas.stop().await;
        for node in self.nodes {
            node.stop().await;
        }
    }
}

/// The slots of node `i` of `n`: `[i*16384/n, (i+1)*16384/n)`, as an inclusive range.
fn slot_range(i: usize, n: usize) -> (usize, usize) {
    (i * SLOTS / n, (i + 1) * SLOTS / n - 1)
}

/// Gives each fresh node its slots and a config epoch of its own, has the first meet the
/// others, and waits until every node sees the whole cluster.
async fn form(nodes: &[RedisProcess]) -> Result<(), BoxError> {
    let n = nodes.len();
    for (i, node) in nodes.iter().enumerate() {
        let (first, last) = slot_range(i, n);
        let mut add = redis::cmd("CLUSTER");
        add.arg("ADDSLOTSRANGE").arg(first).arg(last);
        node.query::<()>(&add).await?;
        // Distinct epochs up front, as redis-cli does, rather than a collision to resolve.
        let mut epoch = redis::cmd("CLUSTER");
        epoch.arg("SET-CONFIG-EPOCH").arg(i + 1);
        node.query::<()>(&epoch).await?;
    }
    if let Some((first, others)) = nodes.split_first() {
        for other in others {
            let mut meet = redis::cmd("CLUSTER");
            meet.arg("MEET").arg("127.0.0.1").arg(other.port);
            first.query::<()>(&meet).await?;
        }
    }
    let deadline = Instant::now() + FORM_TIMEOUT;
    for node in nodes {
        loop {
            let info = cluster_info(node).await?;
            let known = info_value(&info, "cluster_known_nodes").and_then(|v| v.parse::<usize>().ok());
            if info_value(&info, "cluster_state") == Some("ok") && known == Some(n) {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the Redis Cluster did not form within {FORM_TIMEOUT:?}: node {} says state {:?}, \
                     {} known nodes of {n}",
                    node.address(),
                    info_value(&info, "cluster_state").unwrap_or("?"),
                    known.map_or("?".into(), |k| k.to_string()),
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// `CLUSTER INFO` of one node, as text.
async fn cluster_info(node: &RedisProcess) -> Result<String, BoxError> {
    let mut info = redis::cmd("CLUSTER");
    info.arg("INFO");
    Ok(String::from_utf8_lossy(&info_bytes(node.query(&info).await?)).into_owned())
}

/// A `name:value` line's value.
fn info_value<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_split_into_contiguous_equal_ranges() {
        assert_eq!(slot_range(0, 3), (0, 5460));
        assert_eq!(slot_range(1, 3), (5461, 10921));
        assert_eq!(slot_range(2, 3), (10922, 16383));
        assert_eq!(slot_range(0, 1), (0, 16383));
        let (mut next, n) = (0, 7);
        for i in 0..n {
            let (first, last) = slot_range(i, n);
            assert_eq!(first, next);
            next = last + 1;
        }
        assert_eq!(next, SLOTS);
    }

    #[test]
    fn reads_cluster_info() {
        let info = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_known_nodes:3\r\n";
        assert_eq!(info_value(info, "cluster_state"), Some("ok"));
        assert_eq!(info_value(info, "cluster_known_nodes"), Some("3"));
        assert_eq!(info_value(info, "cluster_size"), None);
    }
}
