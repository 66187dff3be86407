//! The one way to start a server: [`Server`] assembles the core around an agent, the routes
//! (`router.rs`) and the listeners, and [`Running`] is the handle to what it started, down to
//! the graceful [`Drain`] (`drain.rs`). Each listener runs its own accept loop
//! (`listener.rs`: the connection cap, accept errors, shutdown), serving every connection
//! (`connection.rs`, `in_flight.rs`: HTTP/1.1 and HTTP/2 on one socket, idle and body
//! timeouts; `write_coalescing.rs`: the answers of one read in one write), over TLS when
//! configured (`tls.rs`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), a2a_server::error::BoxError> {
//! use std::sync::Arc;
//! use a2a_server::agent::demo::DemoAgent;
//! use a2a_server::server::Server;
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
//! let running = Server::new(Arc::new(DemoAgent), DemoAgent::card()).start(listener).await?;
//! println!("listening on {}", running.local_addr());
//! running.wait().await
//! # }
//! ```
mod answer;
mod connection;
pub(crate) mod direct_grpc;
mod drain;
mod http1_guard;
mod in_flight;
mod listener;
mod request_framing;
pub(crate) mod router;
mod send_budget;
mod send_watch;
mod store_health;
mod tls;
mod write_coalescing;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic_health::server::HealthReporter;

use connection::Routes;
pub use drain::Drain;
pub use in_flight::BodyReadTimeout;
pub use listener::{ConnectionSettings, default_max_connections, descriptor_limit};
use router::{Options, app};
pub use tls::{ClientAuth, Tls, TlsSettings};

use crate::agent::AgentExecutor;
use crate::agent::demo::DemoAgent;
use crate::auth::Authenticator;
use crate::call::ProtocolVersion;
use crate::card::signing::CardSigner;
use crate::card::{self, CardFacts, CardOverrides};
use crate::core::{Core, CoreSettings};
use crate::error::BoxError;
use crate::proto::AgentCard;
use crate::task::fleet::Fleet;
use crate::task::store::{MemoryStore, Retention, TaskStore};
use crate::transport::http::HttpSettings;
use crate::ui::UiMode;

/// A server to start around an agent: every setting has a default, so only what differs is
/// said. Everything runs on the listener given to [`Server::start`] unless an HTTP listener of
/// its own is given.
pub struct Server {
    agent: Arc<dyn AgentExecutor>,
    card: AgentCard,
    card_overrides: CardOverrides,
    card_facts: Option<CardFacts>,
    card_signer: Option<CardSigner>,
    settings: CoreSettings,
    store: Option<Arc<dyn TaskStore>>,
    fleet: Option<Arc<dyn Fleet>>,
    http: HttpSettings,
    cors_origins: Vec<String>,
    ui: UiMode,
    http_listener: Option<TcpListener>,
    shutdown: Option<BoxFuture<'static, ()>>,
    auth: Option<Arc<Authenticator>>,
    connections: ConnectionSettings,
    tls: Option<Arc<Tls>>,
}

/// The demo agent with its card.
impl Default for Server {
    fn default() -> Self {
        Self::new(Arc::new(DemoAgent), DemoAgent::card())
    }
}

impl Server {
    /// A server for `agent`, publishing `card` completed with the server's interfaces and
    /// capabilities ([`card::build`]).
    pub fn new(agent: Arc<dyn AgentExecutor>, card: AgentCard) -> Self {
        Self {
            agent,
            card,
            card_overrides: CardOverrides::default(),
            card_facts: None,
            card_signer: None,
            settings: CoreSettings::default(),
            store: None,
            fleet: None,
            http: HttpSettings::default(),
            cors_origins: Vec::new(),
            ui: UiMode::Auto,
            http_listener: None,
            shutdown: None,
            auth: None,
            connections: ConnectionSettings::default(),
            tls: None,
        }
    }

