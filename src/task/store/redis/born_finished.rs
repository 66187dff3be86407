//! The cheapest write: a new task that is over by its first write (an echo, a quick answer),
//! in native commands instead of the `WRITE` script: one `MULTI` on a single node; on a
//! cluster one `MULTI` per slot (the task's, its index piece's, its retention piece's), the
//! three sent at once, so a cluster's call runs no script either.
//!
//! Why no script is needed: the task's id was minted by this replica and nobody has been told
//! it (its caller waits for this very write), so no other writer can exist and there is no
//! seq, owner or lease to check. The commands are the ones `WRITE` would run minus its reads:
//! the events, the Task with `fin`, the keys' expiry, the owner's index entries (a new task
//! has no old ones to move) and the retention note. `MULTI` keeps them one step for readers,
//! the AOF and replicas (on a cluster, one step per slot: readers already tolerate an index
//! entry whose task is not there yet, as on the cluster's scripted path). Only a first try takes this path: a retried write (its reply may have
//! been lost after it landed) goes through `WRITE`, whose seq check finds it written and whose
//! note is not counted twice.
//!
//! When nobody could have seen the events but through the Task (`unwatched`: a blocking
//! caller, no subscriber, no webhook), they are not written at all: the Task with its `seq`
//! says all there is, and the task has one key, not two. A resume from a generation before
//! its end then finds no stream and gets the Task first (resume.md §4.4), as after trimming;
//! no client can hold such a generation anyway (it saw no event, and the Task's generation is
//! its last).
use bytes::Bytes;
use redis::Pipeline;

use super::fleet::StreamBounds;
use super::keys::{encode, owner_id, position};
use super::{RedisStore, retention, status_nanos};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;
use crate::task::state_of;

impl RedisStore {
    /// Writes `events` (numbered from `first_seq`) and `task`, a new task they finished, in
    /// native commands, one atomic step per slot; see the module doc for when this is sound.
    pub async fn write_born_finished(
        &self,
        owner: &Owner,
        task: &Task,
        first_seq: u64,
        events: &[Bytes],
        bounds: StreamBounds,
        unwatched: bool,
    ) -> Result<(), A2aError> {
        let oid = owner_id(owner);
        let (bytes, _, _, now, ttl) = self.write_args(task, None, &oid);
        let (task_key, events_key) = (self.keys.task(&task.id), self.keys.events(&task.id));
        let mut own = redis::pipe();
        own.atomic();
        let mut seq = first_seq.saturating_sub(1);
        let mut event_bytes = 0;
        for event in events {
            seq += 1;
            if unwatched {
                continue;
            }
            event_bytes += event.len() as u64;
            let id = format!("{seq}-0");
            let max = bounds.max_events.max(1);
            own.cmd("XADD")
                .arg(&events_key)
                .arg("MAXLEN")
                .arg("~")
                .arg(max)
                .arg(id)
                .arg("e")
                .arg(event.as_ref());
            own.ignore();
        }
        own.cmd("HSET").arg(&task_key).arg("task").arg(&bytes[..]).arg("owner").arg(&oid);
        own.arg("seq").arg(seq).arg("bytes").arg(event_bytes).arg("fin").arg(now).ignore();
        // Unwatched means no webhooks here (push is off), so no push hash either: only the
        // task key exists to expire.
        let expiring = [&task_key, &self.keys.push(&task.id), &events_key];
        for key in &expiring[..if unwatched { 1 } else { 3 }] {
            own.cmd("PEXPIRE").arg(key).arg(ttl).ignore();
        }
        let place = position(status_nanos(task));
        let context = encode(&task.context_id);
        let size = event_bytes + bytes.len() as u64;
        // On a single node all of it is one MULTI; on a cluster, one per slot.
        let cluster = self.is_cluster();
        let (mut index, mut note) = (atomic(), atomic());
        self.index_commands(if cluster { &mut index } else { &mut own }, &oid, task, &place, &context);
        let note_in = if cluster { &mut note } else { &mut own };
        self.note_commands(note_in, &oid, task, (&place, &context), now, size);
        let (bytes, count): (i64, u64) = if cluster {
            let (mut a, mut b, mut c) = (self.redis.conn(), self.redis.conn(), self.redis.conn());
            let writes = async {
                let (_, _, noted) = futures::try_join!(
                    own.query_async::<()>(&mut a),
                    index.query_async::<()>(&mut b),
                    note.query_async(&mut c),
                )?;
                Ok(noted)
            };
            self.redis.write("born_finished", writes).await?
        } else {
            let mut conn = self.redis.conn();
            self.redis.write("born_finished", own.query_async(&mut conn)).await?
        };
        self.retainer.noted(count, bytes, size);
        Ok(())
    }

    /// A new task's entries in its owner's index piece: nothing to move, so no script.
    fn index_commands(&self, pipe: &mut Pipeline, oid: &str, task: &Task, place: &str, context: &str) {
        let entry = format!("{place}:{}", task.id);
        let shard = self.keys.owner_shard(oid, &task.id);
        pipe.cmd("ZADD").arg(self.keys.owner_index(&shard)).arg(0).arg(&entry).ignore();
        // A context this task opened (its id is the task's) has no index of its own until a
        // second task joins it: ListTasks finds the first through the meta hash (`list.rs`).
        if task.context_id != task.id {
            pipe.cmd("ZADD")
                .arg(self.keys.context_index(&shard, &task.context_id))
                .arg(0)
                .arg(&entry)
                .ignore();
        }
        let state = state_of(task.status.as_ref()) as i32;
        pipe.cmd("HSET")
            .arg(self.keys.owner_meta(&shard))
            .arg(&task.id)
            .arg(format!("{state}|{place}|{context}"));
        pipe.ignore();
    }

    /// The retention note in the task's piece; its replies are the piece's bytes and count.
    fn note_commands(
        &self,
        pipe: &mut Pipeline,
        oid: &str,
        task: &Task,
        (place, context): (&str, &str),
        now: u64,
        size: u64,
    ) {
        let made_by = retention::made_by(task);
        let member = retention::member(size, place, context, oid, &task.id, made_by.as_deref());
        let finished = self.keys.finished_shard(&task.id);
        pipe.cmd("ZADD").arg(self.keys.finished(&finished)).arg("NX").arg(now).arg(member).ignore();
        pipe.cmd("HINCRBY").arg(self.keys.finished_sizes(&finished)).arg("#").arg(size);
        pipe.cmd("ZCARD").arg(self.keys.finished(&finished));
    }
}

/// An empty `MULTI` pipeline.
fn atomic() -> Pipeline {
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe
}
