//! The auth scenario (issue 12): what authentication costs the server per call. The unary
//! scenario (SendMessage echo) runs on a server without `--auth`, then on one with an auth file
//! the benchmark writes (an API key, an HS256 issuer, and an issuer whose JWKS file holds an
//! ES256 and an RS256 key, all generated here), once per kind of credential. Server CPU per
//! call is the figure to compare: the difference to "none" is the check's cost (a SHA-256 and
//! a constant-time comparison for a key; a signature check and the claims for a JWT). The
//! token is the same on every call, as a client reusing it until it expires would send.
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use a2a_server::auth::hash_hex;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::BoxError;
use crate::driver::{Credential, Target};
use crate::report::Measured;
use crate::scenarios::{self, UnaryParams};

const AUDIENCE: &str = "a2a-bench";
const API_KEY_HEADER: &str = "x-api-key";

/// The kinds of credential measured, in the order of the rows.
pub const KINDS: [&str; 5] = ["none", "api-key", "jwt-hs256", "jwt-es256", "jwt-rs256"];

/// A generated auth file, its JWKS file, and a credential of each kind it accepts.
pub struct AuthSetup {
    dir: PathBuf,
    /// `--auth` and the file's path, for the server.
    pub server_args: Vec<String>,
    credentials: Vec<(&'static str, Credential)>,
}

impl AuthSetup {
    /// Generates the keys and writes the files under the temporary directory.
    pub fn create() -> Result<Self, BoxError> {
        let rng = SystemRandom::new();
        let mut random = [0u8; 32];
        rng.fill(&mut random).map_err(|_| "no randomness")?;
        let api_key = URL_SAFE_NO_PAD.encode(random);
        rng.fill(&mut random).map_err(|_| "no randomness")?;
        let secret = URL_SAFE_NO_PAD.encode(random);

        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "cannot generate an ES256 key")?;
        let ec = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
            .map_err(|_| "cannot load the ES256 key")?;
        let point = ec.public_key().as_ref(); // 0x04 || X || Y
        let rsa = RsaKeyPair::generate(KeySize::Rsa2048).map_err(|_| "cannot generate an RS256 key")?;
        let public = rsa.public_key();
        let jwks = json!({ "keys": [
            { "kty": "EC", "crv": "P-256", "kid": "es", "use": "sig", "alg": "ES256",
              "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65]) },
            { "kty": "RSA", "kid": "rs", "use": "sig", "alg": "RS256",
              "n": URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero()),
              "e": URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero()) },
        ]});

        let dir = std::env::temp_dir().join(format!("a2a-bench-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let jwks_path = dir.join("jwks.json");
        std::fs::write(&jwks_path, serde_json::to_vec(&jwks)?)?;
        let file = format!(
            r#"api_key_header = "{API_KEY_HEADER}"

[[api_key]]
sha256 = "{hash}"
principal = "bench"

[[jwt]]
issuer = "bench-hs256"
audiences = ["{AUDIENCE}"]
algorithms = ["HS256"]
secret = "{secret}"

[[jwt]]
issuer = "bench-jwks"
audiences = ["{AUDIENCE}"]
algorithms = ["ES256", "RS256"]
jwks_file = "{jwks}"
"#,
            hash = hash_hex(&api_key),
            jwks = jwks_path.display(),
        );
        let auth_path = dir.join("auth.toml");
        std::fs::write(&auth_path, file)?;

        let hs256 = jwt("HS256", None, "bench-hs256", |input| {
            let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
            Ok(aws_lc_rs::hmac::sign(&key, input).as_ref().to_vec())
        })?;
        let es256 = jwt("ES256", Some("es"), "bench-jwks", |input| {
            Ok(ec.sign(&rng, input).map_err(|_| "ES256 signing failed")?.as_ref().to_vec())
        })?;
        let rs256 = jwt("RS256", Some("rs"), "bench-jwks", |input| {
            let mut signature = vec![0; rsa.public_modulus_len()];
            rsa.sign(&RSA_PKCS1_SHA256, &rng, input, &mut signature).map_err(|_| "RS256 signing failed")?;
            Ok(signature)
        })?;
        let bearer = |token: String| Credential::new("authorization", &format!("Bearer {token}"));
        let credentials = vec![
            ("api-key", Credential::new(API_KEY_HEADER, &api_key)?),
            ("jwt-hs256", bearer(hs256)?),
            ("jwt-es256", bearer(es256)?),
            ("jwt-rs256", bearer(rs256)?),
        ];
        let server_args = vec!["--auth".to_owned(), auth_path.display().to_string()];
        Ok(Self { dir, server_args, credentials })
    }

    /// The credential of a kind (`None` for "none").
    pub fn credential(&self, kind: &str) -> Option<Credential> {
        self.credentials.iter().find(|(k, _)| *k == kind).map(|(_, c)| c.clone())
    }
}

impl Drop for AuthSetup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A signed JWT valid for an hour: `sign` signs the `header.claims` input.
fn jwt(
    algorithm: &str,
    kid: Option<&str>,
    issuer: &str,
    sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, BoxError>,
) -> Result<String, BoxError> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let mut header = json!({ "alg": algorithm, "typ": "JWT" });
    if let Some(kid) = kid {
        header["kid"] = Value::from(kid);
    }
    let claims = json!({ "iss": issuer, "aud": AUDIENCE, "sub": "bench", "iat": now, "exp": now + 3600 });
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?),
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims)?)
    );
    let signature = sign(input.as_bytes())?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// The unary scenario on `target` with the credential of `kind`.
pub async fn measure(
    target: &Target,
    pid: Option<u32>,
    setup: &AuthSetup,
    kind: &str,
    p: &UnaryParams,
) -> Result<Measured, BoxError> {
    let target = Target { credential: setup.credential(kind), ..target.clone() };
    scenarios::unary(&target, pid, p).await
}
