//! Serving the Agent Card at `/.well-known/agent-card.json` with HTTP caching: `Cache-Control`,
//! a strong `ETag` from the content, `Last-Modified`, and 304 for a matching `If-None-Match`.
//! With v0.3 support on, a request without `A2A-Version: 1.x` gets the card with the v0.3
//! fields added (see [`super::v03::card`]), under its own ETag, and `Vary: A2A-Version`.
use std::hash::{Hash, Hasher};
use std::time::SystemTime;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::http::{HttpState, call_context};
use super::v03;
use crate::proto::AgentCard;
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

/// The card, encoded once (twice with v0.3 support), with its validators.
pub struct CardService {
    card: AgentCard,
    v1: Encoded,
    v03: Option<Encoded>,
    last_modified: String,
}

impl CardService {
    /// Encodes the card for serving; `since` is when it took effect (the server's start).
    pub fn new(card: AgentCard, since: SystemTime) -> Self {
        let v1 = Encoded::new(encode_string(&card));
        Self { card, v1, v03: None, last_modified: httpdate::fmt_http_date(since) }
    }

    /// Also serves the v0.3-compatible card to requests without `A2A-Version: 1.x`.
    pub fn with_v03(mut self) -> Self {
        let hybrid = v03::card::with_v03_fields(encode(&self.card), &self.card.supported_interfaces);
        self.v03 = Some(Encoded::new(hybrid.to_string()));
        self
    }

    /// The card being served.
    pub fn card(&self) -> &AgentCard {
        &self.card
    }

    /// The encoding a request gets.
    fn for_request(&self, headers: &HeaderMap, query: Option<&str>) -> &Encoded {
        match &self.v03 {
            Some(v03) if v03::card::wants_v03_card(call_context(headers, query).version.as_deref()) => v03,
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
