//! Signed webhooks (`--push-signing-key`): every POST carries a JWT that binds the body's
//! SHA-256, the task, the event's generation and the time, signed with the server's private
//! key; the public keys are served as a JWKS at `/.well-known/jwks.json`.
//!
//! The token follows the A2A guide's "asymmetric key flow" (JWT with `kid`, verified against
//! the agent's JWKS) and the A2A samples' `request_body_sha256` claim, so receivers written for
//! either verify it. The keys, their ids and the signing itself are [`crate::jose`]'s, which
//! the signed Agent Card shares.
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::digest::{SHA256, digest};
use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};

use crate::jose::{self, B64, SigningKey, b64_json};

/// How long a signed token is valid after it is made (each attempt is signed anew): long
/// enough for clock skew and a slow receiver, short enough to limit replays.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(300);

/// The header that always carries the token (`Authorization: Bearer` carries it as well when
/// the webhook's config names no credentials of its own).
pub const SIGNATURE_HEADER: &str = "X-A2A-Notification-Signature";

/// The server's signing keys: the first signs, every one is published (so a receiver keeps
/// verifying tokens of the previous key while a rotation rolls out).
pub struct PushSigner {
    keys: Vec<SigningKey>,
}

/// What one delivery attempt's token says.
pub struct Delivery<'a> {
    /// The server's public URL (`iss`).
    pub issuer: &'a str,
    /// The webhook URL (`aud`): a token for one receiver is no good at another.
    pub audience: &'a str,
    /// The task the event belongs to (`taskId`).
    pub task_id: &'a str,
    /// The push config delivered to (part of `jti`).
    pub config_id: &'a str,
    /// The event's generation (`generation`, and part of `jti`).
    pub generation: u64,
    /// The exact body POSTed.
    pub body: &'a [u8],
}

#[derive(Serialize)]
struct Header<'a> {
    alg: &'a str,
    typ: &'a str,
    kid: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Claims<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    iss: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
    task_id: &'a str,
    generation: u64,
    #[serde(rename = "request_body_sha256")]
    request_body_sha256: String,
}

/// Names the keys, never their secrets.
impl std::fmt::Debug for PushSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<_> = self.keys.iter().map(|k| format!("{k:?}")).collect();
        f.debug_struct("PushSigner").field("keys", &kids).finish()
    }
}

impl PushSigner {
    /// Loads PEM private keys from `paths`, in order (a file may hold several): PKCS#8
    /// (`PRIVATE KEY`: Ed25519, EC P-256/P-384, RSA), SEC1 (`EC PRIVATE KEY`) or PKCS#1
    /// (`RSA PRIVATE KEY`).
    pub fn from_files(paths: &[impl AsRef<Path>]) -> Result<Self, String> {
        jose::load_keys(paths).map(|keys| Self { keys })
    }

    /// The key id of the signing key.
    pub fn kid(&self) -> &str {
        self.keys[0].kid()
    }

    /// The JWS algorithm of the signing key (`ES256`, `EdDSA`, …).
    pub fn alg(&self) -> &'static str {
        self.keys[0].alg()
    }

    /// The JWKS document: every public key, the signing one first.
    pub fn jwks(&self) -> Value {
        json!({ "keys": jose::public_keys(&self.keys) })
    }

    /// The compact JWT for one delivery attempt, issued now.
    pub fn sign(&self, delivery: &Delivery<'_>) -> Result<String, String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        self.sign_at(delivery, now)
    }

    fn sign_at(&self, delivery: &Delivery<'_>, iat: u64) -> Result<String, String> {
        let key = &self.keys[0];
        let header = Header { alg: key.alg(), typ: "JWT", kid: key.kid() };
        let claims = Claims {
            iss: delivery.issuer,
            aud: delivery.audience,
            iat,
            exp: iat + TOKEN_LIFETIME.as_secs(),
            jti: delivery_id(delivery),
            task_id: delivery.task_id,
            generation: delivery.generation,
            request_body_sha256: hex(digest(&SHA256, delivery.body).as_ref()),
        };
        let input = format!("{}.{}", b64_json(&header), b64_json(&claims));
        let signature = key.sign(input.as_bytes())?;
        Ok(format!("{input}.{}", B64.encode(signature)))
    }
}

