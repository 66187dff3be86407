//! Results with server-chosen ids, page tokens and timestamps normalised away, so that the
//! runs of one scenario over three bindings can be compared step by step.

use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{ListTasksResponse, Message, SendMessageResponse, StreamResponse, Task, TaskStatus};

use super::bindings::ItemStream;
use super::failure::Failure;

pub fn normalise_message(message: &mut Message) {
    message.message_id.clear();
    message.context_id.clear();
    message.task_id.clear();
}

fn normalise_status(status: &mut Option<TaskStatus>) {
    if let Some(status) = status {
        status.timestamp = None;
        if let Some(message) = &mut status.message {
            normalise_message(message);
        }
    }
}

pub fn normalise_task(task: &mut Task) {
    task.id.clear();
    task.context_id.clear();
    normalise_status(&mut task.status);
    task.history.iter_mut().for_each(normalise_message);
}

pub fn normalise_item(item: &mut StreamResponse) {
    match &mut item.payload {
        Some(Payload::Task(task)) => normalise_task(task),
        Some(Payload::Message(message)) => normalise_message(message),
        Some(Payload::StatusUpdate(update)) => {
            update.task_id.clear();
            update.context_id.clear();
            normalise_status(&mut update.status);
        }
        Some(Payload::ArtifactUpdate(update)) => {
            update.task_id.clear();
            update.context_id.clear();
        }
        None => {}
    }
}

/// Every item of a stream is about one task, in one context (checked before the ids are
/// normalised away).
fn assert_one_task(items: &[StreamResponse]) {
    let mut ids = std::collections::BTreeSet::new();
    for item in items {
        match &item.payload {
            Some(Payload::Task(task)) => ids.insert((task.id.clone(), task.context_id.clone())),
            Some(Payload::StatusUpdate(update)) => {
                ids.insert((update.task_id.clone(), update.context_id.clone()))
            }
            Some(Payload::ArtifactUpdate(update)) => {
                ids.insert((update.task_id.clone(), update.context_id.clone()))
            }
            Some(Payload::Message(_)) | None => false,
        };
    }
    assert!(ids.len() <= 1, "one task and context per stream: {ids:?}");
    assert!(ids.iter().all(|(task, context)| !task.is_empty() && !context.is_empty()), "{ids:?}");
}

/// One step's result, with server-chosen ids, page tokens and timestamps normalised away.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Reply(SendMessageResponse),
    Task(Task),
    List(ListTasksResponse),
    Stream {
        items: Vec<StreamResponse>,
        error: Option<Failure>,
    },
    /// A fact derived from a result whose raw form depends on timing.
    Fact(String),
    /// A success where none was expected.
    Unexpected(String),
    Error(Failure),
}

impl Outcome {
    pub fn reply(result: &Result<SendMessageResponse, Failure>) -> Self {
        match result.clone() {
            Ok(mut reply) => {
                match &mut reply.payload {
                    Some(Reply::Task(task)) => normalise_task(task),
                    Some(Reply::Message(message)) => normalise_message(message),
                    None => {}
                }
                Self::Reply(reply)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    pub fn task(result: &Result<Task, Failure>) -> Self {
        match result.clone() {
            Ok(mut task) => {
                normalise_task(&mut task);
                Self::Task(task)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    pub fn list(result: &Result<ListTasksResponse, Failure>) -> Self {
        match result.clone() {
            Ok(mut list) => {
                list.tasks.iter_mut().for_each(normalise_task);
                if !list.next_page_token.is_empty() {
                    list.next_page_token = "<token>".into();
                }
                Self::List(list)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    pub fn items(mut items: Vec<StreamResponse>, error: Option<Failure>) -> Self {
        assert_one_task(&items);
        items.iter_mut().for_each(normalise_item);
        Self::Stream { items, error }
    }

    pub async fn stream(opened: Result<ItemStream, Failure>) -> Self {
        match opened {
            Ok(stream) => {
                let (items, error) = stream.finish().await;
                Self::items(items, error)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    pub fn unexpected<T: std::fmt::Debug>(result: Result<T, Failure>) -> Self {
        match result {
            Ok(value) => Self::Unexpected(format!("{value:?}")),
            Err(failure) => Self::Error(failure),
        }
    }

    pub fn reply_task(&self) -> &Task {
        match self {
            Self::Reply(SendMessageResponse { payload: Some(Reply::Task(task)) }) => task,
            other => panic!("expected a task reply, got {other:?}"),
        }
    }

    pub fn as_task(&self) -> &Task {
        match self {
            Self::Task(task) => task,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    pub fn as_list(&self) -> &ListTasksResponse {
        match self {
            Self::List(list) => list,
            other => panic!("expected a task list, got {other:?}"),
        }
    }

    pub fn as_stream(&self) -> (&[StreamResponse], Option<&Failure>) {
        match self {
            Self::Stream { items, error } => (items, error.as_ref()),
            other => panic!("expected a stream, got {other:?}"),
        }
    }

    pub fn as_error(&self) -> &Failure {
        match self {
            Self::Error(failure) => failure,
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

pub type Steps = Vec<(&'static str, Outcome)>;

pub fn step<'a>(steps: &'a Steps, label: &str) -> &'a Outcome {
    &steps.iter().find(|(l, _)| *l == label).unwrap_or_else(|| panic!("no step {label:?}")).1
}
