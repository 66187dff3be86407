//! The cheapest write: a new task that is over by its first write (an echo, a quick answer),
//! in native commands instead of the `WRITE` script. On a single node the writes of every
//! such task that comes while others are on their way go together in one `MULTI`
//! (`group_commit.rs`); on a cluster each task takes one `MULTI` per slot (the task's, its
//! index piece's, its retention piece's), the three sent at once, so a cluster's call runs no
//! script either.
//!
//! Why no script is needed: the task's id was minted by this replica and nobody has been told it
//! (its caller waits for this very write), so no other writer can exist and there is no seq, owner
//! or lease to check. The commands are the ones `WRITE` would run minus its reads: the events, the
//! Task with `fin`, the owner's index entries (a new task has no old ones to move) and the
//! retention note. On a single node the keys get no `PEXPIRE`, and the SendMessage record of the
//! message that made the task loses its expiry (`PERSIST`): the note, which names the record,
//! lands in the same `MULTI`, so the evictor (by count, bytes and age) bounds them all, and a
//! read of a task past the retention age finds it gone by its `fin` (`load`). On a
//! cluster the note is another slot's `MULTI`, so the keys keep the age as their TTL there.
//! `MULTI` keeps them one step for readers, the AOF and replicas (on a cluster, one step per
//! slot: readers already tolerate an index entry whose task is not there yet, as on the
//! cluster's scripted path). Only a first try takes this path: a retried write (its reply may
//! have been lost after it landed) goes through `WRITE`, whose seq check finds it written and
//! whose note is not counted twice.
//!
//! When nobody could have seen the events but through the Task (`unwatched`: a blocking
//! caller, no subscriber, no webhook), they are not written at all: the Task with its `seq`
//! says all there is, and the task has one key, not two. A resume from a generation before
//! its end then finds no stream and gets the Task first (resume.md §4.4), as after trimming;
//! no client can hold such a generation anyway (it saw no event, and the Task's generation is
//! its last).
use std::collections::BTreeMap;

use bytes::Bytes;
use redis::Pipeline;

use super::fleet::StreamBounds;
use super::keys::{encode, indexes_context, owner_id, position};
use super::retention::Retainer;
use super::{RedisStore, retention, status_nanos};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;
use crate::task::state_of;

/// One born-finished task's write, its keys and arguments worked out, ready to go alone or
/// with others.
pub(super) struct BornWrite {
    task_key: String,
    events_key: String,
    push_key: String,
    /// The stream entries `(seq, event)`; none when the task is unwatched.
    events: Vec<(u64, Bytes)>,
    max_events: usize,
    unwatched: bool,
    task: Bytes,
    oid: String,
    seq: u64,
    event_bytes: u64,
    /// When it finished (ms), and how long its keys live (ms): `None` on a single node, where
    /// the retention note rides in the same `MULTI` and the evictor alone bounds the keys.
    now: u64,
    ttl: Option<u64>,
    /// Its entry (`<position>:<task id>`) in its owner's index piece, and in its context's
    /// index (none when the task opened its context: ListTasks finds it by the meta hash).
    entry: String,
    index: String,
    context_index: Option<String>,
    /// The owner's meta hash, the task's field and value there.
    meta: String,
    task_id: String,
    meta_value: String,
    /// The SendMessage record of the message that made the task, when its retention member
    /// names it and the record is to lose its expiry (on a single node; see `own_commands`).
    persist: Option<String>,
    /// The retention piece (set and sizes hash), the task's member there, and its bytes.
    finished: String,
    finished_sizes: String,
    member: String,
    size: u64,
}

