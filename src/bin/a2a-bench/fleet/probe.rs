//! What the fleet's Redis did around the measured part of a scenario, per unit of work: commands,
//! scripts, CPU and bytes, summed over its nodes (so the rows read the same with one node or a
//! cluster), net of what the idle fleet sends anyway (leases, inboxes). With several nodes, also
//! how evenly the work spread: each node's share of the CPU and of the commands, and the busiest
//! and idlest node against the mean. With replicas of a single node (`--redis-replicas`), their
//! CPU too, summed, in a row of its own beside the primary's: what replication (and a server's
//! `--redis-wait-replicas`) costs besides the primary's work.
use std::collections::BTreeMap;
use std::time::Duration;

use super::redis::NodeMark;
use super::redis_cluster::RedisNodes;
use crate::BoxError;
use crate::report::{Better, Metric};

/// Every node's counters at one moment, in slot order, and the replicas'.
#[derive(Debug, Clone)]
pub struct Mark {
    pub(super) nodes: Vec<NodeMark>,
    /// The replicas of a single node (`--redis-replicas`); none otherwise.
    pub(super) replicas: Vec<NodeMark>,
}

/// What a scenario's counted part is made of.
#[derive(Debug, Clone, Copy)]
pub enum Per {
    /// Per event the owner emitted.
    Event,
    /// Per unary call.
    Call,
    /// Per SubscribeToTask.
    Subscription,
}

/// What Redis (one node, or the sum over the nodes) did between two marks.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// Commands (INFO, the benchmark's own, left out), counting those a Lua script runs: Redis
    /// counts them alike, so client round trips are fewer (see `scripts`).
    pub commands: u64,
    /// Script calls (EVALSHA, EVAL, FCALL): each is one round trip, whatever it runs inside.
    pub scripts: u64,
    /// Redis CPU nanoseconds, if readable.
    pub cpu: Option<u64>,
    /// Bytes Redis read from and wrote to its clients (the benchmark's INFO included: a few
    /// KiB per measurement and node).
    pub bytes: Option<(u64, u64)>,
    /// Per command name: calls and usec inside Redis, most calls first.
    pub by_command: Vec<(String, u64, u64)>,
    /// What `used_memory` grew by (negative: shrank): at a retention cap, what calls leave
    /// behind beyond what retention keeps.
    pub memory: Option<i64>,
    pub elapsed: Duration,
}

