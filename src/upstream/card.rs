//! Reading an upstream agent's card, v1.0 or v0.3, into the endpoint this server calls and the
//! parts of the card it shows as its own (name, description, skills, modes).
//!
//! Only the fields both versions spell the same are read (security schemes, for one, are
//! shaped differently in v0.3 and are this server's own business anyway).
use serde_json::{Map, Value};

use crate::proto::AgentCard;

/// How the upstream is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamBinding {
    /// JSON-RPC 2.0 over HTTP, streams as Server-Sent Events.
    JsonRpc,
    /// HTTP+JSON (v1.0 only), streams as Server-Sent Events.
    HttpJson,
    /// gRPC (`lf.a2a.v1.A2AService`, v1.0 only).
    Grpc,
}

/// The A2A version the upstream speaks on that binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamVersion {
    /// A2A 1.0 (ProtoJSON on JSON-RPC, `A2A-Version: 1.0`).
    V10,
    /// A2A 0.3 (`message/send`, `kind` discriminators).
    V03,
}

/// Where and how to reach the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The interface's URL.
    pub url: String,
    /// Its binding.
    pub binding: UpstreamBinding,
    /// Its protocol version.
    pub version: UpstreamVersion,
}

/// What the card says.
#[derive(Debug, Clone)]
pub struct UpstreamCard {
    /// The interface chosen (gRPC v1.0, then JSON-RPC v1.0, then HTTP+JSON v1.0, then JSON-RPC
    /// v0.3), unless a binding was forced.
    pub endpoint: Endpoint,
    /// Whether the upstream declares streaming (then its streaming calls are used).
    pub streaming: bool,
    /// The card's descriptive part, as a v1.0 card without interfaces or security.
    pub card: AgentCard,
}

/// Reads a card (either version). `forced` picks the binding instead of the preference order.
pub fn read(card: &Value, forced: Option<UpstreamBinding>) -> Result<UpstreamCard, String> {
    let object = card.as_object().ok_or("the agent card is not a JSON object")?;
    let interfaces = interfaces(object);
    let preference = [
        (UpstreamBinding::Grpc, UpstreamVersion::V10),
        (UpstreamBinding::JsonRpc, UpstreamVersion::V10),
        (UpstreamBinding::HttpJson, UpstreamVersion::V10),
        (UpstreamBinding::JsonRpc, UpstreamVersion::V03),
    ];
    let endpoint = preference
        .iter()
        .filter(|(binding, _)| forced.is_none_or(|forced| forced == *binding))
        .find_map(|wanted| interfaces.iter().find(|e| (e.binding, e.version) == *wanted))
        .cloned()
        .ok_or_else(|| {
            format!(
                "the agent card lists no interface this server can call (gRPC or HTTP+JSON v1.0, JSON-RPC v1.0 or v0.3){}",
                forced.map(|b| format!(" with --upstream-binding {b:?}")).unwrap_or_default()
            )
        })?;
    let (card, streaming) = describe(card)?;
    Ok(UpstreamCard { endpoint, streaming, card })
}

/// A card's descriptive part (as a v1.0 card without interfaces or security) and whether it
/// declares streaming.
pub fn describe(card: &Value) -> Result<(AgentCard, bool), String> {
    let object = card.as_object().ok_or("the agent card is not a JSON object")?;
    let streaming =
        object.get("capabilities").and_then(|c| c.get("streaming")).and_then(Value::as_bool).unwrap_or(false);
    Ok((descriptive(object)?, streaming))
}

/// Every interface the card lists that this server can call: v1.0 `supportedInterfaces`, and
/// v0.3 `url` + `preferredTransport` + `additionalInterfaces`.
fn interfaces(card: &Map<String, Value>) -> Vec<Endpoint> {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut found = Vec::new();
    let card_version = text(card.get("protocolVersion"));
    let mut add = |url: String, binding: &str, version: &str| {
        let binding = match binding.to_ascii_uppercase().as_str() {
            "JSONRPC" => UpstreamBinding::JsonRpc,
            "HTTP+JSON" => UpstreamBinding::HttpJson,
            "GRPC" => UpstreamBinding::Grpc,
            _ => return,
        };
        let version = if version.starts_with("0.") { UpstreamVersion::V03 } else { UpstreamVersion::V10 };
        // This server calls v0.3 agents over JSON-RPC only (every one seen serves it).
        if !url.is_empty() && (binding == UpstreamBinding::JsonRpc || version == UpstreamVersion::V10) {
            found.push(Endpoint { url, binding, version });
        }
    };
    for interface in card.get("supportedInterfaces").and_then(Value::as_array).into_iter().flatten() {
        let version = text(interface.get("protocolVersion"));
        add(text(interface.get("url")), &text(interface.get("protocolBinding")), &version);
    }
    if card.contains_key("url") {
        let version = if card_version.is_empty() { "0.3".to_owned() } else { card_version };
        let preferred = text(card.get("preferredTransport"));
        let preferred = if preferred.is_empty() { "JSONRPC".to_owned() } else { preferred };
        add(text(card.get("url")), &preferred, &version);
        for interface in card.get("additionalInterfaces").and_then(Value::as_array).into_iter().flatten() {
            add(text(interface.get("url")), &text(interface.get("transport")), &version);
        }
    }
    found
}

