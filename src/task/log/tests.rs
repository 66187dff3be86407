//! The event log's checks: order, fan-out, bounds and lag.
use super::*;
use crate::proto::{TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent};

fn status(state: TaskState) -> StreamResponse {
    let update = TaskStatusUpdateEvent {
        task_id: "t".into(),
        status: Some(TaskStatus { state: state as i32, ..Default::default() }),
        ..Default::default()
    };
    StreamResponse { payload: Some(Payload::StatusUpdate(update)) }
}

fn chunk() -> StreamResponse {
    StreamResponse { payload: Some(Payload::ArtifactUpdate(TaskArtifactUpdateEvent::default())) }
}

#[tokio::test]
async fn a_feed_yields_every_event_after_its_cursor_then_ends() {
    let log = Arc::new(EventLog::new("t".into(), 16, usize::MAX));
    let count = Arc::new(SubscriberCount::default());
    log.append(status(TaskState::Working));
    let mut feed = Feed::new(log.clone(), log.last_seq(), count.clone());
    assert_eq!(count.get(), 1);
    log.append(chunk());
    log.append(status(TaskState::Completed));
    log.close();
    assert_eq!(feed.next().await.unwrap().unwrap().seq, 2);
    let last = feed.next().await.unwrap().unwrap();
    assert_eq!((last.seq, last.state()), (3, Some(TaskState::Completed)));
    assert!(feed.next().await.is_none());
    drop(feed);
    assert_eq!(count.get(), 0);
}

#[tokio::test]
async fn a_feed_behind_the_ring_gets_an_explicit_lag_error() {
    let log = Arc::new(EventLog::new("t".into(), 4, usize::MAX));
    let mut feed = Feed::new(log.clone(), 0, Arc::new(SubscriberCount::default()));
    for _ in 0..10 {
        log.append(chunk());
    }
    match feed.next().await {
        Some(Err(A2aError::SubscriberLagged { missed, .. })) => assert_eq!(missed, 6),
        other => panic!("expected a lag error, got {other:?}"),
    }
    assert!(feed.next().await.is_none(), "nothing after the error");
}

#[tokio::test]
async fn a_waiting_feed_wakes_on_append() {
    let log = Arc::new(EventLog::new("t".into(), 4, usize::MAX));
    let mut feed = Feed::new(log.clone(), 0, Arc::new(SubscriberCount::default()));
    let reader = tokio::spawn(async move { feed.next().await.map(|e| e.map(|e| e.seq)) });
    tokio::task::yield_now().await;
    log.append(chunk());
    assert_eq!(reader.await.unwrap(), Some(Ok(1)));
}

#[tokio::test]
async fn the_byte_budget_bounds_the_log_but_keeps_the_newest_event() {
    let budget = 3 * footprint(&TaskEvent::new(1, status(TaskState::Working)));
    let log = Arc::new(EventLog::new("t".into(), 1000, budget));
    let mut feed = Feed::new(log.clone(), 0, Arc::new(SubscriberCount::default()));
    for _ in 0..10 {
        log.append(status(TaskState::Working));
    }
    match feed.next().await {
        Some(Err(A2aError::SubscriberLagged { missed, .. })) => assert_eq!(missed, 7, "3 events fit"),
        other => panic!("expected a lag error, got {other:?}"),
    }
    let tiny = Arc::new(EventLog::new("t".into(), 1000, 1));
    let mut feed = Feed::new(tiny.clone(), 0, Arc::new(SubscriberCount::default()));
    tiny.append(status(TaskState::Working));
    assert_eq!(feed.next().await.unwrap().unwrap().seq, 1, "the newest event always stays");
}

#[tokio::test]
async fn a_followed_log_keeps_its_events_for_resuming() {
    let log = Arc::new(EventLog::starting_at("t".into(), 4, usize::MAX, 1));
    drop(Feed::new(log.clone(), 1, Arc::new(SubscriberCount::default())));
    for _ in 0..3 {
        log.append(chunk());
    }
    assert!(log.holds_after(1) && log.holds_after(3) && log.holds_after(4));
    assert!(!log.holds_after(5), "not from the future");
    for _ in 0..3 {
        log.append(chunk());
    }
    assert!(!log.holds_after(2), "events 3..=7 are left");
    assert!(log.holds_after(3));
    let mut feed = Feed::new(log.clone(), 5, Arc::new(SubscriberCount::default()));
    assert_eq!(feed.next().await.unwrap().unwrap().seq, 6);
    assert!(!feed.move_to(2), "not back past the log's reach");
    assert!(feed.move_to(4) && feed.move_to(9), "back within it, and forward");
    assert_eq!(feed.cursor(), 9);
}

#[tokio::test]
async fn a_log_nobody_reads_keeps_no_events() {
    let log = Arc::new(EventLog::new("t".into(), 16, usize::MAX));
    log.append(status(TaskState::Working));
    log.append(chunk());
    assert_eq!(log.ring.read().unwrap().events.len(), 0);
    let mut feed = Feed::new(log.clone(), log.last_seq(), Arc::new(SubscriberCount::default()));
    log.append(status(TaskState::Completed));
    log.close();
    assert_eq!(feed.next().await.unwrap().unwrap().seq, 3, "a feed gets what follows it");
    assert!(feed.next().await.is_none());
    drop(feed);
    log.append(chunk());
    assert_eq!(log.ring.read().unwrap().events.len(), 2, "kept once followed, for resuming");
}

#[test]
fn cached_encodings_are_the_canonical_ones() {
    let event = TaskEvent::new(1, status(TaskState::Working));
    assert_eq!(event.proto_bytes(), prost::Message::encode_to_vec(&event.response));
    let json = event.json(true, crate::protojson::encode_string);
    assert_eq!(&*json, crate::protojson::encode_string(&event.response));
    let again = event.json(true, |_| unreachable!("encoded once"));
    assert!(Arc::ptr_eq(&json, &again));
}
