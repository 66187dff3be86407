//! The flags turned into the library's settings: what each `*Settings` a server is built with
//! takes from the command line.
use std::net::SocketAddr;
use std::time::Duration;

use super::{Config, Switch};
use crate::agent::exec::ExecConfig;
use crate::card::signing::CardSigner;
use crate::card::{CardFacts, CardOverrides, check_interfaces};
use crate::core::CoreSettings;
use crate::fleet::FleetSettings;
use crate::proto::AgentCard;
use crate::protojson;
use crate::push::PushSettings;
use crate::push::signing::PushSigner;
use crate::push::ssrf::Policy;
use crate::server::{ConnectionSettings, TlsSettings, default_max_connections, descriptor_limit};
use crate::task::store::{RedisOptions, Retention};
use crate::transport::http::HttpSettings;

fn read_card(flag: &str, path: Option<&std::path::Path>) -> Result<Option<AgentCard>, String> {
    let Some(path) = path else { return Ok(None) };
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {flag} {}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{flag} {} is not JSON: {e}", path.display()))?;
    protojson::decode(&value).map(Some).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

impl Config {
    /// The card file's card, if one is given.
    pub fn card_file(&self) -> Result<Option<AgentCard>, String> {
        read_card("--card", self.card.as_deref())
    }

    /// The extended card file's card, if one is given.
    pub fn extended_card_file(&self) -> Result<Option<AgentCard>, String> {
        read_card("--extended-card", self.extended_card.as_deref())
    }

    /// The webhook signing keys, if `--push-signing-key` names any.
    pub fn push_signer(&self) -> Result<Option<PushSigner>, String> {
        if self.push_signing_key.is_empty() {
            return Ok(None);
        }
        PushSigner::from_files(&self.push_signing_key)
            .map(Some)
            .map_err(|e| format!("--push-signing-key {e}"))
    }

    /// The card's signing keys, if `--card-signing-key` names any.
    pub fn card_signer(&self) -> Result<Option<CardSigner>, String> {
        if self.card_signing_key.is_empty() {
            return Ok(None);
        }
        CardSigner::from_files(&self.card_signing_key)
            .map(Some)
            .map_err(|e| format!("--card-signing-key {e}"))
    }

    /// The card fields given as flags.
    pub fn card_overrides(&self) -> Result<CardOverrides, String> {
        self.card_fields.overrides()
    }

    /// Where clients reach this server, given the addresses actually bound, and which
    /// bindings the card lists (`--card-interfaces`, refused when empty or repeating one).
    pub fn card_facts(
        &self,
        grpc: SocketAddr,
        http: SocketAddr,
        core: &CoreSettings,
    ) -> Result<CardFacts, String> {
        check_interfaces(&self.card_interfaces).map_err(|e| format!("--card-interfaces: {e}"))?;
        let local_host = |addr: SocketAddr| match addr.ip() {
            ip if ip.is_unspecified() || ip.is_loopback() => "localhost".to_owned(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        let scheme = if self.tls_cert.is_some() { "https" } else { "http" };
        let public_url = self
            .public_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{}:{}", local_host(http), http.port()));
        let public_host = public_url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(['/', '?']).next())
            .map(|authority| match authority.rsplit_once(':') {
                Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.to_owned(),
                _ => authority.to_owned(),
            })
            .filter(|host| !host.is_empty())
            .unwrap_or_else(|| local_host(grpc));
        Ok(CardFacts {
            public_grpc: self.public_grpc.clone().unwrap_or_else(|| format!("{public_host}:{}", grpc.port())),
            public_url,
            streaming: core.streaming,
            push_notifications: core.push_notifications,
            extended_card: core.extended_card.is_some(),
            interfaces: self.card_interfaces.clone(),
        })
    }

    /// The exec agent's settings: the command after `--` and the `--exec-*` flags.
    pub fn exec_config(&self) -> ExecConfig {
        self.exec.config(&self.command)
    }

    /// TLS, if --tls-cert and --tls-key are given.
    pub fn tls_settings(&self) -> Option<TlsSettings> {
        let (cert, key) = (self.tls_cert.clone()?, self.tls_key.clone()?);
        Some(TlsSettings {
            client_ca: self.tls_client_ca.clone(),
            client_auth: self.tls_client_auth,
            reload_interval: (self.tls_reload_secs > 0).then(|| Duration::from_secs(self.tls_reload_secs)),
            handshake_timeout: Duration::from_secs(self.tls_handshake_timeout_secs),
            ..TlsSettings::new(cert, key)
        })
    }

    /// The connection cap and timeouts of the listeners.
    pub fn connection_settings(&self) -> ConnectionSettings {
        let secs = |secs: u64| (secs > 0).then(|| Duration::from_secs(secs));
        ConnectionSettings {
            max_connections: match self.max_connections {
                Some(cap) => usize::try_from(cap).unwrap_or(usize::MAX),
                None => default_max_connections(descriptor_limit()),
            },
            idle_timeout: secs(self.idle_connection_secs),
            header_read_timeout: Duration::from_secs(self.header_read_timeout_secs),
            body_read_timeout: secs(self.body_read_timeout_secs),
            http2_max_concurrent_streams: self.http2_max_concurrent_streams,
            http2_keepalive_interval: secs(self.http2_keepalive_secs),
            http2_keepalive_timeout: Duration::from_secs(self.http2_keepalive_timeout_secs),
            accept_backoff: Duration::from_millis(self.accept_backoff_ms),
            max_connection_age: secs(self.max_connection_age),
            drain_keepalive_grace: Duration::from_millis(self.drain_keepalive_grace_ms),
            send_timeout: secs(self.send_timeout_secs),
            max_unsent_bytes_per_connection: self.max_unsent_bytes_per_connection,
            max_unsent_bytes: self.max_unsent_bytes,
        }
    }

    /// HTTP settings.
    pub fn http_settings(&self) -> HttpSettings {
        HttpSettings {
            sse_keep_alive: Duration::from_secs(self.sse_keep_alive_secs),
            base_path: self.public_url.as_deref().map(HttpSettings::base_path_of).unwrap_or_default(),
            v03: self.v03 == Switch::On,
            max_request_bytes: self.max_request_bytes,
        }
    }

    /// The retention of finished tasks.
    pub fn retention(&self) -> Retention {
        Retention {
            max_finished: self.task_retention_count,
            max_age: Duration::from_secs(self.task_retention_secs),
            max_bytes: usize::try_from(self.task_retention_bytes).unwrap_or(usize::MAX),
        }
    }

    /// How this replica takes part in a fleet (with `--store redis…`).
    pub fn fleet_settings(&self) -> FleetSettings {
        let replica = self.replica_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        FleetSettings {
            stream_events: (self.event_log_capacity as usize).min(crate::fleet::STREAM_EVENTS),
            log_capacity: self.event_log_capacity as usize,
            log_bytes: usize::try_from(self.event_log_bytes).unwrap_or(usize::MAX),
            task_lag: self.fleet_task_lag as usize,
            ..FleetSettings::new(replica, Duration::from_millis(self.lease_ms))
        }
    }

    /// The Redis store options (with `--store redis…`).
    pub fn redis_options(&self) -> RedisOptions {
        RedisOptions { retention: self.retention(), ..self.redis.options() }
    }

    /// The core's settings.
    pub fn core_settings(&self) -> CoreSettings {
        let push = PushSettings {
            events: self.push_events,
            policy: Policy::with_allowlist(self.push_allow_private, &self.push_allow),
            attempt_timeout: Duration::from_secs(self.push_timeout_secs),
            max_attempts: self.push_max_attempts,
            max_age: Duration::from_secs(self.push_max_age_secs),
            queue_capacity: self.push_queue_capacity as usize,
            max_queued_bytes: self.push_max_queued_bytes,
            max_concurrency: self.push_max_concurrency as usize,
            max_configs_per_task: self.max_push_configs_per_task as usize,
            max_configs_per_principal: self.max_push_configs_per_principal as usize,
            ..PushSettings::default()
        };
        CoreSettings {
            event_log_capacity: self.event_log_capacity as usize,
            event_log_bytes: usize::try_from(self.event_log_bytes).unwrap_or(usize::MAX),
            idle_timeout: (self.task_idle_secs > 0).then(|| Duration::from_secs(self.task_idle_secs)),
            max_long_poll: Duration::from_secs(self.max_long_poll_secs),
            max_stream: (self.max_stream_secs > 0).then(|| Duration::from_secs(self.max_stream_secs)),
            push_notifications: self.push,
            push,
            max_parts: self.max_parts,
            max_struct_values: self.max_struct_values,
            max_task_bytes: self.max_task_bytes,
            max_history: self.max_history,
            max_list_page_bytes: self.max_list_page_bytes,
            dedupe_messages: self.dedupe_messages == Switch::On,
            max_live_tasks: self.max_live_tasks,
            max_live_tasks_per_principal: self.max_live_tasks_per_principal,
            input_timeout: Some(Duration::from_secs(self.input_timeout_secs)).filter(|t| !t.is_zero()),
            max_parked_tasks: self.max_parked_tasks,
            max_parked_tasks_per_principal: self.max_parked_tasks_per_principal,
            max_subscriptions_per_task: self.max_subscriptions_per_task,
            max_subscriptions_per_principal: self.max_subscriptions_per_principal,
            max_requests_per_sec: self.max_requests_per_sec,
            max_requests_burst: self.max_requests_burst,
            ..CoreSettings::default()
        }
    }
}