impl Delta {
    pub fn between(before: &NodeMark, after: &NodeMark) -> Self {
        let by_command = after
            .commands
            .iter()
            .filter(|(name, _)| name.as_str() != "info")
            .map(|(name, &(calls, usec))| {
                let (c0, u0) = before.commands.get(name).copied().unwrap_or((0, 0));
                (name.clone(), calls.saturating_sub(c0), usec.saturating_sub(u0))
            })
            .filter(|(_, calls, _)| *calls > 0);
        let cpu = match (before.cpu, after.cpu) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b)),
            _ => None,
        };
        let bytes = match (before.bytes, after.bytes) {
            (Some((i0, o0)), Some((i1, o1))) => Some((i1.saturating_sub(i0), o1.saturating_sub(o0))),
            _ => None,
        };
        let memory = match (before.memory, after.memory) {
            (Some(b), Some(a)) => Some(a as i64 - b as i64),
            _ => None,
        };
        let elapsed = after.at.saturating_duration_since(before.at);
        Self { memory, ..Self::with_commands(by_command.collect(), cpu, bytes, elapsed) }
    }

    /// The nodes' deltas added up: CPU and bytes only if every node's could be read.
    pub fn sum(nodes: &[Delta]) -> Self {
        let mut by_command: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (name, calls, usec) in nodes.iter().flat_map(|d| &d.by_command) {
            let entry = by_command.entry(name).or_default();
            *entry = (entry.0 + calls, entry.1 + usec);
        }
        let by_command = by_command.into_iter().map(|(name, (c, u))| (name.to_owned(), c, u)).collect();
        let cpu = nodes.iter().map(|d| d.cpu).sum::<Option<u64>>();
        let bytes = nodes.iter().try_fold((0, 0), |(i, o), d| d.bytes.map(|(di, d_o)| (i + di, o + d_o)));
        let elapsed = nodes.iter().map(|d| d.elapsed).max().unwrap_or_default();
        let memory = nodes.iter().map(|d| d.memory).sum::<Option<i64>>();
        Self { memory, ..Self::with_commands(by_command, cpu, bytes, elapsed) }
    }

    fn with_commands(
        mut by_command: Vec<(String, u64, u64)>,
        cpu: Option<u64>,
        bytes: Option<(u64, u64)>,
        elapsed: Duration,
    ) -> Self {
        by_command.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let is_script = |name: &str| name.starts_with("eval") || name.starts_with("fcall");
        Self {
            commands: by_command.iter().map(|c| c.1).sum(),
            scripts: by_command.iter().filter(|c| is_script(&c.0)).map(|c| c.1).sum(),
            cpu,
            bytes,
            by_command,
            memory: None,
            elapsed,
        }
    }

    /// What Redis did per second.
    pub fn rate(&self) -> Rate {
        let secs = self.elapsed.as_secs_f64().max(1e-3);
        let (bytes_in, bytes_out) = self.bytes.unwrap_or((0, 0));
        Rate {
            commands: self.commands as f64 / secs,
            scripts: self.scripts as f64 / secs,
            cpu: self.cpu.unwrap_or(0) as f64 / secs,
            bytes_in: bytes_in as f64 / secs,
            bytes_out: bytes_out as f64 / secs,
        }
    }

    /// `total` less what `rate` accounts for over this delta's time, never below zero.
    fn net(&self, total: f64, rate: f64) -> f64 {
        (total - rate * self.elapsed.as_secs_f64()).max(0.0)
    }

    /// Commands, scripts and Redis CPU per unit, as rows, net of `background` (what Redis does
    /// meanwhile anyway: leases and inboxes of the idle fleet, a stream that runs on).
    pub fn metrics(&self, count: f64, per: Per, background: Rate) -> Vec<Metric> {
        if count <= 0.0 {
            return Vec::new();
        }
        let net = |total: f64, rate: f64| self.net(total, rate) / count;
        let unit = unit(per);
        let name = |what: &str| format!("redis {what} per {unit}");
        let mut out = vec![
            Metric::new(
                name("commands"),
                "cmds",
                net(self.commands as f64, background.commands),
                Better::Lower,
            ),
            Metric::new(
                name("scripts"),
                "calls",
                net(self.scripts as f64, background.scripts),
                Better::Lower,
            ),
        ];
        if let Some(cpu) = self.cpu {
            out.push(Metric::new(name("CPU"), "µs", net(cpu as f64, background.cpu) / 1000.0, Better::Lower));
        }
        if let Some((i, o)) = self.bytes {
            out.push(Metric::new(name("bytes in"), "B", net(i as f64, background.bytes_in), Better::Lower));
            out.push(Metric::new(name("bytes out"), "B", net(o as f64, background.bytes_out), Better::Lower));
        }
        if let Some(memory) = self.memory {
            // Not net of the background: an idle fleet's data set does not grow.
            out.push(Metric::new(name("memory growth"), "B", memory as f64 / count, Better::Lower));
        }
        out
    }

    /// The `limit` most frequent commands (all with `None`), per unit: `evalsha 1.00 (3.1 µs
    /// each), xread 2.00 …` (not net of the background; a script's usec includes the commands it
    /// runs, which are counted again under their own names).
    pub fn summary(&self, count: f64, limit: Option<usize>) -> String {
        let parts: Vec<String> = self
            .by_command
            .iter()
            .take(limit.unwrap_or(usize::MAX))
            .map(|(name, calls, usec)| {
                let per = *calls as f64 / count.max(1.0);
                let each = *usec as f64 / (*calls).max(1) as f64;
                format!("{name} {per:.3} ({each:.1} µs each)")
            })
            .collect();
        parts.join(", ")
    }
}

/// The unit's name in rows and notes.
fn unit(per: Per) -> &'static str {
    match per {
        Per::Event => "event",
        Per::Call => "call",
        Per::Subscription => "subscribe",
    }
}

/// With several nodes: how the CPU and the commands (each net of the node's background) spread
/// over them. A slot-hot key shows as one node's share far above 1/N and max/mean far above 1.
fn balance(nodes: &[Delta], background: &Background) -> Vec<Metric> {
    if nodes.len() < 2 {
        return Vec::new();
    }
    let cpu: Option<Vec<f64>> = nodes
        .iter()
        .enumerate()
        .map(|(i, d)| d.cpu.map(|cpu| d.net(cpu as f64, background.node(i).cpu)))
        .collect();
    let commands: Vec<f64> = nodes
        .iter()
        .enumerate()
        .map(|(i, d)| d.net(d.commands as f64, background.node(i).commands))
        .collect();
    let mut out = cpu.map(|cpu| spread("CPU", &cpu)).unwrap_or_default();
    out.extend(spread("commands", &commands));
    out
}

