//! The `a2a-server` binary: flags → core → listeners, until Ctrl-C or SIGTERM.
use std::sync::Arc;

use a2a_server::agent::AgentExecutor;
use a2a_server::agent::demo::DemoAgent;
use a2a_server::agent::exec::ExecAgent;
use a2a_server::config::{AgentKind, Config, LogFormat};
use a2a_server::core::Core;
use a2a_server::error::BoxError;
use a2a_server::server;
use a2a_server::task::store::MemoryStore;
use a2a_server::{card, proto::AgentCard};
use clap::Parser;
use tokio::net::TcpListener;
use tracing_subscriber::{EnvFilter, Layer};

/// The server allocates per call and per event; mimalloc's thread-local free lists cut the
/// allocator's share of CPU time (about a quarter of it with glibc's, in profiles). Version 2
/// (the crate's `v2` feature): version 3 took as much CPU and about 3 KiB more resident memory
/// per idle task with an open stream (a2a-bench's memory scenario).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let config = Config::parse();
    let tracing = init_logging(&config);
    let result = run(config).await;
    tracing.shutdown();
    if let Err(error) = result {
        tracing::error!(%error, "a2a-server stopped");
        eprintln!("a2a-server: {error}");
        std::process::exit(1);
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

fn agent(config: &Config) -> (Arc<dyn AgentExecutor>, AgentCard) {
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
    }
}

async fn bind(address: std::net::SocketAddr) -> Result<TcpListener, BoxError> {
    TcpListener::bind(address).await.map_err(|e| format!("cannot listen on {address}: {e}").into())
}

async fn run(config: Config) -> Result<(), BoxError> {
    let (executor, default_card) = agent(&config);
    let base_card = config.card_file().unwrap_or_else(|e| config_error(e)).unwrap_or(default_card);
    let overrides = config.card_overrides().unwrap_or_else(|e| config_error(e));
    let mut settings = config.core_settings();

    let listener = bind(config.listen).await?;
    let grpc_address = listener.local_addr()?;
    let http_listener = match config.http_listen {
        Some(address) => Some(bind(address).await?),
        None => None,
    };
    let http_address = match &http_listener {
        Some(listener) => listener.local_addr()?,
        None => grpc_address,
    };

    let facts = config.card_facts(grpc_address, http_address, &settings);
    let card = card::build(base_card, overrides, &facts).unwrap_or_else(|e| config_error(e));
    settings.required_extensions = card::required_extensions(&card);
    let store = Arc::new(MemoryStore::new(config.retention()));
    let core = Arc::new(Core::new(executor, store, settings));
    let options =
        server::Options { card, http: config.http_settings(), cors_origins: config.cors_origins.clone() };
    let app = server::app(core.clone(), options).await?;

    println!(
        "a2a-server listening on {grpc_address} (gRPC lf.a2a.v1.A2AService{}), agent {:?}; card at {}/.well-known/agent-card.json",
        if http_listener.is_some() { "" } else { ", JSON-RPC, HTTP+JSON" },
        config.agent,
        facts.public_url.trim_end_matches('/'),
    );
    tracing::info!(%grpc_address, %http_address, agent = ?config.agent, "listening");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let drain = server::Drain {
        core,
        health: app.health.clone(),
        ready: app.ready.clone(),
        timeout: std::time::Duration::from_secs(config.drain_timeout_secs),
    };
    tokio::spawn(async move {
        shutdown_signal().await;
        drain.run(stop_tx).await;
    });
    let stopped = move || {
        let mut stop_rx = stop_rx.clone();
        async move {
            let _ = stop_rx.wait_for(|stop| *stop).await;
        }
    };
    match http_listener {
        None => server::serve(listener, app.combined(), stopped()).await,
        Some(http_listener) => {
            println!("a2a-server HTTP bindings on {http_address}");
            let (grpc, http) = app.split();
            let (a, b) = tokio::join!(
                server::serve(listener, grpc, stopped()),
                server::serve(http_listener, http, stopped())
            );
            a.and(b)
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}
