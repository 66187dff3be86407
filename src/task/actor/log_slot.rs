//! A live task's event log, made when something first reads it.
//!
//! A log that no feed has ever read keeps no event (`log/`): it only numbers them. So until
//! a subscriber or a turn asks for it, the actor keeps that number itself, and a task waiting
//! for its client that nobody follows (most of them) holds no log at all (192 bytes).
use std::sync::{Arc, OnceLock};

use crate::error::A2aError;
use crate::proto::StreamResponse;
use crate::task::TaskEnv;
use crate::task::log::{EventLog, TaskEvent};

pub(super) struct LogSlot {
    log: OnceLock<Arc<EventLog>>,
    /// The newest event's number while there is no log (then the log's counts).
    last_seq: u64,
}

impl LogSlot {
    /// No log yet; the next event is `last_seq + 1`.
    pub fn starting_at(last_seq: u64) -> Self {
        Self { log: OnceLock::new(), last_seq }
    }

    /// The log, made now if there is none (numbering on from here), for a reader.
    pub fn follow(&self, task_id: &Arc<str>, env: &TaskEnv) -> &Arc<EventLog> {
        self.log.get_or_init(|| {
            let log = EventLog::starting_at(task_id.clone(), env.log_capacity, env.log_bytes, self.last_seq);
            Arc::new(log)
        })
    }

    /// The newest event's number.
    pub fn last_seq(&self) -> u64 {
        self.log.get().map_or(self.last_seq, |log| log.last_seq())
    }

    /// Whether a feed reads the log or ever did ([`EventLog::followed`]).
    pub fn followed(&self) -> bool {
        self.log.get().is_some_and(|log| log.followed())
    }

    /// How many feeds read the log now.
    pub fn feeds(&self) -> usize {
        self.log.get().map_or(0, |log| log.feeds())
    }

    /// Numbers an event nobody reads ([`EventLog::skip`]).
    pub fn skip(&mut self) {
        match self.log.get() {
            Some(log) => log.skip(),
            None => self.last_seq += 1,
        }
    }

    /// Appends an event, numbering it ([`EventLog::append`]); with no log it is only numbered
    /// (for the webhooks or a fleet's journal: no feed ever read this log, so it would keep none).
    pub fn append(&mut self, response: StreamResponse) -> Arc<TaskEvent> {
        match self.log.get() {
            Some(log) => log.append(response),
            None => {
                self.last_seq += 1;
                Arc::new(TaskEvent::new(self.last_seq, response))
            }
        }
    }

    /// Appends an event the actor numbered itself ([`EventLog::append_numbered`]).
    pub fn append_numbered(&mut self, event: Arc<TaskEvent>) {
        match self.log.get() {
            Some(log) => log.append_numbered(event),
            None => self.last_seq = event.seq,
        }
    }

    /// Ends the stream ([`EventLog::close`]); with no log there is no reader to tell.
    pub fn close(&self) {
        if let Some(log) = self.log.get() {
            log.close();
        }
    }

    /// Ends the stream early ([`EventLog::close_with`]).
    pub fn close_with(&self, error: A2aError) {
        if let Some(log) = self.log.get() {
            log.close_with(error);
        }
    }
}
