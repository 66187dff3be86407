//! The `a2a-server` binary: flags → the server builder, until Ctrl-C or SIGTERM drains it.
use std::sync::Arc;

use a2a_server::agent::AgentExecutor;
use a2a_server::agent::demo::DemoAgent;
use a2a_server::agent::exec::ExecAgent;
use a2a_server::agent::relay::RelayAgent;
use a2a_server::auth::Authenticator;
use a2a_server::card::{self, CardOverrides};
use a2a_server::config::{AgentKind, Config, LogFormat};
use a2a_server::error::{A2aError, BoxError};
use a2a_server::fleet::RedisFleet;
use a2a_server::proto::AgentCard;
use a2a_server::server::{self, Server, Tls};
use a2a_server::task::store::{MemoryStore, RedisStore, StoreUrl};
use clap::Parser;
use tracing_subscriber::{EnvFilter, Layer};

/// The server allocates per call and per event; mimalloc's thread-local free lists cut the
/// allocator's share of CPU time (about a quarter of it with glibc's, in profiles). Version 2
/// (`libmimalloc-sys`'s `v2` feature): version 3 took as much CPU and about 3 KiB more
/// resident memory per idle task with an open stream (a2a-bench's memory scenario). Asked
/// through [`a2a_server::allocator`], which skips the aligned calls where they buy nothing.
#[global_allocator]
static ALLOCATOR: a2a_server::allocator::Mimalloc = a2a_server::allocator::Mimalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = Config::parse();
    let tracing = init_logging(&config);
    let result = run(config).await;
    tracing.shutdown();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // Returned, not `process::exit`: the runtime is dropped on the way out, and with it every
        // exec command's process group (its supervisor's guard kills the group).
        Err(error) => {
            tracing::error!(%error, "a2a-server stopped");
            eprintln!("a2a-server: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A configuration problem found at start-up: reported like a bad flag (exit code 2).
fn config_error(message: impl std::fmt::Display) -> ! {
    eprintln!("a2a-server: {message}");
    std::process::exit(2);
}

/// What logging keeps running: the OpenTelemetry pipeline, when there is one.
struct Tracing {
    #[cfg(feature = "otel")]
    otel: Option<a2a_server::otel::Otel>,
}

impl Tracing {
    /// Exports the spans still queued.
    fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(otel) = self.otel {
            otel.shutdown();
        }
    }
}

fn init_logging(config: &Config) -> Tracing {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter = EnvFilter::try_new(&config.log_level)
        .unwrap_or_else(|error| config_error(format!("invalid --log-level {:?}: {error}", config.log_level)));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match config.log_format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    #[cfg(feature = "otel")]
    {
        let otel = config.otlp_endpoint.as_deref().map(|endpoint| {
            a2a_server::otel::Otel::new(endpoint).unwrap_or_else(|error| config_error(error))
        });
        registry.with(otel.as_ref().map(|otel| otel.layer())).init();
        Tracing { otel }
    }
    #[cfg(not(feature = "otel"))]
    {
        if config.otlp_endpoint.is_some() {
            config_error(
                "--otlp-endpoint needs a build with the `otel` feature (cargo build --features otel)",
            );
        }
        registry.init();
        Tracing {}
    }
}

async fn agent(config: &Config) -> (Arc<dyn AgentExecutor>, AgentCard) {
    if config.agent != AgentKind::Exec && !config.command.is_empty() {
        config_error(format!("a command after `--` needs --agent exec (the agent is {:?})", config.agent));
    }
    match config.agent {
        AgentKind::Demo => (Arc::new(DemoAgent), DemoAgent::card()),
        AgentKind::Exec => {
            let agent = ExecAgent::new(config.exec_config())
                .unwrap_or_else(|error| config_error(format!("--agent exec: {error}")));
            let card = agent.card();
            (Arc::new(agent), card)
        }
        AgentKind::A2a => {
            let settings = config.upstream.settings().unwrap_or_else(|e| config_error(e));
            let (agent, card) = RelayAgent::connect(settings)
                .await
                .unwrap_or_else(|error| config_error(format!("--agent a2a: {error}")));
            (Arc::new(agent), card)
        }
    }
}

async fn run(config: Config) -> Result<(), BoxError> {
    let (executor, default_card) = agent(&config).await;
    let card_file = config.card_file().unwrap_or_else(|e| config_error(e));
    if card_file.as_ref().is_some_and(|card| !card.supported_interfaces.is_empty()) {
        tracing::warn!(
            "--card: the file's supportedInterfaces are replaced by the server's own \
             (choose them with --card-interfaces, --public-url, --public-grpc)"
        );
    }
    let base_card = card_file.unwrap_or(default_card);
    let card_signer = config.card_signer().unwrap_or_else(|e| config_error(e));
    let overrides = config.card_overrides().unwrap_or_else(|e| config_error(e));
    let mut settings = config.core_settings();
    settings.push.signing = config.push_signer().unwrap_or_else(|e| config_error(e)).map(Arc::new);
    if settings.push.signing.is_some() && !settings.push_notifications {
        tracing::warn!("--push-signing-key without --push: nothing is pushed, so nothing is signed");
    }
    let extended_card = config.extended_card_file().unwrap_or_else(|e| config_error(e));
    settings.extended_card = extended_card.clone();
    let auth = config.auth.as_deref().map(|path| {
        Arc::new(Authenticator::from_file(path).unwrap_or_else(|e| config_error(format!("--auth {e}"))))
    });
    if auth.as_ref().is_some_and(|auth| auth.uses_client_certificates()) && config.tls_client_ca.is_none() {
        config_error("--auth: the [mtls] table needs --tls-client-ca (and --tls-cert, --tls-key)");
    }
    if auth.is_none() && extended_card.is_some() {
        tracing::warn!("--extended-card without --auth: every caller is anonymous and may read it");
    }

    // Bound here, before the server is built, because the card says where clients reach them.
    let listener = server::bind(config.listen).await?;
    let grpc_address = listener.local_addr()?;
    let http_listener = match config.http_listen {
        Some(address) => Some(server::bind(address).await?),
        None => None,
    };
    let http_address = match &http_listener {
        Some(listener) => listener.local_addr()?,
        None => grpc_address,
    };
    let facts = config.card_facts(grpc_address, http_address, &settings).unwrap_or_else(|e| config_error(e));
    if let Some(extended) = extended_card {
        let extended = card::build(extended, CardOverrides::default(), &facts)
            .unwrap_or_else(|e| config_error(format!("--extended-card: {e}")));
        settings.extended_card = Some(extended);
    }
    let public_url = facts.public_url.trim_end_matches('/').to_owned();

    let mut server = Server::new(executor, base_card)
        .card_overrides(overrides)
        .card_facts(facts)
        .settings(settings)
        .http(config.http_settings())
        .cors_origins(config.cors_origins.clone())
        .ui(config.ui)
        .connections(config.connection_settings());
    if let Some(settings) = config.tls_settings() {
        let tls = Arc::new(Tls::new(settings).unwrap_or_else(|e| config_error(e)));
        tokio::spawn(reload_on_sighup(tls.clone()));
        server = server.tls(tls);
    }
    if let Some(http_listener) = http_listener {
        server = server.http_listener(http_listener);
    }
    if let Some(auth) = auth {
        server = server.auth(auth);
    }
    if let Some(signer) = card_signer {
        server = server.card_signer(signer);
    }
    let in_fleet =
        match config.redis.store_url(&config.store).unwrap_or_else(|e| config_error(format!("--store: {e}")))
        {
            StoreUrl::Memory => {
                server = server.store(Arc::new(MemoryStore::new(config.retention())));
                false
            }
            StoreUrl::Redis(target) => {
                let store = RedisStore::connect(target, config.redis_options())
                    .await
                    .unwrap_or_else(|e| config_error(format!("--store: {e}")));
                let store = Arc::new(store);
                let fleet = RedisFleet::new(store.clone(), config.fleet_settings());
                tracing::info!(replica = fleet.replica(), "one replica of a fleet on Redis");
                server = server.store(store).fleet(Arc::new(fleet));
                true
            }
        };
    let running = match server.start(listener).await {
        Err(error) if error.is::<A2aError>() => config_error(error),
        result => result?,
    };

    // Before the listening line: a SIGTERM sent as soon as the server says it listens drains it,
    // instead of killing it outright (and leaving an exec command's processes behind).
    let signalled = shutdown_signal();
    println!(
        "a2a-server listening on {grpc_address} (gRPC lf.a2a.v1.A2AService{}), agent {:?}; card at {public_url}/.well-known/agent-card.json",
        if config.http_listen.is_some() { "" } else { ", JSON-RPC, HTTP+JSON" },
        config.agent,
    );
    if config.http_listen.is_some() {
        println!("a2a-server HTTP bindings on {http_address}");
    }
    tracing::info!(%grpc_address, %http_address, agent = ?config.agent, "listening");
    let drain_timeout = std::time::Duration::from_secs(config.drain_timeout_secs);
    let drain = running.drain(drain_timeout).delay(std::time::Duration::from_millis(config.drain_delay_ms));
    tokio::spawn(async move {
        signalled.await;
        drain.run().await;
    });
    let core = running.core().clone();
    running.wait().await?;
    if in_fleet {
        // Running tasks finish here (or are cancelled by the drain at its deadline); waiting
        // ones hibernated to the store for the other replicas.
        core.wait_idle(drain_timeout).await;
    }
    Ok(())
}

/// Reloads the TLS files on every SIGHUP (a bad file is logged and the old certificate kept).
async fn reload_on_sighup(tls: Arc<Tls>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangup) = signal(SignalKind::hangup()) else { return };
        while hangup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the TLS files");
            let _ = tls.reload();
        }
    }
    #[cfg(not(unix))]
    let _ = tls;
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM. The handlers are installed by the call itself, not
/// on the first poll, so no signal between the call and the first poll takes the default action.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (interrupt, term) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
        async move {
            let (Ok(mut interrupt), Ok(mut term)) = (interrupt, term) else {
                tracing::warn!("cannot install the SIGINT/SIGTERM handlers; stop with SIGKILL");
                return std::future::pending().await;
            };
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = term.recv() => {}
            }
            tracing::info!("shutting down");
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
    }
}
