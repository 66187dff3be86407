//! The `--redis-…` settings of a fleet (`--store redis…`): key layout, logins, and replicated
//! acknowledgements.
use std::time::Duration;

use clap::Args;

use crate::task::store::redis::{RedisOptions, WaitFor};
use crate::task::store::url::{RedisTarget, StoreUrl};

/// The Redis store's settings; see each flag.
#[derive(Debug, Clone, Args)]
pub struct RedisFlags {
    /// Prefix of every Redis key, so several deployments can share one Redis.
    #[arg(long = "redis-prefix", env = "A2A_REDIS_PREFIX", default_value = "a2a")]
    pub prefix: String,

    /// Pieces each owner's ListTasks index and the retention set are split into, so a Redis
    /// Cluster spreads them over its nodes (default: 1 on a single node, 16 on a cluster).
    /// Fixed for a deployment's life, like the prefix.
    #[arg(long = "redis-shards", env = "A2A_REDIS_SHARDS", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub shards: Option<u64>,

    /// Replicas of the Redis primary that must hold a write before an answer or event that
    /// depends on it leaves (`WAIT`; single node or Sentinel). 0: do not wait.
    #[arg(long = "redis-wait-replicas", env = "A2A_REDIS_WAIT_REPLICAS", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=64))]
    pub wait_replicas: u32,

    /// Milliseconds the replicas may take to acknowledge; a write they did not acknowledge
    /// in time counts as failed (retried; the caller gets the real outcome or UNAVAILABLE).
    #[arg(long = "redis-wait-timeout-ms", env = "A2A_REDIS_WAIT_TIMEOUT_MS",
          default_value_t = crate::task::store::redis::DEFAULT_WAIT_TIMEOUT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub wait_timeout_ms: u64,

    /// Password of the Redis data nodes when the `--store` URL carries none (keeps it out of
    /// the command line).
    #[arg(long = "redis-password", env = "A2A_REDIS_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,

    /// Username for the Sentinels of a `redis+sentinel://` store (their own ACL user).
    #[arg(long = "redis-sentinel-username", env = "A2A_REDIS_SENTINEL_USERNAME")]
    pub sentinel_username: Option<String>,

    /// Password for the Sentinels of a `redis+sentinel://` store (`requirepass` of the
    /// Sentinels, which may differ from the data nodes').
    #[arg(long = "redis-sentinel-password", env = "A2A_REDIS_SENTINEL_PASSWORD", hide_env_values = true)]
    pub sentinel_password: Option<String>,
}

impl RedisFlags {
    /// The `--store` value parsed, with the passwords given by flag or environment applied.
    pub fn store_url(&self, store: &str) -> Result<StoreUrl, String> {
        let mut url = StoreUrl::parse(store)?;
        if let StoreUrl::Redis(target) = &mut url {
            if let Some(password) = &self.password {
                target.default_password(password);
            }
            if let RedisTarget::Sentinel(sentinel) = target {
                sentinel.sentinel_login(self.sentinel_username.as_deref(), self.sentinel_password.as_deref());
            }
        }
        Ok(url)
    }

    /// The store's options (retention comes from the general settings).
    pub fn options(&self) -> RedisOptions {
        RedisOptions {
            prefix: self.prefix.clone(),
            shards: self.shards.and_then(|n| usize::try_from(n).ok()),
            wait: WaitFor {
                replicas: self.wait_replicas,
                timeout: Duration::from_millis(self.wait_timeout_ms),
            },
            ..RedisOptions::default()
        }
    }
}
