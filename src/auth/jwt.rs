//! JWT bearer tokens: one [`Issuer`] per `[[jwt]]` table, chosen by the token's `iss`, its
//! keys from a shared secret (HS*), a JWKS file, or a JWKS URL fetched on first need, cached,
//! and fetched again when a token names an unknown `kid` (at most once per
//! `jwks_min_refresh_secs`, so a stream of made-up `kid`s cannot make the server hammer the
//! issuer). `iss`, `aud` and `exp` are required and checked, `nbf` when present, all with a
//! small leeway. An issuer's principals are `jwt:<issuer>#<sub>` unless its table names
//! another namespace (see `principal.rs`).
use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation, errors::ErrorKind};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::principal::Namespace;
use super::tenants_of;
use crate::call::Identity;
use crate::error::A2aError;

/// The biggest JWKS document accepted from a URL.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// One trusted issuer (`[[jwt]]` in the auth file).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    /// The `iss` its tokens carry.
    pub issuer: String,
    /// Accepted `aud` values (at least one; a token must name one of them).
    pub audiences: Vec<String>,
    /// Accepted algorithms: `RS256`, `ES256`, `EdDSA`, … from a JWKS; `HS256`… with `secret`.
    pub algorithms: Vec<String>,
    /// Where the public keys are served (a JWKS document).
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// A JWKS document on disk.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// The shared secret of HS256/384/512 tokens.
    #[serde(default)]
    pub secret: Option<Secret>,
    /// The claim naming the principal (default `sub`).
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// Put the principals in this namespace (`<namespace>:<sub>`) instead of the issuer's own
    /// (`jwt:<issuer>#<sub>`): to merge them with another credential's on purpose.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The older spelling of `namespace`: `"<namespace>:"` (what it was put before each
    /// subject), or `""` for the default.
    #[serde(default)]
    pub principal_prefix: Option<String>,
    /// The claim listing the tenants the principal may use (an array, or a string of names
    /// separated by spaces or commas). Without it, or when a token lacks it: the default
    /// tenant only. `"*"`: any.
    #[serde(default)]
    pub tenants_claim: Option<String>,
    /// Seconds of clock skew allowed on `exp` and `nbf` (default 30).
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
    /// Least seconds between two fetches of `jwks_url` (default 10).
    #[serde(default = "default_min_refresh")]
    pub jwks_min_refresh_secs: u64,
    /// Seconds after which the keys from `jwks_url` are fetched again in the background, so a
    /// key the issuer withdrew stops working (default 3600; the old keys stay if that fails).
    #[serde(default = "default_max_age")]
    pub jwks_max_age_secs: u64,
    /// An OpenID Connect discovery URL, declared in the Agent Card.
    #[serde(default)]
    pub openid_connect_url: Option<String>,
}

/// A shared secret: its `Debug` form hides it, so printing a configuration cannot leak it.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

fn default_principal_claim() -> String {
    "sub".to_owned()
}
fn default_leeway() -> u64 {
    30
}
fn default_min_refresh() -> u64 {
    10
}
fn default_max_age() -> u64 {
    3600
}

/// A trusted issuer, ready to verify its tokens.
pub(super) struct Issuer {
    config: IssuerConfig,
    /// One validation per accepted algorithm: jsonwebtoken wants every algorithm of a
    /// validation to be of the key's family.
    validations: Vec<(Algorithm, Validation)>,
    keys: Keys,
    namespace: Namespace,
}

enum Keys {
    Secret(Arc<DecodingKey>),
    Fixed(KeySet),
    Remote(Arc<RemoteKeys>),
}

/// Keys by `kid`, and those without one.
#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, Arc<DecodingKey>>,
    unnamed: Vec<Arc<DecodingKey>>,
    /// When they were fetched (`None`: never, or from a file).
    fetched: Option<Instant>,
}

