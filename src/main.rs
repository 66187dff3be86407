//! The `a2a-server` binary: flags → core → listener, until Ctrl-C or SIGTERM.
use std::sync::Arc;

use a2a_server::agent::AgentExecutor;
use a2a_server::agent::demo::DemoAgent;
use a2a_server::config::{AgentKind, Config, LogFormat};
use a2a_server::core::Core;
use a2a_server::server;
use a2a_server::task::store::MemoryStore;
use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    let config = Config::parse();
    init_logging(&config);
    if let Err(error) = run(config).await {
        tracing::error!(%error, "a2a-server stopped");
        eprintln!("a2a-server: {error}");
        std::process::exit(1);
    }
}

fn init_logging(config: &Config) {
    let filter = EnvFilter::try_new(&config.log_level).unwrap_or_else(|error| {
        eprintln!("a2a-server: invalid --log-level {:?}: {error}", config.log_level);
        std::process::exit(2);
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match config.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(config: Config) -> Result<(), server::BoxError> {
    let executor: Arc<dyn AgentExecutor> = match config.agent {
        AgentKind::Demo => Arc::new(DemoAgent),
    };
    let store = Arc::new(MemoryStore::new(config.retention()));
    let core = Arc::new(Core::new(executor, store, config.core_settings()));
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let address = listener.local_addr()?;
    let app = server::app(core).await?;
    println!("a2a-server listening on {address} (gRPC lf.a2a.v1.A2AService, agent {:?})", config.agent);
    tracing::info!(%address, agent = ?config.agent, "listening");
    server::serve(listener, app, shutdown_signal()).await
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
