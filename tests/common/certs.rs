//! Test certificates, made with `rcgen` when a test runs (nothing is checked in): a CA, server
//! certificates for `localhost` and 127.0.0.1, client certificates with chosen names, PEM files
//! in a directory of their own, and TLS clients (tonic, reqwest, raw rustls) that trust the CA.
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    SanType, SerialNumber,
};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

impl Pair {
    /// The certificate, DER (what a TLS peer sees).
    pub fn der(&self) -> CertificateDer<'static> {
        use rustls::pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(self.cert.as_bytes()).expect("a PEM certificate")
    }

    /// `cert` and `key` in one PEM, the form reqwest's `Identity::from_pem` reads.
    pub fn identity_pem(&self) -> String {
        format!("{}{}", self.cert, self.key)
    }
}

/// A certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("a CA key");
        Self { issuer: CertifiedIssuer::self_signed(params, key).expect("a CA certificate") }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `localhost` and 127.0.0.1 with this serial number.
    pub fn server(&self, serial: u64) -> Pair {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name.push(DnType::CommonName, format!("server {serial}"));
        params.serial_number = Some(SerialNumber::from(serial));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate with this common name and DNS / URI subject alternative names.
    pub fn client(&self, common_name: &str, dns: &[&str], uris: &[&str]) -> Pair {
        let mut params =
            CertificateParams::new(dns.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>()).expect("params");
        for uri in uris {
            params.subject_alt_names.push(SanType::URI((*uri).try_into().expect("an IA5 string")));
        }
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Pair {
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        Pair { cert: cert.pem(), key: key.serialize_pem() }
    }
}

/// A directory of PEM files for one test, removed on drop.
pub struct Files {
    pub dir: PathBuf,
}

impl Files {
    pub fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("a2a-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        Self { dir }
    }

    /// Writes `text` to `name` in the directory (replacing it); its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a PEM file");
        path
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A reqwest client trusting only `ca`, presenting `identity` if given.
pub fn reqwest_client(ca: &TestCa, identity: Option<&Pair>) -> reqwest::ClientBuilder {
    let mut builder = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("the CA")]);
    if let Some(pair) = identity {
        builder = builder
            .identity(reqwest::Identity::from_pem(pair.identity_pem().as_bytes()).expect("an identity"));
    }
    builder
}

/// A tonic channel to `https://127.0.0.1:PORT` trusting only `ca`, presenting `identity` if
/// given.
pub async fn tonic_channel(
    port: u16,
    ca: &TestCa,
    identity: Option<&Pair>,
) -> Result<tonic::transport::Channel, tonic::transport::Error> {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let mut tls =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca.pem())).domain_name("localhost");
    if let Some(pair) = identity {
        tls = tls.identity(Identity::from_pem(&pair.cert, &pair.key));
    }
    Endpoint::from_shared(format!("https://127.0.0.1:{port}"))?.tls_config(tls)?.connect().await
}

/// A raw TLS handshake with the server, offering `alpn`: the connection, whose ALPN and
/// certificate the test reads.
pub async fn handshake(
    port: u16,
    ca: &TestCa,
    alpn: &[&str],
    identity: Option<&Pair>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).expect("the CA")).expect("a root");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let mut config = match identity {
        Some(pair) => builder
            .with_client_auth_cert(
                vec![pair.der()],
                PrivateKeyDer::from_pem_slice(pair.key.as_bytes()).expect("a key"),
            )
            .expect("a client certificate"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    connector.connect(ServerName::try_from("localhost").expect("a name"), tcp).await
}

/// The server certificate a finished handshake saw.
pub fn served_certificate(
    stream: &tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> CertificateDer<'static> {
    stream.get_ref().1.peer_certificates().expect("a server certificate")[0].clone().into_owned()
}

/// The negotiated ALPN protocol, as text.
pub fn alpn(stream: &tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> Option<String> {
    stream.get_ref().1.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned())
}

/// Writes a server certificate and key as `cert.pem` and `key.pem` (key first, so that a
/// reload between the two writes sees a mismatch, not a half-new pair that matches).
pub fn write_server_files(files: &Files, pair: &Pair) -> (PathBuf, PathBuf) {
    let key = files.write("key.pem", &pair.key);
    let cert = files.write("cert.pem", &pair.cert);
    (cert, key)
}