/// `jti`: the same for every attempt of one event to one webhook (so a receiver can use it to
/// drop a retry it already processed), different for anything else. A hash, because task and
/// config ids are client strings that may hold any separator.
fn delivery_id(delivery: &Delivery<'_>) -> String {
    let mut input = Vec::new();
    for part in [delivery.task_id.as_bytes(), delivery.config_id.as_bytes()] {
        input.extend_from_slice(&(part.len() as u64).to_be_bytes());
        input.extend_from_slice(part);
    }
    input.extend_from_slice(&delivery.generation.to_be_bytes());
    B64.encode(&digest(&SHA256, &input).as_ref()[..18])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::KeyPair as RsaKeyPair;
    use aws_lc_rs::signature::{
        self as sig, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, UnparsedPublicKey,
    };

    fn signer(pem_text: &str) -> PushSigner {
        let dir = std::env::temp_dir().join(format!("a2a-signing-{}", uuid::Uuid::new_v4()));
        std::fs::write(&dir, pem_text).unwrap();
        let signer = PushSigner::from_files(&[&dir]);
        let _ = std::fs::remove_file(&dir);
        signer.unwrap()
    }

    fn pkcs8_pem(der: &[u8]) -> String {
        pem::encode(&pem::Pem::new("PRIVATE KEY", der.to_vec()))
    }

    fn delivery(body: &[u8]) -> Delivery<'_> {
        Delivery {
            issuer: "https://agent.example",
            audience: "https://hooks.example/a2a",
            task_id: "t-1",
            config_id: "c-1",
            generation: 7,
            body,
        }
    }

    /// Splits a token and checks its signature with the public JWK's raw key.
    fn verify(token: &str, jwk: &Value, alg: &'static dyn sig::VerificationAlgorithm) -> (Value, Value) {
        let mut parts = token.split('.');
        let (h, c, s) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        let raw = |name: &str| B64.decode(jwk[name].as_str().unwrap()).unwrap();
        let public = match jwk["kty"].as_str().unwrap() {
            "OKP" => raw("x"),
            "EC" => [vec![4], raw("x"), raw("y")].concat(),
            other => panic!("{other}"),
        };
        UnparsedPublicKey::new(alg, public)
            .verify(format!("{h}.{c}").as_bytes(), &B64.decode(s).unwrap())
            .expect("the signature verifies with the published key");
        let json = |p: &str| serde_json::from_slice::<Value>(&B64.decode(p).unwrap()).unwrap();
        (json(h), json(c))
    }

    #[test]
    fn ed25519_and_p256_tokens_verify_with_their_published_keys() {
        let rng = SystemRandom::new();
        let ed = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let ec = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        for (der, alg, verifier) in [
            (ed.as_ref(), "EdDSA", &sig::ED25519 as &'static dyn sig::VerificationAlgorithm),
            (ec.as_ref(), "ES256", &sig::ECDSA_P256_SHA256_FIXED),
        ] {
            let signer = signer(&pkcs8_pem(der));
            assert_eq!(signer.alg(), alg);
            let jwks = signer.jwks();
            let jwk = &jwks["keys"][0];
            assert_eq!(jwk["kid"], signer.kid());
            let token = signer.sign_at(&delivery(b"{\"a\":1}"), 1_000).unwrap();
            let (header, claims) = verify(&token, jwk, verifier);
            assert_eq!(header, json!({"alg": alg, "typ": "JWT", "kid": signer.kid()}));
            assert_eq!(claims["iat"], 1_000);
            assert_eq!(claims["exp"], 1_300);
            assert_eq!(claims["aud"], "https://hooks.example/a2a");
            assert_eq!(claims["iss"], "https://agent.example");
            assert_eq!(claims["taskId"], "t-1");
            assert_eq!(claims["generation"], 7);
            assert_eq!(
                claims["request_body_sha256"],
                "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
            );
        }
    }

    #[test]
    fn the_jti_is_stable_per_event_and_webhook() {
        let a = delivery(b"x");
        assert_eq!(delivery_id(&a), delivery_id(&delivery(b"other body, same event")));
        assert_ne!(delivery_id(&a), delivery_id(&Delivery { generation: 8, ..delivery(b"x") }));
        assert_ne!(delivery_id(&a), delivery_id(&Delivery { config_id: "c-2", ..delivery(b"x") }));
        // No separator ambiguity: ("ab", "c") is not ("a", "bc").
        let ab = Delivery { task_id: "ab", config_id: "c", ..delivery(b"x") };
        let bc = Delivery { task_id: "a", config_id: "bc", ..delivery(b"x") };
        assert_ne!(delivery_id(&ab), delivery_id(&bc));
    }

    /// Key loading is `jose`'s (tested there); here: the first key signs, every one is published.
    #[test]
    fn the_first_key_signs_and_every_key_is_published() {
        let rsa = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let ec =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
        let signer =
            signer(&format!("{}{}", pkcs8_pem(rsa.as_der().unwrap().as_ref()), pkcs8_pem(ec.as_ref())));
        assert_eq!(signer.alg(), "RS256", "the first key signs");
        let jwks = signer.jwks();
        let keys = jwks["keys"].as_array().unwrap();
        assert_eq!(keys.len(), 2, "both are published");
        assert_eq!(keys[0]["kid"], signer.kid());
        let token = signer.sign_at(&delivery(b"{}"), 5).unwrap();
        assert_eq!(token.split('.').count(), 3);
    }
}
