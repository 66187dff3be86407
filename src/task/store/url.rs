//! The `--store` setting: `memory` (the default) or where Redis is.
use redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

/// Which store a deployment uses.
#[derive(Debug, Clone)]
pub enum StoreUrl {
    /// This process's memory: one replica, nothing to run beside it.
    Memory,
    /// Redis (single node or cluster): a fleet of replicas shares it.
    Redis(RedisTarget),
}

/// Where Redis is.
#[derive(Debug, Clone)]
pub enum RedisTarget {
    /// One node: `redis://[user:pass@]HOST:PORT[/DB]`, or `rediss://…` for TLS.
    Node(Box<ConnectionInfo>),
    /// A cluster, from its seed nodes: `redis+cluster://h1:p1,h2:p2` (`rediss+cluster://` for TLS).
    Cluster(Vec<ConnectionInfo>),
    /// The primary that Redis Sentinels name:
    /// `redis+sentinel://[user:pass@]S1:P1,S2:P2/MASTER[/DB]` (`rediss+sentinel://` for TLS).
    Sentinel(Box<SentinelTarget>),
}

/// How to find the primary through Sentinels, and how to log in to it.
#[derive(Debug, Clone)]
pub struct SentinelTarget {
    /// The Sentinels (their own credentials: [`SentinelTarget::sentinel_login`]).
    pub sentinels: Vec<ConnectionInfo>,
    /// The name the Sentinels monitor the primary under.
    pub master: String,
    /// Database and credentials for the data nodes (from the URL's `user:pass@`).
    pub node: RedisConnectionInfo,
    /// Whether Sentinels and data nodes speak TLS.
    pub tls: bool,
}

/// The port Sentinels listen on when the URL names none.
const SENTINEL_PORT: u16 = 26379;

impl SentinelTarget {
    /// Sets the Sentinels' own username and password (they may differ from the data nodes').
    pub fn sentinel_login(&mut self, username: Option<&str>, password: Option<&str>) {
        for sentinel in &mut self.sentinels {
            let mut settings = sentinel.redis_settings().clone();
            if let Some(username) = username {
                settings = settings.set_username(username);
            }
            if let Some(password) = password {
                settings = settings.set_password(password);
            }
            *sentinel = sentinel.clone().set_redis_settings(settings);
        }
    }
}

impl RedisTarget {
    /// The address(es) for messages and logs: host and port only, never credentials.
    pub fn address(&self) -> String {
        match self {
            Self::Node(info) => info.addr().to_string(),
            Self::Cluster(nodes) => join(nodes),
            Self::Sentinel(target) => format!("{} (Sentinels {})", target.master, join(&target.sentinels)),
        }
    }

    /// Sets the data nodes' password where the URL gave none (`--redis-password`).
    pub fn default_password(&mut self, password: &str) {
        let settings = |info: &RedisConnectionInfo| match info.password() {
            Some(_) => info.clone(),
            None => info.clone().set_password(password),
        };
        match self {
            Self::Node(info) => {
                **info = ConnectionInfo::clone(info).set_redis_settings(settings(info.redis_settings()))
            }
            Self::Cluster(nodes) => {
                for node in nodes {
                    *node = node.clone().set_redis_settings(settings(node.redis_settings()));
                }
            }
            Self::Sentinel(target) => target.node = settings(&target.node),
        }
    }
}

fn join(nodes: &[ConnectionInfo]) -> String {
    nodes.iter().map(|n| n.addr().to_string()).collect::<Vec<_>>().join(",")
}

impl StoreUrl {
    /// Parses a `--store` value; the error names what is wrong (without any password).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.eq_ignore_ascii_case("memory") {
            return Ok(Self::Memory);
        }
        let (scheme, rest) = raw
            .split_once("://")
            .ok_or_else(|| format!("--store must be `memory` or a redis:// URL, not {:?}", redact(raw)))?;
        let invalid = |e: redis::RedisError| format!("invalid --store URL {}: {e}", redact(raw));
        match scheme.to_ascii_lowercase().as_str() {
            "redis" | "rediss" => {
                Ok(Self::Redis(RedisTarget::Node(Box::new(raw.into_connection_info().map_err(invalid)?))))
            }
            "redis+cluster" | "rediss+cluster" => {
                let node_scheme = scheme.split_once('+').map(|(s, _)| s).unwrap_or("redis");
                let (userinfo, hosts) = match rest.rsplit_once('@') {
                    Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
                    None => (String::new(), rest),
                };
                let hosts = hosts.trim_end_matches('/');
                let nodes = hosts
                    .split(',')
                    .filter(|h| !h.is_empty())
                    .map(|h| format!("{node_scheme}://{userinfo}{h}").into_connection_info().map_err(invalid))
                    .collect::<Result<Vec<_>, _>>()?;
                if nodes.is_empty() {
                    return Err(format!("--store {} names no cluster node", redact(raw)));
                }
                Ok(Self::Redis(RedisTarget::Cluster(nodes)))
            }
            "redis+sentinel" | "rediss+sentinel" => sentinel(scheme, rest, raw),
            _ => Err(format!(
                "--store scheme {scheme:?} is not supported: use memory, redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://"
            )),
        }
    }
}

