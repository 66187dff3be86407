//! Every RPC of `lf.a2a.v1.A2AService` over a real socket, and every error it can answer.
mod common;

use a2a_server::core::CoreSettings;
use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, Part, SendMessageConfiguration, SendMessageRequest, SubscribeToTaskRequest, Task,
    TaskPushNotificationConfig, TaskState,
};
use common::*;
use tonic::Code;
use tonic_types::StatusExt;

fn get(id: &str) -> GetTaskRequest {
    GetTaskRequest { id: id.into(), ..Default::default() }
}

#[tokio::test]
async fn send_message_blocks_until_completed_and_echoes() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("hello there")).await;
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(artifact_texts(&task), ["hello there"]);
    assert!(!task.id.is_empty() && !task.context_id.is_empty());
    assert_eq!(task.history.len(), 1, "the user message");
    assert_eq!(task.history[0].task_id, task.id);
    assert_eq!(task.history[0].context_id, task.context_id);
    assert!(task.status.as_ref().unwrap().timestamp.is_some());
}

#[tokio::test]
async fn send_message_returns_immediately_when_asked() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send_returning_immediately("stream 3 50")).await;
    assert_eq!(state(&task), TaskState::Submitted);
    // Wait for the end through a subscription (unless the task already finished, which the
    // server then reports as UNSUPPORTED_OPERATION).
    match client.subscribe_to_task(SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() }).await
    {
        Ok(stream) => {
            let items = collect(stream.into_inner()).await.unwrap();
            assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
        }
        Err(status) => assert_a2a_error(&status, Code::FailedPrecondition, "UNSUPPORTED_OPERATION"),
    }
    let done = client.get_task(get(&task.id)).await.unwrap().into_inner();
    assert_eq!(state(&done), TaskState::Completed);
    assert_eq!(artifact_texts(&done), ["chunk 0", "chunk 1", "chunk 2"]);
}

#[tokio::test]
async fn client_context_id_is_kept_and_history_length_applies() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut request = send("input");
    request.message.as_mut().unwrap().context_id = "my-context".into();
    let task = send_task(&mut client, request).await;
    assert_eq!(task.context_id, "my-context");
    assert_eq!(state(&task), TaskState::InputRequired);
    assert_eq!(task.history.len(), 2, "user message and the agent's question");

    let mut answer = follow_up(&task, "blue");
    answer.configuration = Some(SendMessageConfiguration { history_length: Some(1), ..Default::default() });
    let done = send_task(&mut client, answer).await;
    assert_eq!(state(&done), TaskState::Completed);
    assert_eq!(done.id, task.id);
    assert_eq!(artifact_texts(&done), ["blue"]);
    assert_eq!(done.history.len(), 1);

    let full = client.get_task(get(&task.id)).await.unwrap().into_inner();
    assert_eq!(full.history.len(), 3, "question, answer, first message");
    assert_eq!(texts(&full.history[0].parts), ["input"]);
    assert_eq!(texts(&full.history[2].parts), ["blue"]);
    let none = client
        .get_task(GetTaskRequest { id: task.id.clone(), history_length: Some(0), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(none.history.is_empty());
    let two = client
        .get_task(GetTaskRequest { id: task.id.clone(), history_length: Some(2), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(two.history, full.history[1..].to_vec(), "the most recent two");
    let negative = client
        .get_task(GetTaskRequest { id: task.id.clone(), history_length: Some(-1), ..Default::default() })
        .await
        .unwrap_err();
    assert_a2a_error(&negative, Code::InvalidArgument, "INVALID_PARAMS");
}

#[tokio::test]
async fn follow_up_errors() {
    let server = TestServer::start().await;
    let mut client = server.client().await;

    let unknown =
        client.send_message(follow_up(&Task { id: "nope".into(), ..Default::default() }, "x")).await;
    assert_a2a_error(&unknown.unwrap_err(), Code::NotFound, "TASK_NOT_FOUND");

    let done = send_task(&mut client, send("hi")).await;
    let terminal = client.send_message(follow_up(&done, "again")).await.unwrap_err();
    assert_a2a_error(&terminal, Code::FailedPrecondition, "UNSUPPORTED_OPERATION");

    let waiting = send_task(&mut client, send("input")).await;
    let mut wrong_context = follow_up(&waiting, "x");
    wrong_context.message.as_mut().unwrap().context_id = "another".into();
    let mismatch = client.send_message(wrong_context).await.unwrap_err();
    assert_a2a_error(&mismatch, Code::InvalidArgument, "INVALID_PARAMS");
}

#[tokio::test]
async fn direct_message_reply_creates_no_task() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let reply = client.send_message(send("message hi there")).await.unwrap().into_inner();
    let Some(Reply::Message(message)) = reply.payload else { panic!("expected a message: {reply:?}") };
    assert_eq!(texts(&message.parts), ["hi there"]);
    assert_eq!(message.role, a2a_server::proto::Role::Agent as i32);
    assert!(message.task_id.is_empty());
    let list = client.list_tasks(ListTasksRequest::default()).await.unwrap().into_inner();
    assert_eq!(list.total_size, 0);

    let items = collect(client.send_streaming_message(send("message hello")).await.unwrap().into_inner())
        .await
        .unwrap();
    assert_eq!(items.len(), 1);
    assert!(matches!(&items[0].payload, Some(Payload::Message(m)) if texts(&m.parts) == ["hello"]));
}

#[tokio::test]
async fn streaming_send_yields_task_then_updates_in_order() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let items =
        collect(client.send_streaming_message(send("stream 4 5")).await.unwrap().into_inner()).await.unwrap();
    assert!(matches!(items[0].payload, Some(Payload::Task(_))), "first a Task");
    assert_eq!(item_state(&items[0]), Some(TaskState::Submitted));
    assert_eq!(item_state(&items[1]), Some(TaskState::Working));
    let chunks: Vec<_> = items.iter().flat_map(chunk_texts).collect();
    assert_eq!(chunks, ["chunk 0", "chunk 1", "chunk 2", "chunk 3"]);
    let appends: Vec<_> = items
        .iter()
        .filter_map(|i| match &i.payload {
            Some(Payload::ArtifactUpdate(u)) => Some((u.append, u.last_chunk)),
            _ => None,
        })
        .collect();
    assert_eq!(appends, [(false, false), (true, false), (true, false), (true, true)]);
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
}

#[tokio::test]
async fn streaming_send_ends_at_an_interrupted_state() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let items =
        collect(client.send_streaming_message(send("input")).await.unwrap().into_inner()).await.unwrap();
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::InputRequired));
}

