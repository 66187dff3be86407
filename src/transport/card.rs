//! Serving the Agent Card at `/.well-known/agent-card.json` with HTTP caching: `Cache-Control`,
//! a strong `ETag` from the content, `Last-Modified`, and 304 for a matching `If-None-Match`.
use std::hash::{Hash, Hasher};
use std::time::SystemTime;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::http::HttpState;
use crate::proto::AgentCard;
use crate::protojson::encode_string;

/// How long clients and caches may reuse the card (`Cache-Control: max-age`, seconds).
const CACHE_CONTROL: &str = "public, max-age=300";

/// The card, encoded once, with its validators.
pub struct CardService {
    card: AgentCard,
    json: String,
    etag: String,
    last_modified: String,
}

impl CardService {
    /// Encodes the card for serving; `since` is when it took effect (the server's start).
    pub fn new(card: AgentCard, since: SystemTime) -> Self {
        let json = encode_string(&card);
        // DefaultHasher's keys are fixed, so every replica of one build derives the same tag.
        let mut hasher = std::hash::DefaultHasher::new();
        json.hash(&mut hasher);
        let etag = format!("\"{:016x}\"", hasher.finish());
        Self { card, json, etag, last_modified: httpdate::fmt_http_date(since) }
    }

    /// The card being served.
    pub fn card(&self) -> &AgentCard {
        &self.card
    }

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
pub async fn handle(State(state): State<HttpState>, headers: HeaderMap) -> Response {
    let card = &state.card;
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
    if let Ok(date) = HeaderValue::from_str(&card.last_modified) {
        headers.insert(header::LAST_MODIFIED, date);
    }
    response
}