struct RemoteKeys {
    url: String,
    client: reqwest::Client,
    min_refresh: Duration,
    max_age: Duration,
    /// A background refresh of stale keys is under way.
    refreshing: AtomicBool,
    keys: RwLock<Arc<KeySet>>,
    /// When the last fetch started; held while fetching, so concurrent misses wait for one fetch.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl Issuer {
    pub(super) fn new(config: IssuerConfig) -> Result<Self, String> {
        let name = &config.issuer;
        let algorithms = config
            .algorithms
            .iter()
            .map(|a| Algorithm::from_str(a).map_err(|_| format!("jwt {name:?}: unknown algorithm {a:?}")))
            .collect::<Result<Vec<_>, _>>()?;
        if algorithms.is_empty() || config.audiences.is_empty() || name.is_empty() {
            return Err(format!("jwt {name:?}: issuer, audiences and algorithms are required"));
        }
        let namespace = Namespace::of_issuer(
            &config.issuer,
            config.namespace.as_deref(),
            config.principal_prefix.as_deref(),
        )?;
        let hmac = algorithms.iter().filter(|a| a.family() == AlgorithmFamily::Hmac).count();
        let keys = match (&config.secret, &config.jwks_file, &config.jwks_url) {
            (Some(secret), None, None) if hmac == algorithms.len() => Keys::Secret(Arc::new(
                DecodingKey::from_secret(secret.0.as_bytes()).map_err(|e| e.to_string())?,
            )),
            (None, Some(_), None) | (None, None, Some(_)) if hmac == 0 => {
                match (&config.jwks_file, &config.jwks_url) {
                    (Some(path), _) => {
                        let text =
                            std::fs::read(path).map_err(|e| format!("jwks_file {}: {e}", path.display()))?;
                        Keys::Fixed(key_set(&text).map_err(|e| format!("jwks_file {}: {e}", path.display()))?)
                    }
                    (_, Some(url)) => Keys::Remote(Arc::new(RemoteKeys::new(url, &config)?)),
                    _ => unreachable!("matched above"),
                }
            }
            _ => {
                return Err(format!(
                    "jwt {name:?}: give one of secret (HS* algorithms only), jwks_file or jwks_url \
                     (public-key algorithms only)"
                ));
            }
        };
        let validations = algorithms
            .into_iter()
            .map(|algorithm| {
                let mut validation = Validation::new(algorithm);
                validation.leeway = config.leeway_secs;
                validation.validate_nbf = true;
                validation.set_issuer(&[name]);
                validation.set_audience(&config.audiences);
                validation.set_required_spec_claims(&["exp", "iss", "aud"]);
                (algorithm, validation)
            })
            .collect();
        Ok(Self { config, validations, keys, namespace })
    }

    /// The `iss` this issuer's tokens carry.
    pub(super) fn name(&self) -> &str {
        &self.config.issuer
    }

    /// The OpenID Connect discovery URL to declare, if any.
    pub(super) fn openid_connect_url(&self) -> Option<&str> {
        self.config.openid_connect_url.as_deref()
    }

    pub(super) async fn prefetch(&self) {
        if let Keys::Remote(remote) = &self.keys {
            remote.refresh().await;
        }
    }

    /// Verifies `token` (whose `iss` names this issuer) and reads whom it names.
    pub(super) async fn verify(&self, token: &str) -> Result<Identity, A2aError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(e.kind()))?;
        let Some((_, validation)) = self.validations.iter().find(|(algorithm, _)| *algorithm == header.alg)
        else {
            return Err(A2aError::Unauthenticated(format!(
                "tokens signed with {:?} are not accepted",
                header.alg
            )));
        };
        let candidates = self.keys(header.kid.as_deref()).await;
        if candidates.is_empty() {
            return Err(A2aError::Unauthenticated("the token's signing key is not known".into()));
        }
        let mut last = ErrorKind::InvalidSignature;
        for key in candidates.iter().filter(|key| key.family() == header.alg.family()) {
            match jsonwebtoken::decode::<Map<String, Value>>(token, key, validation) {
                Ok(data) => return self.identity(data.claims),
                Err(error) => last = error.into_kind(),
            }
        }
        Err(invalid(&last))
    }

    /// The keys a token naming `kid` may be signed with.
    async fn keys(&self, kid: Option<&str>) -> Vec<Arc<DecodingKey>> {
        match &self.keys {
            Keys::Secret(key) => vec![key.clone()],
            Keys::Fixed(set) => set.find(kid),
            Keys::Remote(remote) => remote.find(kid).await,
        }
    }

    fn identity(&self, claims: Map<String, Value>) -> Result<Identity, A2aError> {
        let claim = &self.config.principal_claim;
        let principal = match claims.get(claim) {
            Some(Value::String(p)) if !p.is_empty() => self.namespace.principal(p),
            _ => {
                return Err(A2aError::Unauthenticated(format!(
                    "the token has no {claim:?} claim naming a principal"
                )));
            }
        };
        let tenants =
            self.config.tenants_claim.as_ref().and_then(|name| claims.get(name)).map(|value| match value {
                Value::String(list) => {
                    list.split([' ', ',']).filter(|t| !t.is_empty()).map(str::to_owned).collect::<Vec<_>>()
                }
                Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
                _ => Vec::new(),
            });
        Ok(Identity { principal, tenants: tenants_of(tenants) })
    }
}

