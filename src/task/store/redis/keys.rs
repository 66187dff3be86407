//! Key names and the encodings inside them.
//!
//! Every key of one task carries the task id as a hash tag (`{…}`), so a task's keys share a
//! Redis Cluster slot and one Lua script can touch them all. Every key of one owner's indexes
//! carries the owner as a hash tag, so one script updates all of an owner's indexes at once.
//! Task ids, owners and context ids are client-influenced strings: they are percent-encoded
//! where they form key names, so no value can forge a brace (hash tag) or a separator.
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::call::Owner;
use crate::task::store::Cursor;

/// Everything but `A-Z a-z 0-9 - . _ ~` is encoded: no `{ } : / |` or control bytes survive.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A string made safe to sit inside a key name (and inside a hash tag).
pub fn encode(raw: &str) -> String {
    utf8_percent_encode(raw, COMPONENT).to_string()
}

/// The owner as one key component: `<tenant>:<principal>`, each part encoded (so the `:` is
/// unambiguous and the component never contains `/`, which push-config fields rely on).
pub fn owner_id(owner: &Owner) -> String {
    format!("{}:{}", encode(&owner.tenant), encode(&owner.principal))
}

/// The key names of one deployment (one prefix).
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix` (validated by the caller: no braces).
    pub fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_owned() }
    }

    fn task_key(&self, task_id: &str, what: &str) -> String {
        format!("{}:{{{}}}:{what}", self.prefix, encode(task_id))
    }

    /// HASH `task` (protobuf bytes), `seq`, `owner`, `fin` (finish time, ms).
    pub fn task(&self, task_id: &str) -> String {
        self.task_key(task_id, "task")
    }

    /// STREAM of the task's events, entry id `<seq>-0`, field `e` = encoded StreamResponse.
    pub fn events(&self, task_id: &str) -> String {
        self.task_key(task_id, "events")
    }

    /// HASH of push configs: `<owner id>/<config id>` → 20-digit creation number + protobuf.
    pub fn push(&self, task_id: &str) -> String {
        self.task_key(task_id, "push")
    }

    /// STRING naming the replica that owns the live task, with a PX expiry.
    pub fn lease(&self, task_id: &str) -> String {
        self.task_key(task_id, "lease")
    }

    /// STREAM of one replica's mail: commands forwarded to it (it owns their tasks) and the
    /// replies to the commands it forwarded. One key, so one blocking read serves both.
    pub fn inbox(&self, replica: &str) -> String {
        format!("{}:{{r:{}}}:inbox", self.prefix, encode(replica))
    }

    /// ZSET of the tasks some replica owns: task id scored by its lease's expiry (ms), so a
    /// survivor finds the tasks whose owner stopped renewing.
    pub fn live(&self) -> String {
        format!("{}:live", self.prefix)
    }

    fn owner_key(&self, owner_id: &str, what: &str) -> String {
        format!("{}:{{o:{owner_id}}}:{what}", self.prefix)
    }

    /// ZSET (all scores 0, ordered by member) of the owner's tasks: see [`index_member`].
    pub fn owner_index(&self, owner_id: &str) -> String {
        self.owner_key(owner_id, "all")
    }

    /// ZSET like [`Keys::owner_index`], only the tasks of one context.
    pub fn context_index(&self, owner_id: &str, context_id: &str) -> String {
        self.owner_key(owner_id, &format!("ctx:{}", encode(context_id)))
    }

    /// HASH task id → `<state>|<position>|<encoded context id>`: where the task sits in the
    /// indexes now, so an update can remove the old entries and a state filter needs no task.
    pub fn owner_meta(&self, owner_id: &str) -> String {
        self.owner_key(owner_id, "meta")
    }

    /// STRING: what the owner's `messageId` stands for (`SentRecord::encode`), with the
    /// retention age as its expiry: idempotent SendMessage. In the owner's slot; the message
    /// id is encoded like every client string in a key.
    pub fn sent(&self, owner_id: &str, message_id: &str) -> String {
        self.owner_key(owner_id, &format!("sent:{}", encode(message_id)))
    }

    /// SET of one principal's push configs, `<owner id>/<task id>/<config id>` (ids encoded),
    /// for the per-principal cap; a principal spans tenants, so this is not an owner key.
    pub fn principal_push(&self, principal: &str) -> String {
        format!("{}:{{p:{}}}:push", self.prefix, encode(principal))
    }

    /// ZSET of parked tasks, `<owner id>/<task id>` scored by deadline (ms): `parked.rs`.
    pub fn parked(&self) -> String {
        format!("{}:{{parked}}", self.prefix)
    }

    /// ZSET like [`Keys::parked`], one principal's; in the same slot.
    pub fn parked_of(&self, principal: &str) -> String {
        format!("{}:{{parked}}:p:{}", self.prefix, encode(principal))
    }

    /// The prefix of the owner's context index keys (the script appends the encoded context).
    pub fn context_index_prefix(&self, owner_id: &str) -> String {
        self.owner_key(owner_id, "ctx:")
    }

    /// ZSET of `<owner id>/<task id>` scored by finish time (ms): retention by count and age.
    /// The owner is in the member because the task's own keys may have expired (TTL) by the
    /// time retention removes its index entries. Tagged, so it shares a slot with
    /// [`Keys::finished_sizes`].
    pub fn finished(&self) -> String {
        format!("{}:{{finished}}", self.prefix)
    }

    /// HASH member → bytes the finished task holds, and `#` → their sum: retention by bytes.
    pub fn finished_sizes(&self) -> String {
        format!("{}:{{finished}}:sizes", self.prefix)
    }
}

