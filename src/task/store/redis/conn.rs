//! Connections: one shared multiplexed connection (to the primary through a [`Link`], or to a
//! cluster) for every short command, and a pool of dedicated connections for blocking reads,
//! each call bounded by a named timeout and counted.
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, RedisFuture, RedisResult, Value};

use super::acks::{Acks, WaitFor};
use super::full::Full;
use super::link::{Link, LinkConn, Source, open};
use crate::error::A2aError;
use crate::task::store::url::RedisTarget;

/// How long Redis may take; every call is bounded by one of these.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Establishing a connection (and the first PING at start).
    pub connect: Duration,
    /// One command or script, from send to answer.
    pub command: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { connect: Duration::from_secs(2), command: Duration::from_secs(2) }
    }
}

/// Idle blocking connections kept for reuse; more are closed when returned (a burst of
/// concurrent blocked readers should not pin sockets forever).
const MAX_IDLE_BLOCKING: usize = 32;

/// One call of [`Redis::together`]: a script (with its invocation) or a plain command.
pub enum Part<'a> {
    /// A Lua script; the script itself is there to load it when Redis does not know it.
    Script(&'a redis::Script, redis::ScriptInvocation<'a>),
    /// A command.
    Cmd(Cmd),
}

/// A connection of either topology; cheap to clone (clones share the socket).
#[derive(Clone)]
pub enum Conn {
    /// The primary (a node, or the one Sentinels name), reconnecting on the next call.
    Single(LinkConn),
    /// A dedicated connection to the primary (blocking reads), and the link's generation
    /// it was opened in.
    Dedicated(MultiplexedConnection, u64),
    /// A Redis Cluster, routing each command by its key's slot.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Dedicated(c, _) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Dedicated(c, _) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Dedicated(c, _) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The store's way to Redis: the shared connection, the blocking pool, the timeouts, and the
/// address to name in errors (never the password).
pub struct Redis {
    shared: Conn,
    /// The primary's link (none on a cluster).
    link: Option<Arc<Link>>,
    /// The replicated-acknowledgement waiter (with `--redis-wait-replicas` above 0).
    acks: Option<Arc<Acks>>,
    target: RedisTarget,
    timeouts: Timeouts,
    /// Idle dedicated connections; a blocking XREAD would stall every other command on a
    /// multiplexed connection, so each blocking read takes one of these for itself.
    blocking: Mutex<Vec<Conn>>,
    /// When this process started talking to Redis, and (ms after that) when a call last
    /// failed, or Redis last said it restarted: how long this replica has seen Redis without
    /// a break ([`Redis::seen_for`]).
    since: Instant,
    trouble_ms: AtomicU64,
    /// The `run_id` Redis gave last (a single node's: a new one means it restarted).
    run_id: Mutex<Option<String>>,
    /// What a refusal for memory sets off (`full.rs`).
    full: Full,
}

impl Redis {
    /// Connects and checks with a PING, within the connect timeout; with `wait.replicas` above
    /// 0, starts the waiter for replicated acknowledgements (`acks.rs`), whose own key is
    /// `wait_key`.
    pub async fn connect(
        target: RedisTarget,
        timeouts: Timeouts,
        wait: WaitFor,
        wait_key: String,
    ) -> Result<Arc<Self>, String> {
        let address = target.address();
        let unreachable = |e: String| format!("cannot reach Redis at {address}: {e}");
        let (shared, link) = match &target {
            RedisTarget::Cluster(_) => {
                if wait.replicas > 0 {
                    return Err(
                        "--redis-wait-replicas needs a single Redis node or Sentinels, not a cluster".into(),
                    );
                }
                let opening = open_cluster(&target, timeouts, true);
                let conn = tokio::time::timeout(timeouts.connect, opening)
                    .await
                    .map_err(|_| unreachable(format!("no answer within {:?}", timeouts.connect)))?
                    .map_err(|e| unreachable(e.to_string()))?;
                (conn, None)
            }
            RedisTarget::Node(info) => link_of(Source::Node(info.clone()), timeouts),
            RedisTarget::Sentinel(sentinel) => {
                link_of(Source::sentinel(sentinel).map_err(|e| unreachable(e.to_string()))?, timeouts)
            }
        };
        let acks = match &link {
            Some(link) if wait.replicas > 0 => Some(Acks::start(wait, link.clone(), wait_key)),
            _ => None,
        };
        let redis = Arc::new(Self {
            shared,
            link,
            acks,
            target,
            timeouts,
            blocking: Mutex::new(Vec::new()),
            since: Instant::now(),
            trouble_ms: AtomicU64::new(0),
            run_id: Mutex::new(None),
            full: Full::new(),
        });
        let ping = redis::cmd("PING");
        let ping = redis.query::<String>("ping", &ping);
        tokio::time::timeout(timeouts.connect + timeouts.command, ping)
            .await
            .map_err(|_| unreachable(format!("no answer within {:?}", timeouts.connect)))?
            .map_err(|e| e.to_string())?;
        Ok(redis)
    }