impl RedisStore {
    /// Writes `events` (numbered from `first_seq`) and `task`, a new task they finished, in
    /// native commands, one atomic step (per slot on a cluster); see the module doc for when
    /// this is sound.
    pub async fn write_born_finished(
        &self,
        owner: &Owner,
        task: &Task,
        first_seq: u64,
        events: &[Bytes],
        bounds: StreamBounds,
        unwatched: bool,
    ) -> Result<(), A2aError> {
        let write = self.born_write(owner, task, first_seq, events, bounds, unwatched);
        if !self.is_cluster() {
            return self.group_commit.write(write).await;
        }
        // On a cluster: one MULTI per slot, the three sent at once.
        let (mut own, mut index, mut note) = (atomic(), atomic(), atomic());
        write.own_commands(&mut own);
        let writes = [write];
        index_commands(&mut index, &writes);
        let notes = note_commands(&mut note, &writes);
        let (mut a, mut b, mut c) = (self.redis.conn(), self.redis.conn(), self.redis.conn());
        let all = async {
            let (_, _, noted) = futures::try_join!(
                own.query_async::<()>(&mut a),
                index.query_async::<()>(&mut b),
                note.query_async::<Vec<i64>>(&mut c),
            )?;
            Ok(noted)
        };
        let noted = self.redis.write("born_finished", all).await?;
        tell_retainer(&self.retainer, &notes, &noted);
        Ok(())
    }

    /// Works out `task`'s write: its keys, its stream entries, its index entries and its
    /// retention member.
    fn born_write(
        &self,
        owner: &Owner,
        task: &Task,
        first_seq: u64,
        events: &[Bytes],
        bounds: StreamBounds,
        unwatched: bool,
    ) -> BornWrite {
        let oid = owner_id(owner);
        let (bytes, _, _, now, ttl) = self.write_args(task, None, &oid);
        let seq = first_seq.saturating_sub(1) + events.len() as u64;
        let events: Vec<(u64, Bytes)> =
            if unwatched { Vec::new() } else { (first_seq.max(1)..).zip(events.iter().cloned()).collect() };
        let event_bytes = events.iter().map(|(_, event)| event.len() as u64).sum::<u64>();
        let place = position(status_nanos(task));
        let context = encode(&task.context_id);
        let size = event_bytes + bytes.len() as u64;
        let shard = self.keys.owner_shard(&oid, &task.id);
        let state = state_of(task.status.as_ref()) as i32;
        let made_by = retention::made_by(task);
        let member = retention::member(size, &place, &context, &oid, &task.id, made_by.as_deref());
        let finished = self.keys.finished_shard(&task.id);
        BornWrite {
            task_key: self.keys.task(&task.id),
            events_key: self.keys.events(&task.id),
            push_key: self.keys.push(&task.id),
            events,
            max_events: bounds.max_events.max(1),
            unwatched,
            task: bytes,
            seq,
            event_bytes,
            now,
            // On a cluster the note goes in another slot's MULTI, which may fail after this
            // one landed: the TTL keeps such a task from outliving the retention age.
            ttl: self.is_cluster().then_some(ttl),
            entry: format!("{place}:{}", task.id),
            index: self.keys.owner_index(&shard),
            context_index: indexes_context(&context, &task.id)
                .then(|| self.keys.context_index(&shard, &task.context_id)),
            meta: self.keys.owner_meta(&shard),
            task_id: task.id.clone(),
            meta_value: format!("{state}|{place}|{context}"),
            persist: made_by
                .as_deref()
                .filter(|_| !self.is_cluster())
                .map(|message| self.keys.sent_encoded(&oid, message)),
            finished: self.keys.finished(&finished),
            finished_sizes: self.keys.finished_sizes(&finished),
            member,
            size,
            oid,
        }
    }
}

