//! A latency recorder cheap enough for the unary load's hot path: a preallocated log-linear
//! histogram (64 buckets per power of two, so a reported percentile is within 1.6% of the
//! sample), one per worker, written by its worker alone and read by the load's coordinator.
//!
//! Why not a `Vec` of samples sorted at the end: at tens of thousands of calls per second it
//! grows (reallocating and touching fresh pages) while the servers are measured, and its sort
//! is work the client does on the CPUs the servers share. The counters are atomics only so
//! that the coordinator can read a worker it had to abandon (a call that never returned); the
//! worker's own updates are a relaxed load and store, no locked instruction.
use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two, as a bit count.
const SUB_BITS: u32 = 6;
const SUB: usize = 1 << SUB_BITS;
/// Enough buckets for every u64: values below `SUB` exactly, then `SUB` per power of two.
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// The bucket of a value.
fn index(value: u64) -> usize {
    if value < SUB as u64 {
        return value as usize;
    }
    let shift = 63 - value.leading_zeros() - SUB_BITS;
    let mantissa = (value >> shift) as usize;
    (shift as usize + 1) * SUB + (mantissa - SUB)
}

/// The middle of a bucket's range of values.
fn middle(index: usize) -> u64 {
    if index < SUB {
        return index as u64;
    }
    let shift = (index / SUB - 1) as u32;
    let low = ((index % SUB + SUB) as u64) << shift;
    low + ((1u64 << shift) >> 1)
}

/// One worker's latencies (nanoseconds).
pub struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self { counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect() }
    }
}

impl Histogram {
    /// Records a sample; only the owning worker may call this (a load and a store, not an
    /// atomic increment).
    pub fn record(&self, nanos: u64) {
        let count = &self.counts[index(nanos)];
        count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Adds another histogram's counts to these (the coordinator, after the load).
    pub fn merge(&self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter().zip(other.counts.iter()) {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Samples recorded.
    pub fn len(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Nearest-rank percentile (`q` in 0..=1), as the middle of its bucket; NaN when empty.
    pub fn percentile(&self, q: f64) -> f64 {
        let total = self.len();
        if total == 0 {
            return f64::NAN;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, count) in self.counts.iter().enumerate() {
            seen += count.load(Ordering::Relaxed);
            if seen >= rank {
                return middle(i) as f64;
            }
        }
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        assert_eq!(index(0), 0);
        assert_eq!(index(63), 63);
        assert_eq!(index(64), 64);
        assert_eq!(index(128), 128);
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        let mut last = 0;
        for v in (0..1_000_000u64).step_by(7) {
            let i = index(v);
            assert!(i >= last);
            last = i;
            let m = middle(i) as f64;
            assert!((m - v as f64).abs() <= v as f64 / 60.0 + 1.0, "{v} -> {m}");
        }
    }

    #[test]
    fn percentiles_are_close_to_nearest_rank() {
        let h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        assert_eq!(h.len(), 100_000);
        let p50 = h.percentile(0.5);
        assert!((p50 - 500_000.0).abs() < 500_000.0 * 0.016, "{p50}");
        let p99 = h.percentile(0.99);
        assert!((p99 - 990_000.0).abs() < 990_000.0 * 0.016, "{p99}");
        assert!(Histogram::default().percentile(0.5).is_nan());
    }
}