/// The card's descriptive fields, which both versions spell alike, as a v1.0 card.
fn descriptive(card: &Map<String, Value>) -> Result<AgentCard, String> {
    let mut out = Map::new();
    for name in [
        "name",
        "description",
        "version",
        "provider",
        "iconUrl",
        "documentationUrl",
        "defaultInputModes",
        "defaultOutputModes",
    ] {
        if let Some(value) = card.get(name).filter(|v| !v.is_null()) {
            out.insert(name.into(), value.clone());
        }
    }
    let skills = card.get("skills").and_then(Value::as_array).into_iter().flatten().map(|skill| {
        let mut skill = skill.as_object().cloned().unwrap_or_default();
        // v0.3 `security` and v1.0 `securityRequirements` differ, and both are ours to declare.
        skill.retain(|name, value| {
            !value.is_null()
                && ["id", "name", "description", "tags", "examples", "inputModes", "outputModes"]
                    .contains(&name.as_str())
        });
        Value::Object(skill)
    });
    out.insert("skills".into(), Value::Array(skills.collect()));
    crate::protojson::decode::<AgentCard>(&Value::Object(out))
        .map_err(|error| format!("the agent card's descriptive fields: {error}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_v10_card_prefers_grpc_then_json_rpc() {
        let card = json!({
            "name": "up", "description": "d", "version": "1",
            "capabilities": {"streaming": true},
            "supportedInterfaces": [
                {"url": "http://h/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://h:9", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            ],
            "securitySchemes": {"k": {"apiKeySecurityScheme": {"name": "x"}}},
            "skills": [{"id": "s", "name": "S", "description": "sd", "tags": ["t"],
                        "securityRequirements": [{"schemes": {}}]}],
        });
        let read = read(&card, None).unwrap();
        assert_eq!(read.endpoint.binding, UpstreamBinding::Grpc);
        assert_eq!(read.endpoint.url, "http://h:9");
        assert!(read.streaming);
        assert_eq!(read.card.skills[0].id, "s");
        let forced = super::read(&card, Some(UpstreamBinding::JsonRpc)).unwrap();
        assert_eq!(forced.endpoint.url, "http://h/rpc");
        assert_eq!(forced.endpoint.version, UpstreamVersion::V10);
    }

    #[test]
    fn a_v03_card_is_called_over_json_rpc() {
        let card = json!({
            "name": "old", "description": "d", "version": "1", "url": "http://h:1/",
            "protocolVersion": "0.3.0", "preferredTransport": "GRPC",
            "additionalInterfaces": [{"url": "http://h:2/", "transport": "JSONRPC"}],
            "securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "x"}},
            "skills": [{"id": "s", "name": "S", "description": "sd", "tags": [], "security": [{"k": []}]}],
        });
        let read = read(&card, None).unwrap();
        assert_eq!(
            read.endpoint,
            Endpoint {
                url: "http://h:2/".into(),
                binding: UpstreamBinding::JsonRpc,
                version: UpstreamVersion::V03
            }
        );
        assert!(!read.streaming);
        assert!(super::read(&json!({"name": "x", "supportedInterfaces": []}), None).is_err());
        let rest_only = json!({"name": "r", "supportedInterfaces": [
            {"url": "http://h/v1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ]});
        assert_eq!(super::read(&rest_only, None).unwrap().endpoint.binding, UpstreamBinding::HttpJson);
        let v03_rest = json!({"name": "r", "url": "http://h/", "protocolVersion": "0.3.0", "preferredTransport": "HTTP+JSON"});
        assert!(super::read(&v03_rest, None).is_err(), "a v0.3 REST agent is not called");
    }
}
