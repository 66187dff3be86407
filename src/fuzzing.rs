//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz), and nothing else: thin wrappers
//! that reach the decoders and checks the server runs on client input, so that the targets
//! fuzz exactly the server's code without making its internals public piecemeal. Not an API;
//! hidden from the docs and free to change with the code it wraps.
use std::sync::Arc;

use axum::http::{HeaderMap, Method};

use crate::agent::AgentExecutor;
use crate::auth::Authenticator;
use crate::card::{self, CardFacts, CardOverrides};
use crate::core::{Core, CoreSettings};
use crate::error::{A2aError, BoxError};
use crate::proto::{AgentCard, Artifact, SendMessageRequest, TaskPushNotificationConfig};
use crate::server::router::{Options, app};
use crate::task::store::{MemoryStore, Retention};
use crate::transport::http::HttpSettings;
use crate::transport::operation::Operation;
use crate::transport::{jsonrpc, rest, v03};

/// The request limits as the fuzzed decoders apply them: small, so that inputs of a fuzzer's
/// size reach both sides of each (the counting is the same whatever the limit).
fn fuzzed_limits() -> CoreSettings {
    CoreSettings { max_parts: 8, max_struct_values: 64, ..CoreSettings::default() }
}

/// A JSON-RPC request body as the binding decodes it: the id, and the operation (v1.0, or
/// v0.3 when the method is a v0.3 one) or why it cannot be run. `Err` when the envelope is so
/// broken that no id can be trusted. The id is its JSON text, as the answer echoes it.
pub fn jsonrpc_request(body: &[u8]) -> Result<(String, Result<Operation, A2aError>), A2aError> {
    let (id, call) = jsonrpc::envelope(body, &fuzzed_limits())?;
    let id = id.as_json().to_owned();
    let operation = call.and_then(|(method, params)| {
        let params = params?;
        if v03::jsonrpc::is_v03_call(&method, None) {
            v03::jsonrpc::operation(&method, &params)
        } else {
            jsonrpc::operation(&method, &params)
        }
    });
    Ok((id, operation))
}

/// An HTTP+JSON request as the binding routes and decodes it, with the tenant of a `/{tenant}`
/// prefix applied; a path or method no route takes is `MethodNotFound`, as the binding says.
pub fn rest_request(
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Result<Operation, A2aError> {
    let (route, tenant) = rest::resolve(method, path)
        .map_err(|miss| A2aError::MethodNotFound(format!("{miss:?}: {method} {path}")))?;
    let mut operation = rest::operation(route, headers, query, body, &fuzzed_limits())?;
    if let Some(tenant) = tenant {
        operation.set_tenant(tenant);
    }
    Ok(operation)
}

/// The core's checks of a SendMessage request (REQUIRED fields and ranges).
pub fn validate_send_message(request: &SendMessageRequest) -> Result<(), A2aError> {
    crate::core::validate::send_message(request)
}

/// The core's checks of a push notification config (its URL and authentication).
pub fn validate_push_config(config: &TaskPushNotificationConfig) -> Result<(), A2aError> {
    crate::core::validate::push_config(config)
}

/// The core's check of a required task id.
pub fn validate_task_id(field: &str, id: &str) -> Result<(), A2aError> {
    crate::core::validate::task_id(field, id)
}

/// One stdout line of an exec agent's command as the agent reads it: `None` when it is output
/// (not a control line under `prefix`); else the artifact it adds (`None` for a status or
/// interrupt), or why the line is refused.
pub fn exec_control_line(line: &str, prefix: &str) -> Option<Result<Option<Artifact>, String>> {
    use crate::agent::exec::control::{Control, control_json, parse};
    let json = control_json(line, prefix)?;
    Some(parse(json).map(|control| match control {
        Control::Artifact { artifact, .. } => Some(artifact),
        Control::Status(_) | Control::InputRequired(_) | Control::AuthRequired(_) => None,
    }))
}

/// A piece of the command's output as the exec agent's line reader hands it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPiece {
    /// The text (invalid UTF-8 replaced), without the newline.
    pub text: String,
    /// Whether it starts a line (only such a piece can be a control line).
    pub line_start: bool,
    /// Whether a newline ended it (else the end of input, or the reader's limit).
    pub newline: bool,
    /// Whether the reader's limit cut it (the line goes on in the next piece).
    pub split: bool,
}

/// Every piece the exec agent's line reader makes of `output`, reading lines of at most `max`
/// bytes.
pub fn exec_output_pieces(output: &[u8], max: usize) -> Vec<OutputPiece> {
    use crate::agent::exec::output::{End, LineReader};
    let mut reader = LineReader::new(output, max);
    let mut pieces = Vec::new();
    // A byte slice never makes the reader wait, so one poll finishes each piece.
    while let Some(Ok(Some(piece))) = futures::FutureExt::now_or_never(reader.next()) {
        pieces.push(OutputPiece {
            text: piece.text,
            line_start: piece.line_start,
            newline: piece.end == End::Newline,
            split: piece.end == End::Split,
        });
    }
    pieces
}

/// Every route of the server on one port (as `Server::start` assembles them) around a core of
/// `agent` on a memory store keeping at most `max_finished` finished tasks, with the dashboard
/// and CORS for any origin on, for driving in-process with `tower::ServiceExt::oneshot`.
pub async fn router(
    agent: Arc<dyn AgentExecutor>,
    card: AgentCard,
    mut settings: CoreSettings,
    auth: Option<Arc<Authenticator>>,
    max_finished: usize,
) -> Result<axum::Router, BoxError> {
    let facts = CardFacts {
        public_url: "http://fuzz.invalid".into(),
        public_grpc: "fuzz.invalid:443".into(),
        streaming: settings.streaming,
        push_notifications: settings.push_notifications,
        extended_card: settings.extended_card.is_some(),
        interfaces: card::Binding::DEFAULT.to_vec(),
    };
    let mut card = card::build(card, CardOverrides::default(), &facts)?;
    if let Some(auth) = &auth {
        auth.declare(&mut card);
        settings.require_authentication = true;
    }
    let retention = Retention { max_finished, ..Retention::default() };
    let core = Arc::new(Core::new(agent, Arc::new(MemoryStore::new(retention)), settings));
    let options = Options {
        card,
        http: HttpSettings::default(),
        cors_origins: vec!["*".into()],
        ui: true,
        auth,
        card_signer: None,
    };
    Ok(app(core, options).await?.combined())
}
