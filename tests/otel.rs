//! OpenTelemetry export (`--features otel`): the real binary sends its request spans to an
//! OTLP/gRPC collector (here a tonic one in the test), inside the trace the client's
//! `traceparent` names.
#![cfg(feature = "otel")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{Message, Part, Role, SendMessageRequest, part};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use tokio::sync::mpsc;

const BIN: &str = env!("CARGO_BIN_EXE_a2a-server");

/// Hands every exported span to the test.
struct Collector(mpsc::UnboundedSender<Span>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans = request.into_inner().resource_spans.into_iter().flat_map(|r| r.scope_spans);
        for span in spans.flat_map(|s| s.spans) {
            let _ = self.0.send(span);
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| match a.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => Some(s.clone()),
        _ => None,
    })
}

#[tokio::test]
async fn request_spans_reach_the_collector_inside_the_callers_trace() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = listener.local_addr().unwrap();
    let (spans_tx, mut spans) = mpsc::unbounded_channel();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Collector(spans_tx)))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let mut child = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--otlp-endpoint", &format!("http://{collector}")])
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("A2A_LISTEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a2a-server");
    let line = BufReader::new(child.stdout.take().unwrap()).lines().next().unwrap().unwrap();
    let _process = Process(child);
    let address = line.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap();

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let message = Message {
        message_id: "m-1".into(),
        role: Role::User as i32,
        parts: vec![Part { content: Some(part::Content::Text("hi".into())), ..Default::default() }],
        ..Default::default()
    };
    let mut request =
        tonic::Request::new(SendMessageRequest { message: Some(message), ..Default::default() });
    request.metadata_mut().insert("traceparent", format!("00-{trace_id}-{parent_id}-01").parse().unwrap());
    let mut client = A2aServiceClient::connect(format!("http://{address}")).await.unwrap();
    client.send_message(request).await.expect("send");

    let span = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let span = spans.recv().await.expect("the collector runs");
            if attribute(&span, "method").as_deref() == Some("SendMessage") {
                return span;
            }
        }
    })
    .await
    .expect("the request's span is exported");
    assert_eq!(span.name, "a2a");
    assert_eq!(hex(&span.trace_id), trace_id, "in the caller's trace");
    assert_eq!(hex(&span.parent_span_id), parent_id, "a child of the caller's span");
    assert_eq!(attribute(&span, "binding").as_deref(), Some("grpc"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