#[tokio::test]
async fn failing_and_rejecting_tasks() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let failed = send_task(&mut client, send("fail")).await;
    assert_eq!(state(&failed), TaskState::Failed);
    assert!(failed.status.unwrap().message.is_some());
    let rejected = send_task(&mut client, send("reject")).await;
    assert_eq!(state(&rejected), TaskState::Rejected);
}

#[tokio::test]
async fn list_tasks_filters_orders_and_paginates() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut ids = Vec::new();
    for text in ["one", "two", "three"] {
        let mut request = send(text);
        request.message.as_mut().unwrap().context_id = "ctx-list".into();
        ids.push(send_task(&mut client, request).await.id);
    }
    let other = send_task(&mut client, send("input")).await;

    let all = client.list_tasks(ListTasksRequest::default()).await.unwrap().into_inner();
    assert_eq!(all.total_size, 4);
    assert_eq!(all.page_size, 50);
    assert!(all.next_page_token.is_empty());
    assert!(all.tasks.iter().all(|t| t.artifacts.is_empty()), "artifacts only on request");
    let stamps: Vec<_> = all.tasks.iter().map(|t| t.status.clone().unwrap().timestamp.unwrap()).collect();
    assert!(
        stamps.windows(2).all(|w| (w[0].seconds, w[0].nanos) >= (w[1].seconds, w[1].nanos)),
        "newest first"
    );

    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_tasks(ListTasksRequest {
                context_id: "ctx-list".into(),
                page_size: Some(2),
                page_token: token.clone(),
                include_artifacts: Some(true),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.total_size, 3);
        assert_eq!(page.page_size, 2);
        assert!(page.tasks.iter().all(|t| !t.artifacts.is_empty()));
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids, "every task of the context exactly once");

    let waiting = client
        .list_tasks(ListTasksRequest { status: TaskState::InputRequired as i32, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(waiting.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), [other.id.as_str()]);

    let future = client
        .list_tasks(ListTasksRequest {
            status_timestamp_after: Some(pbjson_types::Timestamp { seconds: 4_000_000_000, nanos: 0 }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(future.total_size, 0);

    let none = client
        .list_tasks(ListTasksRequest { history_length: Some(0), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(none.tasks.iter().all(|t| t.history.is_empty()));

    for bad in [0, 101, -1] {
        let error = client
            .list_tasks(ListTasksRequest { page_size: Some(bad), ..Default::default() })
            .await
            .unwrap_err();
        assert_a2a_error(&error, Code::InvalidArgument, "INVALID_PARAMS");
        let violations = error.get_error_details();
        assert_eq!(violations.bad_request().unwrap().field_violations[0].field, "pageSize");
    }
    let error = client
        .list_tasks(ListTasksRequest { page_token: "garbage!".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_a2a_error(&error, Code::InvalidArgument, "INVALID_PARAMS");
}

#[tokio::test]
async fn cancel_live_terminal_and_unknown() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send_returning_immediately("stream 100 200")).await;
    let canceled = client
        .cancel_task(CancelTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&canceled), TaskState::Canceled);
    let read = client.get_task(get(&task.id)).await.unwrap().into_inner();
    assert_eq!(state(&read), TaskState::Canceled);

    let again = client
        .cancel_task(CancelTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .unwrap_err();
    assert_a2a_error(&again, Code::FailedPrecondition, "TASK_NOT_CANCELABLE");

    let waiting = send_task(&mut client, send("input")).await;
    let canceled = client
        .cancel_task(CancelTaskRequest { id: waiting.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&canceled), TaskState::Canceled);

    let unknown = client
        .cancel_task(CancelTaskRequest { id: "no-such-task".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_a2a_error(&unknown, Code::NotFound, "TASK_NOT_FOUND");
    assert_eq!(unknown.get_error_details().error_info().unwrap().domain, "a2a-protocol.org");
}

#[tokio::test]
async fn unknown_task_everywhere() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let error = client.get_task(get("missing")).await.unwrap_err();
    assert_a2a_error(&error, Code::NotFound, "TASK_NOT_FOUND");
    let error = client
        .subscribe_to_task(SubscribeToTaskRequest { id: "missing".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_a2a_error(&error, Code::NotFound, "TASK_NOT_FOUND");
}

#[tokio::test]
async fn push_config_rpcs_are_not_supported_yet() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let config = TaskPushNotificationConfig {
        task_id: "t".into(),
        url: "https://example.com/hook".into(),
        ..Default::default()
    };
    let errors = [
        client.create_task_push_notification_config(config.clone()).await.unwrap_err(),
        client
            .get_task_push_notification_config(GetTaskPushNotificationConfigRequest {
                task_id: "t".into(),
                id: "c".into(),
                ..Default::default()
            })
            .await
            .unwrap_err(),
        client
            .list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest {
                task_id: "t".into(),
                ..Default::default()
            })
            .await
            .unwrap_err(),
        client
            .delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest {
                task_id: "t".into(),
                id: "c".into(),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    ];
    for error in &errors {
        assert_a2a_error(error, Code::FailedPrecondition, "PUSH_NOTIFICATION_NOT_SUPPORTED");
    }
    let mut inline = send("hi");
    inline.configuration =
        Some(SendMessageConfiguration { task_push_notification_config: Some(config), ..Default::default() });
    let error = client.send_message(inline).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "PUSH_NOTIFICATION_NOT_SUPPORTED");
}

#[tokio::test]
async fn extended_card_unsupported_unless_configured() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let error = client.get_extended_agent_card(GetExtendedAgentCardRequest::default()).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "UNSUPPORTED_OPERATION");

    let card = a2a_server::proto::AgentCard { name: "extended".into(), ..Default::default() };
    let server = TestServer::builder()
        .settings(CoreSettings { extended_card: Some(card.clone()), ..Default::default() })
        .start()
        .await;
    let mut client = server.client().await;
    let got = client.get_extended_agent_card(GetExtendedAgentCardRequest::default()).await.unwrap();
    assert_eq!(got.into_inner(), card);
}

#[tokio::test]
async fn invalid_requests_name_their_fields() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let error = client.send_message(SendMessageRequest::default()).await.unwrap_err();
    assert_a2a_error(&error, Code::InvalidArgument, "INVALID_PARAMS");
    assert_eq!(error.get_error_details().bad_request().unwrap().field_violations[0].field, "message");

    let mut no_parts = send("x");
    no_parts.message.as_mut().unwrap().parts.clear();
    no_parts.message.as_mut().unwrap().message_id.clear();
    let error = client.send_message(no_parts).await.unwrap_err();
    let fields: Vec<_> = error
        .get_error_details()
        .bad_request()
        .unwrap()
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    assert_eq!(fields, ["message.messageId", "message.parts"]);

    let mut empty_part = send("x");
    empty_part.message.as_mut().unwrap().parts.push(Part::default());
    let error = client.send_streaming_message(empty_part).await.unwrap_err();
    assert_a2a_error(&error, Code::InvalidArgument, "INVALID_PARAMS");

    let error = client.get_task(get("")).await.unwrap_err();
    assert_a2a_error(&error, Code::InvalidArgument, "INVALID_PARAMS");
}

#[tokio::test]
async fn version_and_extension_parameters() {
    let server = TestServer::builder()
        .settings(CoreSettings {
            required_extensions: vec!["https://example.com/ext/required/v1".into()],
            ..Default::default()
        })
        .start()
        .await;
    let mut client = server.client().await;
    let with = |version: Option<&str>, extensions: Option<&str>| {
        let mut request = tonic::Request::new(send("hi"));
        if let Some(v) = version {
            request.metadata_mut().insert("a2a-version", v.parse().unwrap());
        }
        if let Some(e) = extensions {
            request.metadata_mut().insert("a2a-extensions", e.parse().unwrap());
        }
        request
    };
    let required = "https://example.com/ext/required/v1, https://unknown.example/ext";
    for version in [None, Some("1.0"), Some("1.0.1"), Some("1.2")] {
        client.send_message(with(version, Some(required))).await.expect("accepted version");
    }
    let error = client.send_message(with(Some("99.0"), Some(required))).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "VERSION_NOT_SUPPORTED");
    let error = client.send_message(with(Some("0.3"), Some(required))).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "VERSION_NOT_SUPPORTED");
    let error = client.send_message(with(None, Some("https://unknown.example/ext"))).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "EXTENSION_SUPPORT_REQUIRED");
}

