//! Who is calling: credentials → a principal and the tenants it may use.
//!
//! One file configures it (`--auth FILE`, TOML, see [`AuthFile`]): API keys (`api_key.rs`,
//! stored as SHA-256 hashes), JWT issuers (`jwt.rs`, keys from a secret, a JWKS file or a
//! JWKS URL that is cached and refreshed when an unknown `kid` arrives) and client
//! certificates verified by TLS (`mtls.rs`, the connection's [`ClientCertificate`]). A
//! credential in a header wins over the connection's certificate; a credential header sent twice
//! is refused, since which copy counts would depend on who reads it. Principals are namespaced
//! by credential kind and issuer (`key:alice`, `jwt:<issuer>#alice`, `mtls:alice`; see
//! `principal.rs`), so one kind never acts as another's principal unless a table's `namespace`
//! says so. The [`Authenticator`]
//! runs once per request in a layer in front of every binding ([`layer`]) and leaves its
//! [`Authentication`] in the request's extensions; each binding applies it to its
//! [`CallContext`](crate::call::CallContext), and the core refuses in its admission step, so
//! every binding renders the refusal in its own form (gRPC `UNAUTHENTICATED`, HTTP 401 with
//! `WWW-Authenticate`, a JSON-RPC error; `PERMISSION_DENIED` / 403 for a tenant the principal
//! may not use).
//!
//! The layer never refuses by itself (except `/metrics` when `protect_metrics` is set): the
//! Agent Card, `/healthz`, `/readyz`, `grpc.health.v1` and reflection stay public because their
//! handlers never ask. Credentials are never logged: errors name what was wrong, never the
//! value.
mod api_key;
mod jwt;
mod mtls;
mod principal;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use api_key::ApiKeys;
pub use api_key::hash_hex;
use jwt::Issuer;
pub use jwt::{IssuerConfig, Secret};
use mtls::Mtls;
pub use mtls::{ClientCertificate, MtlsClient, MtlsConfig, SubjectName};

use crate::call::{Authentication, Identity, Tenants};
use crate::error::A2aError;
use crate::proto::security_scheme::Scheme;
use crate::proto::{
    AgentCard, ApiKeySecurityScheme, HttpAuthSecurityScheme, MutualTlsSecurityScheme,
    OpenIdConnectSecurityScheme, SecurityRequirement, SecurityScheme, StringList,
};

/// The auth file (`--auth FILE`), TOML. Every table is optional, but at least one credential
/// kind must be configured. See the README's "Authentication" section for an example.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFile {
    /// The header that carries API keys (default `X-API-Key`).
    #[serde(default = "default_api_key_header")]
    pub api_key_header: String,
    /// Whether `/metrics` needs a credential too (default: public).
    #[serde(default)]
    pub protect_metrics: bool,
    /// API keys (`[[api_key]]` tables).
    #[serde(default, rename = "api_key")]
    pub api_keys: Vec<ApiKeyConfig>,
    /// JWT issuers (`[[jwt]]` tables).
    #[serde(default)]
    pub jwt: Vec<IssuerConfig>,
    /// Client certificates (the `[mtls]` table; needs `--tls-client-ca`).
    #[serde(default)]
    pub mtls: Option<MtlsConfig>,
}

fn default_api_key_header() -> String {
    "X-API-Key".to_owned()
}

/// One API key: its hash, and whom it names.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// SHA-256 of the key, 64 hex digits (`printf %s "$KEY" | sha256sum`).
    pub sha256: String,
    /// The name the key gives its caller; the principal is `key:<principal>`.
    pub principal: String,
    /// Put the principal in this namespace instead of `key` (`<namespace>:<principal>`), to
    /// make it the same principal as another credential's on purpose.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Tenants it may use (default `[""]`, the default tenant; `"*"`: any).
    #[serde(default)]
    pub tenants: Option<Vec<String>>,
}

/// The tenants a credential grants: `None` is the default tenant only, `"*"` is any.
pub(crate) fn tenants_of(list: Option<Vec<String>>) -> Tenants {
    match list {
        None => Tenants::Only(vec![String::new()]),
        Some(list) if list.iter().any(|t| t == "*") => Tenants::Any,
        Some(list) => Tenants::Only(list),
    }
}

