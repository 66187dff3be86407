//! The Agent Card for both generations of clients at one URL. A v1.0 card has no top-level
//! `url`, `preferredTransport`, `additionalInterfaces` or `protocolVersion`, which every v0.3
//! client needs; the v1.0 card schema forbids them. So the card is chosen by the request's
//! `A2A-Version` (header or query, spec §3.6.1): `1.x` gets the v1.0 card exactly; a request
//! without one, which the spec reads as 0.3, gets the v1.0 card plus the v0.3 fields (the
//! merge the official SDKs serve with v0.3 compatibility on; their v1.0 clients ignore the
//! extra fields or read them as a fallback). `GET /v1/card` and gRPC `GetAgentCard` answer with
//! the pure v0.3 card.
//!
//! The v0.3 forms list the interfaces the v1.0 card lists (`--card-interfaces`), in its order,
//! except that gRPC comes after the HTTP bindings when there are any: v0.3's `url` defaults to
//! a JSON-RPC endpoint (`preferredTransport` absent means JSONRPC), clients written before
//! `preferredTransport` read it as one, and a bare `host:port` is no HTTP URL.
//!
//! With `--card-signing-key`, each v0.3 form is signed over its own JSON.
use serde_json::{Value, json};

use super::{json as v03json, typed};
use crate::card::signing::CardSigner;
use crate::proto::{AgentCard, AgentInterface};
use crate::proto_v03 as v03;
use crate::transport::http::HttpState;

/// The v0.3 protocol version the v0.3 fields announce.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// Whether a card request asks for the v0.3-compatible card: no `A2A-Version`, or a `0.x` one.
pub fn wants_v03_card(version: Option<&str>) -> bool {
    match version.map(str::trim) {
        None | Some("") => true,
        Some(version) => version.starts_with("0."),
    }
}

/// The v0.3 interfaces of a card with these v1.0 ones, as (url, v0.3 transport), the first the
/// preferred one: the card's order, gRPC after the HTTP bindings (see the module doc). The same
/// endpoints serve both versions (REST under `/v1/`, gRPC as `a2a.v1.A2AService`).
pub fn v03_interfaces(interfaces: &[AgentInterface]) -> Vec<(String, &'static str)> {
    let mut v03: Vec<(String, &'static str)> = interfaces
        .iter()
        .filter_map(|i| {
            let binding = ["JSONRPC", "HTTP+JSON", "GRPC"].into_iter().find(|b| *b == i.protocol_binding)?;
            Some((i.url.clone(), binding))
        })
        .collect();
    // Stable: the HTTP bindings keep their order, and so does gRPC behind them.
    v03.sort_by_key(|(_, binding)| *binding == "GRPC");
    v03
}

/// `card` (v1.0 ProtoJSON, without `signatures`) with the v0.3 fields added. A card without an
/// interface v0.3 knows is returned as it is.
pub fn with_v03_fields(mut card: Value, interfaces: &[AgentInterface]) -> Value {
    let v03 = v03_interfaces(interfaces);
    let Some((url, preferred)) = v03.first().map(|(url, t)| (url.clone(), *t)) else { return card };
    let Some(map) = card.as_object_mut() else { return card };
    map.insert("url".into(), url.into());
    map.insert("preferredTransport".into(), preferred.into());
    map.insert("protocolVersion".into(), PROTOCOL_VERSION.into());
    let additional: Vec<Value> = v03.iter().map(|(url, t)| json!({"url": url, "transport": t})).collect();
    map.insert("additionalInterfaces".into(), Value::Array(additional));
    let extended =
        map.get("capabilities").and_then(|c| c.get("extendedAgentCard")) == Some(&Value::Bool(true));
    if extended {
        map.insert("supportsAuthenticatedExtendedCard".into(), true.into());
    }
    // Required in v0.3, omitted by ProtoJSON when empty.
    for list in ["defaultInputModes", "defaultOutputModes", "skills"] {
        map.entry(list).or_insert_with(|| json!([]));
    }
    map.entry("capabilities").or_insert_with(|| json!({}));
    card
}

/// The merged card (see the module doc) of a v1.0 one, signed when `signer` is given.
pub fn merged_card(card: &AgentCard, signer: Option<&CardSigner>) -> Result<Value, String> {
    let mut json = crate::protojson::encode(card);
    if let Some(map) = json.as_object_mut() {
        // The v1.0 card's signatures cover the v1.0 form, not this one.
        map.shift_remove("signatures");
    }
    let mut merged = with_v03_fields(json, &card.supported_interfaces);
    if let Some(signer) = signer {
        signer.sign_json(&mut merged)?;
    }
    Ok(merged)
}

/// The pure v0.3 card (the v0.3 proto's `AgentCard`) of a v1.0 one, signed over its v0.3
/// ProtoJSON when `signer` is given.
pub fn v03_card_of(card: &AgentCard, signer: Option<&CardSigner>) -> Result<v03::AgentCard, String> {
    let mut v03_card = typed::card_out(card.clone(), &v03_interfaces(&card.supported_interfaces));
    if let Some(signer) = signer {
        let payload = crate::jose::jcs::canonical(&v03json::encode(&v03_card));
        v03_card.signatures = signer
            .signatures(payload.as_bytes())?
            .into_iter()
            .map(|s| v03::AgentCardSignature {
                protected: s.protected,
                signature: s.signature,
                header: s.header,
            })
            .collect();
    }
    Ok(v03_card)
}

/// The v0.3 card as v0.3 ProtoJSON, for `GET /v1/card`.
pub fn v03_card(state: &HttpState) -> Value {
    state.card.v03_card_json()
}
