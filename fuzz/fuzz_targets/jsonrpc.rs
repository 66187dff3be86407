//! The JSON-RPC envelope and params decoding (v1.0 methods, and the v0.3 shim's): a body
//! decodes to an operation whose request round-trips and decodes the same when sent again in
//! its canonical form, or to one of our errors, a client's mistake on every wire.
#![no_main]
use a2a_fuzz::check;
use a2a_server::error::A2aError;
use a2a_server::fuzzing::jsonrpc_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    match jsonrpc_request(body) {
        Err(error) => {
            assert!(
                matches!(error, A2aError::JsonParse(_) | A2aError::InvalidRequest(_)),
                "an envelope without a usable id is a parse error or an invalid request: {error:?}"
            );
            check::client_error(&error);
        }
        Ok((id, decoded)) => {
            // The id's text as sent: a string, a number (of any size) or null.
            let kind = serde_json::from_str::<serde_json::Value>(&id).ok();
            let number = id.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
            assert!(kind.is_some_and(|v| v.is_string() || v.is_null()) || number, "id {id}");
            match decoded {
                Ok(operation) => check::same_over_jsonrpc(&operation),
                Err(error) => check::client_error(&error),
            }
        }
    }
});
