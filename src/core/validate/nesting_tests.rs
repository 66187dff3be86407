//! [`MAX_NESTING`] proved against every wrapper a client's value travels in: at the limit each
//! decodes, with prost and with the ProtoJSON reader; one level deeper, the deepest does not.
use std::fmt::Debug;

use pbjson_types::{ListValue, Struct, Value, value::Kind};
use prost::Message as _;

use super::*;
use crate::fleet::mail::{self, Mail, Outcome, Reply, TurnStart};
use crate::proto::{
    Artifact, ListTasksResponse, Message, Part, SendMessageRequest, SendMessageResponse, StreamResponse,
    Task, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent, part, send_message_response,
    stream_response,
};
use crate::proto_v03 as v03;
use crate::protojson::{self, Encode};
use crate::transport::v03::{json as v03json, typed};

fn object(inner: Value) -> Value {
    Value { kind: Some(Kind::StructValue(Struct { fields: [("k".to_owned(), inner)].into() })) }
}

fn array(inner: Value) -> Value {
    Value { kind: Some(Kind::ListValue(ListValue { values: vec![inner] })) }
}

fn leaf() -> Value {
    Value { kind: Some(Kind::StringValue("x".into())) }
}

/// Values `depth` deep, in the shapes that cost a decoder the most: objects only, arrays only,
/// an array around objects (what v0.3 wraps once more), and the two alternating.
fn shapes(depth: usize) -> Vec<Value> {
    let nest = |outer: &dyn Fn(usize) -> bool| {
        (0..depth).rev().fold(leaf(), |inner, level| if outer(level) { array(inner) } else { object(inner) })
    };
    vec![nest(&|_| false), nest(&|_| true), nest(&|level| level == 0), nest(&|level| level % 2 == 1)]
}

fn as_struct(value: &Value) -> Option<Struct> {
    match &value.kind {
        Some(Kind::StructValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A message with `value` as its data part and, when it is an object, its metadata and its
/// part's metadata.
fn message(value: &Value) -> Message {
    let part = Part {
        content: Some(part::Content::Data(value.clone())),
        metadata: as_struct(value),
        ..Default::default()
    };
    Message {
        message_id: "m".into(),
        role: 1,
        parts: vec![part],
        metadata: as_struct(value),
        ..Default::default()
    }
}

/// A task holding `value` everywhere a client's value can end up (an agent may echo it).
fn task(value: &Value) -> Task {
    let message = message(value);
    let status = TaskStatus { state: 2, message: Some(message.clone()), timestamp: None };
    let artifact = Artifact {
        artifact_id: "a".into(),
        parts: message.parts.clone(),
        metadata: as_struct(value),
        ..Default::default()
    };
    Task {
        id: "t".into(),
        status: Some(status),
        artifacts: vec![artifact],
        history: vec![message],
        metadata: as_struct(value),
        ..Default::default()
    }
}

fn prost_round_trip<T: prost::Message + Default + PartialEq + Debug>(message: &T) -> Result<(), String> {
    let decoded = T::decode(message.encode_to_vec().as_slice()).map_err(|e| e.to_string())?;
    assert_eq!(&decoded, message);
    Ok(())
}

/// Written as ProtoJSON text (a JSON binding's answer, a push body) and read back by both readers.
fn json_round_trip<T: Encode + Default + PartialEq + Debug>(message: &T) -> Result<(), String> {
    let text = protojson::encode_string(message);
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    assert_eq!(&protojson::decode_described::<T>(&value).map_err(|e| e.to_string())?, message);
    assert_eq!(&protojson::decode::<T>(&value).map_err(|e| e.to_string())?, message);
    Ok(())
}

/// Every wrapper `value` travels in, each decoded; the first that fails.
fn every_wrapper(value: &Value) -> Result<(), String> {
    let task = task(value);
    let message = message(value);
    let status = task.status.clone();
    let events = [
        stream_response::Payload::Task(task.clone()),
        stream_response::Payload::Message(message.clone()),
        stream_response::Payload::StatusUpdate(TaskStatusUpdateEvent { status, ..Default::default() }),
        stream_response::Payload::ArtifactUpdate(TaskArtifactUpdateEvent {
            artifact: task.artifacts.first().cloned(),
            ..Default::default()
        }),
    ];
    let request = SendMessageRequest {
        message: Some(message.clone()),
        metadata: as_struct(value),
        ..Default::default()
    };
    prost_round_trip(&request)?;
    json_round_trip(&request)?;
    // The stores' encoding (memory's packed tasks, Redis) and a ListTasks page.
    prost_round_trip(&task)?;
    assert_eq!(Task::decode(crate::task::encoded::encode(&task)).map_err(|e| e.to_string())?, task);
    let list = ListTasksResponse { tasks: vec![task.clone()], ..Default::default() };
    prost_round_trip(&list)?;
    let sent = SendMessageResponse { payload: Some(send_message_response::Payload::Task(task.clone())) };
    prost_round_trip(&sent)?;
    json_round_trip(&sent)?;
    prost_round_trip(&typed::send_out(sent))?;
    for payload in events {
        // An event on gRPC, in a task's Redis stream, and in a JSON answer or push body.
        let event = StreamResponse { payload: Some(payload) };
        prost_round_trip(&event)?;
        json_round_trip(&event)?;
        let old = typed::stream_out(event);
        prost_round_trip(&old)?;
        let old_json = v03json::encode(&old);
        assert_eq!(v03json::decode::<v03::StreamResponse>(&old_json).map_err(|e| e.to_string())?, old);
    }
    // Fleet mail: a forwarded follow-up, and each answer to one.
    let forwarded =
        mail::Request { message: Some(message.clone()), metadata: as_struct(value), ..Default::default() };
    let turn = TurnStart { snapshot: Some(task.clone()), seq: 1 };
    for outcome in [Outcome::Turn(turn), Outcome::Task(task), Outcome::Message(message)] {
        prost_round_trip(&Mail { kind: Some(mail::Kind::Reply(Reply { id: 1, outcome: Some(outcome) })) })?;
    }
    prost_round_trip(&Mail { kind: Some(mail::Kind::Request(forwarded)) })
}

#[test]
fn every_wrapper_of_a_value_at_the_limit_decodes() {
    assert_eq!(MAX_NESTING, 31);
    for value in shapes(MAX_NESTING) {
        assert_eq!(Shape::of_value(&value).depth, MAX_NESTING);
        if let Err(error) = every_wrapper(&value) {
            panic!("a value {MAX_NESTING} deep does not decode: {error}");
        }
    }
}

/// The limit is no lower than it must be: one level deeper, the deepest wrapper fails.
#[test]
fn one_level_deeper_breaks_the_deepest_wrapper() {
    let objects = shapes(MAX_NESTING + 1).swap_remove(0);
    assert_eq!(Shape::of_value(&objects).depth, MAX_NESTING + 1);
    let error = every_wrapper(&objects).expect_err("a value past the limit breaks a wrapper");
    assert!(error.contains("recursion limit"), "{error}");
}

#[test]
fn shape_counts_values_and_depth() {
    let value: Value = serde_json::from_value(serde_json::json!({"a": [1, {"b": []}], "c": "x"})).unwrap();
    assert_eq!(Shape::of_value(&value), Shape { values: 6, depth: 4 });
    assert_eq!(Shape::of_value(&leaf()), Shape { values: 1, depth: 0 });
    assert_eq!(Shape::of_struct(&Struct::default()), Shape { values: 1, depth: 1 });
}
