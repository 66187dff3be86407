//! What a round of the evictor sees in the pieces of the retention set, and which of their
//! members it chooses: the fleet's oldest, exactly, whatever the pieces.
use redis::Value;

use super::EVICT_BATCH;
use super::member::parse;
use crate::error::A2aError;
use crate::task::store::Retention;

/// Who asks for a round, which decides how many expired tasks it waits for.
#[derive(Clone, Copy)]
pub(in crate::task::store::redis) enum RetainFor {
    /// The evictor: evicting by age waits for 1/64 of the count limit to expire (rounds, not
    /// one per second per task; the keys expire by themselves meanwhile).
    Background,
    /// The evictor, woken by a write that found the fleet over a limit: as `Background`, but
    /// some go for sure, so the first look reads the oldest members too (one round trip less),
    /// and its rounds go on to 1/64 below the limit (see [`limits`]).
    Over,
    /// A read (ListTasks): every expired task goes now.
    Read,
    /// Redis refused a write for memory (`full.rs`): one batch of the oldest goes, whatever
    /// the limits.
    Room,
}

impl RetainFor {
    pub(super) fn age_slack(self, max_count: usize) -> usize {
        match self {
            Self::Background | Self::Over | Self::Room => (max_count / 64).max(1),
            Self::Read => 1,
        }
    }
}

/// What a round saw in one piece of the retention set ([`Retainer::look`]).
pub(super) struct Look {
    pub(super) count: u64,
    pub(super) bytes: i64,
    /// Members older than the retention age.
    pub(super) expired: u64,
    /// The oldest members: (score, or rank when the set is in one piece; member; size),
    /// oldest first.
    pub(super) oldest: Vec<(f64, String, i64)>,
}

pub(super) fn malformed(what: &str) -> A2aError {
    A2aError::Internal(format!("malformed retention reply from Redis: {what}"))
}

impl Look {
    /// From the replies to `ZCARD`, `HGET sizes #`, `ZCOUNT` and (if asked) `ZRANGE`, `scored`
    /// if `WITHSCORES`; with where in `oldest` the members of the old form are, whose size (0
    /// here) is in the sizes hash. Unscored members get their rank as their score: the order
    /// of one piece is all [`choose`] needs of them.
    pub(super) fn parse(
        count: Option<Value>,
        bytes: Option<Value>,
        expired: Option<Value>,
        members: Option<Value>,
        scored: bool,
    ) -> Result<(Self, Vec<usize>), A2aError> {
        let int = |value: Option<Value>| match value {
            None => Err(malformed("too short")),
            Some(Value::Nil) => Ok(0),
            Some(value) => redis::from_redis_value::<i64>(value).map_err(|e| malformed(&e.to_string())),
        };
        let (count, bytes, expired) = (int(count)?, int(bytes)?, int(expired)?);
        let values: Vec<Value> = match members {
            None => Vec::new(),
            Some(members) => redis::from_redis_value(members).map_err(|e| malformed(&e.to_string()))?,
        };
        // RESP2 answers a flat member, score, member, …; RESP3 a pair per member.
        let flat = values.iter().all(|value| !matches!(value, Value::Array(_)));
        let pairs: Vec<(String, f64)> = if !scored {
            let members: Vec<String> = values
                .into_iter()
                .map(redis::from_redis_value)
                .collect::<Result<_, _>>()
                .map_err(|e| malformed(&e.to_string()))?;
            members.into_iter().zip((0..).map(f64::from)).collect()
        } else if flat {
            let mut pairs = Vec::with_capacity(values.len() / 2);
            let mut values = values.into_iter();
            while let (Some(member), Some(score)) = (values.next(), values.next()) {
                let member = redis::from_redis_value(member).map_err(|e| malformed(&e.to_string()))?;
                pairs.push((member, redis::from_redis_value(score).map_err(|e| malformed(&e.to_string()))?));
            }
            pairs
        } else {
            values
                .into_iter()
                .map(redis::from_redis_value)
                .collect::<Result<_, _>>()
                .map_err(|e| malformed(&e.to_string()))?
        };
        let mut old_form = Vec::new();
        let mut oldest = Vec::with_capacity(pairs.len());
        for (at, (member, score)) in pairs.into_iter().enumerate() {
            let size = parse(&member).and_then(|evicted| evicted.size);
            if size.is_none() {
                old_form.push(at);
            }
            oldest.push((score, member, size.unwrap_or(0)));
        }
        let (count, expired) = (u64::try_from(count).unwrap_or(0), u64::try_from(expired).unwrap_or(0));
        Ok((Self { count, bytes, expired, oldest }, old_form))
    }
}

