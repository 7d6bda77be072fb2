//! Latencies kept in constant memory: a log-bucketed histogram with 1% wide buckets from 1 us
//! to about 3 hours, so a long open-loop run at thousands of requests per second costs the same
//! few kilobytes as a short one, and a percentile is within 1% of the exact one.

use serde::Serialize;

/// The lower edge of bucket 1, in seconds; anything at or below it lands in bucket 0.
const FLOOR: f64 = 1e-6;
/// Each bucket's upper edge is this times its lower edge.
const GROWTH: f64 = 1.01;
/// 1.01^2500 us is about 3.4 hours; anything longer lands in the last bucket.
const BUCKETS: usize = 2500;

/// Latency samples, in seconds.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    min: f64,
    max: f64,
}

/// The percentiles a report prints, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
}

fn bucket(seconds: f64) -> usize {
    if seconds.is_nan() || seconds <= FLOOR {
        return 0;
    }
    let i = ((seconds / FLOOR).ln() / GROWTH.ln()).ceil();
    if i >= (BUCKETS - 1) as f64 {
        BUCKETS - 1
    } else {
        i as usize
    }
}

/// The middle (geometric) of bucket `i`.
fn middle(i: usize) -> f64 {
    if i == 0 {
        return 0.0;
    }
    FLOOR * GROWTH.powf(i as f64 - 0.5)
}

impl Histogram {
    pub fn record(&mut self, seconds: f64) {
        self.record_n(seconds, 1);
    }

    /// Records `n` samples of the same value.
    pub fn record_n(&mut self, seconds: f64, n: u64) {
        if n == 0 || !seconds.is_finite() {
            return;
        }
        let seconds = seconds.max(0.0);
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
            self.min = seconds;
            self.max = seconds;
        }
        self.counts[bucket(seconds)] += n;
        self.total += n;
        self.min = self.min.min(seconds);
        self.max = self.max.max(seconds);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.total == 0 {
            return;
        }
        if self.total == 0 {
            *self = other.clone();
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The `q` quantile (0 < q <= 1) by nearest rank, within a bucket's width, clamped to the
    /// smallest and largest samples seen; none without samples.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(middle(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    pub fn percentiles(&self) -> Option<Percentiles> {
        Some(Percentiles {
            p50: self.quantile(0.50)?,
            p90: self.quantile(0.90)?,
            p95: self.quantile(0.95)?,
            p99: self.quantile(0.99)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_one_percent_of_the_exact_ones() {
        let mut h = Histogram::default();
        // 1 ms .. 1000 ms: p50 = 500 ms, p90 = 900 ms, p99 = 990 ms.
        for i in 1..=1000 {
            h.record(i as f64 / 1000.0);
        }
        let p = h.percentiles().unwrap();
        for (got, want) in [(p.p50, 0.5), (p.p90, 0.9), (p.p95, 0.95), (p.p99, 0.99)] {
            assert!((got / want - 1.0).abs() < 0.01, "{got} vs {want}");
        }
        assert_eq!(h.count(), 1000);
    }

    #[test]
    fn one_value_is_returned_exactly_and_extremes_are_kept() {
        let mut h = Histogram::default();
        h.record_n(0.25, 3);
        assert_eq!(h.quantile(0.5), Some(0.25));
        assert_eq!(h.quantile(1.0), Some(0.25));
        h.record(0.0);
        h.record(1e9);
        h.record(f64::NAN);
        assert_eq!(h.count(), 5);
        assert_eq!(h.quantile(0.01), Some(0.0));
        assert_eq!(Histogram::default().percentiles(), None);
    }

    #[test]
    fn merged_histograms_count_both() {
        let (mut a, mut b) = (Histogram::default(), Histogram::default());
        a.record(0.1);
        b.record(0.3);
        b.record(0.3);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert!((a.quantile(0.5).unwrap() - 0.3).abs() < 0.003);
    }
}
