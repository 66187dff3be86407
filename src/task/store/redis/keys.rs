//! Key names and the encodings inside them.
//!
//! Every key of one task carries the task id as a hash tag (`{…}`), so a task's keys share a
//! Redis Cluster slot and one Lua script can touch them all. Task ids, owners and context ids
//! are client-influenced strings: they are percent-encoded where they form key names, so no
//! value can forge a brace (hash tag) or a separator.
//!
//! # Shards
//! What many tasks share (an owner's ListTasks indexes, the retention set) is split into
//! `shards` pieces, each under a hash tag of its own ([`Shard`]), and a task's entries go to
//! the piece its id picks. On a single node there is one piece and the names are the plain
//! ones (`{o:<owner>}`, `{finished}`). On a cluster, one owner or the fleet's retention would
//! otherwise be one slot, so one node doing every call's index and retention work: piece `k`
//! takes the first of `base`, `base~1`, `base~2`, … whose slot lies in the `k`-th of `shards`
//! equal slot ranges, so the pieces spread over a cluster whose nodes hold equal ranges (what
//! `redis-cli --cluster create` makes) as evenly as the ranges divide, not by chance. A task's
//! piece is the range its own slot lies in, so its entries usually sit on its own node.
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::call::Owner;
use crate::task::store::Cursor;

/// Everything but `A-Z a-z 0-9 - . _ ~` is encoded: no `{ } : / |` or control bytes survive.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A string made safe to sit inside a key name (and inside a hash tag).
pub fn encode(raw: &str) -> String {
    utf8_percent_encode(raw, COMPONENT).to_string()
}

/// The owner an [`owner_id`] stands for; `None` for one this code did not write.
pub fn owner_from_id(oid: &str) -> Option<Owner> {
    let (tenant, principal) = oid.split_once(':')?;
    Some(Owner { tenant: decode(tenant)?, principal: decode(principal)? })
}

/// Whether a task with context `encoded_context` has an entry in its context index. A task
/// that opened its context (the context bears its id) has none: ListTasks finds it through the
/// meta hash (`scripts.rs` `LIST`), and every new context would otherwise be a key born with
/// the task and deleted with it. The scripts apply the same test (`ctx ~= id`).
pub fn indexes_context(encoded_context: &str, task_id: &str) -> bool {
    encoded_context != task_id
}

/// What [`encode`] encoded; `None` if it is not UTF-8 after decoding.
pub fn decode(encoded: &str) -> Option<String> {
    percent_encoding::percent_decode_str(encoded).decode_utf8().ok().map(|c| c.into_owned())
}

/// The owner as one key component: `<tenant>:<principal>`, each part encoded (so the `:` is
/// unambiguous and the component never contains `/`, which push-config fields rely on).
pub fn owner_id(owner: &Owner) -> String {
    format!("{}:{}", encode(&owner.tenant), encode(&owner.principal))
}

/// Redis Cluster's hash slots.
const SLOTS: usize = 16_384;

/// The hash slot of a key whose hash tag is `tag`, as Redis Cluster computes it.
fn slot(tag: &str) -> usize {
    usize::from(crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes())) % SLOTS
}

/// Which of `shards` equal slot ranges `slot` lies in.
fn range_of(slot: usize, shards: usize) -> usize {
    slot * shards / SLOTS
}

/// Candidate tags tried per piece before giving up on its range (each try hits it with
/// probability 1/shards, so this is never reached in practice; the fallback is still a
/// distinct, deterministic tag).
const TRIES_PER_SHARD: usize = 64;

/// The `n`-th tag tried for a piece of `base`: `base` itself first, so a single piece (and
/// the piece `base` falls in) keeps the plain name.
fn candidate(base: &str, n: usize) -> String {
    if n == 0 { base.to_owned() } else { format!("{base}~{n}") }
}

/// One piece of something many tasks share: the hash tag its keys carry (no braces).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shard(String);

impl Shard {
    /// The piece of `base` (split in `shards`) that holds the entries of `item` (an encoded
    /// task or message id): the range `item`'s own slot lies in.
    fn of(base: &str, shards: usize, item: &str) -> Self {
        if shards <= 1 {
            return Self(base.to_owned());
        }
        let want = range_of(slot(item), shards);
        let candidates = (0..shards * TRIES_PER_SHARD).map(|n| candidate(base, n));
        let found = candidates.into_iter().find(|t| range_of(slot(t), shards) == want);
        Self(found.unwrap_or_else(|| format!("{base}~r{want}")))
    }