/// The fleet's totals from every piece, and what retention keeps of them: (count, bytes,
/// expired that may go now, count to keep, bytes to keep). Over the count or the bytes (or
/// woken by a write that was), eviction goes to 1/64 below the limit, so it comes in batches,
/// not one task per finished task; expired tasks go once there are enough of them for `why`.
fn limits(looks: &[Look], retention: &Retention, why: RetainFor) -> (u64, i64, u64, u64, i64) {
    let count: u64 = looks.iter().map(|l| l.count).sum();
    let bytes: i64 = looks.iter().map(|l| l.bytes).sum();
    let expired: u64 = looks.iter().map(|l| l.expired).sum();
    let max_count = retention.max_finished as u64;
    let max_bytes = i64::try_from(retention.max_bytes).unwrap_or(i64::MAX);
    let low = (max_count - max_count / 64, max_bytes - max_bytes / 64);
    // A wake by a write over a limit goes on to the low mark even once the first of its
    // rounds is under the limit: else its second round found nothing to take (one look
    // wasted per wake).
    let draining = matches!(why, RetainFor::Over) && (count > low.0 || bytes > low.1);
    let (keep_count, keep_bytes) = if matches!(why, RetainFor::Room) {
        (count.saturating_sub(EVICT_BATCH as u64), bytes)
    } else if count > max_count || bytes > max_bytes || draining {
        low
    } else {
        (count, bytes)
    };
    let expired = if expired < why.age_slack(retention.max_finished) as u64 { 0 } else { expired };
    (count, bytes, expired, keep_count, keep_bytes)
}

/// How many of its oldest members each piece must show for [`choose`] to find the fleet's
/// oldest that go this round; `None` if none go.
pub(super) fn wanted(looks: &[Look], retention: &Retention, why: RetainFor) -> Option<usize> {
    let (count, bytes, expired, keep_count, keep_bytes) = limits(looks, retention, why);
    let want = (count.saturating_sub(keep_count).max(expired) as usize).min(EVICT_BATCH);
    match (want, bytes > keep_bytes) {
        (_, true) => Some(EVICT_BATCH),
        (0, false) => None,
        (want, false) => Some(want),
    }
}