/// Checks credentials against the auth file.
pub struct Authenticator {
    api_keys: Option<ApiKeys>,
    issuers: Vec<Issuer>,
    mtls: Option<Mtls>,
    protect_metrics: bool,
    /// `WWW-Authenticate` of a refusal (none when only client certificates are configured:
    /// HTTP has no challenge for those).
    challenge: Option<HeaderValue>,
}

impl Authenticator {
    /// Reads and checks an auth file.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let file: AuthFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::new(file).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// An authenticator for `file`'s credentials.
    pub fn new(file: AuthFile) -> Result<Self, String> {
        if file.api_keys.is_empty() && file.jwt.is_empty() && file.mtls.is_none() {
            return Err("no credential is configured: add [[api_key]], [[jwt]] or [mtls] tables".into());
        }
        let api_keys = (!file.api_keys.is_empty())
            .then(|| ApiKeys::new(&file.api_key_header, file.api_keys))
            .transpose()?;
        let issuers = file.jwt.into_iter().map(Issuer::new).collect::<Result<Vec<_>, _>>()?;
        let mtls = file.mtls.map(Mtls::new).transpose()?;
        let mut challenges = Vec::new();
        if !issuers.is_empty() {
            challenges.push(r#"Bearer realm="a2a""#.to_owned());
        }
        if let Some(keys) = &api_keys {
            challenges.push(format!(r#"ApiKey realm="a2a", header="{}""#, keys.header()));
        }
        let challenge = (!challenges.is_empty())
            .then(|| HeaderValue::from_str(&challenges.join(", ")))
            .transpose()
            .map_err(|e| format!("challenge: {e}"))?;
        Ok(Self { api_keys, issuers, mtls, protect_metrics: file.protect_metrics, challenge })
    }

    /// Whether client certificates are a credential here (the server must then ask for them).
    pub fn uses_client_certificates(&self) -> bool {
        self.mtls.is_some()
    }

    /// Fetches the JWKS of every issuer that has a URL, so the first call need not wait;
    /// a failure is logged and retried when a token needs the keys.
    pub async fn prefetch(&self) {
        for issuer in &self.issuers {
            issuer.prefetch().await;
        }
    }

    /// Checks the request's credential in its headers.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Authentication {
        self.authenticate_with(headers, None).await
    }

    /// The outcome for a request with these headers and extensions (where the connection
    /// put the verified client certificate, if any).
    pub async fn outcome(&self, headers: &HeaderMap, extensions: &Extensions) -> Authentication {
        let certificate = extensions.get::<Arc<ClientCertificate>>();
        self.authenticate_with(headers, certificate.map(|c| &**c)).await
    }

    /// Checks the request's credential: its headers, else the client certificate its
    /// connection presented.
    pub async fn authenticate_with(
        &self,
        headers: &HeaderMap,
        certificate: Option<&ClientCertificate>,
    ) -> Authentication {
        match self.identity(headers, certificate).await {
            Ok(identity) => Authentication::Authenticated(Arc::new(identity)),
            Err(error) => {
                tracing::debug!(reason = %error, "credential refused");
                Authentication::Refused(error)
            }
        }
    }

    async fn identity(
        &self,
        headers: &HeaderMap,
        certificate: Option<&ClientCertificate>,
    ) -> Result<Identity, A2aError> {
        let api_key = match &self.api_keys {
            Some(keys) => keys.presented(headers)?.map(|key| (keys, key)),
            None => None,
        };
        let bearer = if self.issuers.is_empty() { None } else { bearer_token(headers)? };
        match (api_key, bearer) {
            (Some(_), Some(_)) => Err(A2aError::Unauthenticated(
                "send one credential, not an API key and a bearer token".into(),
            )),
            (Some((keys, key)), None) => keys.check(key),
            (None, Some(token)) => self.check_token(token).await,
            (None, None) => match (&self.mtls, certificate) {
                (Some(mtls), Some(certificate)) => mtls.check(certificate),
                _ => Err(A2aError::Unauthenticated(format!("a credential is required ({})", self.wanted()))),
            },
        }
    }

    async fn check_token(&self, token: &str) -> Result<Identity, A2aError> {
        let issuer_claim = jwt::peek_issuer(token)?;
        let issuer = self
            .issuers
            .iter()
            .find(|issuer| issuer.name() == issuer_claim)
            .ok_or_else(|| A2aError::Unauthenticated("the token's issuer is not trusted here".into()))?;
        issuer.verify(token).await
    }

    fn wanted(&self) -> String {
        let mut wanted = Vec::new();
        if let Some(keys) = &self.api_keys {
            wanted.push(format!("an API key in {}", keys.header()));
        }
        if !self.issuers.is_empty() {
            wanted.push("Authorization: Bearer <JWT>".to_owned());
        }
        if self.mtls.is_some() {
            wanted.push("a client certificate".to_owned());
        }
        wanted.join(" or ")
    }

    /// Declares the configured schemes in `card`: `securitySchemes`, and `securityRequirements`
    /// as an OR-list (any one scheme will do).
    pub fn declare(&self, card: &mut AgentCard) {
        let mut schemes = HashMap::new();
        if let Some(keys) = &self.api_keys {
            let scheme = Scheme::ApiKeySecurityScheme(ApiKeySecurityScheme {
                description: "An API key issued by the operator".into(),
                location: "header".into(),
                name: keys.header().to_owned(),
            });
            schemes.insert("apiKey".to_owned(), SecurityScheme { scheme: Some(scheme) });
        }
        if !self.issuers.is_empty() {
            let scheme = Scheme::HttpAuthSecurityScheme(HttpAuthSecurityScheme {
                description: "A JWT from a trusted issuer".into(),
                scheme: "Bearer".into(),
                bearer_format: "JWT".into(),
            });
            schemes.insert("bearer".to_owned(), SecurityScheme { scheme: Some(scheme) });
        }
        for (i, url) in self.issuers.iter().filter_map(Issuer::openid_connect_url).enumerate() {
            let scheme = Scheme::OpenIdConnectSecurityScheme(OpenIdConnectSecurityScheme {
                description: "Tokens from this OpenID Connect provider (sent as a bearer token)".into(),
                open_id_connect_url: url.to_owned(),
            });
            let name = if i == 0 { "oidc".to_owned() } else { format!("oidc{}", i + 1) };
            schemes.insert(name, SecurityScheme { scheme: Some(scheme) });
        }
        if self.mtls.is_some() {
            let scheme = Scheme::MtlsSecurityScheme(MutualTlsSecurityScheme {
                description: "A client certificate from a CA the operator trusts".into(),
            });
            schemes.insert("mtls".to_owned(), SecurityScheme { scheme: Some(scheme) });
        }
        let mut names: Vec<&String> = schemes.keys().collect();
        names.sort();
        card.security_requirements = names
            .into_iter()
            .map(|name| SecurityRequirement {
                schemes: HashMap::from([(name.clone(), StringList { list: Vec::new() })]),
            })
            .collect();
        card.security_schemes = schemes;
    }

    /// Paths whose handlers never ask who is calling: not worth checking a credential for.
    fn is_public(&self, path: &str) -> bool {
        path.ends_with("/.well-known/agent-card.json")
            || path.ends_with("/.well-known/jwks.json")
            || matches!(path, "/healthz" | "/readyz")
            || (path == "/metrics" && !self.protect_metrics)
            || path.starts_with("/grpc.health.v1.")
            || path.starts_with("/grpc.reflection.")
    }
}

/// The bearer token of an `Authorization` header, if there is one. Two headers are refused, and
/// so is a value that holds more than one token (a JWT has no `,` or space in it).
fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, A2aError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(repeated("Authorization"));
    }
    let value = value
        .to_str()
        .map_err(|_| A2aError::Unauthenticated("the Authorization header is not ASCII".into()))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            let token = token.trim();
            if token.contains([',', ' ', '\t']) {
                return Err(A2aError::Unauthenticated(
                    "the Authorization header holds more than one credential".into(),
                ));
            }
            Ok(Some(token))
        }
        _ => Err(A2aError::Unauthenticated("the Authorization header must be `Bearer <JWT>`".into())),
    }
}

