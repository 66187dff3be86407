//! Signed webhooks (`--push-signing-key`): every POST carries a JWT that binds the body's
//! SHA-256, the task, the event's generation and the time, signed with the server's private
//! key; the public keys are served as a JWKS at `/.well-known/jwks.json`.
//!
//! The token follows the A2A guide's "asymmetric key flow" (JWT with `kid`, verified against
//! the agent's JWKS) and the A2A samples' `request_body_sha256` claim, so receivers written for
//! either verify it. Signing is done here with aws-lc directly (a compact JWS is three base64
//! strings), not with the JWT library the receivers use, so a test that verifies with
//! `jsonwebtoken` checks an independent implementation.
//!
//! Key ids are RFC 7638 thumbprints: every replica of a fleet that loads the same key file
//! publishes the same `kid`, and a new key gets a new one without anyone naming it.
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeyPair as RsaKeyPair;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
    RSA_PKCS1_SHA256,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde::Serialize;
use serde_json::{Value, json};

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

struct SigningKey {
    kid: String,
    alg: &'static str,
    /// The public JWK (with `kid`, `alg`, `use`).
    jwk: Value,
    secret: Secret,
}

enum Secret {
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
    Rsa(RsaKeyPair),
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
        let kids: Vec<_> = self.keys.iter().map(|k| format!("{} {}", k.alg, k.kid)).collect();
        f.debug_struct("PushSigner").field("keys", &kids).finish()
    }
}

impl PushSigner {
    /// Loads PEM private keys from `paths`, in order (a file may hold several): PKCS#8
    /// (`PRIVATE KEY`: Ed25519, EC P-256/P-384, RSA), SEC1 (`EC PRIVATE KEY`) or PKCS#1
    /// (`RSA PRIVATE KEY`).
    pub fn from_files(paths: &[impl AsRef<Path>]) -> Result<Self, String> {
        let mut pems = Vec::new();
        for path in paths {
            let path = path.as_ref();
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            pems.push((path.display().to_string(), text));
        }
        let mut keys = Vec::new();
        for (name, text) in &pems {
            let blocks = pem::parse_many(text).map_err(|e| format!("{name}: not PEM: {e}"))?;
            if blocks.is_empty() {
                return Err(format!("{name}: no PEM block"));
            }
            for block in blocks {
                keys.push(SigningKey::from_pem(&block).map_err(|e| format!("{name}: {e}"))?);
            }
        }
        Self::new(keys)
    }

    fn new(keys: Vec<SigningKey>) -> Result<Self, String> {
        if keys.is_empty() {
            return Err("no signing key".into());
        }
        for (i, key) in keys.iter().enumerate() {
            if keys[..i].iter().any(|other| other.kid == key.kid) {
                return Err(format!("the same key is given twice (kid {})", key.kid));
            }
        }
        Ok(Self { keys })
    }

    /// The key id of the signing key.
    pub fn kid(&self) -> &str {
        &self.keys[0].kid
    }

    /// The JWS algorithm of the signing key (`ES256`, `EdDSA`, …).
    pub fn alg(&self) -> &'static str {
        self.keys[0].alg
    }

    /// The JWKS document: every public key, the signing one first.
    pub fn jwks(&self) -> Value {
        json!({ "keys": self.keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() })
    }

    /// The compact JWT for one delivery attempt, issued now.
    pub fn sign(&self, delivery: &Delivery<'_>) -> Result<String, String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        self.sign_at(delivery, now)
    }

    fn sign_at(&self, delivery: &Delivery<'_>, iat: u64) -> Result<String, String> {
        let key = &self.keys[0];
        let header = Header { alg: key.alg, typ: "JWT", kid: &key.kid };
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
        let signature = key.secret.sign(input.as_bytes())?;
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

/// A JWS segment: base64url of the compact JSON.
fn b64_json(value: &impl Serialize) -> String {
    B64.encode(serde_json::to_vec(value).unwrap_or_default())
}

impl SigningKey {
    fn from_pem(block: &pem::Pem) -> Result<Self, String> {
        let der = block.contents();
        let rejected = |kind: &str, e: aws_lc_rs::error::KeyRejected| format!("not a usable {kind} key: {e}");
        let secret = match block.tag() {
            "PRIVATE KEY" => Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
                .map(Secret::Ed25519)
                .or_else(|_| {
                    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der).map(Secret::Ecdsa)
                })
                .or_else(|_| {
                    EcdsaKeyPair::from_pkcs8(&ECDSA_P384_SHA384_FIXED_SIGNING, der).map(Secret::Ecdsa)
                })
                .or_else(|_| RsaKeyPair::from_pkcs8(der).map(Secret::Rsa))
                .map_err(|_| {
                    "the PKCS#8 key is none of Ed25519, EC P-256, EC P-384 or RSA (2048 bits or more)"
                        .to_owned()
                })?,
            "EC PRIVATE KEY" => EcdsaKeyPair::from_private_key_der(&ECDSA_P256_SHA256_FIXED_SIGNING, der)
                .or_else(|_| EcdsaKeyPair::from_private_key_der(&ECDSA_P384_SHA384_FIXED_SIGNING, der))
                .map(Secret::Ecdsa)
                .map_err(|e| rejected("EC P-256 or P-384", e))?,
            "RSA PRIVATE KEY" => {
                RsaKeyPair::from_der(der).map(Secret::Rsa).map_err(|e| rejected("RSA", e))?
            }
            "ENCRYPTED PRIVATE KEY" => {
                return Err("encrypted keys are not supported; decrypt it first".into());
            }
            other => return Err(format!("a {other:?} PEM block is not a private key")),
        };
        let (alg, mut jwk) = secret.public_jwk()?;
        let kid = thumbprint(&jwk);
        let object = jwk.as_object_mut().ok_or("JWK is not an object")?;
        object.insert("kid".into(), kid.clone().into());
        object.insert("alg".into(), alg.into());
        object.insert("use".into(), "sig".into());
        Ok(Self { kid, alg, jwk, secret })
    }
}

