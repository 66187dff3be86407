//! TLS on the one port: rustls (the aws-lc provider) offering ALPN `h2` and `http/1.1`, so every
//! binding works over TLS exactly as in plaintext; optionally verifying client certificates
//! (mTLS), whose names then reach the auth layer as a [`ClientCertificate`].
//!
//! Certificates are replaced without a restart: [`Tls::reload`] (on SIGHUP, from the binary) and
//! a poll of the files' modification times build a whole new configuration (certificate, key,
//! client CA); handshakes after that use it. A new configuration that does not load — a
//! half-written file, a key that does not match — is logged and the old one kept.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

use crate::auth::ClientCertificate;

/// Whether a client must present a certificate (with [`TlsSettings::client_ca`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// The handshake fails without a certificate the CA signed.
    #[default]
    Required,
    /// A client may connect without one (and is then unauthenticated unless it sends another
    /// credential); a certificate it does present must verify.
    Optional,
}

/// Where the server's certificate and key are, and how clients are verified.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// The certificate chain, PEM, the server's own certificate first.
    pub cert: PathBuf,
    /// The private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates (PEM) that client certificates must chain to; `None`: no client
    /// certificates are asked for.
    pub client_ca: Option<PathBuf>,
    /// Whether a client certificate is required (with `client_ca`).
    pub client_auth: ClientAuth,
    /// How often the files' modification times are checked (a change reloads them); `None`:
    /// only [`Tls::reload`] reloads.
    pub reload_interval: Option<Duration>,
    /// How long a client may take to complete the handshake before the connection is closed.
    pub handshake_timeout: Duration,
}

impl TlsSettings {
    /// TLS with `cert` and `key`, no client certificates, files checked every 5 s, and a 10 s
    /// handshake timeout.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
            client_auth: ClientAuth::Required,
            reload_interval: Some(Duration::from_secs(5)),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// The live TLS configuration of a server, replaced whole on reload.
pub struct Tls {
    settings: TlsSettings,
    current: RwLock<Arc<ServerConfig>>,
    /// The files' modification times and sizes when they were last loaded.
    stamps: Mutex<Vec<Option<(SystemTime, u64)>>>,
}

impl Tls {
    /// Loads the files; an error names the file and what is wrong with it.
    pub fn new(settings: TlsSettings) -> Result<Self, String> {
        let stamps = stamps(&settings);
        let config = load(&settings)?;
        Ok(Self { settings, current: RwLock::new(Arc::new(config)), stamps: Mutex::new(stamps) })
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// An acceptor with the current configuration, for one connection.
    pub(super) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// Reads the files again; the next handshakes use them. On an error the configuration in
    /// use stays, and the error is logged and returned.
    pub fn reload(&self) -> Result<(), String> {
        let stamps = stamps(&self.settings);
        *self.stamps.lock().unwrap_or_else(PoisonError::into_inner) = stamps;
        match load(&self.settings) {
            Ok(config) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
                tracing::info!(cert = %self.settings.cert.display(), "TLS certificate reloaded");
                Ok(())
            }
            Err(error) => {
                tracing::error!(%error, "TLS reload failed; keeping the certificate in use");
                Err(error)
            }
        }
    }

    /// Reloads whenever a file changed, checking every `reload_interval`, until `stop`.
    pub(super) async fn watch(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        let Some(interval) = self.settings.reload_interval else { return };
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(interval) => {}
            }
            let changed =
                stamps(&self.settings) != *self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
            if changed {
                let _ = self.reload();
            }
        }
    }
}

/// The names of the client certificate a finished handshake verified, if any.
pub(super) fn client_certificate(
    connection: &tokio_rustls::rustls::ServerConnection,
) -> Option<Arc<ClientCertificate>> {
    let der = connection.peer_certificates()?.first()?;
    match ClientCertificate::from_der(der) {
        Ok(certificate) => Some(Arc::new(certificate)),
        Err(error) => {
            tracing::debug!(%error, "a verified client certificate whose names cannot be read");
            None
        }
    }
}

fn files(settings: &TlsSettings) -> impl Iterator<Item = &Path> {
    [Some(settings.cert.as_path()), Some(settings.key.as_path()), settings.client_ca.as_deref()]
        .into_iter()
        .flatten()
}

fn stamps(settings: &TlsSettings) -> Vec<Option<(SystemTime, u64)>> {
    files(settings)
        .map(|path| std::fs::metadata(path).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

fn certificates(what: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// A server configuration from the files, or what is wrong with them.
fn load(settings: &TlsSettings) -> Result<ServerConfig, String> {
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let chain = certificates("--tls-cert", &settings.cert)?;
    let key = PrivateKeyDer::from_pem_slice(&read("--tls-key", &settings.key)?)
        .map_err(|e| format!("--tls-key {}: {e}", settings.key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match &settings.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("--tls-client-ca", path)? {
                roots.add(cert).map_err(|e| format!("--tls-client-ca {}: {e}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match settings.client_auth {
                ClientAuth::Required => verifier,
                ClientAuth::Optional => verifier.allow_unauthenticated(),
            };
            let verifier =
                verifier.build().map_err(|e| format!("--tls-client-ca {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        format!("--tls-cert {} and --tls-key {}: {e}", settings.cert.display(), settings.key.display())
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
