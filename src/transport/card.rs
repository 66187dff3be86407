//! Serving the Agent Card at `/.well-known/agent-card.json` with HTTP caching: `Cache-Control`,
//! a strong `ETag` from the content, `Last-Modified`, and 304 for a matching `If-None-Match`.
//! With v0.3 support on, a request without `A2A-Version: 1.x` gets the card with the v0.3
//! fields added (see [`super::v03::card`]), under its own ETag, and `Vary: A2A-Version`.
//!
//! Every form is encoded (and, with `--card-signing-key`, signed) once, here, when the server
//! starts: serving a card costs a copy.
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::http::{HttpState, call_context};
use super::v03;
use crate::card::signing::CardSigner;
use crate::proto::AgentCard;
use crate::proto_v03;
use crate::protojson::{encode, encode_string};

/// How long clients and caches may reuse the card (`Cache-Control: max-age`, seconds).
const CACHE_CONTROL: &str = "public, max-age=300";

/// One encoding of the card with its ETag.
struct Encoded {
    json: String,
    etag: String,
}

impl Encoded {
    fn new(json: String) -> Self {
        // DefaultHasher's keys are fixed, so every replica of one build derives the same tag.
        let mut hasher = std::hash::DefaultHasher::new();
        json.hash(&mut hasher);
        let etag = format!("\"{:016x}\"", hasher.finish());
        Self { json, etag }
    }
}

/// The card, encoded once (and its v0.3 forms, with v0.3 support), with its validators.
pub struct CardService {
    card: AgentCard,
    v1: Encoded,
    v03: Option<V03Cards>,
    last_modified: String,
    signer: Option<Arc<CardSigner>>,
}

/// The v0.3 forms, each signed over itself when the card is signed.
struct V03Cards {
    /// The merged card at `/.well-known/agent-card.json`.
    merged: Encoded,
    /// The pure v0.3 card (`GET /v1/card`, gRPC `GetAgentCard`).
    pure: proto_v03::AgentCard,
    pure_json: Value,
    /// The extended card: as the core answers it (v1.0 ProtoJSON), and its merged form.
    extended: Option<(Value, Value)>,
}

impl CardService {
    /// Encodes `card` (already signed, when `signer` is given) for serving; `since` is when it
    /// took effect (the server's start).
    pub fn new(card: AgentCard, since: SystemTime, signer: Option<Arc<CardSigner>>) -> Self {
        let v1 = Encoded::new(encode_string(&card));
        Self { card, v1, v03: None, last_modified: httpdate::fmt_http_date(since), signer }
    }

    /// Also serves the v0.3 forms: the merged card to requests without `A2A-Version: 1.x`, the
    /// pure one, and `extended` (the extended card as GetExtendedAgentCard answers) merged.
    pub fn with_v03(mut self, extended: Option<&AgentCard>) -> Result<Self, String> {
        let signer = self.signer.as_deref();
        let merged = v03::card::merged_card(&self.card, signer)?;
        let pure = v03::card::v03_card_of(&self.card, signer)?;
        let pure_json = v03::json::encode(&pure);
        let extended = match extended {
            Some(card) => Some((encode(card), v03::card::merged_card(card, signer)?)),
            None => None,
        };
        self.v03 = Some(V03Cards { merged: Encoded::new(merged.to_string()), pure, pure_json, extended });
        Ok(self)
    }

    /// The card being served.
    pub fn card(&self) -> &AgentCard {
        &self.card
    }

    /// The keys that sign the card, for the JWKS.
    pub fn signer(&self) -> Option<&CardSigner> {
        self.signer.as_deref()
    }

    /// The pure v0.3 card (gRPC `GetAgentCard`), signed like the others.
    pub fn v03_card(&self) -> Option<&proto_v03::AgentCard> {
        self.v03.as_ref().map(|v03| &v03.pure)
    }

    /// The pure v0.3 card as v0.3 ProtoJSON (`GET /v1/card`).
    pub fn v03_card_json(&self) -> Value {
        self.v03.as_ref().map(|v03| v03.pure_json.clone()).unwrap_or_default()
    }

    /// The merged v0.3 form of an extended card the core answered (v1.0 ProtoJSON): the one
    /// made at start-up when it is that card, else merged now, unsigned (a signature cannot
    /// be made per call).
    pub fn v03_extended(&self, answered: &Value) -> Value {
        match self.v03.as_ref().and_then(|v03| v03.extended.as_ref()) {
            Some((card, merged)) if card == answered => merged.clone(),
            _ => {
                let mut card = answered.clone();
                if let Some(map) = card.as_object_mut() {
                    map.shift_remove("signatures");
                }
                v03::card::with_v03_fields(card, &self.card.supported_interfaces)
            }
        }
    }

    /// The encoding a request gets.
    fn for_request(&self, headers: &HeaderMap, query: Option<&str>) -> &Encoded {
        match &self.v03 {
            Some(v03) if v03::card::wants_v03_card(call_context(headers, query).version.as_deref()) => {
                &v03.merged
            }
            _ => &self.v1,
        }
    }
}

impl Encoded {
    fn matches(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::IF_NONE_MATCH)
            .into_iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|tag| tag.trim().trim_start_matches("W/"))
            .any(|tag| tag == "*" || tag == self.etag)
    }
}

/// `GET /.well-known/agent-card.json`.
pub async fn handle(State(state): State<HttpState>, uri: Uri, headers: HeaderMap) -> Response {
    let service = &state.card;
    let card = service.for_request(&headers, uri.query());
    let mut response = if card.matches(&headers) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = card.json.clone().into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
    if let Ok(etag) = HeaderValue::from_str(&card.etag) {
        headers.insert(header::ETAG, etag);
    }
    if service.v03.is_some() {
        headers.insert(header::VARY, HeaderValue::from_static("a2a-version"));
    }
    if let Ok(date) = HeaderValue::from_str(&service.last_modified) {
        headers.insert(header::LAST_MODIFIED, date);
    }
    response
}
