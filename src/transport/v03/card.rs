//! The Agent Card for both generations of clients at one URL. A v1.0 card has no top-level
//! `url`, `preferredTransport`, `additionalInterfaces` or `protocolVersion`, which every v0.3
//! client needs; the v1.0 card schema forbids them. So the card is chosen by the request's
//! `A2A-Version` (header or query, spec §3.6.1): `1.x` gets the v1.0 card exactly; a request
//! without one, which the spec reads as 0.3, gets the v1.0 card plus the v0.3 fields (the
//! merge the official SDKs serve with v0.3 compatibility on; their v1.0 clients ignore the
//! extra fields or read them as a fallback).
use serde_json::{Value, json};

use crate::proto::AgentInterface;

/// The v0.3 protocol version the v0.3 fields announce.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// Whether a card request asks for the v0.3-compatible card: no `A2A-Version`, or a `0.x` one.
pub fn wants_v03_card(version: Option<&str>) -> bool {
    match version.map(str::trim) {
        None | Some("") => true,
        Some(version) => version.starts_with("0."),
    }
}

/// `card` (v1.0 ProtoJSON) with the v0.3 fields added: v0.3 clients are served over JSON-RPC
/// only, so `url` and the one additional interface are the JSON-RPC interface's URL. A card
/// without a JSON-RPC interface is returned as it is.
pub fn with_v03_fields(mut card: Value, interfaces: &[AgentInterface]) -> Value {
    let Some(jsonrpc) = interfaces.iter().find(|i| i.protocol_binding == "JSONRPC") else { return card };
    let Some(map) = card.as_object_mut() else { return card };
    map.insert("url".into(), jsonrpc.url.clone().into());
    map.insert("preferredTransport".into(), "JSONRPC".into());
    map.insert("protocolVersion".into(), PROTOCOL_VERSION.into());
    map.insert("additionalInterfaces".into(), json!([{"url": jsonrpc.url, "transport": "JSONRPC"}]));
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
