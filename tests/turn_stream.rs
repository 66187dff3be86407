//! A turn's stream (SendStreamingMessage on a task waiting for input) carries the whole turn:
//! it may end early only when the execution it follows has ended with nothing more to say,
//! never while that execution's events are still on their way to the task's log.
//!
//! The race this guards against needs a woken stream to run on one worker while the actor on
//! the other is still applying what the execution sent, so this is a stress test: before the
//! fix it failed about two runs in five here. The contract itself is checked deterministically
//! by the unit tests of `task::execution`.
mod common;

use a2a_server::agent::{AgentExecutor, EventSink, RequestContext, text_part};
use a2a_server::error::A2aError;
use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{Artifact, TaskState};
use common::bindings::{BINDINGS, Client};
use common::*;

/// Parts in the answer's artifact: enough that applying and logging it takes a while, so a
/// stream told of the execution's end too early would see the task still waiting.
const PARTS: usize = 200;

/// Asks for input; answers a follow-up with one many-part artifact and completes, returning
/// at once (its events still queued for the actor).
struct AskThenAnswer;

#[async_trait::async_trait]
impl AgentExecutor for AskThenAnswer {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        if ctx.new_task {
            let _ = events.input_required(Some("and?")).await;
            return Ok(());
        }
        let parts = (0..PARTS).map(|i| text_part(i.to_string())).collect();
        let artifact = Artifact { artifact_id: "answer".into(), parts, ..Default::default() };
        let _ = events.artifact(artifact).await;
        let _ = events.complete(None).await;
        Ok(())
    }
}

/// Rounds of (new task, streamed answer) per client, and clients at once per binding: many
/// turns in flight on a two-worker runtime, so a woken stream often runs on the other worker
/// while the actor is still applying what the execution sent.
const ROUNDS: usize = 50;
const CLIENTS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_stream_holds_every_event_of_its_turn() {
    let server = TestServer::builder().agent(AskThenAnswer).start().await;
    let mut clients = tokio::task::JoinSet::new();
    for binding in BINDINGS {
        for n in 0..CLIENTS {
            let client = Client::connect(&server, binding, "1.0").await;
            clients.spawn(async move {
                for round in 0..ROUNDS {
                    let context = format!("{binding:?} client {n}, round {round}");
                    let asked = client.send(send("question")).await.expect("a task");
                    let Some(Reply::Task(task)) = asked.payload else {
                        panic!("{context}: a task: {asked:?}")
                    };
                    assert_eq!(state(&task), TaskState::InputRequired, "{context}");
                    let stream = client.send_streaming(follow_up(&task, "answer")).await.expect("a stream");
                    let (items, error) = stream.finish().await;
                    assert_eq!(error, None, "{context}");
                    let kinds: Vec<&str> = items
                        .iter()
                        .map(|item| match &item.payload {
                            Some(Payload::Task(_)) => "task",
                            Some(Payload::ArtifactUpdate(_)) => "artifact",
                            Some(Payload::StatusUpdate(_)) => "status",
                            _ => "other",
                        })
                        .collect();
                    assert_eq!(kinds, ["task", "artifact", "status"], "{context}: the whole turn");
                    assert_eq!(item_state(&items[2]), Some(TaskState::Completed), "{context}");
                }
            });
        }
    }
    while let Some(joined) = clients.join_next().await {
        joined.expect("every client saw every turn whole");
    }
}
