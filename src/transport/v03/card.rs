//! The Agent Card for both generations of clients at one URL. A v1.0 card has no top-level
//! `url`, `preferredTransport`, `additionalInterfaces` or `protocolVersion`, which every v0.3
//! client needs; the v1.0 card schema forbids them. So the card is chosen by the request's
//! `A2A-Version` (header or query, spec §3.6.1): `1.x` gets the v1.0 card exactly; a request
//! without one, which the spec reads as 0.3, gets the v1.0 card plus the v0.3 fields (the
//! merge the official SDKs serve with v0.3 compatibility on; their v1.0 clients ignore the
//! extra fields or read them as a fallback). `GET /v1/card` and gRPC `GetAgentCard` answer with
//! the pure v0.3 card.
use serde_json::{Value, json};

use super::{json as v03json, typed};
use crate::proto::{AgentCard, AgentInterface};
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

/// The v0.3 interfaces of a card with these v1.0 ones, as (url, v0.3 transport), JSON-RPC
/// first (the preferred one): the same endpoints serve both versions (REST under `/v1/`, gRPC
/// as `a2a.v1.A2AService`).
pub fn v03_interfaces(interfaces: &[AgentInterface]) -> Vec<(String, &'static str)> {
    ["JSONRPC", "HTTP+JSON", "GRPC"]
        .into_iter()
        .filter_map(|binding| {
            interfaces.iter().find(|i| i.protocol_binding == binding).map(|i| (i.url.clone(), binding))
        })
        .collect()
}

/// `card` (v1.0 ProtoJSON) with the v0.3 fields added. A card without a JSON-RPC interface
/// (the one v0.3 clients prefer) is returned as it is.
pub fn with_v03_fields(mut card: Value, interfaces: &[AgentInterface]) -> Value {
    let v03 = v03_interfaces(interfaces);
    let Some((url, "JSONRPC")) = v03.first().map(|(url, t)| (url.clone(), *t)) else { return card };
    let Some(map) = card.as_object_mut() else { return card };
    map.insert("url".into(), url.into());
    map.insert("preferredTransport".into(), "JSONRPC".into());
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

/// The pure v0.3 card (the v0.3 proto's `AgentCard`) of a v1.0 one.
pub fn v03_card_of(card: &AgentCard) -> crate::proto_v03::AgentCard {
    typed::card_out(card.clone(), &v03_interfaces(&card.supported_interfaces))
}

/// The v0.3 card as v0.3 ProtoJSON, for `GET /v1/card`.
pub fn v03_card(state: &HttpState) -> Value {
    v03json::encode(&v03_card_of(state.card.card()))
}
