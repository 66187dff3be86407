//! The request-latency histogram: a count per fixed bucket and a sum, in constant memory.
//!
//! The Prometheus exporter's own histogram keeps every sample (value and time) until the next
//! scrape or upkeep folds them into buckets, so a server that nobody scrapes grows by about
//! 20 bytes a request, without bound. Counting into the buckets at once needs no upkeep and
//! no allocation: a record is two atomic additions.
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, seconds: from sub-millisecond unary calls to long blocking
/// sends. A sample above the last falls in `+Inf` alone.
pub const BUCKETS: [f64; 16] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// One series: per bucket the samples that fell in it (not yet cumulative), and their sum.
pub struct Latency {
    /// `BUCKETS.len()` bounded buckets, then the one above the last bound.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Default for Latency {
    fn default() -> Self {
        Self { counts: std::array::from_fn(|_| AtomicU64::new(0)), sum_nanos: AtomicU64::new(0) }
    }
}

impl Latency {
    /// Counts one sample.
    pub fn record(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = BUCKETS.iter().position(|bound| seconds <= *bound).unwrap_or(BUCKETS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Appends the series `name{labels}` in the Prometheus text format: cumulative buckets,
    /// `+Inf`, sum and count. The count is the `+Inf` bucket as read here, so the two agree
    /// even while calls are recorded.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.counts[BUCKETS.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(latency: &Latency) -> String {
        let mut out = String::new();
        latency.render(&mut out, "d", r#"m="x""#);
        out
    }

    #[test]
    fn buckets_are_cumulative_with_the_bound_inclusive_and_the_rest_in_inf() {
        let latency = Latency::default();
        for ms in [0.2, 0.5, 0.7, 3.0, 120_000.0] {
            latency.record(Duration::from_secs_f64(ms / 1e3));
        }
        let out = rendered(&latency);
        for line in [
            r#"d_bucket{m="x",le="0.0005"} 2"#,
            r#"d_bucket{m="x",le="0.001"} 3"#,
            r#"d_bucket{m="x",le="0.0025"} 3"#,
            r#"d_bucket{m="x",le="0.005"} 4"#,
            r#"d_bucket{m="x",le="60"} 4"#,
            r#"d_bucket{m="x",le="+Inf"} 5"#,
            r#"d_count{m="x"} 5"#,
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
        }
        let sum: f64 = out.lines().find_map(|l| l.strip_prefix(r#"d_sum{m="x"} "#)).unwrap().parse().unwrap();
        assert!((sum - 120.0044).abs() < 1e-6, "{sum}");
        assert_eq!(out.lines().count(), BUCKETS.len() + 3);
    }

    #[test]
    fn a_million_samples_land_in_their_buckets() {
        let latency = Latency::default();
        for n in 0..1_000_000u64 {
            latency.record(Duration::from_micros(n % 2_000));
        }
        let out = rendered(&latency);
        assert!(out.contains(r#"d_count{m="x"} 1000000"#), "{out}");
        assert!(out.contains(r#"d_bucket{m="x",le="0.001"} 500500"#), "{out}");
    }
}