    /// Every piece of `base`, in range order.
    fn all(base: &str, shards: usize) -> Vec<Self> {
        let shards = shards.max(1);
        let mut found: Vec<Option<String>> = vec![None; shards];
        let mut left = shards;
        for tag in (0..shards * TRIES_PER_SHARD).map(|n| candidate(base, n)) {
            let range = range_of(slot(&tag), shards);
            if found[range].is_none() {
                found[range] = Some(tag);
                left -= 1;
                if left == 0 {
                    break;
                }
            }
        }
        let tags = found.into_iter().enumerate();
        tags.map(|(k, tag)| Self(tag.unwrap_or_else(|| format!("{base}~r{k}")))).collect()
    }
}

/// The key names of one deployment (one prefix).
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
    /// Pieces of each owner's indexes and of the retention set (see the module doc).
    shards: usize,
}

impl Keys {
    /// Keys under `prefix` (validated by the caller: no braces), shared things in `shards`
    /// pieces.
    pub fn new(prefix: &str, shards: usize) -> Self {
        Self { prefix: prefix.to_owned(), shards: shards.max(1) }
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

    /// The piece of the owner's indexes that holds `task_id`'s entries.
    pub fn owner_shard(&self, owner_id: &str, task_id: &str) -> Shard {
        Shard::of(&format!("o:{owner_id}"), self.shards, &encode(task_id))
    }

    /// Every piece of the owner's indexes (ListTasks reads them all).
    pub fn owner_shards(&self, owner_id: &str) -> Vec<Shard> {
        Shard::all(&format!("o:{owner_id}"), self.shards)
    }

    fn shard_key(&self, shard: &Shard, what: &str) -> String {
        format!("{}:{{{}}}:{what}", self.prefix, shard.0)
    }

    /// ZSET (all scores 0, ordered by member) of the owner's tasks: see [`index_member`].
    pub fn owner_index(&self, shard: &Shard) -> String {
        self.shard_key(shard, "all")
    }

    /// ZSET like [`Keys::owner_index`], only the tasks of one context.
    pub fn context_index(&self, shard: &Shard, context_id: &str) -> String {
        self.shard_key(shard, &format!("ctx:{}", encode(context_id)))
    }

    /// HASH task id → `<state>|<position>|<encoded context id>`: where the task sits in the
    /// indexes now, so an update can remove the old entries and a state filter needs no task.
    pub fn owner_meta(&self, shard: &Shard) -> String {
        self.shard_key(shard, "meta")
    }

    /// The prefix of the owner's context index keys (the script appends the encoded context).
    /// A task has an entry there only when [`indexes_context`] says so.
    pub fn context_index_prefix(&self, shard: &Shard) -> String {
        self.shard_key(shard, "ctx:")
    }

    /// STRING: what the owner's `messageId` stands for (`SentRecord::encode`), with the
    /// retention age as its expiry: idempotent SendMessage. In the owner's piece the message
    /// id picks; the message id is encoded like every client string in a key.
    pub fn sent(&self, owner_id: &str, message_id: &str) -> String {
        self.sent_encoded(owner_id, &encode(message_id))
    }

    /// [`Keys::sent`] of a `messageId` already encoded (as a retention member carries it).
    pub fn sent_encoded(&self, owner_id: &str, message: &str) -> String {
        let shard = Shard::of(&format!("o:{owner_id}"), self.shards, message);
        self.shard_key(&shard, &format!("sent:{message}"))
    }

    /// SET of one principal's push configs, `<owner id>/<task id>/<config id>` (ids encoded),
    /// for the per-principal cap; a principal spans tenants, so this is not an owner key.
    pub fn principal_push(&self, principal: &str) -> String {
        format!("{}:{{p:{}}}:push", self.prefix, encode(principal))
    }

    /// The durable push outbox (STREAM of `t` task, `s` seq, `o` owner id; group `push`).
    pub fn outbox(&self) -> String {
        format!("{}:{{outbox}}", self.prefix)
    }

    /// Which replica reads the outbox now (STRING, the replica id, `PX` lease).
    pub fn outbox_leader(&self) -> String {
        format!("{}:{{outbox}}:leader", self.prefix)
    }

    /// ZSET of parked tasks, `<owner id>/<task id>` scored by deadline (ms): `parked.rs`.
    pub fn parked(&self) -> String {
        format!("{}:{{parked}}", self.prefix)
    }

    /// ZSET like [`Keys::parked`], one principal's; in the same slot.
    pub fn parked_of(&self, principal: &str) -> String {
        format!("{}:{{parked}}:p:{}", self.prefix, encode(principal))
    }

    /// The piece of the retention set that notes `task_id`.
    pub fn finished_shard(&self, task_id: &str) -> Shard {
        Shard::of("finished", self.shards, &encode(task_id))
    }

    /// Every piece of the retention set (the evictor reads them all).
    pub fn finished_shards(&self) -> Vec<Shard> {
        Shard::all("finished", self.shards)
    }

    /// The piece of the records' retention set that holds SendMessage record `message_id`'s
    /// member: records no task takes along are kept as finished tasks are, counted apart.
    pub fn records_shard(&self, message_id: &str) -> Shard {
        Shard::of("records", self.shards, &encode(message_id))
    }

    /// Every piece of the records' retention set.
    pub fn records_shards(&self) -> Vec<Shard> {
        Shard::all("records", self.shards)
    }

    /// ZSET of finished tasks scored by finish time (ms): retention by count and age
    /// (`retention/` says what a member holds). Shares its piece's slot with
    /// [`Keys::finished_sizes`].
    pub fn finished(&self, shard: &Shard) -> String {
        format!("{}:{{{}}}", self.prefix, shard.0)
    }

    /// HASH `#` → the bytes the piece's finished tasks hold (and, for members noted before
    /// they carried their size, member → its bytes): retention by bytes.
    pub fn finished_sizes(&self, shard: &Shard) -> String {
        self.shard_key(shard, "sizes")
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
        let keys = Keys::new("a2a", 1);
        assert_eq!(keys.task("x}:{y"), "a2a:{x%7D%3A%7By}:task");
        let owner = Owner { tenant: "t:1".into(), principal: "p/}".into() };
        let shard = keys.owner_shard(&owner_id(&owner), "x}:{y");
        assert_eq!(keys.owner_index(&shard), "a2a:{o:t%3A1:p%2F%7D}:all");
        assert_eq!(keys.sent(&owner_id(&owner), "m}:{x"), "a2a:{o:t%3A1:p%2F%7D}:sent:m%7D%3A%7Bx");
        assert!(parse_member("short").is_none());
    }

    #[test]
    fn slots_are_redis_clusters() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot("123456789"), 0x31C3);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("user1000"), 3443);
    }

    #[test]
    fn one_piece_keeps_the_plain_names() {
        let keys = Keys::new("a2a", 1);
        assert_eq!(keys.owner_shards("t:p"), [Shard("o:t:p".into())]);
        assert_eq!(keys.finished(&keys.finished_shard("x")), "a2a:{finished}");
        assert_eq!(keys.finished_sizes(&keys.finished_shards()[0]), "a2a:{finished}:sizes");
        assert_eq!(keys.finished(&keys.records_shard("m")), "a2a:{records}");
        assert_eq!(keys.finished_sizes(&keys.records_shards()[0]), "a2a:{records}:sizes");
    }

    #[test]
    fn pieces_cover_equal_slot_ranges_and_every_task_lands_in_one() {
        for shards in [2, 3, 16, 64] {
            let keys = Keys::new("a2a", shards);
            let all = keys.owner_shards("t:alice");
            assert_eq!(all.len(), shards);
            for (k, shard) in all.iter().enumerate() {
                assert_eq!(range_of(slot(&shard.0), shards), k, "piece {k} of {shards} lies in range {k}");
            }
            assert!(all.contains(&Shard("o:t:alice".into())), "the plain name is one of them");
            let mut per_piece = vec![0usize; shards];
            for i in 0..shards * 200 {
                let shard = keys.owner_shard("t:alice", &format!("task-{i}"));
                per_piece[all.iter().position(|s| *s == shard).expect("one of the pieces")] += 1;
            }
            let (min, max) = (per_piece.iter().min().unwrap(), per_piece.iter().max().unwrap());
            assert!(*min >= 120 && *max <= 280, "{shards} pieces: tasks spread evenly: {per_piece:?}");
            let fin = keys.finished_shards();
            assert_eq!(fin.len(), shards);
            assert!(fin.contains(&keys.finished_shard("task-1")));
        }
    }
}
