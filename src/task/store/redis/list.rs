//! ListTasks from the owner's indexes: on each piece of them (`keys.rs`, "Shards"), one script
//! picks that piece's first members of the page and counts its total, all pieces in one round
//! trip; the pieces' members are merged in ListTasks order (they are ordered strings, so the
//! merge is a sort) and the tasks then read from their own slots.

use std::sync::Arc;

use redis::Value;

use super::conn::Part;
use super::keys::{at_or_after_bound, encode, index_member, owner_id, parse_member, position};
use super::{RedisStore, scripts};
use crate::call::Owner;
use crate::error::A2aError;
use crate::task::store::{Cursor, TaskPage, TaskQuery};

/// Rounds of "read the page, drop stale entries, read again" before answering with what is
/// there; stale entries come only from expired tasks and interrupted writes, so one is usual.
const ATTEMPTS: usize = 3;

impl RedisStore {
    /// A page of `owner`'s tasks, in the ListTasks order, with the memory store's cursors.
    pub(super) async fn list_page(&self, owner: &Owner, query: &TaskQuery) -> Result<TaskPage, A2aError> {
        let oid = owner_id(owner);
        let shards = self.keys.owner_shards(&oid);
        let start =
            query.after.as_ref().map(|c| format!("({}", index_member(c))).unwrap_or_else(|| "-".into());
        let stop = query
            .status_after
            .as_ref()
            .map(|t| at_or_after_bound(t.seconds as i128 * 1_000_000_000 + t.nanos as i128))
            .unwrap_or_else(|| "+".into());
        let state = query.state.map(|s| (s as i32).to_string()).unwrap_or_default();
        let context = query.context_id.as_deref().unwrap_or_default();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let parts = shards.iter().map(|shard| {
                let index = match &query.context_id {
                    Some(context_id) => self.keys.context_index(shard, context_id),
                    None => self.keys.owner_index(shard),
                };
                let mut list = scripts::LIST.prepare_invoke();
                list.key(index).key(self.keys.owner_meta(shard));
                list.arg(&start).arg(&stop).arg(&state).arg(query.page_size + 1);
                list.arg(context).arg(encode(context));
                Part::Script(&scripts::LIST, list)
            });
            let replies = self.redis.together("list", parts.collect()).await?;
            let (mut total, mut members) = (0, Vec::new());
            for reply in replies {
                let (piece_total, piece_members) = parse_list_reply(reply)?;
                total += piece_total;
                members.extend(piece_members);
            }
            if shards.len() > 1 {
                members.sort_by_cached_key(index_member);
                members.truncate(query.page_size + 1);
            }
            let loaded =
                futures::future::join_all(members.iter().map(|c| self.load(owner, &c.task_id))).await;
            let (mut stale, mut page) = (0, Vec::with_capacity(members.len()));
            for (cursor, task) in members.into_iter().zip(loaded) {
                match task {
                    Ok(Some((task, _))) => page.push((cursor, task)),
                    Ok(None) => {
                        self.unindex(&oid, &cursor.task_id, &position(cursor.timestamp_nanos)).await?;
                        stale += 1;
                    }
                    // A task that cannot be read back (it does not decode, or its events do not
                    // replay) is skipped, reported where it was found: it cannot break the page.
                    Err(A2aError::Internal(_)) => {}
                    Err(error) => return Err(error),
                }
            }
            if stale > 0 && attempt < ATTEMPTS {
                continue;
            }
            let more = page.len() > query.page_size;
            page.truncate(query.page_size);
            let next = if more { page.last().map(|(cursor, _)| cursor.clone()) } else { None };
            let tasks = page.into_iter().map(|(_, task)| Arc::unwrap_or_clone(task)).collect();
            return Ok(TaskPage { tasks, next, total: total.saturating_sub(stale) });
        }
    }
}

/// `{total, member…}` from [`scripts::LIST`].
fn parse_list_reply(reply: Value) -> Result<(usize, Vec<Cursor>), A2aError> {
    let malformed = || A2aError::Internal("malformed ListTasks index reply from Redis".into());
    let Value::Array(reply) = reply else { return Err(malformed()) };
    let mut values = reply.into_iter();
    let total = match values.next() {
        Some(Value::Int(total)) => usize::try_from(total).map_err(|_| malformed())?,
        _ => return Err(malformed()),
    };
    let mut members = Vec::new();
    for value in values {
        let Value::BulkString(bytes) = value else { return Err(malformed()) };
        // A member this code did not write (or garbage) is skipped, not fatal.
        if let Some(cursor) = std::str::from_utf8(&bytes).ok().and_then(parse_member) {
            members.push(cursor);
        }
    }
    Ok((total, members))
}
