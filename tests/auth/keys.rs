//! Test keys made here, and a JWKS endpoint on loopback that counts its fetches.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A private key with its `kid` and public JWK.
pub struct SigningKey {
    kid: String,
    algorithm: Algorithm,
    key: EncodingKey,
    jwk: Value,
}

impl SigningKey {
    pub fn es256(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("a key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).expect("a key");
        let point = pair.public_key().as_ref(); // 0x04 || X || Y
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        });
        Self {
            kid: kid.into(),
            algorithm: Algorithm::ES256,
            key: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk,
        }
    }

    pub fn ed25519(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).expect("a key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("a key");
        let jwk = json!({
            "kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig", "alg": "EdDSA",
            "x": URL_SAFE_NO_PAD.encode(pair.public_key().as_ref()),
        });
        Self {
            kid: kid.into(),
            algorithm: Algorithm::EdDSA,
            key: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk,
        }
    }

    pub fn jwk(&self) -> Value {
        self.jwk.clone()
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).expect("a signed token")
    }
}

/// A JWKS document served on loopback.
pub struct Jwks {
    keys: Arc<Mutex<Vec<Value>>>,
    pub fetches: Arc<AtomicUsize>,
    url: String,
    _server: tokio::task::JoinHandle<()>,
}

impl Jwks {
    pub async fn serve(keys: Vec<Value>) -> Self {
        let keys = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (keys.clone(), fetches.clone());
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (served, counted) = (served.clone(), counted.clone());
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let keys = served.lock().expect("keys").clone();
                    axum::Json(json!({ "keys": keys }))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/jwks.json", listener.local_addr().expect("address"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { keys, fetches, url, _server: server }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn set(&self, keys: Vec<Value>) {
        *self.keys.lock().expect("keys") = keys;
    }

    pub async fn wait_for_fetches(&self, n: usize) {
        for _ in 0..200 {
            if self.fetches.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the JWKS was not fetched");
    }
}