impl BornWrite {
    /// The commands on the task's own keys: its events, the Task, their expiry on a cluster.
    fn own_commands(&self, pipe: &mut Pipeline) {
        for (seq, event) in &self.events {
            pipe.cmd("XADD").arg(&self.events_key).arg("MAXLEN").arg("~").arg(self.max_events);
            pipe.arg(format!("{seq}-0")).arg("e").arg(event.as_ref()).ignore();
        }
        pipe.cmd("HSET").arg(&self.task_key).arg("task").arg(&self.task[..]).arg("owner").arg(&self.oid);
        pipe.arg("seq").arg(self.seq).arg("bytes").arg(self.event_bytes).arg("fin").arg(self.now).ignore();
        if let Some(record) = &self.persist {
            // Retention now governs the record (the member noted in this MULTI names it), as it
            // does the task. A key with an expiry costs every key Redis deletes or reads a
            // look-up in the expiry table, one per call's record: 7 % of Redis's CPU at the cap.
            pipe.cmd("PERSIST").arg(record).ignore();
        }
        let Some(ttl) = self.ttl else { return };
        // Unwatched means no webhooks here (push is off), so no push hash either: only the
        // task key exists to expire.
        let expiring = [&self.task_key, &self.push_key, &self.events_key];
        for key in &expiring[..if self.unwatched { 1 } else { 3 }] {
            pipe.cmd("PEXPIRE").arg(key).arg(ttl).ignore();
        }
    }
}

/// The commands on the task's own keys, for every write of a batch.
pub(super) fn own_commands(pipe: &mut Pipeline, writes: &[BornWrite]) {
    for write in writes {
        write.own_commands(pipe);
    }
}

/// New tasks' entries in their owners' index pieces (nothing to move, so no script), one
/// command per key however many tasks it gains.
pub(super) fn index_commands(pipe: &mut Pipeline, writes: &[BornWrite]) {
    let mut zsets: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut metas: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for write in writes {
        zsets.entry(&write.index).or_default().push(&write.entry);
        if let Some(context) = &write.context_index {
            zsets.entry(context).or_default().push(&write.entry);
        }
        metas.entry(&write.meta).or_default().push((&write.task_id, &write.meta_value));
    }
    for (key, entries) in zsets {
        pipe.cmd("ZADD").arg(key);
        for entry in entries {
            pipe.arg(0).arg(entry);
        }
        pipe.ignore();
    }
    for (key, fields) in metas {
        pipe.cmd("HSET").arg(key);
        for (field, value) in fields {
            pipe.arg(field).arg(value);
        }
        pipe.ignore();
    }
}

/// The retention notes, one `ZADD` per piece; each piece replies with its bytes and count.
/// Returns, per piece in the order of those replies, how many tasks it gained and their bytes.
pub(super) fn note_commands(pipe: &mut Pipeline, writes: &[BornWrite]) -> Vec<(u64, u64)> {
    let mut pieces: BTreeMap<(&str, &str), Vec<&BornWrite>> = BTreeMap::new();
    for write in writes {
        pieces.entry((&write.finished, &write.finished_sizes)).or_default().push(write);
    }
    let mut notes = Vec::with_capacity(pieces.len());
    for ((finished, sizes), members) in pieces {
        pipe.cmd("ZADD").arg(finished).arg("NX");
        for write in &members {
            pipe.arg(write.now).arg(&write.member);
        }
        pipe.ignore();
        let size = members.iter().map(|write| write.size).sum::<u64>();
        pipe.cmd("HINCRBY").arg(sizes).arg("#").arg(size);
        pipe.cmd("ZCARD").arg(finished);
        notes.push((members.len() as u64, size));
    }
    notes
}

/// Tells the evictor what the retention pieces replied (`bytes`, `count` per piece, in the
/// order of `notes`).
pub(super) fn tell_retainer(retainer: &Retainer, notes: &[(u64, u64)], replies: &[i64]) {
    for (&(tasks, size), reply) in notes.iter().zip(replies.chunks_exact(2)) {
        let count = u64::try_from(reply[1]).unwrap_or(0);
        retainer.noted(tasks, count, reply[0], size);
    }
}

/// An empty `MULTI` pipeline.
pub(super) fn atomic() -> Pipeline {
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe
}
