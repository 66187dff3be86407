//! SendMessage claims on a single node go out pipelined when they come together
//! (`pipelined.rs`): each still gets its own answer, exactly one of two claims of one
//! `messageId` wins, and a pipeline that cannot be sent fails every claim in it, without a hang.
use std::time::Duration;

use a2a_server::call::Owner;
use a2a_server::task::store::redis::Timeouts;
use a2a_server::task::store::{RedisStore, Retention, SentRecord, SentState, TaskStore};
use futures::future::join_all;

use super::redis_server::RedisServer;
use super::suite::owner;
use super::{BOUND, redis_store};

/// Message ids claimed at once, each by two calls.
const MESSAGES: usize = 100;

/// Call `caller`'s claim of message `i`.
fn claim(i: usize, caller: &str) -> SentRecord {
    let state =
        SentState::Claimed { task_id: format!("t{i}-{caller}"), claim: caller.to_owned(), alive_ms: 1 };
    SentRecord { fingerprint: [7; 32], state }
}

/// Claims every message of `range` twice (callers `a` and `b`) at once: what each got.
async fn claim_all(
    store: &RedisStore,
    who: &Owner,
    range: std::ops::Range<usize>,
) -> Vec<Result<Option<SentRecord>, String>> {
    let claims =
        range.flat_map(|i| ["a", "b"].map(move |caller| (i, caller))).map(|(i, caller)| async move {
            let (message_id, record) = (format!("m{i}"), claim(i, caller));
            let claimed = store.claim_sent(who, &message_id, &record);
            tokio::time::timeout(BOUND, claimed).await.expect("no hang").map_err(|e| e.reason().to_owned())
        });
    join_all(claims).await
}

#[tokio::test]
async fn claims_that_come_together_each_get_their_own_answer() {
    let Some(server) = RedisServer::start() else { return };
    let store = redis_store(&server.url(), Retention::default(), Timeouts::default()).await;
    let alice = owner("alice");
    let answers = claim_all(&store, &alice, 0..MESSAGES).await;
    for (i, pair) in answers.chunks_exact(2).enumerate() {
        let (a, b) = (pair[0].clone().unwrap(), pair[1].clone().unwrap());
        match (a, b) {
            (None, Some(held)) => assert_eq!(held, claim(i, "a"), "m{i}: b sees a's claim"),
            (Some(held), None) => assert_eq!(held, claim(i, "b"), "m{i}: a sees b's claim"),
            other => panic!("m{i}: exactly one claim wins: {other:?}"),
        }
    }
    // Another owner's same ids are its own.
    let bob = owner("bob");
    for i in 0..3 {
        assert_eq!(store.claim_sent(&bob, &format!("m{i}"), &claim(i, "c")).await.unwrap(), None);
    }
}

#[tokio::test]
async fn a_pipeline_that_cannot_be_sent_fails_every_claim_in_it_and_the_next_goes() {
    let Some(mut server) = RedisServer::start() else { return };
    let timeouts = Timeouts { connect: Duration::from_millis(500), command: Duration::from_millis(500) };
    let store = redis_store(&server.url(), Retention::default(), timeouts).await;
    let alice = owner("alice");
    assert_eq!(claim_all(&store, &alice, 0..1).await[0], Ok(None), "Redis up");

    server.stop();
    let failed = claim_all(&store, &alice, 1..MESSAGES).await;
    assert!(failed.iter().all(|c| *c == Err("UNAVAILABLE".to_owned())), "{failed:?}");

    server.restart();
    let deadline = tokio::time::Instant::now() + BOUND;
    while claim_all(&store, &alice, MESSAGES..MESSAGES + 1).await[0].is_err() {
        assert!(tokio::time::Instant::now() < deadline, "no recovery after the restart");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answers = claim_all(&store, &alice, MESSAGES + 1..2 * MESSAGES).await;
    let won = answers.iter().filter(|c| matches!(c, Ok(None))).count();
    assert_eq!(won, MESSAGES - 1, "one of each pair: {answers:?}");
}