/// Each node's share of `values` in %, then the largest and the smallest over the mean.
fn spread(what: &str, values: &[f64]) -> Vec<Metric> {
    let total: f64 = values.iter().sum();
    if total <= 0.0 || values.is_empty() {
        return Vec::new();
    }
    let mean = total / values.len() as f64;
    let share = |(i, v): (usize, &f64)| {
        Metric::new(format!("redis node {} {what} share", i + 1), "%", 100.0 * v / total, Better::Info)
    };
    let mut out: Vec<Metric> = values.iter().enumerate().map(share).collect();
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    out.push(Metric::new(format!("redis node {what} max/mean"), "ratio", max / mean, Better::Info));
    out.push(Metric::new(format!("redis node {what} min/mean"), "ratio", min / mean, Better::Info));
    out
}

/// The replicas' CPU per unit, summed over them and net of their background; `None` without
/// replicas or where a replica's CPU could not be read.
fn replicas_cpu(replicas: &[Delta], count: f64, per: Per, background: &Background) -> Option<Metric> {
    if replicas.is_empty() || count <= 0.0 {
        return None;
    }
    let cpu = replicas
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let rate = background.replicas.get(i).copied().unwrap_or_default().cpu;
            d.cpu.map(|cpu| d.net(cpu as f64, rate))
        })
        .sum::<Option<f64>>()?;
    let name = format!("redis replicas CPU per {}", unit(per));
    Some(Metric::new(name, "µs", cpu / count / 1000.0, Better::Lower))
}

/// Redis's work per second (one node's, or the sum).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rate {
    pub commands: f64,
    pub scripts: f64,
    /// CPU nanoseconds per second.
    pub cpu: f64,
    pub bytes_in: f64,
    pub bytes_out: f64,
}

/// What Redis does per second anyway, per node (the idle fleet's leases and inboxes, a stream
/// that runs on), to be subtracted from what a scenario measures.
#[derive(Debug, Clone, Default)]
pub struct Background {
    nodes: Vec<Rate>,
    /// The replicas' (they replay the primary's writes and ping it, idle or not).
    replicas: Vec<Rate>,
}

impl Background {
    /// Summed over the nodes.
    pub fn total(&self) -> Rate {
        self.nodes.iter().fold(Rate::default(), |a, b| Rate {
            commands: a.commands + b.commands,
            scripts: a.scripts + b.scripts,
            cpu: a.cpu + b.cpu,
            bytes_in: a.bytes_in + b.bytes_in,
            bytes_out: a.bytes_out + b.bytes_out,
        })
    }

    /// Node `i`'s (none known: zero).
    fn node(&self, i: usize) -> Rate {
        self.nodes.get(i).copied().unwrap_or_default()
    }
}

/// Redis seen around the measured part of a scenario: its commands (net of `background`) and
/// CPU per unit of work.
#[derive(Clone, Copy)]
pub struct Probe<'a> {
    pub redis: &'a RedisNodes,
    pub background: &'a Background,
}

impl<'a> Probe<'a> {
    pub async fn mark(&self) -> Result<Mark, BoxError> {
        self.redis.mark().await
    }

    /// What Redis does per second over `window` from now (for work that goes on during a
    /// measurement but is not what is measured; see [`Probe::with_background`]).
    pub async fn background_over(&self, window: Duration) -> Result<Background, BoxError> {
        let before = self.mark().await?;
        tokio::time::sleep(window).await;
        let after = self.mark().await?;
        let rates = |b: &[NodeMark], a: &[NodeMark]| -> Vec<Rate> {
            b.iter().zip(a).map(|(b, a)| Delta::between(b, a).rate()).collect()
        };
        Ok(Background {
            nodes: rates(&before.nodes, &after.nodes),
            replicas: rates(&before.replicas, &after.replicas),
        })
    }