/// The `iss` of a token, read before its signature is checked (to choose the issuer whose keys
/// check it).
pub(super) fn peek_issuer(token: &str) -> Result<String, A2aError> {
    #[derive(Deserialize)]
    struct Iss {
        iss: Option<String>,
    }
    let claims: Iss =
        jsonwebtoken::dangerous::insecure_decode_claims(token).map_err(|e| invalid(e.kind()))?;
    claims.iss.ok_or_else(|| A2aError::Unauthenticated("the token has no iss claim".into()))
}

/// Says what is wrong with a token, never what it holds.
fn invalid(kind: &ErrorKind) -> A2aError {
    let why = match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
        ErrorKind::InvalidAudience => "the token is not meant for this server (aud)",
        ErrorKind::InvalidIssuer => "the token's issuer is not trusted here",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim (exp, iss, aud)",
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => "the token's algorithm is not accepted",
        ErrorKind::InvalidSignature => "the token's signature is not valid",
        _ => "the token is malformed",
    };
    A2aError::Unauthenticated(why.into())
}

impl KeySet {
    fn find(&self, kid: Option<&str>) -> Vec<Arc<DecodingKey>> {
        match kid {
            Some(kid) => self.by_kid.get(kid).cloned().into_iter().collect(),
            None => self.by_kid.values().chain(&self.unnamed).cloned().collect(),
        }
    }
}

/// The signing keys of a JWKS document; secret (`oct`) and encryption keys are left out.
fn key_set(json: &[u8]) -> Result<KeySet, String> {
    let jwks: JwkSet = serde_json::from_slice(json).map_err(|e| format!("not a JWKS document: {e}"))?;
    let mut set = KeySet::default();
    for jwk in &jwks.keys {
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_))
            || matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption))
        {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(jwk) else { continue };
        match &jwk.common.key_id {
            Some(kid) => set.by_kid.insert(kid.clone(), Arc::new(key)).map(|_| ()).unwrap_or(()),
            None => set.unnamed.push(Arc::new(key)),
        }
    }
    Ok(set)
}

