//! The HTTP+JSON path and query router and its body decoding: a request routes and decodes
//! to an operation whose request round-trips, and whose path, rebuilt from the decoded ids and
//! tenant, routes to the same operation; or it is one of our errors, a client's mistake.
//!
//! Input: the method and the request target on the first line, then the body.
#![no_main]
use a2a_fuzz::check;
use a2a_server::fuzzing::rest_request;
use a2a_server::transport::operation::Operation;
use axum::http::{HeaderMap, HeaderValue, Method, Uri, header};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

fuzz_target!(|input: &[u8]| {
    let (head, body) = match input.iter().position(|&b| b == b'\n') {
        Some(at) => (&input[..at], &input[at + 1..]),
        None => (input, &[][..]),
    };
    let Ok(head) = std::str::from_utf8(head) else { return };
    let Some((method, target)) = head.split_once(' ') else { return };
    let Ok(method) = Method::from_bytes(method.as_bytes()) else { return };
    let Ok(uri) = target.parse::<Uri>() else { return };
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    match rest_request(&method, uri.path(), &headers, uri.query(), body) {
        Err(error) => check::client_error(&error),
        Ok(operation) => {
            check::same_over_jsonrpc(&operation);
            if let Some(path) = canonical_path(&operation) {
                let again = rest_request(&method, &path, &headers, uri.query(), body)
                    .unwrap_or_else(|e| panic!("{path} (rebuilt from {}) refused: {e:?}", uri.path()));
                assert_eq!(
                    check::operation(&again),
                    check::operation(&operation),
                    "{path} vs {}",
                    uri.path()
                );
            }
        }
    }
});

/// The path of an operation whose ids travel in the path, rebuilt with every id and the tenant
/// percent-encoded.
fn canonical_path(operation: &Operation) -> Option<String> {
    let encode = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    let (tenant, route) = match operation {
        Operation::GetTask(r) => (&r.tenant, format!("/tasks/{}", encode(&r.id))),
        Operation::CancelTask(r) if !r.id.is_empty() => {
            (&r.tenant, format!("/tasks/{}:cancel", encode(&r.id)))
        }
        Operation::SubscribeToTask(r) if !r.id.is_empty() => {
            (&r.tenant, format!("/tasks/{}:subscribe", encode(&r.id)))
        }
        Operation::ListPushConfigs(r) => {
            (&r.tenant, format!("/tasks/{}/pushNotificationConfigs", encode(&r.task_id)))
        }
        Operation::GetPushConfig(r) => {
            (&r.tenant, format!("/tasks/{}/pushNotificationConfigs/{}", encode(&r.task_id), encode(&r.id)))
        }
        Operation::DeletePushConfig(r) => {
            (&r.tenant, format!("/tasks/{}/pushNotificationConfigs/{}", encode(&r.task_id), encode(&r.id)))
        }
        _ => return None,
    };
    Some(match tenant.as_str() {
        // A tenant named like the route's first segment reads as the route itself (by design:
        // a tenant cannot shadow a route), so such a path has no canonical form to compare.
        "tasks" => return None,
        "" => route,
        tenant => format!("/{}{route}", encode(tenant)),
    })
}
