//! The dashboard at `/ui`: a task list, a live view of any task, sending and cancelling, and
//! the Agent Card, in plain HTML, CSS and JavaScript modules compiled into the binary (no build
//! step, no CDN). The page talks to the server's own HTTP+JSON routes, as any client would.
//!
//! It is served on loopback listeners by default ([`UiMode::Auto`]), since a page that lists
//! every task should not appear on a public port by surprise; `--ui on|off` decides otherwise.
//! Every response carries a Content-Security-Policy that allows only the page's own origin.
use std::net::SocketAddr;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Whether the server serves `/ui`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UiMode {
    /// Only when the HTTP listener is on a loopback address.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl UiMode {
    /// Whether the UI is served on a listener bound to `address`.
    pub fn enabled(self, address: SocketAddr) -> bool {
        match self {
            UiMode::On => true,
            UiMode::Off => false,
            UiMode::Auto => address.ip().is_loopback(),
        }
    }
}

/// The Content-Security-Policy of every `/ui` response: the page's own origin only, no
/// inline script or style, no frames, no plugins.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; \
                       object-src 'none'";

/// The page; `{{ROOT}}` becomes the relative path from the request's URL to `/ui/`, so the
/// page works at `/ui`, `/ui/` and `/ui/tasks/{id}`, and behind a proxy that adds a prefix.
const PAGE: &str = include_str!("assets/index.html");

/// The assets under `/ui/assets/`: name, content type, bytes.
pub const ASSETS: &[(&str, &str, &[u8])] = &[
    ("style.css", "text/css; charset=utf-8", include_bytes!("assets/style.css")),
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("assets/app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_bytes!("assets/api.js")),
    ("sse.js", "text/javascript; charset=utf-8", include_bytes!("assets/sse.js")),
    ("dom.js", "text/javascript; charset=utf-8", include_bytes!("assets/dom.js")),
    ("list.js", "text/javascript; charset=utf-8", include_bytes!("assets/list.js")),
    ("task.js", "text/javascript; charset=utf-8", include_bytes!("assets/task.js")),
    ("card.js", "text/javascript; charset=utf-8", include_bytes!("assets/card.js")),
    ("icon.svg", "image/svg+xml", include_bytes!("assets/icon.svg")),
];

/// The bytes of the page and every asset together.
pub fn total_size() -> usize {
    PAGE.len() + ASSETS.iter().map(|(_, _, bytes)| bytes.len()).sum::<usize>()
}

/// The page, for a request whose path is `depth` segments below `/ui/` (`/ui` itself is -1:
/// its relative root is `ui/`).
pub fn page(depth: i32) -> Response {
    let root = match depth {
        d if d < 0 => "ui/".to_owned(),
        d => "../".repeat(d as usize),
    };
    let body = PAGE.replace("{{ROOT}}", &root);
    respond(StatusCode::OK, "text/html; charset=utf-8", body.into_bytes())
}

/// An asset by name, or 404.
pub fn asset(name: &str) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, bytes)) => respond(StatusCode::OK, content_type, bytes.to_vec()),
        None => respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", b"not found\n".to_vec()),
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // Small, and compiled in: revalidating costs nothing, and a new binary is seen at once.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_loopback_only() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(UiMode::Auto.enabled(at("127.0.0.1:1")));
        assert!(UiMode::Auto.enabled(at("[::1]:1")));
        assert!(!UiMode::Auto.enabled(at("0.0.0.0:1")));
        assert!(!UiMode::Auto.enabled(at("192.0.2.7:1")));
        assert!(UiMode::On.enabled(at("0.0.0.0:1")));
        assert!(!UiMode::Off.enabled(at("127.0.0.1:1")));
    }

    #[test]
    fn page_roots() {
        let body = |depth| {
            let response = page(depth);
            futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX)).unwrap()
        };
        assert!(String::from_utf8_lossy(&body(-1)).contains("\"ui/assets/app.js\""));
        assert!(String::from_utf8_lossy(&body(0)).contains("\"assets/app.js\""));
        assert!(String::from_utf8_lossy(&body(2)).contains("\"../../assets/app.js\""));
    }
}