    /// The shared connection, for scripts and pipelines run through [`Redis::run`].
    pub fn conn(&self) -> Conn {
        self.shared.clone()
    }

    /// The address(es), for messages.
    pub fn address(&self) -> String {
        self.target.address()
    }

    /// Whether this is a Redis Cluster (whose scripts must stay within one slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self.shared, Conn::Cluster(_))
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Notified when Redis refuses a write for memory: the evictor makes room (`full.rs`).
    pub(super) fn room_wanted(&self) -> Arc<tokio::sync::Notify> {
        self.full.room()
    }

    /// How long this replica has seen Redis answer without a break: since its last failed
    /// call or the last restart of Redis it noticed (or since it connected). A fleet takes no
    /// task over before it has seen Redis for a lease: an outage is not a death.
    pub fn seen_for(&self) -> Duration {
        let trouble = Duration::from_millis(self.trouble_ms.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(trouble)
    }

    /// Notes a break in this replica's sight of Redis, now.
    fn trouble(&self) {
        let now = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.trouble_ms.fetch_max(now, Ordering::Relaxed);
    }

    /// Asks a single node for its `run_id` and notes a break when it changed (Redis restarted,
    /// perhaps between two calls of this replica, losing leases that expired meanwhile). A
    /// cluster's nodes answer for themselves; there, failed calls alone count.
    pub async fn check_restart(&self) -> Result<(), A2aError> {
        if self.is_cluster() {
            return Ok(());
        }
        if let Some(link) = self.link.as_ref().filter(|link| link.follows_sentinels()) {
            // Never keep writing to a demoted primary: Sentinels may have moved it while this
            // replica's connection stayed open (a paused primary, resumed after a failover,
            // takes writes until Sentinel turns it into a replica).
            let generation = link.generation();
            let role: Vec<Value> = self.query("role", &redis::cmd("ROLE")).await?;
            if !matches!(role.first(), Some(Value::BulkString(role)) if role == b"master") {
                tracing::warn!(address = %self.target.address(), "the Redis node is no longer the primary");
                link.drop_generation(generation);
                self.trouble();
            }
        }
        let info: String = self.query("info", redis::cmd("INFO").arg("server")).await?;
        let run_id =
            info.lines().find_map(|line| line.strip_prefix("run_id:")).map(|id| id.trim().to_owned());
        let mut last = self.run_id.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some() && run_id.is_some() && *last != run_id {
            tracing::warn!(address = %self.target.address(), "Redis restarted");
            self.trouble();
        }
        if run_id.is_some() {
            *last = run_id;
        }
        Ok(())
    }

    /// Runs a write that an answer or an event depends on: with `--redis-wait-replicas`, it
    /// returns only once that many replicas hold it (`acks.rs`); a write they did not
    /// acknowledge in time fails as UNAVAILABLE, and its caller's retry finds what landed.
    pub async fn write<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = RedisResult<T>>,
    ) -> Result<T, A2aError> {
        let before = self.before_write().await;
        let value = self.run(op, self.timeouts.command, call).await?;
        self.replicated(before).await?;
        Ok(value)
    }

