//! The retention member: what the set's entry for a finished task says, so eviction needs
//! no read of the task (see the module doc of `retention`, "The member").
use crate::proto::{Role, Task};
use crate::task::store::redis::keys::{encode, indexes_context};

/// The retention member of a finished task; see the module doc. `sent`: the encoded
/// `messageId` whose SendMessage record goes with the task, after the context and a `&` (which
/// encoding never leaves in either): so a replica of the version before, still evicting during
/// a rolling upgrade, reads the size where it always was and keeps the bytes exact (it only
/// misses the context index entry and the record, which a listing and the record's expiry
/// then clear; but a record a task born finished took the expiry off (`born_finished.rs`)
/// would stay: a fleet older than this member form upgrades by way of a version that has it
/// and no `PERSIST`, `59db705` to `3a2ef24`). The context is left out (empty) when the task
/// opened it, as then it has no context index entry for eviction to remove (`keys.rs`
/// `indexes_context`).
pub(in crate::task::store::redis) fn member(
    size: u64,
    position: &str,
    encoded_context: &str,
    oid: &str,
    task_id: &str,
    sent: Option<&str>,
) -> String {
    let encoded_context = if indexes_context(encoded_context, task_id) { encoded_context } else { "" };
    match sent {
        Some(sent) => format!("{oid}/{task_id}|{position}|{encoded_context}&{sent}|{size}"),
        None => format!("{oid}/{task_id}|{position}|{encoded_context}|{size}"),
    }
}

/// The encoded `messageId` of the message that made `task` (its first from the user), whose
/// SendMessage record goes with the task; see the module doc.
pub(in crate::task::store::redis) fn made_by(task: &Task) -> Option<String> {
    task.history.iter().find(|m| m.role == Role::User as i32).map(|m| encode(&m.message_id))
}

/// What an evicted member names: owner, task, and (new members) its index position, context,
/// size and SendMessage record (its encoded `messageId`).
pub(super) struct Evicted<'a> {
    pub(super) oid: &'a str,
    pub(super) task_id: &'a str,
    pub(super) place: Option<(&'a str, &'a str)>,
    pub(super) size: Option<i64>,
    pub(super) sent: Option<&'a str>,
}

pub(super) fn parse(member: &str) -> Option<Evicted<'_>> {
    // Fields from the right, as the task id (in `rest`) is the one that may hold a '|'.
    let fields: Vec<&str> = member.rsplitn(4, '|').collect();
    placed(&fields).or_else(|| {
        let (oid, task_id) = member.split_once('/')?;
        Some(Evicted { oid, task_id, place: None, size: None, sent: None })
    })
}

/// A member of the current form from its fields, right to left: size, context (with the
/// record's `&<messageId>`, if any), position and `<owner id>/<task id>`.
fn placed<'a>(fields: &[&'a str]) -> Option<Evicted<'a>> {
    let digits = |text: &str, hex: bool| {
        !text.is_empty() && text.bytes().all(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
    };
    match *fields {
        [size, context, position, rest]
            if digits(size, false) && position.len() == 32 && digits(position, true) =>
        {
            let (oid, task_id) = rest.split_once('/')?;
            let (context, sent) = match context.split_once('&') {
                Some((context, sent)) => (context, Some(sent).filter(|sent| !sent.is_empty())),
                None => (context, None),
            };
            Some(Evicted { oid, task_id, place: Some((position, context)), size: size.parse().ok(), sent })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_name_their_task_and_place_in_either_form() {
        let position = "0123456789abcdef0123456789abcdef";
        let new = member(1234, position, "ctx%2F1", "t:alice", "task|1/x", None);
        let parsed = parse(&new).expect("a member");
        assert_eq!(
            (parsed.oid, parsed.task_id, parsed.place, parsed.size, parsed.sent),
            ("t:alice", "task|1/x", Some((position, "ctx%2F1")), Some(1234), None)
        );
        let made = member(99, position, "c", "t:alice", "task|1/x", Some("m%7C1"));
        assert!(made.ends_with("|c&m%7C1|99"), "the size stays last: {made}");
        let parsed = parse(&made).expect("a member with its message");
        assert_eq!(
            (parsed.oid, parsed.task_id, parsed.place, parsed.size, parsed.sent),
            ("t:alice", "task|1/x", Some((position, "c")), Some(99), Some("m%7C1"))
        );
        let old = parse("t:alice/task|1").expect("an old member");
        assert_eq!(
            (old.oid, old.task_id, old.place, old.size, old.sent),
            ("t:alice", "task|1", None, None, None)
        );
        let opener = member(7, position, "t1", "t:alice", "t1", Some("m"));
        let opener = parse(&opener).expect("an opener");
        assert_eq!(opener.place, Some((position, "")), "no context entry to remove");
        assert_eq!(opener.sent, Some("m"));
        assert!(parse("garbage").is_none());
    }
}
