//! API keys: the file holds only their SHA-256 hashes; a presented key is hashed and compared
//! with every stored hash in constant time, so neither the comparison nor the search reveals
//! how much of a guess was right. A key's principal is `key:<principal>` unless its table names
//! another namespace (see `principal.rs`).
use std::sync::Arc;

use aws_lc_rs::digest::{SHA256, digest};
use axum::http::{HeaderMap, HeaderName};
use subtle::ConstantTimeEq;

use super::principal::Namespace;
use super::{ApiKeyConfig, repeated, tenants_of};
use crate::call::Identity;
use crate::error::A2aError;

/// The SHA-256 of `key` as 64 lowercase hex digits, the form the auth file stores.
pub fn hash_hex(key: &str) -> String {
    digest(&SHA256, key.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The configured keys.
pub(super) struct ApiKeys {
    header: HeaderName,
    /// The header's name as configured (header names are matched without case, but the card
    /// and the challenge show the operator's spelling).
    spelling: String,
    keys: Vec<([u8; 32], Arc<Identity>)>,
}

impl ApiKeys {
    pub(super) fn new(header: &str, configured: Vec<ApiKeyConfig>) -> Result<Self, String> {
        let spelling = header.to_owned();
        let header = HeaderName::try_from(header).map_err(|e| format!("api_key_header {header:?}: {e}"))?;
        let mut keys = Vec::with_capacity(configured.len());
        for (i, key) in configured.into_iter().enumerate() {
            let hash = parse_hash(&key.sha256)
                .ok_or_else(|| format!("api_key[{i}].sha256 must be 64 hex digits"))?;
            if key.principal.is_empty() {
                return Err(format!("api_key[{i}].principal is empty"));
            }
            if keys.iter().any(|(known, _)| known == &hash) {
                return Err(format!("api_key[{i}] repeats another key"));
            }
            let what = format!("api_key[{i}]");
            let namespace = Namespace::configured(key.namespace.as_deref(), Namespace::api_keys(), &what)?;
            let identity =
                Identity { principal: namespace.principal(&key.principal), tenants: tenants_of(key.tenants) };
            keys.push((hash, Arc::new(identity)));
        }
        Ok(Self { header, spelling, keys })
    }

    /// The header keys travel in.
    pub(super) fn header(&self) -> &str {
        &self.spelling
    }

    /// The key the request presents, if any. Two headers, or one holding a comma (what a
    /// proxy makes of two), are refused: which one counts would depend on who reads them.
    pub(super) fn presented<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h [u8]>, A2aError> {
        let mut values = headers.get_all(&self.header).iter();
        let Some(value) = values.next() else { return Ok(None) };
        if values.next().is_some() {
            return Err(repeated(&self.spelling));
        }
        if value.as_bytes().contains(&b',') {
            return Err(A2aError::Unauthenticated(format!(
                "the {} header holds a comma: send one key, in one header",
                self.spelling
            )));
        }
        Ok(Some(value.as_bytes()))
    }

    /// Whom `key` names.
    pub(super) fn check(&self, key: &[u8]) -> Result<Identity, A2aError> {
        let presented = digest(&SHA256, key);
        let presented = presented.as_ref();
        // Every stored hash is compared, whichever matches.
        let mut found = None;
        for (hash, identity) in &self.keys {
            if bool::from(hash.as_slice().ct_eq(presented)) {
                found = Some(identity);
            }
        }
        found
            .map(|identity| Identity::clone(identity))
            .ok_or_else(|| A2aError::Unauthenticated("the API key is not valid".into()))
    }
}

fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut hash = [0u8; 32];
    for (byte, pair) in hash.iter_mut().zip(hex.chunks(2)) {
        let digit = |c: u8| (c as char).to_digit(16);
        *byte = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip() {
        let hex = hash_hex("test");
        assert_eq!(hex, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
        assert_eq!(parse_hash(&hex.to_uppercase()).map(hex_of), Some(hex));
        assert!(parse_hash("zz").is_none());
        assert!(parse_hash(&"g".repeat(64)).is_none());
    }

    fn hex_of(hash: [u8; 32]) -> String {
        hash.iter().map(|b| format!("{b:02x}")).collect()
    }
}