    /// With `--redis-wait-replicas`, waits until the replicas hold every write this process
    /// saw answered since generation `before` began (see [`Redis::generation`]).
    pub async fn replicated(&self, before: u64) -> Result<(), A2aError> {
        let Some(acks) = &self.acks else { return Ok(()) };
        // A write sent over one connection counts only if no other opened meanwhile.
        let generation = if self.generation() == before { before } else { 0 };
        acks.replicated(generation).await
    }

    /// What to take before a write (or read) whose replication [`Redis::replicated`] is to
    /// confirm: the primary link's generation, opening a connection if none is open (else the
    /// write would open one and never count). 0 without acknowledgements: nothing to confirm.
    pub async fn before_write(&self) -> u64 {
        match (&self.link, &self.acks) {
            (Some(link), Some(_)) => {
                // Boxed: opening a link is a large future (kilobytes), and every write's future
                // would carry it, and copy it at each await that moves it, for the rare call
                // that needs it.
                let opening = Box::pin(tokio::time::timeout(self.timeouts.connect, link.live())).await;
                opening.ok().and_then(Result::ok).map_or(0, |live| live.generation)
            }
            _ => 0,
        }
    }

    /// The primary link's generation now (0 on a cluster, or with no connection open).
    pub fn generation(&self) -> u64 {
        self.link.as_ref().map_or(0, |link| link.generation())
    }

    /// Runs one command on the shared connection.
    pub async fn query<T: redis::FromRedisValue>(&self, op: &'static str, cmd: &Cmd) -> Result<T, A2aError> {
        let mut conn = self.conn();
        self.run(op, self.timeouts.command, async move { cmd.query_async(&mut conn).await }).await
    }

    /// Runs `parts` in one round trip and returns their replies in order: as one pipeline on
    /// a single node (loading a script Redis does not know yet, then running it again), or
    /// side by side on a cluster, whose pipelines cannot cross slots.
    pub async fn together(&self, op: &'static str, parts: Vec<Part<'_>>) -> Result<Vec<Value>, A2aError> {
        let limit = self.timeouts.command;
        if matches!(self.shared, Conn::Cluster(_)) {
            let calls = parts.into_iter().map(|part| {
                let mut conn = self.conn();
                async move {
                    match part {
                        Part::Script(_, invocation) => invocation.invoke_async::<Value>(&mut conn).await,
                        Part::Cmd(cmd) => cmd.query_async::<Value>(&mut conn).await,
                    }
                }
            });
            return self.run(op, limit, futures::future::try_join_all(calls)).await;
        }
        let mut pipe = redis::pipe();
        for part in &parts {
            match part {
                Part::Script(_, invocation) => pipe.invoke_script(invocation),
                Part::Cmd(cmd) => pipe.add_command(cmd.clone()),
            };
        }
        let mut conn = self.conn();
        let first = tokio::time::timeout(limit, pipe.query_async::<Vec<Value>>(&mut conn)).await;
        match first {
            Ok(Err(error)) if is_noscript(&error) => {
                for part in &parts {
                    if let Part::Script(script, _) = part {
                        self.run(op, limit, script.load_async(&mut conn)).await?;
                    }
                }
                self.run(op, limit, pipe.query_async(&mut conn)).await
            }
            _ => self.run(op, limit, async { first.unwrap_or_else(|_| Err(timed_out())) }).await,
        }
    }

