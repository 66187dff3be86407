//! grpc-web framing through the whole server (tonic-web in front of the A2A service, the v0.3
//! service and health), binary and base64 text: whatever the body, the answer is HTTP 200 with
//! one valid gRPC status, in whole frames ending with the trailer frame.
//!
//! Input: the first byte picks the method (low 4 bits), `application/grpc-web-text` (0x10),
//! whether the rest is one message the harness frames (0x20; else the raw body, framing and
//! base64 included), the `+proto` suffix (0x40), and whether the message names a live task
//! (0x80: its id field is appended, which protobuf merges over any earlier one).
#![no_main]
use a2a_fuzz::response;
use a2a_fuzz::server::{API_KEY, Harness, Sent};
use axum::body::Body;
use axum::http::{Method, Request, header};
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;

/// The methods, each with the protobuf bytes that set its task id, if it has one: the tag and,
/// for an id inside the request's message, the tag of that message.
const METHODS: [(&str, &[u8]); 16] = [
    ("/lf.a2a.v1.A2AService/SendMessage", &[0x12, 0x1a]),
    ("/lf.a2a.v1.A2AService/SendStreamingMessage", &[0x12, 0x1a]),
    ("/lf.a2a.v1.A2AService/GetTask", &[0x12]),
    ("/lf.a2a.v1.A2AService/ListTasks", &[]),
    ("/lf.a2a.v1.A2AService/CancelTask", &[0x12]),
    ("/lf.a2a.v1.A2AService/SubscribeToTask", &[0x12]),
    ("/lf.a2a.v1.A2AService/CreateTaskPushNotificationConfig", &[0x1a]),
    ("/lf.a2a.v1.A2AService/GetTaskPushNotificationConfig", &[0x12]),
    ("/lf.a2a.v1.A2AService/ListTaskPushNotificationConfigs", &[0x0a]),
    ("/lf.a2a.v1.A2AService/GetExtendedAgentCard", &[]),
    ("/lf.a2a.v1.A2AService/DeleteTaskPushNotificationConfig", &[0x12]),
    ("/a2a.v1.A2AService/SendMessage", &[]),
    ("/a2a.v1.A2AService/GetTask", &[]),
    ("/a2a.v1.A2AService/TaskSubscription", &[]),
    ("/grpc.health.v1.Health/Check", &[]),
    ("/lf.a2a.v1.A2AService/NoSuchMethod", &[]),
];

fuzz_target!(|input: &[u8]| {
    let Some((&flags, rest)) = input.split_first() else { return };
    let (path, id_tags) = METHODS[usize::from(flags & 0x0f)];
    let text = flags & 0x10 != 0;
    let framed = flags & 0x20 != 0;
    let suffix = if flags & 0x40 != 0 { "+proto" } else { "" };
    let harness = Harness::get();
    let live = (flags & 0x80 != 0 && framed && !id_tags.is_empty()).then(|| harness.create_task("input"));

    let mut body = rest.to_vec();
    if framed {
        if let Some(id) = &live {
            body.extend(with_id(id_tags, id.as_bytes()));
        }
        let mut frame = vec![0x00];
        frame.extend_from_slice(&u32::try_from(body.len()).expect("a small input").to_be_bytes());
        frame.extend_from_slice(&body);
        body = frame;
        if text {
            body = base64::engine::general_purpose::STANDARD.encode(&body).into_bytes();
        }
    }
    let content_type = if text {
        format!("application/grpc-web-text{suffix}")
    } else {
        format!("application/grpc-web{suffix}")
    };
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, &content_type)
        .header("x-grpc-web", "1")
        .header("x-api-key", API_KEY)
        .body(Body::from(body))
        .expect("a valid request");
    let reply = harness.send(request);
    let sent = Sent { method: Method::POST, path: path.to_owned(), content_type: Some(content_type) };
    response::check(&sent, &reply);
    assert!(
        reply.headers.contains_key("grpc-status")
            || reply.trailers.is_some()
            || reply
                .headers
                .get(header::CONTENT_TYPE)
                .is_some_and(|ct| ct.as_bytes().starts_with(b"application/grpc-web")),
        "a grpc-web request gets a gRPC answer: {reply:?}"
    );
    if let Some(id) = live {
        harness.cancel(&id);
    }
});

/// A length-delimited field per tag, nested from the outermost, holding `id` innermost.
fn with_id(tags: &[u8], id: &[u8]) -> Vec<u8> {
    let mut value = id.to_vec();
    for &tag in tags.iter().rev() {
        let mut field = vec![tag];
        let mut length = value.len();
        while length >= 0x80 {
            field.push((length as u8 & 0x7f) | 0x80);
            length >>= 7;
        }
        field.push(length as u8);
        field.extend_from_slice(&value);
        value = field;
    }
    value
}
