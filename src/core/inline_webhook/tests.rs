//! The inline webhook's guard: what a call that goes, is refused, or is a retry leaves behind.
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;

use super::*;
use crate::agent::{AgentExecutor, EventSink, RequestContext};
use crate::call::CallContext;
use crate::core::CoreSettings;
use crate::core::send::SendOutcome;
use crate::proto::TaskState;
use crate::proto::stream_response::Payload;
use crate::proto::{
    GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest, Task,
};
use crate::push::PushSettings;
use crate::push::ssrf::Policy;
use crate::task::state_of;
use crate::task::store::{
    MemoryStore, PushConfigLimits, PushRegistration, Retention, SentRecord, SentState, TaskPage, TaskQuery,
    TaskStore,
};

/// Answers every message directly (after `delay`), or, when `makes_tasks`, works on its
/// task (a first event) and completes it once `gate` opens (at once without one); notes the
/// task id the message has.
#[derive(Default)]
struct Replier {
    ids: Mutex<Vec<String>>,
    delay: Duration,
    makes_tasks: bool,
    gate: Option<Arc<Notify>>,
}

#[async_trait::async_trait]
impl AgentExecutor for Replier {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        self.ids.lock().unwrap().push(ctx.task_id.clone());
        if !self.makes_tasks {
            tokio::time::sleep(self.delay).await;
            let _ = events.reply("hello").await;
            return Ok(());
        }
        let _ = events.working(None).await;
        if let Some(gate) = &self.gate {
            gate.notified().await;
        }
        let _ = events.complete(Some("done")).await;
        Ok(())
    }
}

