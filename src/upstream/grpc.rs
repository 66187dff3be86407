//! An upstream over gRPC (`lf.a2a.v1.A2AService`, v1.0), through the generated tonic client.
use futures::StreamExt;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use super::{Events, UpstreamError, UpstreamSettings};
use crate::proto::a2a_service_client::A2aServiceClient;
use crate::proto::{
    CancelTaskRequest, GetTaskRequest, SendMessageRequest, StreamResponse, SubscribeToTaskRequest, Task,
    send_message_response, stream_response,
};

/// Streams this relay reset that h2 remembers (and so whose late frames it ignores).
const RESETS_REMEMBERED: usize = 4096;

#[derive(Clone)]
pub(super) struct Grpc {
    client: A2aServiceClient<Channel>,
    metadata: MetadataMap,
    call_timeout: std::time::Duration,
}

impl Grpc {
    /// A lazily connected channel: the first call connects, and a broken connection is made
    /// again by the next call.
    pub(super) fn new(url: &str, settings: &UpstreamSettings) -> Result<Self, String> {
        // `host:port` alone (`--upstream-binding grpc`) is plaintext.
        let url = if url.contains("://") { url.to_owned() } else { format!("http://{url}") };
        let url = url.as_str();
        let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_owned())
            .map_err(|e| format!("the upstream gRPC URL {url}: {e}"))?
            .connect_timeout(settings.call_timeout)
            .tcp_keepalive(Some(std::time::Duration::from_secs(30)))
            .http2_keep_alive_interval(std::time::Duration::from_secs(30))
            .keep_alive_while_idle(false)
            // A relay resets the upstream's streams it stops reading (a cancel, an aborted
            // execution). h2 ignores late frames only for the resets it remembers (10 by
            // default); each late frame on a forgotten one counts toward the 1,024 that close
            // the connection for good, failing every task then on it. Remember enough of them.
            .http2_max_concurrent_reset_streams(RESETS_REMEMBERED)
            .http2_reset_stream_duration(std::time::Duration::from_secs(10));
        if url.starts_with("https://") {
            let mut tls = ClientTlsConfig::new();
            match &settings.tls_ca_pem {
                Some(pem) => tls = tls.ca_certificate(Certificate::from_pem(pem)),
                None => return Err("a gRPC upstream over https needs --upstream-ca".into()),
            }
            if let Some((certificate, key)) = &settings.tls_identity {
                tls = tls.identity(Identity::from_pem(certificate, key));
            }
            endpoint = endpoint.tls_config(tls).map_err(|e| format!("the upstream's TLS: {e}"))?;
        }
        let mut metadata = MetadataMap::new();
        metadata.insert("a2a-version", MetadataValue::from_static("1.0"));
        for (name, value) in &settings.headers {
            let key = MetadataKey::from_bytes(name.as_str().as_bytes())
                .map_err(|e| format!("--upstream-header {name}: {e}"))?;
            let value = MetadataValue::try_from(value.as_bytes())
                .map_err(|e| format!("--upstream-header {name}: {e}"))?;
            metadata.append(key, value);
        }
        let client = A2aServiceClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(settings.max_event_bytes);
        Ok(Self { client, metadata, call_timeout: settings.call_timeout })
    }

    /// A request with the upstream's metadata.
    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        *request.metadata_mut() = self.metadata.clone();
        request
    }

    pub(super) async fn send(
        &self,
        request: SendMessageRequest,
        streaming: bool,
    ) -> Result<Events, UpstreamError> {
        let mut client = self.client.clone();
        if streaming {
            let call = client.send_streaming_message(self.request(request));
            let events = self.started(call).await?;
            return Ok(Box::pin(events.into_inner().map(|event| event.map_err(status))));
        }
        let response = self.started(client.send_message(self.request(request))).await?.into_inner();
        let payload = response.payload.map(|payload| match payload {
            send_message_response::Payload::Task(task) => stream_response::Payload::Task(task),
            send_message_response::Payload::Message(message) => stream_response::Payload::Message(message),
        });
        let event = Ok(StreamResponse { payload });
        Ok(Box::pin(futures::stream::once(async move { event })))
    }

    pub(super) async fn subscribe(&self, task_id: &str) -> Result<Events, UpstreamError> {
        let request = SubscribeToTaskRequest { id: task_id.to_owned(), ..Default::default() };
        let mut client = self.client.clone();
        let events = self.started(client.subscribe_to_task(self.request(request))).await?;
        Ok(Box::pin(events.into_inner().map(|event| event.map_err(status))))
    }

    /// A unary call's answer, or a stream's start (its response headers), within the call
    /// timeout (the stream itself may be quiet for as long as the task runs).
    async fn started<T>(
        &self,
        call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<tonic::Response<T>, UpstreamError> {
        tokio::time::timeout(self.call_timeout, call)
            .await
            .map_err(|_| UpstreamError::Unreachable("no answer within --upstream-timeout-ms".into()))?
            .map_err(status)
    }

    pub(super) async fn get_task(&self, task_id: &str) -> Result<Task, UpstreamError> {
        let request = GetTaskRequest { id: task_id.to_owned(), ..Default::default() };
        let mut client = self.client.clone();
        Ok(self.started(client.get_task(self.request(request))).await?.into_inner())
    }

    pub(super) async fn cancel(&self, task_id: &str) -> Result<Task, UpstreamError> {
        let request = CancelTaskRequest { id: task_id.to_owned(), ..Default::default() };
        let mut client = self.client.clone();
        Ok(self.started(client.cancel_task(self.request(request))).await?.into_inner())
    }
}

/// A gRPC status as an upstream error: the transport's codes mean "not reached".
fn status(status: tonic::Status) -> UpstreamError {
    use tonic::Code;
    let why = format!("gRPC {:?}: {}", status.code(), status.message());
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled | Code::Aborted => {
            UpstreamError::Unreachable(why)
        }
        Code::Internal if status.message().contains("h2 protocol error") => UpstreamError::Unreachable(why),
        _ => UpstreamError::Refused(why),
    }
}
