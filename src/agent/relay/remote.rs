//! The upstream task a task of this server is: where it is kept (the task's metadata, so any
//! replica finds it), which live executions know it before it is kept, and the upstream
//! context a caller's context becomes.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pbjson_types::value::Kind;

use crate::call::Owner;
use crate::proto::Task;

/// The task metadata key holding `{"taskId": …, "contextId": …}` of the upstream task.
pub const UPSTREAM_KEY: &str = "a2aServerUpstream";

/// The upstream task a task of ours is.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// Its id upstream.
    pub task_id: String,
    /// Its context upstream.
    pub context_id: String,
}

impl Remote {
    /// The one `task`'s metadata names.
    pub fn of(task: &Task) -> Option<Self> {
        let Some(Kind::StructValue(object)) = &task.metadata.as_ref()?.fields.get(UPSTREAM_KEY)?.kind else {
            return None;
        };
        let text = |key: &str| match object.fields.get(key).and_then(|v| v.kind.as_ref()) {
            Some(Kind::StringValue(text)) => text.clone(),
            _ => String::new(),
        };
        let remote = Remote { task_id: text("taskId"), context_id: text("contextId") };
        (!remote.task_id.is_empty()).then_some(remote)
    }

    /// The metadata that names it.
    pub fn metadata(&self) -> pbjson_types::Struct {
        let text = |t: &str| pbjson_types::Value { kind: Some(Kind::StringValue(t.to_owned())) };
        let fields =
            [("taskId".to_owned(), text(&self.task_id)), ("contextId".to_owned(), text(&self.context_id))];
        let object = pbjson_types::Struct { fields: fields.into_iter().collect() };
        let value = pbjson_types::Value { kind: Some(Kind::StructValue(object)) };
        pbjson_types::Struct { fields: [(UPSTREAM_KEY.to_owned(), value)].into_iter().collect() }
    }
}

/// Removes [`UPSTREAM_KEY`] from metadata an upstream sent: only the relay names the upstream
/// task (an upstream that echoed a client's request metadata would otherwise let that client
/// point the task at another one).
pub fn strip(metadata: Option<pbjson_types::Struct>) -> Option<pbjson_types::Struct> {
    metadata.map(|mut metadata| {
        metadata.fields.remove(UPSTREAM_KEY);
        metadata
    })
}

/// The upstream context for `owner`'s context `context_id`: one per caller and context, the same
/// on every replica and every turn, and never another caller's. All callers reach the upstream
/// as one identity, so a context id a client chose is not passed on as it is: two callers who
/// both said `session-1` would share the upstream's conversation.
pub fn upstream_context(owner: &Owner, context_id: &str) -> String {
    let mut digest = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    for piece in ["a2a-server relay context", &owner.tenant, &owner.principal, context_id] {
        digest.update(&(piece.len() as u64).to_be_bytes());
        digest.update(piece.as_bytes());
    }
    let hash = digest.finish();
    let bytes: [u8; 16] = hash.as_ref()[..16].try_into().unwrap_or_default();
    uuid::Builder::from_random_bytes(bytes).into_uuid().to_string()
}

/// The upstream tasks of the executions running on this replica, known before the task's
/// metadata holds them (a cancel then still reaches the upstream). One entry per running
/// execution, removed when it ends.
#[derive(Default, Clone)]
pub struct Live(Arc<Mutex<HashMap<String, Remote>>>);

impl Live {
    /// Notes `remote` for `task_id` while the returned guard lives.
    pub fn hold(&self, task_id: &str) -> LiveEntry {
        LiveEntry { live: self.clone(), task_id: task_id.to_owned() }
    }

    /// The upstream task of `task_id`, if an execution here knows it.
    pub fn get(&self, task_id: &str) -> Option<Remote> {
        self.0.lock().ok()?.get(task_id).cloned()
    }
}

/// An execution's entry in [`Live`].
pub struct LiveEntry {
    live: Live,
    task_id: String,
}

impl LiveEntry {
    /// Records the upstream task.
    pub fn set(&self, remote: &Remote) {
        if let Ok(mut map) = self.live.0.lock() {
            map.insert(self.task_id.clone(), remote.clone());
        }
    }
}

impl Drop for LiveEntry {
    fn drop(&mut self) {
        if let Ok(mut map) = self.live.0.lock() {
            map.remove(&self.task_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_the_same_for_its_caller_and_never_another_callers() {
        let owner = |principal: &str| Owner { tenant: String::new(), principal: principal.into() };
        let alice = upstream_context(&owner("key:alice"), "session-1");
        assert_eq!(alice, upstream_context(&owner("key:alice"), "session-1"));
        assert_ne!(alice, upstream_context(&owner("key:bob"), "session-1"));
        assert_ne!(alice, upstream_context(&owner("key:alice"), "session-2"));
        // Length-prefixed: the pieces cannot slide into each other.
        assert_ne!(upstream_context(&owner("ab"), "c"), upstream_context(&owner("a"), "bc"));
    }

    #[test]
    fn the_reference_round_trips_and_upstream_metadata_cannot_name_one() {
        let remote = Remote { task_id: "t".into(), context_id: "c".into() };
        let task = Task { metadata: Some(remote.metadata()), ..Default::default() };
        assert_eq!(Remote::of(&task), Some(remote.clone()));
        assert_eq!(strip(Some(remote.metadata())).map(|m| m.fields.len()), Some(0));
    }
}