#[tokio::test]
async fn tasks_are_scoped_by_tenant() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut request = send("input");
    request.tenant = "acme".into();
    let task = send_task(&mut client, request).await;

    let other = client
        .get_task(GetTaskRequest { id: task.id.clone(), tenant: "globex".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_a2a_error(&other, Code::NotFound, "TASK_NOT_FOUND");
    let cancel = client
        .cancel_task(CancelTaskRequest { id: task.id.clone(), tenant: "globex".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_a2a_error(&cancel, Code::NotFound, "TASK_NOT_FOUND");
    let listed = client.list_tasks(ListTasksRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.total_size, 0, "the default tenant sees nothing of acme's");
    let mine = client
        .get_task(GetTaskRequest { id: task.id.clone(), tenant: "acme".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mine.id, task.id);
}

#[tokio::test]
async fn conformance_kit_message_id_prefixes() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let with_id = |id: &str, text: &str| {
        let mut request = send(text);
        request.message.as_mut().unwrap().message_id = id.into();
        request
    };
    let task = send_task(&mut client, with_id("tck-complete-task-1", "stream 3 1")).await;
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(texts(&task.status.unwrap().message.unwrap().parts), ["Hello from TCK"]);

    let waiting = send_task(&mut client, with_id("tck-input-required-1", "x")).await;
    assert_eq!(state(&waiting), TaskState::InputRequired);
    let mut again = follow_up(&waiting, "x");
    again.message.as_mut().unwrap().message_id = "tck-input-required-2".into();
    assert_eq!(state(&send_task(&mut client, again).await), TaskState::InputRequired);
    let mut finish = follow_up(&waiting, "x");
    finish.message.as_mut().unwrap().message_id = "tck-complete-task-2".into();
    assert_eq!(state(&send_task(&mut client, finish).await), TaskState::Completed);

    let file = send_task(&mut client, with_id("tck-artifact-file-url-1", "x")).await;
    let part = &file.artifacts[0].parts[0];
    assert_eq!(part.filename, "output.txt");
    assert_eq!(part.media_type, "text/plain");
    assert!(
        matches!(&part.content, Some(a2a_server::proto::part::Content::Url(u)) if u == "https://example.com/output.txt")
    );

    let reply = client.send_message(with_id("tck-message-response-1", "x")).await.unwrap().into_inner();
    assert!(matches!(reply.payload, Some(Reply::Message(_))));

    let rejected = send_task(&mut client, with_id("tck-reject-task-1", "x")).await;
    assert_eq!(state(&rejected), TaskState::Rejected);

    let unhandled = send_task(&mut client, with_id("tck-something-else", "x")).await;
    assert_eq!(
        texts(&unhandled.status.unwrap().message.unwrap().parts),
        ["Unhandled messageId prefix: tck-something-else"]
    );

    let items = collect(
        client
            .send_streaming_message(with_id("tck-stream-artifact-chunked-1", "x"))
            .await
            .unwrap()
            .into_inner(),
    )
    .await
    .unwrap();
    let chunks: Vec<_> = items.iter().flat_map(chunk_texts).collect();
    assert_eq!(chunks, ["chunk-1 ", "chunk-2"]);
}
