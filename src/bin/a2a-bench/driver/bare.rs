//! The unary load's connections: one bare hyper HTTP/2 connection each, for gRPC with tonic's
//! generated client straight on it, for the JSON bindings with their requests.
//!
//! Why: a `Channel` sends every call through a tower `Buffer` to a task of its own, which then
//! hands it to hyper's connection task; at tens of thousands of calls per second that extra hop
//! per call is client CPU taken from the servers being measured on the same cores, and the
//! JSON and gRPC rows should differ in the binding alone. Without the reconnect and buffer
//! layers a dropped connection is not reestablished, which a benchmark does not need (the call
//! fails and is counted).
use std::pin::Pin;
use std::task::{Context, Poll};

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{SendMessageRequest, SendMessageResponse};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tonic::codegen::http::{Request, Response, Uri};
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};

use super::json::{Flavor, JsonConn, Transport};
use super::{Conn, GrpcConn, Target};
use crate::BoxError;

/// One HTTP/2 connection as the service tonic's client calls through.
#[derive(Clone)]
pub struct H2(SendRequest<tonic::body::Body>);

type Answer = Result<Response<hyper::body::Incoming>, hyper::Error>;

impl tower::Service<Request<tonic::body::Body>> for H2 {
    type Response = Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.0.send_request(request))
    }
}

/// A connection for the unary load. Cheap to clone (clones share the connection); a call
/// needs `&mut`, so each worker owns its clones and never clones per call.
#[derive(Clone)]
pub enum UnaryConn {
    Grpc { client: A2aServiceClient<H2>, credential: Option<(AsciiMetadataKey, AsciiMetadataValue)> },
    Other(Conn),
}

impl Target {
    /// A new connection for the unary load (for gRPC, a bare one: see the module doc).
    pub async fn connect_unary(&self) -> Result<UnaryConn, BoxError> {
        let (h2, origin) = self.connect_bare().await?;
        let flavor = match self.binding {
            super::Binding::Grpc => {
                let credential = GrpcConn::metadata(self.credential.as_ref())?;
                return Ok(UnaryConn::Grpc { client: A2aServiceClient::with_origin(h2, origin), credential });
            }
            super::Binding::Jsonrpc => Flavor::JsonRpc,
            super::Binding::Rest => Flavor::Rest,
        };
        let transport = Transport::Bare(h2);
        Ok(UnaryConn::Other(Conn::Json(JsonConn {
            flavor,
            transport,
            base: self.base(),
            credential: self.credential.clone(),
        })))
    }

    async fn connect_bare(&self) -> Result<(H2, Uri), BoxError> {
        let origin: Uri = self.url.parse()?;
        let authority = origin.authority().ok_or_else(|| format!("no host in {}", self.url))?.as_str();
        let tcp = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.url))?;
        tcp.set_nodelay(true)?;
        let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .handshake(TokioIo::new(tcp))
            .await?;
        tokio::spawn(connection);
        Ok((H2(send), origin))
    }
}

impl UnaryConn {
    /// SendMessage with nothing around it: no timer (the load watches its workers instead)
    /// and no client clone.
    pub async fn send(&mut self, request: SendMessageRequest) -> Result<SendMessageResponse, BoxError> {
        match self {
            UnaryConn::Grpc { client, credential } => {
                let mut request = tonic::Request::new(request);
                if let Some((key, value)) = credential {
                    request.metadata_mut().insert(key.clone(), value.clone());
                }
                Ok(client.send_message(request).await?.into_inner())
            }
            UnaryConn::Other(conn) => conn.send(request).await,
        }
    }
}
