//! The `burst` scenario: what a busy task's event log costs, and that a burst is held whole for
//! a reader that did not keep up (our server only).
//!
//! Each of M tasks is SendStreamingMessage `stream E 0` (the demo agent emits E chunks as fast
//! as it can, about 20,000 a second). The client reads each stream's first item and then
//! nothing until every task has finished (GetTask), so the whole burst waits in the task's
//! event log (and, for a few events, in HTTP/2 buffers). RSS₀ before, RSS₁ then: per busy
//! task = (RSS₁−RSS₀)/M, per event = that / E. Then each stream is read to its end and must
//! hold all E chunks in order, ending COMPLETED: a lagging reader loses nothing.
use std::time::{Duration, Instant};

use a2a_server::proto::StreamResponse;
use a2a_server::proto::stream_response::Payload;

use crate::BoxError;
use crate::driver::{
    CALL_TIMEOUT, Conn, Sub, Target, fresh_message, is_terminal, send_request, task_state, texts,
};
use crate::memory::within;
use crate::process::settled_rss_kib;
use crate::report::{Better, Measured, Metric};

#[derive(Debug, Clone)]
pub struct BurstParams {
    /// Busy tasks at once.
    pub count: usize,
    /// Chunks in each task's burst.
    pub events: u64,
    pub timeout: Duration,
}

pub async fn burst(target: &Target, pid: u32, p: &BurstParams) -> Result<Measured, BoxError> {
    let m = p.count.max(1);
    let conns = target.connect_many(m).await?;
    let started = Instant::now();
    // Warm-up: one burst read as it comes, so the runtime's buffers exist before RSS₀.
    let warm = async {
        let (_, mut sub, seen) = start(&conns[0], p.events).await?;
        read_rest(&mut sub, p.events, seen).await
    };
    within("burst", p.timeout, "warm-up", warm).await?;
    let rss0 = settled_rss_kib(pid).await?;

    let held = within(
        "burst",
        p.timeout,
        "starting the bursts",
        futures::future::try_join_all(conns.iter().map(|conn| start(conn, p.events))),
    )
    .await?;
    let finished =
        futures::future::try_join_all(held.iter().zip(&conns).map(|((id, ..), conn)| finish(conn, id)));
    within("burst", p.timeout, "waiting for the bursts to end", finished).await?;
    let rss1 = settled_rss_kib(pid).await?;

    let mut lost = 0;
    for (_, mut sub, seen) in held {
        lost += within("burst", p.timeout, "reading the held bursts", read_rest(&mut sub, p.events, seen))
            .await?;
    }
    let per_task = rss1.saturating_sub(rss0) as f64 / m as f64;
    Ok(Measured {
        metrics: vec![
            Metric::new("per busy task", "KiB", per_task, Better::Lower),
            Metric::new("per held event", "B", per_task * 1024.0 / p.events.max(1) as f64, Better::Lower),
            Metric::new("lost events", "events", lost as f64, Better::Zero),
        ],
        notes: vec![format!(
            "burst: M={m} × `stream {} 0`, read after the task finished; RSS KiB {rss0} → {rss1}, {:.1} s",
            p.events,
            started.elapsed().as_secs_f64()
        )],
    })
}

/// SendStreamingMessage `stream E 0`, read up to its first item: the task id, and the chunks
/// that item held (none, unless the server sends no Task first).
async fn start(conn: &Conn, events: u64) -> Result<(String, Sub, u64), BoxError> {
    let command = format!("stream {events} 0");
    let mut sub = conn.send_streaming(send_request(fresh_message(&command, None), false)).await?;
    let first = next(&mut sub).await?.ok_or("the burst's stream ended at once")?;
    Ok(match first.payload {
        Some(Payload::Task(task)) => (task.id, sub, 0),
        Some(Payload::StatusUpdate(update)) => (update.task_id, sub, 0),
        Some(Payload::ArtifactUpdate(update)) => {
            let seen = update.artifact.iter().flat_map(|a| texts(&a.parts)).count() as u64;
            (update.task_id, sub, seen)
        }
        other => return Err(format!("`{command}` answered {other:?} first").into()),
    })
}

/// Polls GetTask until the task has finished.
async fn finish(conn: &Conn, id: &str) -> Result<(), BoxError> {
    while !is_terminal(task_state(&conn.get_task(id).await?)) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Reads a burst's stream to its end; how many of its `events` chunks (those from `from` on)
/// did not arrive, in order. A stream that ends early or in an error (SUBSCRIBER_LAGGED) counts
/// what it missed.
async fn read_rest(sub: &mut Sub, events: u64, from: u64) -> Result<u64, BoxError> {
    let mut expected = from;
    while let Ok(Some(item)) = next(sub).await {
        let Some(Payload::ArtifactUpdate(update)) = &item.payload else { continue };
        for text in update.artifact.iter().flat_map(|a| texts(&a.parts)) {
            if text != format!("chunk {expected}") {
                return Ok(events.saturating_sub(expected));
            }
            expected += 1;
        }
    }
    Ok(events.saturating_sub(expected))
}

async fn next(sub: &mut Sub) -> Result<Option<StreamResponse>, BoxError> {
    tokio::time::timeout(CALL_TIMEOUT, sub.next())
        .await
        .map_err(|_| format!("no item within {CALL_TIMEOUT:?}"))?
}
