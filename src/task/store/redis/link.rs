//! The link to one primary (a single node, or whichever node the Sentinels name): one shared
//! multiplexed connection that is replaced, never patched, when it fails.
//!
//! # Why not `redis::aio::ConnectionManager`
//! It reconnects to the address it was built with, so after a Sentinel failover it keeps
//! talking to the demoted primary, and it does not treat `READONLY` as a reason to reconnect
//! (`docs/REDIS-FAILOVER-NOTES.md` §1). A [`Link`] instead drops its connection on any sign
//! that the node behind it is gone or no longer primary — a dropped socket, no answer within
//! the command timeout, `READONLY` — and the next call opens a new one, asking the Sentinels
//! again where the primary is. Each connection is a *generation*: a number that changes with
//! every new connection, so a replicated acknowledgement (`acks.rs`) is only ever counted for
//! writes sent over the same connection, to the same node, as the `WAIT` that covered them.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, ConnectionInfo, ErrorKind, RedisError, RedisResult, ServerErrorKind,
};

use super::conn::Timeouts;
use crate::task::store::url::SentinelTarget;

/// Where a link's node comes from.
pub enum Source {
    /// A fixed address.
    Node(Box<ConnectionInfo>),
    /// The primary the Sentinels name now (asked again at every new connection).
    Sentinel(Box<tokio::sync::Mutex<SentinelClient>>),
}

impl Source {
    /// A Sentinel source for `target`.
    pub fn sentinel(target: &SentinelTarget) -> RedisResult<Self> {
        let mut node = SentinelNodeConnectionInfo::default().set_redis_connection_info(target.node.clone());
        if target.tls {
            node = node.set_tls_mode(redis::TlsMode::Secure);
        }
        let client = SentinelClient::build(
            target.sentinels.clone(),
            &target.master,
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(Self::Sentinel(Box::new(tokio::sync::Mutex::new(client))))
    }

    /// A client for the node to use now.
    async fn client(&self) -> RedisResult<Client> {
        match self {
            Source::Node(info) => Client::open(ConnectionInfo::clone(info)),
            Source::Sentinel(sentinel) => sentinel.lock().await.async_get_client().await,
        }
    }
}

/// One connection to the primary, and its generation.
#[derive(Clone)]
pub struct Live {
    /// Changes with every new connection (never 0).
    pub generation: u64,
    /// The shared connection.
    pub conn: MultiplexedConnection,
    /// The client it came from, to open dedicated connections to the same node.
    pub client: Client,
}

/// The shared link to the primary; see the module doc.
pub struct Link {
    source: Source,
    timeouts: Timeouts,
    current: RwLock<Option<Live>>,
    /// Held while a new connection opens, so a burst of failed calls opens one, not many.
    opening: tokio::sync::Mutex<()>,
    generations: AtomicU64,
}

impl Link {
    /// A link that connects on first use.
    pub fn new(source: Source, timeouts: Timeouts) -> Self {
        Self {
            source,
            timeouts,
            current: RwLock::new(None),
            opening: tokio::sync::Mutex::new(()),
            generations: AtomicU64::new(0),
        }
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Whether the node comes from Sentinels.
    pub fn follows_sentinels(&self) -> bool {
        matches!(self.source, Source::Sentinel(_))
    }

    /// The connection in use now, if one is open.
    pub fn current(&self) -> Option<Live> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The generation in use now (0: none open).
    pub fn generation(&self) -> u64 {
        self.current().map_or(0, |live| live.generation)
    }

    /// The connection in use, opening a new one (to the primary as named now) if there is none.
    pub async fn live(&self) -> RedisResult<Live> {
        if let Some(live) = self.current() {
            return Ok(live);
        }
        let _opening = self.opening.lock().await;
        if let Some(live) = self.current() {
            return Ok(live);
        }
        let client = self.source.client().await?;
        let conn = open(&client, self.timeouts, Some(self.timeouts.command)).await?;
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let live = Live { generation, conn, client };
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(live.clone());
        tracing::debug!(generation, address = %live.client.get_connection_info().addr(), "opened a Redis connection");
        Ok(live)
    }

    /// Drops generation `generation` (if still in use): the next call opens a new connection.
    /// Whether it was in use.
    pub fn drop_generation(&self, generation: u64) -> bool {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let in_use = current.as_ref().is_some_and(|live| live.generation == generation);
        if in_use {
            *current = None;
        }
        in_use
    }

    /// Notes how a call on `generation` failed, dropping the connection when the failure says
    /// the node is gone, unreachable, or no longer the primary.
    pub fn failed(&self, generation: u64, error: &RedisError) {
        // Logged once per connection: every call in flight on it fails the same way.
        if ends_connection(error) && self.drop_generation(generation) {
            tracing::warn!(generation, %error, "dropping the Redis connection");
        }
    }
}

/// Whether `error` means the connection must be replaced: the socket is gone, the node did
/// not answer in time, or it is a replica now (a demoted primary answers `READONLY`, inside
/// `MULTI` as `EXECABORT`, and blocked clients get `UNBLOCKED`).
pub fn ends_connection(error: &RedisError) -> bool {
    if error.is_unrecoverable_error() || error.is_timeout() || error.is_io_error() {
        return true;
    }
    if matches!(error.kind(), ErrorKind::Server(ServerErrorKind::ReadOnly)) {
        return true;
    }
    let text = error.to_string();
    ["READONLY", "UNBLOCKED", "MASTERDOWN"].iter().any(|code| text.contains(code))
}

/// Opens a multiplexed connection to `client`'s node; `response`: the bound on each command
/// (none for dedicated connections, whose caller bounds each call).
pub async fn open(
    client: &Client,
    timeouts: Timeouts,
    response: Option<std::time::Duration>,
) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeouts.connect))
        .set_response_timeout(response);
    client.get_multiplexed_async_connection_with_config(&config).await
}

/// The shared connection as the `redis` crate's commands take it: every call goes over the
/// link's current connection, and a failure that ends it is noted.
#[derive(Clone)]
pub struct LinkConn(pub Arc<Link>);

impl ConnectionLike for LinkConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, redis::Value> {
        Box::pin(async move {
            let live = self.0.live().await?;
            let mut conn = live.conn;
            let reply = conn.req_packed_command(cmd).await;
            if let Err(error) = &reply {
                self.0.failed(live.generation, error);
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            let live = self.0.live().await?;
            let mut conn = live.conn;
            let reply = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(error) = &reply {
                self.0.failed(live.generation, error);
            }
            reply
        })
    }

    fn get_db(&self) -> i64 {
        self.0.current().map_or(0, |live| live.conn.get_db())
    }
}
