//! The signed Agent Card (`--card-signing-key`, spec §8.4): each card the server serves
//! carries one JWS per key in `signatures`, over the RFC 8785 form of that card as served
//! without `signatures`, so a client verifies it with the keys at `/.well-known/jwks.json`.
//!
//! Each variant is signed over its own JSON (the v1.0 card, the v0.3 forms, the extended
//! card), once, when the server builds its cards: a card costs nothing to serve signed.
//!
//! The protected header is `{"alg","typ":"JOSE","kid","jku"}`: `alg` and `kid` are required,
//! `typ` SHOULD be `JOSE`, and `jku` (MAY) names the JWKS URL so that a client that follows
//! it (a2a-sdk's verifier is given `kid` and `jku`) finds the key without configuration.
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::jose::{self, B64, SigningKey, b64_json};
use crate::proto::{AgentCard, AgentCardSignature};
use crate::protojson;
use base64::Engine;

/// The card's signing keys: every one signs (a client that knows only the old key of a
/// rotation still finds its signature), every one is published.
pub struct CardSigner {
    keys: Vec<SigningKey>,
    jku: Option<String>,
}

#[derive(Serialize)]
struct Protected<'a> {
    alg: &'a str,
    typ: &'a str,
    kid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    jku: Option<&'a str>,
}

/// Names the keys, never their secrets.
impl std::fmt::Debug for CardSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardSigner").field("keys", &self.keys).field("jku", &self.jku).finish()
    }
}

impl CardSigner {
    /// Loads the PEM private keys in `paths` (the kinds [`jose::load_keys`] reads), in order.
    pub fn from_files(paths: &[impl AsRef<Path>]) -> Result<Self, String> {
        jose::load_keys(paths).map(|keys| Self { keys, jku: None })
    }

    /// Names `url` (the JWKS) as `jku` in every signature made from now on.
    pub fn set_jku(&mut self, url: impl Into<String>) {
        self.jku = Some(url.into());
    }

    /// The public JWKs, for `/.well-known/jwks.json`.
    pub fn public_keys(&self) -> Vec<Value> {
        jose::public_keys(&self.keys)
    }

    /// One signature per key over `payload` (the canonical card bytes).
    pub fn signatures(&self, payload: &[u8]) -> Result<Vec<AgentCardSignature>, String> {
        let payload = B64.encode(payload);
        self.keys
            .iter()
            .map(|key| {
                let header =
                    Protected { alg: key.alg(), typ: "JOSE", kid: key.kid(), jku: self.jku.as_deref() };
                let protected = b64_json(&header);
                let signature = key.sign(format!("{protected}.{payload}").as_bytes())?;
                Ok(AgentCardSignature { protected, signature: B64.encode(signature), header: None })
            })
            .collect()
    }

    /// Signs a v1.0 card over its ProtoJSON (the form every binding's JSON serves, and what a
    /// gRPC client's JSON of it is), replacing any signatures it had.
    pub fn sign_card(&self, card: &mut AgentCard) -> Result<(), String> {
        card.signatures.clear();
        let payload = jose::jcs::canonical(&protojson::encode(card));
        card.signatures = self.signatures(payload.as_bytes())?;
        Ok(())
    }

    /// Signs a card given as JSON (a v0.3 form), replacing any `signatures` member.
    pub fn sign_json(&self, card: &mut Value) -> Result<(), String> {
        let map = card.as_object_mut().ok_or("a card is a JSON object")?;
        map.shift_remove("signatures");
        let signatures = self.signatures(jose::jcs::canonical(card).as_bytes())?;
        let signatures = signatures.iter().map(protojson::encode).collect();
        if let Some(map) = card.as_object_mut() {
            map.insert("signatures".into(), Value::Array(signatures));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{
        self as sig, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, UnparsedPublicKey,
    };
    use serde_json::json;

    fn signer() -> CardSigner {
        let der =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
        let path = std::env::temp_dir().join(format!("a2a-card-key-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, pem::encode(&pem::Pem::new("PRIVATE KEY", der.as_ref().to_vec()))).unwrap();
        let mut signer = CardSigner::from_files(&[&path]).unwrap();
        let _ = std::fs::remove_file(&path);
        signer.set_jku("https://a.example/.well-known/jwks.json");
        signer
    }

    /// Verifies `signature` over the canonical form of `card` without `signatures`.
    fn verifies(signer: &CardSigner, card: &Value, signature: &Value) -> bool {
        let mut unsigned = card.clone();
        unsigned.as_object_mut().unwrap().shift_remove("signatures");
        let jwk = &signer.public_keys()[0];
        let raw = |name: &str| B64.decode(jwk[name].as_str().unwrap()).unwrap();
        let point = [vec![4], raw("x"), raw("y")].concat();
        let protected = signature["protected"].as_str().unwrap();
        let input = format!("{protected}.{}", B64.encode(jose::jcs::canonical(&unsigned)));
        let bytes = B64.decode(signature["signature"].as_str().unwrap()).unwrap();
        UnparsedPublicKey::new(&sig::ECDSA_P256_SHA256_FIXED, point).verify(input.as_bytes(), &bytes).is_ok()
    }

    #[test]
    fn a_signed_card_verifies_over_its_canonical_json_and_a_changed_one_does_not() {
        let signer = signer();
        let mut card = AgentCard { name: "n".into(), description: "d".into(), ..Default::default() };
        signer.sign_card(&mut card).unwrap();
        assert_eq!(card.signatures.len(), 1);
        let json = protojson::encode(&card);
        let signature = json["signatures"][0].clone();
        assert!(verifies(&signer, &json, &signature));
        let header: Value =
            serde_json::from_slice(&B64.decode(&card.signatures[0].protected).unwrap()).unwrap();
        let kid = signer.public_keys()[0]["kid"].clone();
        assert_eq!(
            header,
            json!({"alg": "ES256", "typ": "JOSE", "kid": kid, "jku": "https://a.example/.well-known/jwks.json"})
        );
        let mut tampered = json.clone();
        tampered["name"] = "m".into();
        assert!(!verifies(&signer, &tampered, &signature));

        // A JSON form (v0.3) is signed over itself; signing again replaces, not adds.
        let mut v03 = json!({"name": "n", "url": "https://a.example/", "signatures": [{"protected": "x"}]});
        signer.sign_json(&mut v03).unwrap();
        signer.sign_json(&mut v03).unwrap();
        assert_eq!(v03["signatures"].as_array().unwrap().len(), 1);
        let signature = v03["signatures"][0].clone();
        assert!(verifies(&signer, &v03, &signature));
    }
}
