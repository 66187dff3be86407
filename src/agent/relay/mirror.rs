//! What of an upstream task this server's task already shows, so that a stream resumed after a
//! break, or a task read by polling, adds only what is new: no event is relayed twice, none is
//! lost.
use crate::proto::{Artifact, Task, TaskState, TaskStatus};

/// The relayed view: the status (state, message id, timestamp) and each artifact's part count.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Mirror {
    state: i32,
    status_message: Option<String>,
    status_stamp: Option<pbjson_types::Timestamp>,
    artifacts: Vec<(String, usize)>,
}

/// One change a snapshot brings, to be relayed as an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Catch {
    /// An artifact: whole (`append` false) or the parts past those already shown.
    Artifact {
        /// The artifact, or its new parts.
        artifact: Artifact,
        /// Whether the parts are added to those shown.
        append: bool,
        /// Whether the upstream task is over (no more chunks can come).
        last_chunk: bool,
    },
    /// A new status.
    Status(TaskStatus),
}

impl Mirror {
    /// The view of what `task` (this server's) already shows.
    pub fn of(task: &Task) -> Self {
        let mut mirror = Self::default();
        if let Some(status) = &task.status {
            mirror.status(status);
        }
        for artifact in &task.artifacts {
            mirror.artifacts.push((artifact.artifact_id.clone(), artifact.parts.len()));
        }
        mirror
    }

    /// The state shown.
    pub fn state(&self) -> TaskState {
        TaskState::try_from(self.state).unwrap_or(TaskState::Unspecified)
    }

    /// Whether the task is terminal or waits for the client's next message: a relay's execution
    /// is over. AUTH_REQUIRED is not: the upstream goes on by itself once authorized out of band,
    /// so it is followed further.
    pub fn settled(&self) -> bool {
        matches!(
            self.state(),
            TaskState::Completed
                | TaskState::Failed
                | TaskState::Canceled
                | TaskState::Rejected
                | TaskState::InputRequired
        )
    }

    /// Notes a status as shown.
    pub fn status(&mut self, status: &TaskStatus) {
        self.state = status.state;
        self.status_message = status.message.as_ref().map(|m| m.message_id.clone());
        self.status_stamp = status.timestamp;
    }

    /// Whether the status shown differs from `before`'s (state, message or time): the upstream
    /// has acted since.
    pub fn status_moved_from(&self, before: &Mirror) -> bool {
        (self.state, &self.status_message, &self.status_stamp)
            != (before.state, &before.status_message, &before.status_stamp)
    }

    /// Notes an artifact chunk as shown.
    pub fn artifact(&mut self, artifact: &Artifact, append: bool) {
        let parts = artifact.parts.len();
        match self.artifacts.iter_mut().find(|(id, _)| *id == artifact.artifact_id) {
            Some((_, shown)) if append => *shown += parts,
            Some((_, shown)) => *shown = parts,
            None => self.artifacts.push((artifact.artifact_id.clone(), parts)),
        }
    }

    /// What `snapshot` (the upstream's task) holds that is not shown yet: artifacts first (a
    /// terminal status closes the task to them), then the status if it changed. An artifact
    /// with fewer parts than shown was replaced upstream, and is relayed whole.
    pub fn catch_up(&self, snapshot: &Task) -> Vec<Catch> {
        let last_chunk = {
            let mut probe = self.clone();
            if let Some(status) = &snapshot.status {
                probe.status(status);
            }
            probe.settled()
        };
        let mut catch = Vec::new();
        for artifact in &snapshot.artifacts {
            let shown = self.artifacts.iter().find(|(id, _)| *id == artifact.artifact_id).map(|(_, n)| *n);
            match shown {
                Some(n) if n == artifact.parts.len() => {}
                Some(n) if n < artifact.parts.len() => catch.push(Catch::Artifact {
                    artifact: Artifact { parts: artifact.parts[n..].to_vec(), ..artifact.clone() },
                    append: true,
                    last_chunk,
                }),
                _ => catch.push(Catch::Artifact { artifact: artifact.clone(), append: false, last_chunk }),
            }
        }
        if let Some(status) = &snapshot.status {
            let message = status.message.as_ref().map(|m| m.message_id.clone());
            if status.state != self.state || message != self.status_message {
                catch.push(Catch::Status(status.clone()));
            }
        }
        catch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{text_artifact, text_part};

    fn status(state: TaskState) -> TaskStatus {
        TaskStatus { state: state as i32, message: None, timestamp: None }
    }

    #[test]
    fn a_snapshot_adds_only_the_parts_and_status_not_yet_shown() {
        let mut shown = Mirror::default();
        shown.status(&status(TaskState::Working));
        shown.artifact(&text_artifact("out", "out", "chunk 0"), false);
        shown.artifact(&text_artifact("out", "out", "chunk 1"), true);

        let mut out = text_artifact("out", "out", "chunk 0");
        out.parts.extend([text_part("chunk 1"), text_part("chunk 2")]);
        let snapshot = Task {
            status: Some(status(TaskState::Working)),
            artifacts: vec![out, text_artifact("new", "new", "n")],
            ..Default::default()
        };
        let catch = shown.catch_up(&snapshot);
        assert_eq!(catch.len(), 2, "{catch:?}");
        let Catch::Artifact { artifact, append: true, last_chunk: false } = &catch[0] else {
            panic!("{catch:?}")
        };
        assert_eq!(artifact.parts, vec![text_part("chunk 2")]);
        assert!(matches!(&catch[1], Catch::Artifact { append: false, .. }));

        let done = Task { status: Some(status(TaskState::Completed)), ..snapshot.clone() };
        let catch = shown.catch_up(&done);
        assert!(matches!(catch.last(), Some(Catch::Status(s)) if s.state == TaskState::Completed as i32));
        assert!(matches!(&catch[0], Catch::Artifact { last_chunk: true, .. }));
    }

    #[test]
    fn a_snapshot_equal_to_what_is_shown_adds_nothing() {
        let mut shown = Mirror::default();
        shown.status(&status(TaskState::InputRequired));
        shown.artifact(&text_artifact("a", "a", "x"), false);
        let snapshot = Task {
            status: Some(status(TaskState::InputRequired)),
            artifacts: vec![text_artifact("a", "a", "x")],
            ..Default::default()
        };
        assert!(shown.catch_up(&snapshot).is_empty());
        assert!(shown.settled());
        let mut auth = shown.clone();
        auth.status(&status(TaskState::AuthRequired));
        assert!(!auth.settled(), "AUTH_REQUIRED is followed further");
        assert!(auth.status_moved_from(&shown));
    }
}