impl Secret {
    /// The JWS algorithm and the public JWK with only its required members (RFC 7638 order
    /// is applied by the thumbprint, not here).
    fn public_jwk(&self) -> Result<(&'static str, Value), String> {
        Ok(match self {
            Secret::Ed25519(key) => {
                ("EdDSA", json!({"kty": "OKP", "crv": "Ed25519", "x": B64.encode(key.public_key().as_ref())}))
            }
            Secret::Ecdsa(key) => {
                // The uncompressed point, 0x04 ‖ x ‖ y, whose size names the curve. (Comparing
                // `key.algorithm()` with the algorithm statics by address is not reliable: the
                // compiler may give one constant several addresses.)
                let point = key.public_key().as_ref();
                let (alg, crv, size) = match point.len() {
                    65 => ("ES256", "P-256", 32),
                    97 => ("ES384", "P-384", 48),
                    _ => return Err("unexpected EC public key encoding".into()),
                };
                if point[0] != 4 {
                    return Err("unexpected EC public key encoding".into());
                }
                let (x, y) = point[1..].split_at(size);
                (alg, json!({"kty": "EC", "crv": crv, "x": B64.encode(x), "y": B64.encode(y)}))
            }
            Secret::Rsa(key) => {
                let public = key.public_key();
                let n = public.modulus();
                let e = public.exponent();
                (
                    "RS256",
                    json!({
                        "kty": "RSA",
                        "n": B64.encode(n.big_endian_without_leading_zero()),
                        "e": B64.encode(e.big_endian_without_leading_zero()),
                    }),
                )
            }
        })
    }

    fn sign(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        let failed = |_| "signing failed".to_owned();
        match self {
            Secret::Ed25519(key) => Ok(key.sign(input).as_ref().to_vec()),
            Secret::Ecdsa(key) => {
                key.sign(&SystemRandom::new(), input).map(|s| s.as_ref().to_vec()).map_err(failed)
            }
            Secret::Rsa(key) => {
                let mut signature = vec![0; key.public_modulus_len()];
                key.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), input, &mut signature).map_err(failed)?;
                Ok(signature)
            }
        }
    }
}

/// RFC 7638: SHA-256 over the required members in lexicographic order, no whitespace.
fn thumbprint(jwk: &Value) -> String {
    let required: std::collections::BTreeMap<&str, &Value> = jwk
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| matches!(k.as_str(), "crv" | "e" | "kty" | "n" | "x" | "y"))
                .map(|(k, v)| (k.as_str(), v))
                .collect()
        })
        .unwrap_or_default();
    let canonical = serde_json::to_vec(&required).unwrap_or_default();
    B64.encode(digest(&SHA256, &canonical))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::{self as sig, UnparsedPublicKey};

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

    #[test]
    fn rsa_sec1_and_several_keys() {
        let rsa = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let rsa_pem = pkcs8_pem(rsa.as_der().unwrap().as_ref());
        let ec = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let sec1 = ec.private_key().as_der().unwrap();
        let sec1_pem = pem::encode(&pem::Pem::new("EC PRIVATE KEY", sec1.as_ref().to_vec()));
        let signer = signer(&format!("{rsa_pem}{sec1_pem}"));
        assert_eq!(signer.alg(), "RS256", "the first key signs");
        let jwks = signer.jwks();
        let keys = jwks["keys"].as_array().unwrap();
        assert_eq!(keys.len(), 2, "both are published");
        assert_eq!(keys[0]["kty"], "RSA");
        assert_eq!(keys[0]["e"], "AQAB");
        assert_eq!(keys[1]["crv"], "P-256");
        assert_ne!(keys[0]["kid"], keys[1]["kid"]);
        let token = signer.sign_at(&delivery(b"{}"), 5).unwrap();
        assert_eq!(token.split('.').count(), 3);
        let twice = format!("{sec1_pem}{sec1_pem}");
        let dir = std::env::temp_dir().join(format!("a2a-signing-{}", uuid::Uuid::new_v4()));
        std::fs::write(&dir, twice).unwrap();
        let error = PushSigner::from_files(&[&dir]).err().unwrap();
        let _ = std::fs::remove_file(&dir);
        assert!(error.contains("twice"), "{error}");
    }

    #[test]
    fn the_thumbprint_is_rfc_7638() {
        // RFC 7638 §3.1's example key and thumbprint.
        let jwk = json!({
            "kty": "RSA",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
            "e": "AQAB",
            "alg": "RS256",
            "kid": "2011-04-29",
        });
        assert_eq!(thumbprint(&jwk), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    }

    #[test]
    fn bad_key_files_say_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("a2a-signing-{}", uuid::Uuid::new_v4()));
        for (text, expected) in [
            ("hello", "no PEM block"),
            ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "not a private key"),
            ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "PKCS#8"),
        ] {
            std::fs::write(&dir, text).unwrap();
            let error = PushSigner::from_files(&[&dir]).err().unwrap();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let _ = std::fs::remove_file(&dir);
        assert!(PushSigner::from_files(&[&dir]).is_err(), "a missing file");
    }
}
