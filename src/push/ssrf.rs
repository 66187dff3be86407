//! The SSRF guard for webhook deliveries: a webhook URL must not make the server reach into
//! private networks. Addresses are checked when connecting (a DNS resolver that refuses
//! non-public answers), not when a config is created, so a name that later resolves to
//! 127.0.0.1 is caught too.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// A CIDR block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` lies in the block.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Cidr {
    type Err = String;

    /// `10.0.0.0/8`, `::1/128`, or a bare address (a single host).
    fn from_str(text: &str) -> Result<Self, String> {
        let (address, prefix) = text.split_once('/').unwrap_or((text, ""));
        let network: IpAddr =
            address.parse().map_err(|_| format!("{text:?} is not an IP address or CIDR"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            "" => max,
            p => {
                p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| format!("bad prefix in {text:?}"))?
            }
        };
        Ok(Self { network: canonical(network), prefix })
    }
}

/// What webhook deliveries may connect to.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Allow every address (local setups and tests).
    pub allow_private: bool,
    /// Addresses allowed although not public.
    pub allow_cidrs: Vec<Cidr>,
    /// Host names allowed whatever they resolve to (compared case-insensitively).
    pub allow_hosts: Vec<String>,
}

impl Policy {
    /// Parses `--push-allow` entries: CIDRs or addresses, else host names.
    pub fn with_allowlist(allow_private: bool, entries: &[String]) -> Self {
        let mut policy = Self { allow_private, ..Self::default() };
        for entry in entries {
            match entry.parse::<Cidr>() {
                Ok(cidr) => policy.allow_cidrs.push(cidr),
                Err(_) => policy.allow_hosts.push(entry.to_ascii_lowercase()),
            }
        }
        policy
    }

    /// Whether a delivery may connect to `ip`.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip) || self.allow_cidrs.iter().any(|c| c.contains(ip))
    }

    /// Whether `host` is allowed by name, whatever it resolves to.
    pub fn allows_host(&self, host: &str) -> bool {
        self.allow_hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Checks a URL before any connection: http or https, and a literal IP host must be
    /// allowed (names are checked by [`GuardedResolver`] when they are resolved).
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("webhook scheme {:?} is not http or https", url.scheme()));
        }
        match url.host() {
            None => Err("webhook URL has no host".into()),
            Some(url::Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => Ok(()),
        }
    }

    fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        if self.allows_ip(ip) {
            Ok(())
        } else {
            Err(format!("webhook address {ip} is not public; refused (see --push-allow)"))
        }
    }
}

/// The address in its simplest form: IPv4-mapped and IPv4-compatible IPv6 become IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Whether an address is globally routable: not loopback, private, link-local, CGNAT,
/// multicast, unspecified, broadcast, documentation, benchmarking or reserved.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => is_public_v6(ip),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated) fec0::/10
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || first == 0x0064 && ip.segments()[1] == 0xff9b // NAT64 may reach IPv4 private space
        || ip.to_ipv4().is_some_and(|v4| !is_public_v4(v4))) // IPv4-compatible ::a.b.c.d
}

/// A DNS resolver that drops every answer the policy does not allow, and fails when none is
/// left, so the HTTP client can never connect to a refused address.
pub struct GuardedResolver {
    policy: Arc<Policy>,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: Arc<Policy>) -> Self {
        Self { policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let answers: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = if policy.allows_host(&host) {
                answers
            } else {
                answers.into_iter().filter(|a| policy.allows_ip(a.ip())).collect()
            };
            if allowed.is_empty() {
                let message =
                    format!("webhook host {host} resolves to no public address; refused (see --push-allow)");
                return Err(message.into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "ff02::1",
        ] {
            assert!(!is_public(ip(refused)), "{refused} must be refused");
        }
        for public in ["8.8.8.8", "1.1.1.1", "100.128.0.1", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8"]
        {
            assert!(is_public(ip(public)), "{public} is public");
        }
    }

    #[test]
    fn allowlists() {
        let policy = Policy::with_allowlist(false, &["127.0.0.0/8".into(), "hooks.internal".into()]);
        assert!(policy.allows_ip(ip("127.0.0.2")));
        assert!(policy.allows_ip(ip("::ffff:127.0.0.1")));
        assert!(!policy.allows_ip(ip("10.0.0.1")));
        assert!(policy.allows_host("HOOKS.internal"));
        assert!(Policy::with_allowlist(true, &[]).allows_ip(ip("10.0.0.1")));
    }

    #[test]
    fn urls_are_checked_before_connecting() {
        let policy = Policy::default();
        let check = |u: &str| policy.check_url(&reqwest::Url::parse(u).unwrap());
        assert!(check("http://127.0.0.1:8080/hook").is_err());
        assert!(check("http://[::1]/hook").is_err());
        assert!(check("ftp://example.com/").is_err());
        assert!(check("https://example.com/hook").is_ok());
        assert!(check("http://8.8.8.8/hook").is_ok());
    }
}