fn request_with_webhook() -> SendMessageRequest {
    let message = Message {
        message_id: crate::proto::new_id(),
        role: Role::User as i32,
        parts: vec![Part {
            content: Some(crate::proto::part::Content::Text("hi".into())),
            ..Default::default()
        }],
        ..Default::default()
    };
    let webhook = TaskPushNotificationConfig { url: "http://127.0.0.1:9/hook".into(), ..Default::default() };
    SendMessageRequest {
        message: Some(message),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(webhook),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn core_with_webhooks(agent: Arc<dyn AgentExecutor>) -> (Core, Arc<dyn TaskStore>) {
    core_on(agent, Arc::new(MemoryStore::new(Retention::default())))
}

fn core_on(agent: Arc<dyn AgentExecutor>, store: Arc<dyn TaskStore>) -> (Core, Arc<dyn TaskStore>) {
    let settings = CoreSettings {
        push_notifications: true,
        push: PushSettings { policy: Policy::with_allowlist(true, &[]), ..Default::default() },
        ..Default::default()
    };
    (Core::new(agent, store.clone(), settings), store)
}

#[tokio::test]
async fn a_direct_reply_leaves_no_task_and_no_webhook_behind() {
    let agent = Arc::new(Replier::default());
    let (core, store) = core_with_webhooks(agent.clone());
    let call = CallContext::default();
    let owner = call.owner("").unwrap();

    let outcome = core.send_message_shared(&call, request_with_webhook()).await.unwrap();
    assert!(matches!(outcome, SendOutcome::Message(m) if m.task_id.is_empty()));
    let mut stream = core.send_streaming_message(&call, request_with_webhook()).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(matches!(first.response.payload, Some(Payload::Message(_))));
    assert!(stream.next().await.is_none(), "one message, then the end");

    let ids = agent.ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 2);
    assert_eq!(core.live_tasks(), 0, "nothing registered");
    for id in ids {
        assert!(store.get(&owner, &id).await.unwrap().is_none(), "nothing stored");
        assert!(store.push_configs(&owner, &id).await.unwrap().is_empty(), "the webhook is forgotten");
        let get = core.get_task(&call, GetTaskRequest { id: id.clone(), ..Default::default() }).await;
        assert!(matches!(get, Err(A2aError::TaskNotFound(_))));
    }
    let list = core.list_tasks(&call, ListTasksRequest::default()).await.unwrap();
    assert_eq!(list.total_size, 0);
}

/// A caller that gives up while the agent is still deciding how to answer leaves no webhook
/// behind when the answer is a direct reply: nothing else would ever forget it.
#[tokio::test]
async fn a_call_that_goes_before_a_direct_reply_leaves_no_webhook_behind() {
    let agent = Arc::new(Replier { delay: Duration::from_secs(1), ..Default::default() });
    let (core, store) = core_with_webhooks(agent.clone());
    let call = CallContext::default();
    let owner = call.owner("").unwrap();

    let sent = core.send_message_shared(&call, request_with_webhook());
    let given_up = tokio::time::timeout(Duration::from_millis(50), sent).await;
    assert!(given_up.is_err(), "the caller went first");
    let id = agent.ids.lock().unwrap()[0].clone();
    assert_eq!(store.push_configs(&owner, &id).await.unwrap().len(), 1, "registered before the agent ran");
    for _ in 0..200 {
        if store.push_configs(&owner, &id).await.unwrap().is_empty() {
            assert!(store.get(&owner, &id).await.unwrap().is_none(), "nothing stored");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the webhook of a task that never existed is still registered after 4 s");
}

/// A memory store whose webhook registrations are answered only `delay_ms` after they are
/// stored (as when a slow Redis's reply is on its way), noting the tasks they are for; with
/// `lose_replies`, each is stored and answered UNAVAILABLE (its reply lost).
struct SlowWebhooks {
    inner: MemoryStore,
    tasks: Mutex<Vec<String>>,
    delay_ms: AtomicU64,
    lose_replies: AtomicBool,
    /// The tasks whose webhook was deleted, in order, and what the test notes among them.
    log: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl TaskStore for SlowWebhooks {
    async fn save(&self, owner: &Owner, task: Arc<Task>) -> Result<(), A2aError> {
        self.inner.save(owner, task).await
    }
    async fn get(&self, owner: &Owner, task_id: &str) -> Result<Option<Arc<Task>>, A2aError> {
        self.inner.get(owner, task_id).await
    }
    async fn list(&self, owner: &Owner, query: &TaskQuery) -> Result<TaskPage, A2aError> {
        self.inner.list(owner, query).await
    }
    async fn put_push_config(
        &self,
        owner: &Owner,
        registration: &PushRegistration,
        limits: PushConfigLimits,
    ) -> Result<(), A2aError> {
        self.tasks.lock().unwrap().push(registration.config.task_id.clone());
        self.inner.put_push_config(owner, registration, limits).await?;
        tokio::time::sleep(Duration::from_millis(self.delay_ms.load(Ordering::Relaxed))).await;
        if self.lose_replies.load(Ordering::Relaxed) {
            return Err(A2aError::Unavailable("the store's reply was lost".into()));
        }
        Ok(())
    }
    async fn push_configs(&self, owner: &Owner, task_id: &str) -> Result<Vec<PushRegistration>, A2aError> {
        self.inner.push_configs(owner, task_id).await
    }
    async fn delete_push_config(&self, owner: &Owner, task_id: &str, id: &str) -> Result<(), A2aError> {
        self.inner.delete_push_config(owner, task_id, id).await?;
        self.log.lock().unwrap().push(task_id.to_owned());
        Ok(())
    }
    async fn claim_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        record: &SentRecord,
    ) -> Result<Option<SentRecord>, A2aError> {
        self.inner.claim_sent(owner, message_id, record).await
    }
    async fn swap_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        old: &SentRecord,
        new: Option<&SentRecord>,
    ) -> Result<bool, A2aError> {
        self.inner.swap_sent(owner, message_id, old, new).await
    }
}

/// A core whose agent completes each task (once `gate` opens), on a store whose webhooks are
/// slow to store.
struct Slow {
    agent: Arc<Replier>,
    slow: Arc<SlowWebhooks>,
    core: Core,
    store: Arc<dyn TaskStore>,
}

impl Slow {
    fn new(gate: Option<Arc<Notify>>) -> Self {
        let agent = Arc::new(Replier { makes_tasks: true, gate, ..Default::default() });
        let slow = Arc::new(SlowWebhooks {
            inner: MemoryStore::new(Retention::default()),
            tasks: Mutex::default(),
            delay_ms: AtomicU64::new(0),
            lose_replies: AtomicBool::new(false),
            log: Mutex::default(),
        });
        let (core, store) = core_on(agent.clone(), slow.clone());
        Self { agent, slow, core, store }
    }
}

/// Waits until `store` holds no webhook of `task_id` (the guard forgets it in a task of its
/// own).
async fn forgotten(store: &dyn TaskStore, owner: &Owner, task_id: &str) {
    for _ in 0..200 {
        if store.push_configs(owner, task_id).await.unwrap().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the webhook of task {task_id}, which never existed, is still registered after 4 s");
}

/// Waits until no claim is left on `owner`'s `message_id` (a refused call's goes in a task of
/// its own).
async fn no_claim_on(store: &dyn TaskStore, owner: &Owner, message_id: &str) {
    let probe = SentRecord {
        fingerprint: [0; 32],
        state: SentState::Claimed { task_id: "probe".into(), claim: "probe".into(), alive_ms: 0 },
    };
    let mut left = None;
    for _ in 0..200 {
        left = store.claim_sent(owner, message_id, &probe).await.unwrap();
        if left.is_none() {
            assert!(store.swap_sent(owner, message_id, &probe, None).await.unwrap());
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("a claim is left on message {message_id} after 4 s: {left:?}");
}

/// A call whose client goes while its new task's webhook is being stored (stored, its reply
/// not back yet) leaves no claim on its message (a retry of it ran only after waiting for such a
/// claim to go stale, and in Redis the claim stayed the retention age) and no webhook, and its
/// agent never ran.
#[tokio::test]
async fn a_call_that_goes_while_its_webhook_is_stored_leaves_no_claim_behind() {
    let Slow { agent, slow, core, store } = Slow::new(None);
    let call = CallContext::default();
    let owner = call.owner("").unwrap();
    let request = request_with_webhook();
    let message_id = request.message.as_ref().unwrap().message_id.clone();

    // The reply never comes back while the call waits: it goes first, however slow the machine.
    slow.delay_ms.store(3_600_000, Ordering::Relaxed);
    let sent = core.send_message_shared(&call, request.clone());
    let given_up = tokio::time::timeout(Duration::from_millis(100), sent).await;
    assert!(given_up.is_err(), "the caller went first");
    let task_id = slow.tasks.lock().unwrap()[0].clone();
    forgotten(&*store, &owner, &task_id).await;
    assert_eq!(*slow.log.lock().unwrap(), std::slice::from_ref(&task_id), "the stored webhook was forgotten");
    assert!(agent.ids.lock().unwrap().is_empty(), "the agent never ran");
    assert!(store.get(&owner, &task_id).await.unwrap().is_none(), "nothing stored");
    no_claim_on(&*store, &owner, &message_id).await;

    // Its retry runs at once, as a first call.
    slow.delay_ms.store(0, Ordering::Relaxed);
    let retried = tokio::time::timeout(Duration::from_secs(3), core.send_message_shared(&call, request));
    let outcome = retried.await.expect("the retry waited for a claim to go stale").unwrap();
    assert!(matches!(outcome, SendOutcome::Task(_)));
    assert_eq!(agent.ids.lock().unwrap().len(), 1);
}

/// A first call whose webhook the store refuses UNAVAILABLE (after the config landed: its
/// reply lost) is answered so, and leaves neither its webhook nor a claim: nothing ran, so
/// its retry runs at once (a kept claim held it up 6 s, and stayed an hour in Redis).
#[tokio::test]
async fn a_webhook_refused_unavailable_leaves_no_claim_and_no_webhook() {
    let Slow { agent, slow, core, store } = Slow::new(None);
    let call = CallContext::default();
    let owner = call.owner("").unwrap();
    let request = request_with_webhook();
    let message_id = request.message.as_ref().unwrap().message_id.clone();

    slow.lose_replies.store(true, Ordering::Relaxed);
    let refused = core.send_message_shared(&call, request.clone()).await;
    assert!(matches!(refused, Err(A2aError::Unavailable(_))), "{:?}", refused.err());
    let task_id = slow.tasks.lock().unwrap()[0].clone();
    forgotten(&*store, &owner, &task_id).await;
    no_claim_on(&*store, &owner, &message_id).await;
    assert!(agent.ids.lock().unwrap().is_empty(), "the agent never ran");

    slow.lose_replies.store(false, Ordering::Relaxed);
    let retried = tokio::time::timeout(Duration::from_secs(3), core.send_message_shared(&call, request));
    let outcome = retried.await.expect("the retry waited for a claim to go stale").unwrap();
    assert!(matches!(outcome, SendOutcome::Task(_)));
}

/// A retry of a call whose task exists gets that task back (a blocking one, once it is
/// done), and the webhook it registered before its claim found the first call (for a task id
/// that never comes to be) is forgotten at once, not held in the push quota while the retry
/// waits; the first call's webhook stays.
#[tokio::test]
async fn a_retry_forgets_the_webhook_it_registered_for_a_task_it_does_not_make() {
    let gate = Arc::new(Notify::new());
    let Slow { agent, slow, core, store } = Slow::new(Some(gate.clone()));
    let call = CallContext::default();
    let owner = call.owner("").unwrap();
    let request = request_with_webhook();
    let mut at_once = request.clone();
    at_once.configuration.as_mut().unwrap().return_immediately = true;

    let first = core.send_message_shared(&call, at_once).await.unwrap();
    let SendOutcome::Task(first) = first else { panic!("a task, not a message") };
    let first_id = first.into_parts().0.id.clone();
    // The first call's task runs until its retry's own webhook is forgotten.
    let released = async {
        for _ in 0..800 {
            let own = slow.tasks.lock().unwrap().get(1).cloned();
            if own.is_some_and(|own| slow.log.lock().unwrap().contains(&own)) {
                slow.log.lock().unwrap().push("released".into());
                gate.notify_one();
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        gate.notify_one();
    };
    let (retry, ()) = tokio::join!(core.send_message_shared(&call, request), released);
    let own = slow.tasks.lock().unwrap()[1].clone();
    let log = slow.log.lock().unwrap().clone();
    assert_eq!(log, [own, "released".into()], "the retry's webhook was held while it waited");
    let SendOutcome::Task(retry) = retry.unwrap() else { panic!("a task, not a message") };
    let retry = retry.into_parts().0;
    assert_eq!(retry.id, first_id, "the retry gets the first call's task");
    assert_eq!(state_of(retry.status.as_ref()), TaskState::Completed, "once it is done");
    assert_eq!(agent.ids.lock().unwrap().len(), 1, "the agent ran once");
    assert_eq!(slow.tasks.lock().unwrap()[0], first_id);
    assert_eq!(store.push_configs(&owner, &first_id).await.unwrap().len(), 1, "the first call's stays");
}

/// A guard dropped once the actor's answer, an error, was heard (while the call looked the
/// task up) cannot tell from the answer: it looks the task up, and keeps the webhook of a task
/// that exists. It once took "no answer left" for "the agent never ran".
#[tokio::test]
async fn a_guard_dropped_after_the_answer_keeps_the_webhook_of_a_task_that_exists() {
    let (core, store) = core_with_webhooks(Arc::new(Replier::default()));
    let owner = CallContext::default().owner("").unwrap();
    for exists in [true, false] {
        let task_id = crate::proto::new_id();
        if exists {
            let task = Task { id: task_id.clone(), context_id: task_id.clone(), ..Default::default() };
            store.save(&owner, Arc::new(task)).await.unwrap();
        }
        let config = TaskPushNotificationConfig {
            id: "hook".into(),
            task_id: task_id.clone(),
            url: "http://127.0.0.1:9/hook".into(),
            ..Default::default()
        };
        let registration = PushRegistration { config, version: ProtocolVersion::default() };
        store.put_push_config(&owner, &registration, PushConfigLimits::default()).await.unwrap();
        drop(Unborn {
            env: core.env.clone(),
            owner: owner.clone(),
            task_id: task_id.clone(),
            config_id: "hook".into(),
            actor: Some(Actor::Answered { direct_reply: false }),
            armed: true,
        });
        if !exists {
            forgotten(&*store, &owner, &task_id).await;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            store.push_configs(&owner, &task_id).await.unwrap().len(),
            1,
            "the live task's webhook stays"
        );
    }
}