/// Width of the position part of an index member (hex digits of a u128).
const POSITION_WIDTH: usize = 32;

/// The position of a timestamp in an index: newer sorts first, fixed width, so members compare
/// bytewise exactly as [`Cursor::sort_key`] does.
pub fn position(timestamp_nanos: i128) -> String {
    // Flipping the sign bit maps i128 onto u128 in order; subtracting from MAX reverses it.
    let inverted = u128::MAX - ((timestamp_nanos as u128) ^ SIGN);
    format!("{inverted:0POSITION_WIDTH$x}")
}

const SIGN: u128 = 1 << 127;

/// The index member of a cursor position: `<position>:<task id>`.
pub fn index_member(cursor: &Cursor) -> String {
    format!("{}:{}", position(cursor.timestamp_nanos), cursor.task_id)
}

/// The cursor an index member stands for; `None` for a member this code did not write.
pub fn parse_member(member: &str) -> Option<Cursor> {
    let (hex, task_id) = (member.get(..POSITION_WIDTH)?, member.get(POSITION_WIDTH + 1..)?);
    let inverted = u128::from_str_radix(hex, 16).ok()?;
    let timestamp_nanos = ((u128::MAX - inverted) ^ SIGN) as i128;
    Some(Cursor { timestamp_nanos, task_id: task_id.to_owned() })
}

/// The exclusive upper bound (in member order) of tasks with a status at or after `nanos`:
/// `;` is the byte after `:`, so every member at that position sorts before it.
pub fn at_or_after_bound(nanos: i128) -> String {
    format!("({};", position(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_sort_like_cursors() {
        let cursors = [
            Cursor { timestamp_nanos: 5_000, task_id: "b".into() },
            Cursor { timestamp_nanos: 5_000, task_id: "a".into() },
            Cursor { timestamp_nanos: -1, task_id: "z".into() },
            Cursor { timestamp_nanos: 9_000_000_000_000_000_000, task_id: "a:b".into() },
            Cursor { timestamp_nanos: 0, task_id: "".into() },
            Cursor { timestamp_nanos: i128::MIN, task_id: "m".into() },
            Cursor { timestamp_nanos: i128::MAX, task_id: "n".into() },
        ];
        let mut by_cursor = cursors.to_vec();
        by_cursor.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        let mut by_member: Vec<String> = cursors.iter().map(index_member).collect();
        by_member.sort();
        let parsed: Vec<Cursor> = by_member.iter().filter_map(|m| parse_member(m)).collect();
        assert_eq!(parsed, by_cursor);
    }

    #[test]
    fn hostile_strings_cannot_forge_tags_or_separators() {
        let keys = Keys::new("a2a");
        assert_eq!(keys.task("x}:{y"), "a2a:{x%7D%3A%7By}:task");
        let owner = Owner { tenant: "t:1".into(), principal: "p/}".into() };
        assert_eq!(keys.owner_index(&owner_id(&owner)), "a2a:{o:t%3A1:p%2F%7D}:all");
        assert_eq!(keys.sent(&owner_id(&owner), "m}:{x"), "a2a:{o:t%3A1:p%2F%7D}:sent:m%7D%3A%7Bx");
        assert!(parse_member("short").is_none());
    }
}