/// Which members each piece gives up this round (with their sizes): the fleet's oldest, as
/// many as the count limit and the expired ones call for, then as the bytes limit does, at
/// most [`EVICT_BATCH`] (see [`limits`]).
pub(super) fn choose(looks: &[Look], retention: &Retention, why: RetainFor) -> Vec<Vec<(String, i64)>> {
    let (count, mut bytes, expired, keep_count, keep_bytes) = limits(looks, retention, why);
    let want = (count.saturating_sub(keep_count).max(expired) as usize).min(EVICT_BATCH);
    let mut candidates: Vec<(usize, &(f64, String, i64))> = looks
        .iter()
        .enumerate()
        .flat_map(|(piece, look)| look.oldest.iter().map(move |c| (piece, c)))
        .collect();
    candidates.sort_by(|(_, a), (_, b)| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut chosen = vec![Vec::new(); looks.len()];
    for (taken, (piece, (_, member, size))) in candidates.into_iter().enumerate() {
        if taken >= EVICT_BATCH || (taken >= want && bytes <= keep_bytes) {
            break;
        }
        bytes -= size;
        chosen[piece].push((member.clone(), *size));
    }
    chosen
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn look(count: u64, expired: u64, oldest: &[(f64, &str, i64)]) -> Look {
        let bytes = oldest.iter().map(|(_, _, size)| size).sum();
        let oldest =
            oldest.iter().map(|(score, member, size)| (*score, (*member).to_owned(), *size)).collect();
        Look { count, bytes, expired, oldest }
    }

    fn names(chosen: &[Vec<(String, i64)>]) -> Vec<Vec<&str>> {
        chosen.iter().map(|piece| piece.iter().map(|(m, _)| m.as_str()).collect()).collect()
    }

    #[test]
    fn the_fleets_oldest_go_first_across_pieces() {
        let keep = Retention { max_finished: 3, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 };
        let looks = [
            look(3, 0, &[(1.0, "a", 10), (4.0, "d", 10), (6.0, "f", 10)]),
            look(2, 0, &[(2.0, "b", 10), (5.0, "e", 10)]),
            look(0, 0, &[]),
        ];
        // Five held, three kept: the two oldest of the fleet, whatever piece they are in.
        assert_eq!(names(&choose(&looks, &keep, RetainFor::Read)), [vec!["a"], vec!["b"], vec![]]);
        let roomy = Retention { max_finished: 5, ..keep };
        assert!(choose(&looks, &roomy, RetainFor::Read).iter().all(Vec::is_empty), "within the limits");
        // By bytes: 50 held, room for 30 (less 1/64, so 29): the three oldest.
        let bytes = Retention { max_finished: 100, max_bytes: 30, ..keep };
        assert_eq!(names(&choose(&looks, &bytes, RetainFor::Read)), [vec!["a"], vec!["b"], vec![]]);
        let bytes = Retention { max_bytes: 29, ..bytes };
        assert_eq!(names(&choose(&looks, &bytes, RetainFor::Read)), [vec!["a", "d"], vec!["b"], vec![]]);
    }

    #[test]
    fn room_takes_a_batch_of_the_oldest_whatever_the_limits() {
        let roomy =
            Retention { max_finished: 10_000, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 };
        let small = [look(2, 0, &[(1.0, "a", 10), (4.0, "d", 10)]), look(1, 0, &[(2.0, "b", 10)])];
        assert!(wanted(&small, &roomy, RetainFor::Over).is_none(), "within the limits");
        assert_eq!(wanted(&small, &roomy, RetainFor::Room), Some(3));
        assert_eq!(names(&choose(&small, &roomy, RetainFor::Room)), [vec!["a", "d"], vec!["b"]]);
        // Never more than a batch a round: each refusal for memory asks for one more.
        let many: Vec<(f64, String, i64)> = (0..40).map(|i| (f64::from(i), format!("m{i:02}"), 1)).collect();
        let many: Vec<(f64, &str, i64)> = many.iter().map(|(s, m, b)| (*s, m.as_str(), *b)).collect();
        let chosen = choose(&[look(40, 0, &many)], &roomy, RetainFor::Room);
        assert_eq!(chosen[0].len(), EVICT_BATCH);
        assert_eq!(chosen[0][0].0, "m00", "the oldest first");
        assert!(choose(&[look(0, 0, &[])], &roomy, RetainFor::Room)[0].is_empty(), "nothing to take");
    }

    #[test]
    fn expired_tasks_go_when_enough_of_them_wait() {
        let retention = Retention { max_finished: 640, max_age: Duration::from_secs(1), max_bytes: 1 << 30 };
        let looks = [look(2, 1, &[(1.0, "a", 1), (9.0, "z", 1)]), look(1, 1, &[(2.0, "b", 1)])];
        // A read takes every expired one; the background evictor waits for 640/64 of them.
        assert_eq!(names(&choose(&looks, &retention, RetainFor::Read)), [vec!["a"], vec!["b"]]);
        assert!(choose(&looks, &retention, RetainFor::Background).iter().all(Vec::is_empty));
    }

    #[test]
    fn a_wake_by_a_write_over_the_limit_goes_on_to_the_low_mark() {
        let retention =
            Retention { max_finished: 640, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 };
        let members: Vec<String> = (0..40).map(|i| format!("m{i:03}")).collect();
        let oldest: Vec<(f64, &str, i64)> = members.iter().map(|m| (1.0, m.as_str(), 1)).collect();
        // 635 held: under the limit (640) after a first round, above its low mark (630).
        let looks = [look(635, 0, &oldest)];
        assert_eq!(choose(&looks, &retention, RetainFor::Over)[0].len(), 5, "on to 630");
        assert_eq!(wanted(&looks, &retention, RetainFor::Over), Some(5));
        for why in [RetainFor::Background, RetainFor::Read] {
            assert!(choose(&looks, &retention, why)[0].is_empty(), "under the limit, nothing goes");
            assert_eq!(wanted(&looks, &retention, why), None);
        }
        assert_eq!(wanted(&[look(630, 0, &oldest)], &retention, RetainFor::Over), None);
    }

    #[test]
    fn a_lone_pieces_members_come_unscored_in_their_order() {
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        let position = "0123456789abcdef0123456789abcdef";
        let (b, a) = (format!("t:o/b|{position}||7"), format!("t:o/a|{position}||9"));
        let members = Value::Array(vec![bulk(&b), bulk(&a)]);
        let (count, bytes, expired) = (Some(Value::Int(2)), Some(Value::Int(16)), Some(Value::Int(0)));
        let (look, old_form) = Look::parse(count, bytes, expired, Some(members), false).unwrap();
        assert!(old_form.is_empty());
        let oldest: Vec<(f64, &str, i64)> =
            look.oldest.iter().map(|(s, m, z)| (*s, m.as_str(), *z)).collect();
        assert_eq!(oldest, [(0.0, b.as_str(), 7), (1.0, a.as_str(), 9)], "Redis's order, not the members'");
        let retention = Retention { max_finished: 1, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 };
        assert_eq!(names(&choose(&[look], &retention, RetainFor::Read)), [vec![b.as_str()]]);
    }

    #[test]
    fn a_round_takes_one_batch_at_most() {
        let retention = Retention { max_finished: 1, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 };
        let members: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
        let oldest: Vec<(f64, &str, i64)> = members.iter().map(|m| (1.0, m.as_str(), 1)).collect();
        let chosen = choose(&[look(100, 0, &oldest)], &retention, RetainFor::Read);
        assert_eq!(chosen[0].len(), EVICT_BATCH);
        assert_eq!(chosen[0][0].0, "m000", "same score: in member order, as Redis orders them");
    }
}
