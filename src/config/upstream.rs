//! The `--upstream-…` settings of the relay agent (`--agent a2a`): where the upstream agent
//! is, how to call it, and its credentials.
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use reqwest::header::{HeaderName, HeaderValue};

use crate::upstream::{UpstreamBinding, UpstreamSettings, UpstreamVersion};

/// The upstream agent's settings; see each flag.
#[derive(Debug, Clone, Args)]
pub struct UpstreamFlags {
    /// `--agent a2a`: the URL of the upstream agent's card (its interfaces, skills and
    /// streaming are read from it), or of its endpoint with `--upstream-binding`.
    #[arg(long = "upstream", env = "A2A_UPSTREAM")]
    pub upstream_url: Option<String>,

    /// Call the upstream on this binding, at the `--upstream` URL itself, instead of choosing
    /// from its card (gRPC v1.0 first, then JSON-RPC v1.0, HTTP+JSON v1.0, JSON-RPC v0.3).
    #[arg(long = "upstream-binding", env = "A2A_UPSTREAM_BINDING", value_enum)]
    pub upstream_binding: Option<BindingFlag>,

    /// With `--upstream-binding`: the A2A version the upstream speaks there.
    #[arg(long = "upstream-version", env = "A2A_UPSTREAM_VERSION", value_enum, default_value = "1.0")]
    pub upstream_version: VersionFlag,

    /// A header sent on every upstream call, `'Name: value'` (repeatable): its credentials.
    /// `${VAR}` in the value is replaced by that environment variable, so secrets stay out of
    /// the command line.
    #[arg(long = "upstream-header", value_name = "'NAME: VALUE'")]
    pub upstream_headers: Vec<String>,

    /// Milliseconds to connect to the upstream, and for its answer to a read or a cancel.
    #[arg(long = "upstream-timeout-ms", env = "A2A_UPSTREAM_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub upstream_timeout_ms: u64,

    /// Seconds a task keeps trying to reach an upstream that went away (its stream broke)
    /// before the task fails; also how long the card is waited for at start.
    #[arg(long = "upstream-retry-secs", env = "A2A_UPSTREAM_RETRY_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub upstream_retry_secs: u64,

    /// PEM file of the CA that signs the upstream's certificate (default: the system's roots;
    /// required for gRPC over TLS).
    #[arg(long = "upstream-ca", env = "A2A_UPSTREAM_CA")]
    pub upstream_ca: Option<PathBuf>,

    /// PEM file of this server's client certificate, for an upstream that asks for mTLS.
    #[arg(long = "upstream-client-cert", env = "A2A_UPSTREAM_CLIENT_CERT", requires = "upstream_client_key")]
    pub upstream_client_cert: Option<PathBuf>,

    /// PEM file of that certificate's private key.
    #[arg(long = "upstream-client-key", env = "A2A_UPSTREAM_CLIENT_KEY", requires = "upstream_client_cert")]
    pub upstream_client_key: Option<PathBuf>,
}

/// `--upstream-binding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BindingFlag {
    /// JSON-RPC 2.0 (v1.0 or v0.3).
    Jsonrpc,
    /// HTTP+JSON (v1.0).
    HttpJson,
    /// gRPC (v1.0).
    Grpc,
}

/// `--upstream-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VersionFlag {
    /// A2A 1.0.
    #[value(name = "1.0")]
    V10,
    /// A2A 0.3.
    #[value(name = "0.3")]
    V03,
}

impl UpstreamFlags {
    /// The client settings, with header values expanded and PEM files read.
    pub fn settings(&self) -> Result<UpstreamSettings, String> {
        let url = self
            .upstream_url
            .clone()
            .ok_or("--agent a2a needs --upstream URL (the upstream agent's card)")?;
        let read = |path: &PathBuf| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
        let identity = match (&self.upstream_client_cert, &self.upstream_client_key) {
            (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
            _ => None,
        };
        if self.upstream_binding.is_some_and(|b| b != BindingFlag::Jsonrpc)
            && self.upstream_version == VersionFlag::V03
        {
            return Err("--upstream-version 0.3 is called over --upstream-binding jsonrpc only".into());
        }
        Ok(UpstreamSettings {
            url,
            binding: self.upstream_binding.map(|b| match b {
                BindingFlag::Jsonrpc => UpstreamBinding::JsonRpc,
                BindingFlag::HttpJson => UpstreamBinding::HttpJson,
                BindingFlag::Grpc => UpstreamBinding::Grpc,
            }),
            version: match self.upstream_version {
                VersionFlag::V10 => UpstreamVersion::V10,
                VersionFlag::V03 => UpstreamVersion::V03,
            },
            headers: self
                .upstream_headers
                .iter()
                .map(|h| header(h, |name| std::env::var(name).ok()))
                .collect::<Result<_, _>>()?,
            call_timeout: Duration::from_millis(self.upstream_timeout_ms),
            retry_window: Duration::from_secs(self.upstream_retry_secs),
            tls_ca_pem: self.upstream_ca.as_ref().map(read).transpose()?,
            tls_identity: identity,
            ..UpstreamSettings::default()
        })
    }
}

/// `'Name: value'` as a header, `${VAR}` in the value replaced by `env(VAR)`.
fn header(flag: &str, env: impl Fn(&str) -> Option<String>) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) =
        flag.split_once(':').ok_or_else(|| format!("--upstream-header {flag:?}: expected 'Name: value'"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|e| format!("--upstream-header {name:?}: {e}"))?;
    let mut expanded = String::new();
    let mut rest = value.trim();
    while let Some(start) = rest.find("${") {
        expanded.push_str(&rest[..start]);
        let end =
            rest[start..].find('}').ok_or_else(|| format!("--upstream-header {name}: an unclosed ${{"))?;
        let var = &rest[start + 2..start + end];
        expanded
            .push_str(&env(var).ok_or_else(|| format!("--upstream-header {name}: ${{{var}}} is not set"))?);
        rest = &rest[start + end + 1..];
    }
    expanded.push_str(rest);
    let mut value = HeaderValue::from_str(&expanded).map_err(|e| format!("--upstream-header {name}: {e}"))?;
    value.set_sensitive(true);
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_value_takes_variables_from_the_environment() {
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        let (name, value) = header("Authorization: Bearer ${TOKEN}", env).unwrap();
        assert_eq!((name.as_str(), value.to_str().unwrap()), ("authorization", "Bearer s3cret"));
        assert!(header("X-Key: ${MISSING}", env).unwrap_err().contains("MISSING"));
        assert!(header("no colon", env).is_err());
        assert!(header("X-Key: ${open", env).is_err());
    }
}