    /// Awaits one round trip within `limit`, counting it, and maps failures to UNAVAILABLE.
    pub async fn run<T>(
        &self,
        op: &'static str,
        limit: Duration,
        call: impl Future<Output = RedisResult<T>>,
    ) -> Result<T, A2aError> {
        metrics::counter!("a2a_redis_round_trips_total", "op" => op).increment(1);
        let outcome = tokio::time::timeout(limit, call).await;
        let error = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {limit:?}"),
        };
        metrics::counter!("a2a_redis_errors_total", "op" => op).increment(1);
        let address = self.target.address();
        // Redis answered: a refusal for memory is no break in this replica's sight of it.
        let what = if self.full.refused(&error, &address) {
            // `full.rs` logs it as an error now and then; a line per refused call would flood.
            tracing::debug!(op, %address, %error, "Redis refused a write for memory");
            "full"
        } else {
            self.trouble();
            tracing::warn!(op, %address, %error, "Redis call failed");
            "unavailable"
        };
        Err(A2aError::Unavailable(format!(
            "the task store (Redis at {address}) is {what}: {op} failed: {error}"
        )))
    }

    /// Runs a blocking command on a dedicated connection, allowing `block` more than the
    /// command timeout. The connection goes back to the pool only after a clean answer.
    pub async fn blocking<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        block: Duration,
        cmd: &Cmd,
    ) -> Result<T, A2aError> {
        let generation = self.generation();
        let pooled = self.blocking.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut conn = match pooled {
            // One opened before a reconnect may talk to a node that is no longer the primary.
            Some(Conn::Dedicated(_, opened)) if opened != generation => self.dedicated().await?,
            Some(conn) => conn,
            None => self.dedicated().await?,
        };
        let limit = block + self.timeouts.command;
        let value = self.run(op, limit, cmd.query_async(&mut conn)).await?;
        let mut idle = self.blocking.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE_BLOCKING {
            idle.push(conn);
        }
        Ok(value)
    }
}

impl Redis {
    /// A new dedicated connection: to the primary the link talks to now, or to the cluster.
    async fn dedicated(&self) -> Result<Conn, A2aError> {
        let limit = self.timeouts.connect;
        match &self.link {
            Some(link) => {
                let live = self.run("connect", limit, link.live()).await?;
                let opened = self.run("connect", limit, open(&live.client, self.timeouts, None)).await?;
                Ok(Conn::Dedicated(opened, live.generation))
            }
            None => self.run("connect", limit, open_cluster(&self.target, self.timeouts, false)).await,
        }
    }
}

/// The shared connection and link for a primary found through `source`.
fn link_of(source: Source, timeouts: Timeouts) -> (Conn, Option<Arc<Link>>) {
    let link = Arc::new(Link::new(source, timeouts));
    (Conn::Single(LinkConn(link.clone())), Some(link))
}

/// Opens a cluster connection: `shared` ones time out each command; dedicated ones carry no
/// response timeout of their own (their caller bounds each call).
async fn open_cluster(target: &RedisTarget, timeouts: Timeouts, shared: bool) -> RedisResult<Conn> {
    let response = shared.then_some(timeouts.command);
    match target {
        RedisTarget::Node(_) | RedisTarget::Sentinel(_) => {
            Err(redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "not a cluster")))
        }
        RedisTarget::Cluster(nodes) => {
            let mut builder =
                ClusterClientBuilder::new(nodes.clone()).connection_timeout(timeouts.connect).retries(2);
            if let Some(response) = response {
                builder = builder.response_timeout(response);
            } else {
                builder = builder.response_timeout(Duration::from_secs(24 * 3600));
            }
            Ok(Conn::Cluster(builder.build()?.get_async_connection().await?))
        }
    }
}

/// Whether Redis refused a script call because it does not know the script (anywhere in a
/// pipeline's replies).
fn is_noscript(error: &redis::RedisError) -> bool {
    let text = error.to_string();
    text.contains("NoScript") || text.contains("NOSCRIPT")
}

/// The error a timed-out first try of a pipeline stands for (its time is counted again).
fn timed_out() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, "no answer within the command timeout"))
}