    /// The core's settings (default: [`CoreSettings::default`]).
    pub fn settings(mut self, settings: CoreSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Card fields that override the agent's card (the `--card-*` flags).
    pub fn card_overrides(mut self, overrides: CardOverrides) -> Self {
        self.card_overrides = overrides;
        self
    }

    /// Where the card says clients reach the server. Default: the addresses bound, as
    /// `http://{http}` and `{grpc}`, which is right for local use but not behind a proxy.
    pub fn card_facts(mut self, facts: CardFacts) -> Self {
        self.card_facts = Some(facts);
        self
    }

    /// Signs the card, its v0.3 forms and the extended card with every key of `signer`, and
    /// publishes the keys at `/.well-known/jwks.json` (default: unsigned).
    pub fn card_signer(mut self, signer: CardSigner) -> Self {
        self.card_signer = Some(signer);
        self
    }

    /// The task store (default: a [`MemoryStore`] with the default retention).
    pub fn store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Makes this server one replica of `fleet`, whose shared store must be the one given to
    /// [`Server::store`]: any replica then serves any task.
    pub fn fleet(mut self, fleet: Arc<dyn Fleet>) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// SSE and base-path settings of the HTTP side.
    pub fn http(mut self, http: HttpSettings) -> Self {
        self.http = http;
        self
    }

    /// Origins allowed by CORS (`*` for any); none (the default) turns CORS off.
    pub fn cors_origins(mut self, origins: Vec<String>) -> Self {
        self.cors_origins = origins;
        self
    }

    /// Whether to serve the dashboard at `/ui` (default [`UiMode::Auto`]: only when the HTTP
    /// listener is on loopback).
    pub fn ui(mut self, mode: UiMode) -> Self {
        self.ui = mode;
        self
    }

    /// Turns authentication on: every call needs a credential `auth` accepts, each task and
    /// push config belongs to the caller's principal, and the card (and the extended card)
    /// declares the schemes. Off by default: every caller is the one anonymous principal.
    pub fn auth(mut self, auth: Arc<Authenticator>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Sends HTTP/2 GOAWAY on every connection after `age` (`None`, the default: never), so
    /// that a load balancer can move long-lived clients. Calls in flight finish; the client's
    /// next call opens a new connection.
    pub fn max_connection_age(mut self, age: Option<Duration>) -> Self {
        self.connections.max_connection_age = age;
        self
    }

    /// The connection cap and timeouts (default: [`ConnectionSettings::default`]); keeps the
    /// age set by [`Server::max_connection_age`] unless `settings` sets one.
    pub fn connections(mut self, settings: ConnectionSettings) -> Self {
        let age = self.connections.max_connection_age;
        self.connections = settings;
        self.connections.max_connection_age = self.connections.max_connection_age.or(age);
        self
    }

    /// Serves TLS (ALPN `h2` and `http/1.1`) on every listener with `tls` (loaded by
    /// [`Tls::new`]; keep a clone to [`Tls::reload`] it, e.g. on SIGHUP). While the server
    /// runs it also reloads the files when they change.
    pub fn tls(mut self, tls: Arc<Tls>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Serves the HTTP bindings on `listener`, leaving only gRPC on the main listener.
    pub fn http_listener(mut self, listener: TcpListener) -> Self {
        self.http_listener = Some(listener);
        self
    }

    /// Stops the server (listeners close, in-flight calls finish) when `shutdown` resolves;
    /// the server then no longer stops when its [`Running`] handle is dropped.
    pub fn shutdown(mut self, shutdown: impl Future<Output = ()> + Send + 'static) -> Self {
        self.shutdown = Some(Box::pin(shutdown));
        self
    }

    /// Binds `address` and starts there.
    pub async fn start_at(self, address: SocketAddr) -> Result<Running, BoxError> {
        self.start(bind(address).await?).await
    }

    /// Builds the card, the core and the routes, and serves on `listener` (and the HTTP
    /// listener, if one was given) in the background.
    pub async fn start(self, listener: TcpListener) -> Result<Running, BoxError> {
        let grpc_addr = listener.local_addr()?;
        let http_addr = match &self.http_listener {
            Some(http) => http.local_addr()?,
            None => grpc_addr,
        };
        let tls = self.tls;
        if let Some(auth) = &self.auth
            && auth.uses_client_certificates()
            && tls.as_ref().is_none_or(|tls| tls.settings().client_ca.is_none())
        {
            return Err("the auth file's [mtls] needs TLS with client certificates (--tls-client-ca)".into());
        }
        let mut settings = self.settings;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let facts = self.card_facts.unwrap_or_else(|| CardFacts {
            public_url: format!("{scheme}://{http_addr}"),
            public_grpc: grpc_addr.to_string(),
            streaming: settings.streaming,
            push_notifications: settings.push_notifications,
            extended_card: settings.extended_card.is_some(),
            interfaces: card::Binding::DEFAULT.to_vec(),
        });
        let mut card = card::build(self.card, self.card_overrides, &facts)?;
        if settings.push.issuer.is_empty() {
            // Signed webhooks name the server as their issuer, as its card does.
            settings.push.issuer = facts.public_url.trim_end_matches('/').to_owned();
        }
        // Webhooks registered through v0.3 get v0.3 bodies, also with `--v03 off`: in a fleet
        // another replica may have registered them.
        settings.push.encoders = std::mem::take(&mut settings.push.encoders)
            .with(ProtocolVersion::V0_3, Arc::new(crate::transport::v03::push::V03Webhooks));
        if let Some(auth) = &self.auth {
            auth.declare(&mut card);
            if let Some(extended) = &mut settings.extended_card {
                auth.declare(extended);
            }
            settings.require_authentication = true;
            let auth = auth.clone();
            tokio::spawn(async move { auth.prefetch().await });
        }
        // Signed last, over the cards as served (the auth schemes declared).
        let card_signer = match self.card_signer {
            Some(mut signer) => {
                signer.set_jku(format!("{}/.well-known/jwks.json", facts.public_url.trim_end_matches('/')));
                signer.sign_card(&mut card)?;
                if let Some(extended) = &mut settings.extended_card {
                    signer.sign_card(extended)?;
                }
                Some(Arc::new(signer))
            }
            None => None,
        };
        // The card's required extensions are enforced on every call, beside any the
        // settings already require.
        for uri in card::required_extensions(&card) {
            if !settings.required_extensions.contains(&uri) {
                settings.required_extensions.push(uri);
            }
        }
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new(Retention::default())));
        let core = Arc::new(match self.fleet {
            Some(fleet) => Core::in_fleet(self.agent, store, fleet, settings),
            None => Core::new(self.agent, store, settings),
        });
        let ui = self.ui.enabled(http_addr);
        let options = Options {
            card,
            http: self.http,
            cors_origins: self.cors_origins,
            ui,
            auth: self.auth,
            card_signer,
        };
        let app = app(core.clone(), options).await?;
        let (health, ready) = (app.health.clone(), app.ready.clone());
        if let Some(fleet) = core.fleet() {
            tokio::spawn(store_health::watch(fleet.clone(), core.clone(), health.clone(), ready.clone()));
        }

        let (stop, stopped) = watch::channel(false);
        let until = move || {
            let mut stopped = stopped.clone();
            async move {
                // A dropped sender (every handle gone) stops the server as well.
                let _ = stopped.wait_for(|stop| *stop).await;
            }
        };
        if let Some(tls) = &tls {
            tokio::spawn(tls.clone().watch(until()));
        }
        let connections = self.connections;
        tracing::info!(
            max_connections = connections.max_connections,
            descriptor_limit = descriptor_limit(),
            "connection cap (each listener)"
        );
        // One count of unsent answer bytes for every listener (`send_budget.rs`).
        let unsent = Arc::new(send_budget::Unsent::server(connections.max_unsent_bytes));
        let serve = |listener, routes, tls: &Option<Arc<Tls>>| {
            listener::serve(listener, routes, until(), connections.clone(), tls.clone(), unsent.clone())
        };
        let direct = Some(app.direct.clone());
        let task = match self.http_listener {
            None => tokio::spawn(serve(listener, Routes { router: app.combined(), direct }, &tls)),
            Some(http_listener) => {
                let (grpc, http) = app.split();
                let grpc = serve(listener, Routes { router: grpc, direct }, &tls);
                let http = serve(http_listener, Routes { router: http, direct: None }, &tls);
                tokio::spawn(async move {
                    let (a, b) = tokio::join!(grpc, http);
                    a.and(b)
                })
            }
        };
        if let Some(shutdown) = self.shutdown {
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = shutdown => { let _ = stop.send(true); }
                    () = stop.closed() => {}
                }
            });
        }
        Ok(Running { grpc_addr, http_addr, core, health, ready, stop, task })
    }
}