    /// This probe with `background` subtracted instead.
    pub fn with_background<'b>(self, background: &'b Background) -> Probe<'b>
    where
        'a: 'b,
    {
        Probe { redis: self.redis, background }
    }

    /// The rows for what Redis did since `before`, per `count` units, and a note naming the
    /// commands (`what` says which part of which scenario); with several nodes, the balance
    /// rows too, and each node's busiest commands in the note.
    pub async fn finish(
        &self,
        before: &Mark,
        count: f64,
        per: Per,
        what: &str,
    ) -> Result<(Vec<Metric>, String), BoxError> {
        let after = self.mark().await?;
        let nodes: Vec<Delta> =
            before.nodes.iter().zip(&after.nodes).map(|(b, a)| Delta::between(b, a)).collect();
        let total = Delta::sum(&nodes);
        let mut note = format!("redis per {} ({what}): {}", unit(per), total.summary(count, None));
        let mut metrics = total.metrics(count, per, self.background.total());
        let replicas: Vec<Delta> =
            before.replicas.iter().zip(&after.replicas).map(|(b, a)| Delta::between(b, a)).collect();
        if let Some(row) = replicas_cpu(&replicas, count, per, self.background) {
            // Right after the primary's CPU row, so the two read side by side.
            let primary = format!("redis CPU per {}", unit(per));
            let at = metrics.iter().position(|m| m.name == primary).map_or(metrics.len(), |i| i + 1);
            metrics.insert(at, row);
        }
        if nodes.len() > 1 {
            metrics.extend(balance(&nodes, self.background));
            let by_node: Vec<String> = nodes
                .iter()
                .enumerate()
                .map(|(i, d)| format!("node {}: {}", i + 1, d.summary(count, Some(3))))
                .collect();
            note.push_str(&format!(" | by node, the top 3: {}", by_node.join(" | ")));
        }
        Ok((metrics, note))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn mark(commands: &[(&str, u64, u64)], bytes: (u64, u64), cpu: u64, at: Instant) -> NodeMark {
        let commands = commands.iter().map(|&(n, c, u)| (n.to_owned(), (c, u))).collect();
        NodeMark { commands, bytes: Some(bytes), cpu: Some(cpu), memory: None, at }
    }

    #[test]
    fn counts_per_unit() {
        let at = Instant::now();
        let before = mark(&[], (0, 0), 0, at);
        let after = mark(&[("xread", 12, 34), ("evalsha", 3, 30), ("info", 9, 9)], (500, 100), 10_000, at);
        let delta = Delta::between(&before, &after);
        assert_eq!(delta.commands, 15);
        assert_eq!(delta.by_command[0].0, "xread");
        let metrics = delta.metrics(5.0, Per::Event, Rate::default());
        assert_eq!(metrics[0].name, "redis commands per event");
        let values: Vec<f64> = metrics.iter().map(|m| m.value).collect();
        assert_eq!(values, [3.0, 0.6, 2.0, 100.0, 20.0]);
    }

    #[test]
    fn sums_nodes_and_measures_their_balance() {
        let at = Instant::now();
        let zero = mark(&[], (0, 0), 0, at);
        let nodes = [
            Delta::between(&zero, &mark(&[("evalsha", 60, 600)], (10, 1), 6_000, at)),
            Delta::between(&zero, &mark(&[("evalsha", 20, 200), ("hget", 10, 5)], (20, 2), 3_000, at)),
            Delta::between(&zero, &mark(&[("hget", 10, 5)], (30, 3), 3_000, at)),
        ];
        let total = Delta::sum(&nodes);
        assert_eq!(
            (total.commands, total.scripts, total.cpu, total.bytes),
            (100, 80, Some(12_000), Some((60, 6)))
        );
        assert_eq!(total.by_command[0], ("evalsha".to_owned(), 80, 800));
        let rows = balance(&nodes, &Background::default());
        let value = |name: &str| rows.iter().find(|m| m.name == name).map_or(f64::NAN, |m| m.value);
        let close = |name: &str, want: f64| assert!((value(name) - want).abs() < 1e-9, "{name}");
        close("redis node 1 CPU share", 50.0);
        close("redis node 3 CPU share", 25.0);
        close("redis node CPU max/mean", 1.5);
        close("redis node CPU min/mean", 0.75);
        close("redis node 2 commands share", 30.0);
        close("redis node commands max/mean", 1.8);
        close("redis node commands min/mean", 0.3);
        assert!(balance(&nodes[..1], &Background::default()).is_empty());
    }

    #[test]
    fn sums_the_replicas_cpu_net_of_their_background() {
        let at = Instant::now();
        let later = at + Duration::from_secs(1);
        let replica = |cpu| Delta::between(&mark(&[], (0, 0), 0, at), &mark(&[], (0, 0), cpu, later));
        let replicas = [replica(30_000), replica(10_000)];
        // 5 µs/s of the first replica's CPU is its background: 35 µs over 10 calls.
        let cpu = |ns: f64| Rate { cpu: ns, ..Rate::default() };
        let background = Background { nodes: Vec::new(), replicas: vec![cpu(5_000.0), cpu(0.0)] };
        let row = replicas_cpu(&replicas, 10.0, Per::Call, &background).expect("a row");
        assert_eq!((&*row.name, row.value), ("redis replicas CPU per call", 3.5));
        assert!(replicas_cpu(&[], 10.0, Per::Call, &background).is_none());
    }
}