impl RemoteKeys {
    fn new(url: &str, config: &IssuerConfig) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("jwks_url {url}: {e}"))?;
        Ok(Self {
            url: url.to_owned(),
            client,
            min_refresh: Duration::from_secs(config.jwks_min_refresh_secs),
            max_age: Duration::from_secs(config.jwks_max_age_secs),
            refreshing: AtomicBool::new(false),
            keys: RwLock::new(Arc::new(KeySet::default())),
            last_fetch: tokio::sync::Mutex::new(None),
        })
    }

    fn current(&self) -> Arc<KeySet> {
        self.keys.read().map(|keys| keys.clone()).unwrap_or_default()
    }

    /// The keys for `kid`: known ones at once (stale ones start a refresh in the background),
    /// an unknown one after a refresh.
    async fn find(self: &Arc<Self>, kid: Option<&str>) -> Vec<Arc<DecodingKey>> {
        let current = self.current();
        let found = current.find(kid);
        if !found.is_empty() {
            let stale = current.fetched.is_none_or(|at| at.elapsed() >= self.max_age);
            if stale && !self.refreshing.swap(true, Ordering::AcqRel) {
                let this = self.clone();
                tokio::spawn(async move {
                    this.refresh().await;
                    this.refreshing.store(false, Ordering::Release);
                });
            }
            return found;
        }
        self.refresh().await;
        self.current().find(kid)
    }

    /// Fetches the keys again, unless that was tried less than `min_refresh` ago.
    async fn refresh(&self) {
        let before = self.current();
        let mut last = self.last_fetch.lock().await;
        if !Arc::ptr_eq(&self.current(), &before) {
            return; // another request refreshed them while this one waited
        }
        if last.is_some_and(|at| at.elapsed() < self.min_refresh) {
            return;
        }
        *last = Some(Instant::now());
        match self.fetch().await {
            Ok(mut set) => {
                set.fetched = Some(Instant::now());
                tracing::info!(url = %self.url, keys = set.by_kid.len() + set.unnamed.len(), "JWKS fetched");
                if let Ok(mut keys) = self.keys.write() {
                    *keys = Arc::new(set);
                }
            }
            Err(error) => tracing::warn!(url = %self.url, %error, "cannot fetch the JWKS"),
        }
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let mut response = self
            .client
            .get(&self.url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| e.to_string())?;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        key_set(&body)
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    use super::*;

    fn issuer(text: &str) -> Issuer {
        Issuer::new(toml::from_str(text).expect("a table")).expect("valid")
    }

    fn token(algorithm: Algorithm, secret: &[u8], claims: Value) -> String {
        let key = EncodingKey::from_secret(secret).expect("a key");
        jsonwebtoken::encode(&Header::new(algorithm), &claims, &key).expect("a token")
    }

    fn claims(extra: Value) -> Value {
        let exp = jsonwebtoken::get_current_timestamp() + 60;
        let mut claims = json!({"iss": "i", "aud": "a", "exp": exp, "sub": "alice"});
        if let (Value::Object(claims), Value::Object(extra)) = (&mut claims, extra) {
            claims.extend(extra);
        }
        claims
    }

    #[tokio::test]
    async fn shared_secret_tokens() {
        let hs = issuer(
            "issuer = \"i\"\naudiences = [\"a\"]\nalgorithms = [\"HS256\"]\nsecret = \"s3cret\"\n\
             tenants_claim = \"t\"\nprincipal_prefix = \"hs:\"\n",
        );
        let identity = hs.verify(&token(Algorithm::HS256, b"s3cret", claims(json!({"t": ["x", "y"]})))).await;
        let identity = identity.expect("valid");
        assert_eq!(identity.principal, "hs:alice", "the older principal_prefix still names it");
        assert!(identity.tenants.allows("y") && !identity.tenants.allows(""));
        let wrong = hs.verify(&token(Algorithm::HS256, b"guess", claims(json!({})))).await;
        assert_eq!(wrong.unwrap_err().to_string(), "unauthenticated: the token's signature is not valid");
        let other_alg = hs.verify(&token(Algorithm::HS384, b"s3cret", claims(json!({})))).await;
        assert!(other_alg.is_err(), "HS384 is not accepted");
        let no_sub = hs.verify(&token(Algorithm::HS256, b"s3cret", claims(json!({"sub": ""})))).await;
        assert!(no_sub.is_err(), "a principal is required");
        let mut stale = claims(json!({}));
        stale["exp"] = json!(jsonwebtoken::get_current_timestamp() - 3600);
        let expired = hs.verify(&token(Algorithm::HS256, b"s3cret", stale)).await;
        assert_eq!(expired.unwrap_err().to_string(), "unauthenticated: the token has expired");
        let mut early = claims(json!({}));
        early["nbf"] = json!(jsonwebtoken::get_current_timestamp() + 3600);
        assert!(hs.verify(&token(Algorithm::HS256, b"s3cret", early)).await.is_err(), "nbf");
    }

    #[tokio::test]
    async fn an_issuers_principals_are_its_own_unless_its_namespace_is_set() {
        let table = "issuer = \"i\"\naudiences = [\"a\"]\nalgorithms = [\"HS256\"]\nsecret = \"s\"\n";
        let alice = token(Algorithm::HS256, b"s", claims(json!({})));
        let own = issuer(table).verify(&alice).await.expect("valid");
        assert_eq!(own.principal, "jwt:i#alice");
        let legacy_default = issuer(&format!("{table}principal_prefix = \"\"\n")).verify(&alice).await;
        assert_eq!(legacy_default.expect("valid").principal, "jwt:i#alice", "\"\" was the default");
        let merged = issuer(&format!("{table}namespace = \"key\"\n")).verify(&alice).await;
        assert_eq!(merged.expect("valid").principal, "key:alice");
        for bad in [
            "namespace = \"jwt\"\n",
            "principal_prefix = \"corp-\"\n",
            "namespace = \"a\"\nprincipal_prefix = \"a:\"\n",
        ] {
            let config = toml::from_str(&format!("{table}{bad}")).expect("a table");
            assert!(Issuer::new(config).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_do_not_print() {
        let config: IssuerConfig = toml::from_str(
            "issuer = \"i\"\naudiences = [\"a\"]\nalgorithms = [\"HS256\"]\nsecret = \"s3cret\"\n",
        )
        .expect("a table");
        assert!(!format!("{config:?}").contains("s3cret"));
    }

    #[tokio::test]
    async fn a_public_key_issuer_refuses_hmac_tokens() {
        // The classic confusion: an HS256 token "signed" with what the server holds as a
        // public key. The issuer accepts only ES256, and a JWKS never yields secret keys.
        let jwks = r#"{"keys":[{"kty":"oct","kid":"k","k":"czNjcmV0"}]}"#;
        let set = key_set(jwks.as_bytes()).expect("a JWKS");
        assert!(set.by_kid.is_empty() && set.unnamed.is_empty(), "oct keys are left out");
        let path = std::env::temp_dir().join(format!("a2a-jwt-test-{}.json", std::process::id()));
        std::fs::write(&path, jwks).expect("write");
        let es = issuer(&format!(
            "issuer = \"i\"\naudiences = [\"a\"]\nalgorithms = [\"ES256\"]\njwks_file = \"{}\"\n",
            path.display()
        ));
        let _ = std::fs::remove_file(&path);
        let forged = es.verify(&token(Algorithm::HS256, b"s3cret", claims(json!({})))).await;
        assert!(forged.unwrap_err().to_string().contains("not accepted"));
    }
}
