//! The card file (`--card FILE`, `--extended-card FILE`) as the server reads it: JSON, then
//! ProtoJSON into an AgentCard, then the card built around what the server offers and
//! validated. A card that builds declares the server's interfaces and capabilities, round-trips,
//! and renders for v1.0 and v0.3 clients; a refusal names the field.
#![no_main]
use std::time::SystemTime;

use a2a_fuzz::check;
use a2a_server::card::{Binding, CardFacts, CardOverrides, build};
use a2a_server::error::A2aError;
use a2a_server::proto::AgentCard;
use a2a_server::protojson;
use a2a_server::transport::card::CardService;
use a2a_server::transport::v03::card::v03_card_of;
use a2a_server::transport::v03::json as v03json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &[u8]| {
    // As `Config::card_file` reads the file: text, JSON, ProtoJSON.
    let Ok(text) = std::str::from_utf8(text) else { return };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else { return };
    let base: AgentCard = match protojson::decode(&value) {
        Ok(card) => card,
        Err(error) => return refused(&error),
    };
    check::roundtrip(&base);
    let facts = CardFacts {
        public_url: "https://a2a.example.com/base/".into(),
        public_grpc: "a2a.example.com:443".into(),
        streaming: true,
        push_notifications: false,
        extended_card: true,
        interfaces: Binding::DEFAULT.to_vec(),
    };
    match build(base, CardOverrides::default(), &facts) {
        Ok(card) => {
            assert_eq!(card.supported_interfaces.len(), 3, "gRPC, JSON-RPC and HTTP+JSON");
            let capabilities = card.capabilities.as_ref().expect("capabilities are declared");
            assert_eq!((capabilities.streaming, capabilities.extended_agent_card), (Some(true), Some(true)));
            assert!(!card.name.trim().is_empty() && !card.skills.is_empty());
            check::roundtrip(&card);
            let v03 = v03_card_of(&card, None).expect("an unsigned v0.3 card always renders");
            let json = v03json::encode(&v03);
            assert_eq!(
                v03json::encode(
                    &v03json::decode::<a2a_server::proto_v03::AgentCard>(&json).expect("decodes")
                ),
                json
            );
            let service = CardService::new(card.clone(), SystemTime::UNIX_EPOCH, None)
                .with_v03(None)
                .expect("an unsigned v0.3 card always renders");
            assert_eq!(service.card(), &card);
        }
        Err(error) => refused(&error),
    }
});

fn refused(error: &A2aError) {
    assert!(matches!(error, A2aError::InvalidParams { .. }), "a bad card is InvalidParams: {error:?}");
    assert!(!error.violations().is_empty(), "naming the field: {error:?}");
    check::client_error(error);
}
