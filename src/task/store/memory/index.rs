//! The ListTasks indexes of the memory store: per owner, every task and each context's tasks,
//! in the ListTasks order, each also split by state. A page is a seek and a short walk in the
//! one index that matches the filters exactly, and its total a count in the same index, so a
//! page costs O(log n + page size) whatever the owner, or anyone else, has stored.
//!
//! Every combination of filters has an index of exactly its tasks (owner or owner+context,
//! each whole or by state), and `statusTimestampAfter` is a prefix of any of them, so there is
//! no filter left to apply while walking and no worst case beyond O(log n + page size). The
//! price is memory: a task sits in four ordered sets, about 4 × 64 bytes plus its id once.
use std::collections::HashMap;
use std::sync::Arc;

use super::ranked::Ranked;
use crate::call::Owner;
use crate::proto::TaskState;
use crate::task::store::{Cursor, TaskQuery};

/// Where a task sits in the ListTasks order: status timestamp descending, then id ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// Status timestamp in nanoseconds (as [`crate::task::store::status_nanos`]).
    pub nanos: i128,
    /// The id's first eight bytes, big-endian (zero-padded): ordered as the ids are, so
    /// tasks of the same millisecond (many, under load) mostly compare without reading the id
    /// from its own allocation.
    head: u64,
    /// The task id, shared with the store's record.
    pub id: Arc<str>,
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .nanos
            .cmp(&self.nanos)
            .then_with(|| self.head.cmp(&other.head))
            .then_with(|| self.id.cmp(&other.id))
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Position {
    /// The position of task `id` whose status timestamp is `nanos`.
    pub fn new(nanos: i128, id: Arc<str>) -> Self {
        let mut head = [0; 8];
        let len = id.len().min(8);
        head[..len].copy_from_slice(&id.as_bytes()[..len]);
        Self { nanos, head: u64::from_be_bytes(head), id }
    }

    /// Whether this position comes at or before `cursor`, i.e. was on an earlier page.
    fn not_after(&self, cursor: &Cursor) -> bool {
        (std::cmp::Reverse(self.nanos), &*self.id) <= cursor.sort_key()
    }

    fn cursor(&self) -> Cursor {
        Cursor { timestamp_nanos: self.nanos, task_id: self.id.to_string() }
    }
}

/// Where one task is indexed: what the index needs to find its entries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its place in the order.
    pub position: Position,
    /// Its state (as `state_of`, so unknown numbers are UNSPECIFIED).
    pub state: TaskState,
    /// Its context.
    pub context_id: String,
}

/// Task states a listing splits by: every `TaskState` number (`state_of` maps unknown
/// numbers to UNSPECIFIED, 0).
const STATES: usize = TaskState::AuthRequired as usize + 1;

/// One ordered list of tasks, and the same tasks split by state: an array by state number, as
/// every save moves a task between two of them (no hashing, no map allocated per context).
#[derive(Default)]
struct Listing {
    all: Ranked<Position>,
    by_state: [Ranked<Position>; STATES],
}

fn slot(state: TaskState) -> usize {
    (state as usize).min(STATES - 1)
}

impl Listing {
    fn insert(&mut self, position: &Position, state: TaskState) {
        self.all.insert(position.clone());
        self.by_state[slot(state)].insert(position.clone());
    }

    fn remove(&mut self, position: &Position, state: TaskState) {
        self.all.remove(position);
        self.by_state[slot(state)].remove(position);
    }

    /// The list that holds exactly the tasks of `state` (any state: `None`).
    fn select(&self, state: Option<TaskState>) -> &Ranked<Position> {
        match state {
            None => &self.all,
            Some(state) => &self.by_state[slot(state)],
        }
    }
}

/// One owner's indexes.
#[derive(Default)]
struct OwnerIndex {
    all: Listing,
    contexts: HashMap<String, Listing>,
}

/// A page of positions picked from the index: the store then looks the tasks up.
pub struct PagePositions {
    /// The page, in order.
    pub ids: Vec<Arc<str>>,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
    /// Matching tasks before paging.
    pub total: usize,
}

/// Every owner's indexes.
#[derive(Default)]
pub struct Indexes {
    owners: HashMap<Owner, OwnerIndex>,
}

impl Indexes {
    /// Adds a task that is not indexed yet.
    pub fn insert(&mut self, owner: &Owner, entry: &Entry) {
        let index = match self.owners.get_mut(owner) {
            Some(index) => index,
            None => self.owners.entry(owner.clone()).or_default(),
        };
        index.all.insert(&entry.position, entry.state);
        let context = match index.contexts.get_mut(&entry.context_id) {
            Some(context) => context,
            None => index.contexts.entry(entry.context_id.clone()).or_default(),
        };
        context.insert(&entry.position, entry.state);
    }

    /// Takes a task out; empty lists, contexts and owners go with it, so nothing is kept for
    /// tasks that are gone.
    pub fn remove(&mut self, owner: &Owner, entry: &Entry) {
        let Some(index) = self.owners.get_mut(owner) else { return };
        index.all.remove(&entry.position, entry.state);
        if let Some(context) = index.contexts.get_mut(&entry.context_id) {
            context.remove(&entry.position, entry.state);
            if context.all.is_empty() {
                index.contexts.remove(&entry.context_id);
            }
        }
        if index.all.all.is_empty() {
            self.owners.remove(owner);
        }
    }

    /// The positions of one page of `owner`'s tasks matching `query`, and the total.
    pub fn page(&self, owner: &Owner, query: &TaskQuery) -> PagePositions {
        let empty = PagePositions { ids: Vec::new(), next: None, total: 0 };
        let Some(index) = self.owners.get(owner) else { return empty };
        let listing = match &query.context_id {
            Some(context_id) => index.contexts.get(context_id),
            None => Some(&index.all),
        };
        let Some(list) = listing.map(|l| l.select(query.state)) else { return empty };
        let after_nanos =
            query.status_after.as_ref().map(|t| t.seconds as i128 * 1_000_000_000 + t.nanos as i128);
        let recent_enough = |p: &Position| after_nanos.is_none_or(|after| p.nanos >= after);
        let total = match after_nanos {
            Some(_) => list.count_while(recent_enough),
            None => list.len(),
        };
        let from = list.iter_from(|p| query.after.as_ref().is_some_and(|after| p.not_after(after)));
        let mut page: Vec<&Position> =
            from.take_while(|p| recent_enough(p)).take(query.page_size.saturating_add(1)).collect();
        let more = page.len() > query.page_size;
        page.truncate(query.page_size);
        let next = if more { page.last().map(|p| p.cursor()) } else { None };
        PagePositions { ids: page.into_iter().map(|p| p.id.clone()).collect(), next, total }
    }
}
