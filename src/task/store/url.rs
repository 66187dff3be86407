//! The `--store` setting: `memory` (the default) or where Redis is.
use redis::{ConnectionInfo, IntoConnectionInfo};

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
}

impl RedisTarget {
    /// The address(es) for messages and logs: host and port only, never credentials.
    pub fn address(&self) -> String {
        match self {
            Self::Node(info) => info.addr().to_string(),
            Self::Cluster(nodes) => nodes.iter().map(|n| n.addr().to_string()).collect::<Vec<_>>().join(","),
        }
    }
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
            _ => Err(format!(
                "--store scheme {scheme:?} is not supported: use memory, redis://, rediss://, redis+cluster:// or rediss+cluster://"
            )),
        }
    }
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
    fn refuses_garbage_without_echoing_passwords() {
        for bad in ["redis+cluster://", "postgres://x", "nonsense", "redis://:pw@[::1"] {
            let error = StoreUrl::parse(bad).unwrap_err();
            assert!(!error.contains("pw"), "{error}");
        }
    }
}
