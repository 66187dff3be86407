//! JWS signing keys, shared by the two things the server signs: webhooks
//! (`--push-signing-key`, [`crate::push::signing`]) and the Agent Card (`--card-signing-key`,
//! [`crate::card::signing`]). Both publish their public keys in the one JWKS at
//! `/.well-known/jwks.json`, so a key is loaded, named and published the same way for both.
//!
//! Signing is done here with aws-lc directly (a JWS is base64 strings around one signature),
//! not with the JWT library receivers use, so tests that verify with `jsonwebtoken` or Python
//! check an independent implementation.
//!
//! Key ids are RFC 7638 thumbprints: every replica of a fleet that loads the same key file
//! publishes the same `kid`, and a new key gets a new one without anyone naming it.
//!
//! [`jcs`]: the RFC 8785 canonical JSON the card's signatures cover.
use std::path::Path;

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeyPair as RsaKeyPair;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
    RSA_PKCS1_SHA256,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde_json::{Value, json};

pub mod jcs;

/// Base64url without padding, the encoding of every JWS segment.
pub const B64: base64::engine::GeneralPurpose = URL_SAFE_NO_PAD;

/// A private key that signs JWS, with its public JWK.
pub struct SigningKey {
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

/// Names the key, never its secret.
impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.alg, self.kid)
    }
}

/// Loads PEM private keys from `paths`, in order (a file may hold several): PKCS#8
/// (`PRIVATE KEY`: Ed25519, EC P-256/P-384, RSA), SEC1 (`EC PRIVATE KEY`) or PKCS#1
/// (`RSA PRIVATE KEY`). At least one key; the same key twice is refused.
pub fn load_keys(paths: &[impl AsRef<Path>]) -> Result<Vec<SigningKey>, String> {
    let mut keys: Vec<SigningKey> = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let name = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
        let blocks = pem::parse_many(&text).map_err(|e| format!("{name}: not PEM: {e}"))?;
        if blocks.is_empty() {
            return Err(format!("{name}: no PEM block"));
        }
        for block in blocks {
            let key = SigningKey::from_pem(&block).map_err(|e| format!("{name}: {e}"))?;
            if keys.iter().any(|other| other.kid == key.kid) {
                return Err(format!("the same key is given twice (kid {})", key.kid));
            }
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return Err("no signing key".into());
    }
    Ok(keys)
}

/// The public JWKs of `keys`, each key once (a key that signs both webhooks and the card is
/// published once).
pub fn public_keys<'a>(keys: impl IntoIterator<Item = &'a SigningKey>) -> Vec<Value> {
    let mut seen: Vec<&str> = Vec::new();
    let mut jwks = Vec::new();
    for key in keys {
        if !seen.contains(&key.kid.as_str()) {
            seen.push(&key.kid);
            jwks.push(key.jwk.clone());
        }
    }
    jwks
}

/// A JWS segment: base64url of the compact JSON.
pub fn b64_json(value: &impl Serialize) -> String {
    B64.encode(serde_json::to_vec(value).unwrap_or_default())
}

impl SigningKey {
    /// The key id (its RFC 7638 thumbprint).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The JWS algorithm (`ES256`, `ES384`, `EdDSA`, `RS256`).
    pub fn alg(&self) -> &'static str {
        self.alg
    }

    /// The public JWK, with `kid`, `alg` and `use`.
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    /// The raw signature of `input` (the JWS signing input), as JWS encodes it (ECDSA: r ‖ s).
    pub fn sign(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        self.secret.sign(input)
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;

    fn pkcs8_pem(der: &[u8]) -> String {
        pem::encode(&pem::Pem::new("PRIVATE KEY", der.to_vec()))
    }

    fn load(text: &str) -> Result<Vec<SigningKey>, String> {
        let path = std::env::temp_dir().join(format!("a2a-jose-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, text).unwrap();
        let keys = load_keys(&[&path]);
        let _ = std::fs::remove_file(&path);
        keys
    }

    #[test]
    fn rsa_sec1_and_several_keys_in_one_file() {
        let rsa = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let rsa_pem = pkcs8_pem(rsa.as_der().unwrap().as_ref());
        let ec = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let sec1 = ec.private_key().as_der().unwrap();
        let sec1_pem = pem::encode(&pem::Pem::new("EC PRIVATE KEY", sec1.as_ref().to_vec()));
        let keys = load(&format!("{rsa_pem}{sec1_pem}")).unwrap();
        assert_eq!(keys[0].alg(), "RS256");
        let jwks = public_keys(&keys);
        assert_eq!(jwks.len(), 2);
        assert_eq!(jwks[0]["kty"], "RSA");
        assert_eq!(jwks[0]["e"], "AQAB");
        assert_eq!(jwks[1]["crv"], "P-256");
        assert_ne!(jwks[0]["kid"], jwks[1]["kid"]);
        assert_eq!(public_keys(keys.iter().chain(&keys)).len(), 2, "a key shared by two signers, once");
        let error = load(&format!("{sec1_pem}{sec1_pem}")).err().unwrap();
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
        for (text, expected) in [
            ("hello", "no PEM block"),
            ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "not a private key"),
            ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "PKCS#8"),
        ] {
            let error = load(text).err().unwrap();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let missing = std::env::temp_dir().join(format!("a2a-jose-{}", uuid::Uuid::new_v4()));
        assert!(load_keys(&[&missing]).is_err(), "a missing file");
        let none: [&Path; 0] = [];
        assert!(load_keys(&none).is_err(), "no key at all");
    }
}
