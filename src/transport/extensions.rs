//! The `A2A-Extensions` response header (spec §3.2.6 / A2A-NOTES §12.2: a server SHOULD echo
//! the extensions it activated for the call): the extensions the client asked for
//! (`A2A-Extensions`, and v0.3's `X-A2A-Extensions`) that this server supports, which are those
//! its Agent Card declares in `capabilities.extensions` (this server's own resume extension
//! among them; the agent's, from the card file, are the agent's to honour). Nothing activated,
//! no header.
//!
//! Set once, on the response head, for every binding: a layer around the router (JSON-RPC,
//! HTTP+JSON, the v0.3 routes, grpc-web, the card) and the direct gRPC path
//! (`server/direct_grpc.rs`), where the head is the call's initial metadata, so streaming calls
//! and SSE streams carry it from their first byte. Not per handler: which extensions are
//! active depends only on the request's headers and the card.
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::parameters::A2A_EXTENSIONS;
use crate::proto::AgentCard;

/// v0.3 clients' name for `A2A-Extensions`.
const X_A2A_EXTENSIONS: HeaderName = HeaderName::from_static("x-a2a-extensions");

/// The extensions this server supports, and what it echoes of a request's.
#[derive(Debug, Clone, Default)]
pub struct ExtensionEcho {
    supported: Arc<[String]>,
}

impl ExtensionEcho {
    /// The extensions `card` declares.
    pub fn new(card: &AgentCard) -> Self {
        let declared = card.capabilities.as_ref().map(|c| c.extensions.as_slice()).unwrap_or_default();
        Self { supported: declared.iter().map(|e| e.uri.clone()).collect() }
    }

    /// The value of the response header for a request with `headers`: the supported extensions
    /// it asked for, each once, in the order asked; `None` when there are none.
    pub fn activated(&self, headers: &HeaderMap) -> Option<HeaderValue> {
        if self.supported.is_empty() {
            return None;
        }
        let names = [A2A_EXTENSIONS, X_A2A_EXTENSIONS];
        let asked = names
            .iter()
            .flat_map(|name| headers.get_all(name).into_iter().filter_map(|v| v.to_str().ok()))
            .flat_map(|value| value.split(','))
            .map(str::trim);
        let mut active: Vec<&str> = Vec::new();
        for uri in asked {
            if !active.contains(&uri) && self.supported.iter().any(|s| s == uri) {
                active.push(uri);
            }
        }
        // Declared URIs are valid header text (the card is checked at start-up), so this only
        // fails for one that is not, which is then left out rather than failing the call.
        HeaderValue::from_str(&active.join(", ")).ok().filter(|_| !active.is_empty())
    }

    /// Sets the header on `response` for a request with `headers`, when something is active.
    pub fn apply(&self, activated: Option<HeaderValue>, response: &mut HeaderMap) {
        if let Some(value) = activated {
            response.insert(A2A_EXTENSIONS, value);
        }
    }
}

/// The layer's function: the router's responses get the header.
pub async fn echo(State(echo): State<ExtensionEcho>, request: Request, next: Next) -> Response {
    let activated = echo.activated(request.headers());
    let mut response = next.run(request).await;
    echo.apply(activated, response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AgentCapabilities, AgentExtension};

    fn echo(uris: &[&str]) -> ExtensionEcho {
        let extensions =
            uris.iter().map(|uri| AgentExtension { uri: (*uri).into(), ..Default::default() }).collect();
        let capabilities = AgentCapabilities { extensions, ..Default::default() };
        ExtensionEcho::new(&AgentCard { capabilities: Some(capabilities), ..Default::default() })
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| (axum::http::HeaderName::from_static(n), HeaderValue::from_static(v)))
            .collect()
    }

    #[test]
    fn requested_and_supported_each_once_else_nothing() {
        let echo = echo(&["urn:a", "urn:b"]);
        let asked = headers(&[("a2a-extensions", "urn:z, urn:b,urn:a"), ("x-a2a-extensions", "urn:b")]);
        assert_eq!(echo.activated(&asked).unwrap(), "urn:b, urn:a");
        assert_eq!(echo.activated(&headers(&[("a2a-extensions", "urn:z")])), None);
        assert_eq!(echo.activated(&HeaderMap::new()), None);
        assert_eq!(ExtensionEcho::default().activated(&asked), None, "nothing declared, nothing active");
    }
}