/// The refusal of a credential header sent more than once.
fn repeated(header: &str) -> A2aError {
    A2aError::Unauthenticated(format!("the {header} header is repeated: send one credential, once"))
}

/// The layer in front of every route: authenticates the request once and stores the outcome in
/// its extensions. A refused request's HTTP answers carry `WWW-Authenticate`.
pub async fn layer(State(auth): State<Arc<Authenticator>>, mut request: Request, next: Next) -> Response {
    if auth.is_public(request.uri().path()) {
        return next.run(request).await;
    }
    let outcome = auth.outcome(request.headers(), request.extensions()).await;
    let refused = matches!(outcome, Authentication::Refused(_));
    if refused && request.uri().path() == "/metrics" {
        return challenge(&auth, StatusCode::UNAUTHORIZED.into_response());
    }
    request.extensions_mut().insert(outcome);
    let response = next.run(request).await;
    let grpc = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/grpc"));
    if refused && !grpc { challenge(&auth, response) } else { response }
}

fn challenge(auth: &Authenticator, mut response: Response) -> Response {
    if let Some(challenge) = &auth.challenge {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Result<Authenticator, String> {
        Authenticator::new(toml::from_str(text).map_err(|e| e.to_string())?)
    }

    #[tokio::test]
    async fn api_keys_name_principals_and_tenants() {
        let auth = file(&format!(
            "[[api_key]]\nsha256 = \"{}\"\nprincipal = \"alice\"\ntenants = [\"acme\"]\n",
            hash_hex("secret-a")
        ))
        .unwrap();
        let mut headers = HeaderMap::new();
        assert!(
            matches!(auth.authenticate(&headers).await, Authentication::Refused(e) if e.reason() == "UNAUTHENTICATED")
        );
        headers.insert("x-api-key", HeaderValue::from_static("secret-a"));
        let Authentication::Authenticated(identity) = auth.authenticate(&headers).await else { panic!() };
        assert_eq!(identity.principal, "key:alice");
        assert!(identity.tenants.allows("acme") && !identity.tenants.allows(""));
        headers.insert("x-api-key", HeaderValue::from_static("secret-b"));
        assert!(matches!(auth.authenticate(&headers).await, Authentication::Refused(_)));
    }

    #[tokio::test]
    async fn a_repeated_or_joined_credential_header_is_refused_as_ambiguous() {
        let auth = file(&format!(
            "[[api_key]]\nsha256 = \"{}\"\nprincipal = \"a\"\n\
             [[jwt]]\nissuer = \"i\"\naudiences = [\"a\"]\nalgorithms = [\"HS256\"]\nsecret = \"s\"\n",
            hash_hex("k")
        ))
        .unwrap();
        let auth = &auth;
        let refusal = |headers: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.append(*name, HeaderValue::from_static(value));
            }
            async move {
                match auth.authenticate(&map).await {
                    Authentication::Refused(e) => e.to_string(),
                    Authentication::Authenticated(identity) => format!("accepted as {}", identity.principal),
                }
            }
        };
        assert_eq!(refusal(&[("x-api-key", "k")]).await, "accepted as key:a");
        let twice = refusal(&[("x-api-key", "k"), ("x-api-key", "k")]).await;
        assert!(twice.contains("X-API-Key header is repeated"), "{twice}");
        assert!(refusal(&[("x-api-key", "k, k")]).await.contains("comma"));
        let twice = refusal(&[("authorization", "Bearer a.b.c"), ("authorization", "Bearer a.b.c")]).await;
        assert!(twice.contains("Authorization header is repeated"), "{twice}");
        let joined = refusal(&[("authorization", "Bearer a.b.c, Bearer d.e.f")]).await;
        assert!(joined.contains("more than one credential"), "{joined}");
    }

    #[test]
    fn bad_files_are_refused() {
        assert!(file("").is_err(), "no credential");
        assert!(file("[[api_key]]\nsha256 = \"abc\"\nprincipal = \"a\"\n").is_err(), "short hash");
        assert!(file("unknown = 1\n[[api_key]]\n").is_err());
        let jwt =
            "[[jwt]]\nissuer = \"i\"\naudiences = [\"a\"]\nalgorithms = [\"HS256\"]\njwks_file = \"x\"\n";
        assert!(file(jwt).is_err(), "HS256 with public keys");
    }

    #[test]
    fn the_card_declares_every_scheme() {
        let auth = file(&format!(
            "api_key_header = \"X-Key\"\n[[api_key]]\nsha256 = \"{}\"\nprincipal = \"a\"\n\
             [[jwt]]\nissuer = \"i\"\naudiences = [\"a\"]\nalgorithms = [\"HS256\"]\nsecret = \"s\"\n\
             openid_connect_url = \"https://i/.well-known/openid-configuration\"\n",
            hash_hex("k")
        ))
        .unwrap();
        let mut card = AgentCard::default();
        auth.declare(&mut card);
        let mut names: Vec<_> = card.security_schemes.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["apiKey", "bearer", "oidc"]);
        assert_eq!(card.security_requirements.len(), 3);
    }
}
