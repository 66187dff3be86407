//! Requests per second per principal (`--max-requests-per-sec`, `--max-requests-burst`),
//! checked as every call enters the core, so every binding is limited alike.
//!
//! GCRA from the `governor` crate, one cell per principal. The cells of principals that have
//! gone quiet (their bucket is full again) are swept every [`SWEEP_EVERY`] calls, so the map
//! holds at most the principals heard from lately plus that many.
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::error::{A2aError, LimitKind};

/// Calls between two sweeps of quiet principals.
const SWEEP_EVERY: u64 = 4096;

/// The limiter of one server.
pub(super) struct RateLimit {
    limiter: DefaultKeyedRateLimiter<String>,
    per_sec: u32,
    calls: AtomicU64,
}

impl RateLimit {
    /// `per_sec` requests per second per principal, in bursts of up to `burst` (0: one
    /// second's worth); `None` when `per_sec` is 0 (no limit).
    pub fn new(per_sec: u32, burst: u32) -> Option<Self> {
        let rate = NonZeroU32::new(per_sec)?;
        let burst = NonZeroU32::new(burst).unwrap_or(rate);
        let limiter = DefaultKeyedRateLimiter::keyed(Quota::per_second(rate).allow_burst(burst));
        Some(Self { limiter, per_sec, calls: AtomicU64::new(0) })
    }

    /// Counts one call of `principal`; RATE_LIMITED (with the seconds to wait) past its rate.
    // `&String`: the limiter is keyed by `String` and looks keys up by `&K`; a `&str` would
    // cost an allocation per call.
    #[allow(clippy::ptr_arg)]
    pub fn check(&self, principal: &String) -> Result<(), A2aError> {
        if self.calls.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        let Err(not_until) = self.limiter.check_key(principal) else {
            return Ok(());
        };
        let wait = not_until.wait_time_from(self.limiter.clock().now());
        let secs = (wait.as_secs_f64().ceil() as u64).max(1);
        Err(A2aError::LimitExceeded {
            kind: LimitKind::Rate,
            limit: "max-requests-per-sec".to_owned(),
            detail: format!(
                "principal {principal:?} sent more than {} requests per second; retry in {secs} s",
                self.per_sec
            ),
            retry_after_secs: Some(secs),
        })
    }

    /// Forgets the principals whose bucket is full again (they are as if never seen).
    fn sweep(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }

    /// Principals with a cell now.
    #[cfg(test)]
    fn principals(&self) -> usize {
        self.limiter.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_past_its_burst_waits_and_others_do_not() {
        let rate = RateLimit::new(1, 2).expect("on");
        let alice = "alice".to_owned();
        assert!(rate.check(&alice).is_ok() && rate.check(&alice).is_ok(), "the burst");
        let refused = rate.check(&alice).unwrap_err();
        assert_eq!(refused.reason(), "RATE_LIMITED");
        assert_eq!(refused.retry_after_secs(), Some(1));
        assert_eq!(refused.metadata()["limit"], "max-requests-per-sec");
        assert!(rate.check(&"bob".to_owned()).is_ok(), "per principal");
        assert!(RateLimit::new(0, 5).is_none(), "0: off");
    }

    #[test]
    fn quiet_principals_are_swept_so_the_map_stays_bounded() {
        let rate = RateLimit::new(1_000_000, 1).expect("on");
        for i in 0..SWEEP_EVERY - 1 {
            rate.check(&format!("p{i}")).expect("each principal's first call");
        }
        assert_eq!(rate.principals() as u64, SWEEP_EVERY - 1);
        // A microsecond refills each bucket; the next call sweeps them all.
        std::thread::sleep(std::time::Duration::from_millis(5));
        rate.check(&"last".to_owned()).expect("allowed");
        assert!(rate.principals() <= 1, "{} cells left", rate.principals());
    }
}
