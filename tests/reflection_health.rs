//! Server reflection (v1 and v1alpha) lists the A2A service; grpc.health.v1 reports SERVING;
//! unknown gRPC methods answer UNIMPLEMENTED.
mod common;

use common::*;
use futures::StreamExt;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

#[tokio::test]
async fn reflection_v1_lists_the_a2a_service_and_describes_it() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let server = TestServer::start().await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    let requests = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol("lf.a2a.v1.A2AService".into()),
    ]
    .map(|m| ServerReflectionRequest { host: String::new(), message_request: Some(m) });
    let mut responses =
        client.server_reflection_info(futures::stream::iter(requests)).await.unwrap().into_inner();

    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"lf.a2a.v1.A2AService"), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");

    let Some(MessageResponse::FileDescriptorResponse(files)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected descriptors")
    };
    use prost::Message;
    let methods: Vec<String> = files
        .file_descriptor_proto
        .iter()
        .map(|bytes| prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap())
        .filter(|file| file.package() == "lf.a2a.v1")
        .flat_map(|file| file.service)
        .flat_map(|service| service.method)
        .map(|method| method.name().to_owned())
        .collect();
    assert_eq!(
        methods,
        [
            "SendMessage",
            "SendStreamingMessage",
            "GetTask",
            "ListTasks",
            "CancelTask",
            "SubscribeToTask",
            "CreateTaskPushNotificationConfig",
            "GetTaskPushNotificationConfig",
            "ListTaskPushNotificationConfigs",
            "GetExtendedAgentCard",
            "DeleteTaskPushNotificationConfig",
        ]
    );
}

#[tokio::test]
async fn reflection_v1alpha_lists_the_a2a_service() {
    use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;

    let server = TestServer::start().await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses =
        client.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    assert!(list.service.iter().any(|s| s.name == "lf.a2a.v1.A2AService"));
}

#[tokio::test]
async fn health_reports_serving() {
    let server = TestServer::start().await;
    let mut client = HealthClient::new(server.channel().await);
    for service in ["", "lf.a2a.v1.A2AService"] {
        let response =
            client.check(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(response.status(), ServingStatus::Serving, "service {service:?}");
    }
}

#[tokio::test]
async fn unknown_methods_and_paths() {
    let server = TestServer::start().await;
    let mut client = HealthClient::new(server.channel().await);
    let error = client.check(HealthCheckRequest { service: "no.such.Service".into() }).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound);

    // A gRPC call to a service this server does not have.
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    let path = "/no.such.Service/Method".parse().unwrap();
    let error = grpc.unary(tonic::Request::new(()), path, codec).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unimplemented);
}