/// A started server. Dropping it stops the server, unless a [`Server::shutdown`] future was
/// given: then that future decides.
pub struct Running {
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    core: Arc<Core>,
    health: HealthReporter,
    ready: Arc<AtomicBool>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), BoxError>>,
}

impl Running {
    /// The address gRPC (and, on one port, everything else) is served on.
    pub fn local_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The address the HTTP bindings are served on (the same as [`Self::local_addr`] on one
    /// port).
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The core, for tests and embedders that look inside.
    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Stops accepting connections; in-flight calls finish.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// The graceful shutdown a load balancer needs, for [`Drain::run`] on a signal: running
    /// tasks get `timeout` to finish.
    pub fn drain(&self, timeout: Duration) -> Drain {
        Drain {
            core: self.core.clone(),
            health: self.health.clone(),
            ready: self.ready.clone(),
            stop: self.stop.clone(),
            timeout,
            delay: Duration::ZERO,
        }
    }

    /// Waits until the server has stopped.
    pub async fn wait(self) -> Result<(), BoxError> {
        // Held until the end, so waiting does not itself stop the server.
        let Running { task, stop: _stop, .. } = self;
        task.await?
    }
}

/// Binds `address`, saying which address failed.
pub async fn bind(address: SocketAddr) -> Result<TcpListener, BoxError> {
    TcpListener::bind(address).await.map_err(|e| format!("cannot listen on {address}: {e}").into())
}