/// Parses `[user:pass@]S1:P1,S2:P2/MASTER[/DB]` after a `redis+sentinel://` scheme.
fn sentinel(scheme: &str, rest: &str, raw: &str) -> Result<StoreUrl, String> {
    let tls = scheme.to_ascii_lowercase().starts_with("rediss");
    let node_scheme = if tls { "rediss" } else { "redis" };
    let invalid = |e: redis::RedisError| format!("invalid --store URL {}: {e}", redact(raw));
    let (userinfo, after) = match rest.rsplit_once('@') {
        Some((userinfo, after)) => (format!("{userinfo}@"), after),
        None => (String::new(), rest),
    };
    let mut parts = after.split('/');
    let hosts = parts.next().unwrap_or_default();
    let master = parts.next().unwrap_or_default();
    let db = parts.next().filter(|db| !db.is_empty()).unwrap_or("0");
    if master.is_empty() || parts.any(|extra| !extra.is_empty()) {
        return Err(format!(
            "--store {} must be {scheme}://[user:pass@]SENTINEL[,SENTINEL…]/MASTER_NAME[/DB]",
            redact(raw)
        ));
    }
    let sentinels = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| {
            let h = if h.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok()) {
                h.to_owned()
            } else {
                format!("{h}:{SENTINEL_PORT}")
            };
            format!("{node_scheme}://{h}").into_connection_info().map_err(invalid)
        })
        .collect::<Result<Vec<_>, _>>()?;
    if sentinels.is_empty() {
        return Err(format!("--store {} names no Sentinel", redact(raw)));
    }
    // The data nodes' login and database, read the way a node URL is (any address will do).
    let node =
        format!("redis://{userinfo}sentinel-named-primary/{db}").into_connection_info().map_err(invalid)?;
    let target =
        SentinelTarget { sentinels, master: master.to_owned(), node: node.redis_settings().clone(), tls };
    Ok(StoreUrl::Redis(RedisTarget::Sentinel(Box::new(target))))
}

/// The URL with any `user:password@` replaced, for error messages.
fn redact(raw: &str) -> String {
    match (raw.split_once("://"), raw.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, hosts))) => format!("{scheme}://***@{hosts}"),
        _ => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(raw: &str) -> RedisTarget {
        match StoreUrl::parse(raw) {
            Ok(StoreUrl::Redis(target)) => target,
            other => panic!("{raw}: {other:?}"),
        }
    }

    #[test]
    fn parses_every_form() {
        assert!(matches!(StoreUrl::parse("memory"), Ok(StoreUrl::Memory)));
        assert_eq!(target("redis://127.0.0.1:6390/2").address(), "127.0.0.1:6390");
        let RedisTarget::Node(info) = target("redis://127.0.0.1:6390/2") else { panic!() };
        assert_eq!(info.redis_settings().db(), 2);
        assert_eq!(target("rediss://cache.example:6380").address(), "cache.example:6380");
        let cluster = target("redis+cluster://:secret@h1:7000,h2:7001/");
        assert_eq!(cluster.address(), "h1:7000,h2:7001");
        assert!(matches!(cluster, RedisTarget::Cluster(nodes) if nodes.len() == 2));
    }

    #[test]
    fn parses_sentinels() {
        let RedisTarget::Sentinel(parsed) = target("redis+sentinel://:pw@10.0.0.1:26380,10.0.0.2/mymaster/3")
        else {
            panic!()
        };
        assert_eq!(parsed.master, "mymaster");
        assert_eq!(parsed.node.db(), 3);
        assert_eq!(parsed.node.password(), Some("pw"));
        assert!(!parsed.tls);
        let addresses: Vec<String> = parsed.sentinels.iter().map(|s| s.addr().to_string()).collect();
        assert_eq!(addresses, ["10.0.0.1:26380", "10.0.0.2:26379"]);
        // The data nodes' password is not the Sentinels'.
        assert!(parsed.sentinels.iter().all(|s| s.redis_settings().password().is_none()));
        let mut logged_in = *parsed;
        logged_in.sentinel_login(None, Some("spw"));
        assert!(logged_in.sentinels.iter().all(|s| s.redis_settings().password() == Some("spw")));
        let RedisTarget::Sentinel(tls) = target("rediss+sentinel://s1:1/m") else { panic!() };
        assert!(tls.tls && tls.node.db() == 0);
        assert_eq!(target_address("redis+sentinel://s1:1,s2:2/m"), "m (Sentinels s1:1,s2:2)");
    }

    fn target_address(raw: &str) -> String {
        target(raw).address()
    }

    #[test]
    fn a_default_password_fills_only_what_the_url_left_out() {
        let mut node = target("redis://h:1");
        node.default_password("env");
        let RedisTarget::Node(info) = node else { panic!() };
        assert_eq!(info.redis_settings().password(), Some("env"));
        let mut node = target("redis://:url@h:1");
        node.default_password("env");
        let RedisTarget::Node(info) = node else { panic!() };
        assert_eq!(info.redis_settings().password(), Some("url"));
    }

    #[test]
    fn refuses_garbage_without_echoing_passwords() {
        for bad in [
            "redis+cluster://",
            "postgres://x",
            "nonsense",
            "redis://:pw@[::1",
            "redis+sentinel://:pw@h1:1",
            "redis+sentinel://:pw@/m",
            "redis+sentinel://:pw@h1/m/0/x",
        ] {
            let error = StoreUrl::parse(bad).unwrap_err();
            assert!(!error.contains("pw"), "{error}");
        }
    }
}
