//! The knee of a concurrency sweep: the most requests one replica takes at once before waiting
//! starts to dominate, which is the per-replica queue target a policy should be given.
//!
//! The rule: going up the sweep, a concurrency is **saturated** when
//! - its TTFT p50 is more than [`TTFT_FACTOR`] (2x) the TTFT p50 at the lightest concurrency
//!   (requests now wait for a batch slot, or prefill is crowded out), or
//! - its requests/s grew by less than [`THROUGHPUT_GAIN`] (10%) over the previous
//!   concurrency's while its TTFT p50 grew by more than [`TTFT_RISE`] (10%): more load buys latency, not
//!   throughput, or
//! - more than [`ERROR_SHARE`] (10%) of its requests failed, or none was answered.
//!
//! The knee is the largest concurrency before the first saturated one. A sweep whose lightest
//! concurrency is already saturated, or that never saturates, has no knee.

use super::report::Report;
use serde::Serialize;

pub const TTFT_FACTOR: f64 = 2.0;
pub const THROUGHPUT_GAIN: f64 = 0.10;
pub const ERROR_SHARE: f64 = 0.10;
/// How much TTFT p50 must rise over the previous concurrency's for flat throughput to count.
pub const TTFT_RISE: f64 = 0.10;

/// The rule in one line, as `infscale load --sweep` prints it.
pub const RULE: &str = "knee rule: the largest concurrency before the first saturated one; \
saturated = TTFT p50 above 2x the lightest concurrency's, or req/s up less than 10% while \
TTFT p50 rose more than 10%, or over 10% of requests failed";

/// Why a concurrency counts as saturated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Saturated {
    /// TTFT p50 above [`TTFT_FACTOR`] times the lightest concurrency's.
    TtftDoubled,
    /// Throughput flat while TTFT rose.
    ThroughputFlat,
    /// Too many failures, or no answer to time.
    Errors,
}

/// The knee and the row past it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Knee {
    pub concurrency: u32,
    pub ttft_p50_s: f64,
    /// The first saturated concurrency, and its TTFT p50 (none when nothing was answered).
    pub past: u32,
    pub past_ttft_p50_s: Option<f64>,
    pub why: Saturated,
}

/// The numbers of one sweep row the rule reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub concurrency: u32,
    pub ttft_p50: Option<f64>,
    pub requests_per_s: f64,
    pub requests: u64,
    pub failed: u64,
}

impl Point {
    pub fn of(r: &Report) -> Point {
        Point {
            concurrency: r.concurrency.unwrap_or(0),
            ttft_p50: r.ttft_s.map(|p| p.p50),
            requests_per_s: r.requests_per_s,
            requests: r.requests,
            failed: r.failed(),
        }
    }
}

fn saturated(point: &Point, previous: Option<&Point>, base: Option<f64>) -> Option<Saturated> {
    let Some(ttft) = point.ttft_p50 else {
        return Some(Saturated::Errors);
    };
    if point.failed as f64 > ERROR_SHARE * point.requests as f64 {
        return Some(Saturated::Errors);
    }
    if base.is_some_and(|b| ttft > TTFT_FACTOR * b) {
        return Some(Saturated::TtftDoubled);
    }
    if let Some(prev) = previous {
        let flat = point.requests_per_s < (1.0 + THROUGHPUT_GAIN) * prev.requests_per_s;
        let slower = prev.ttft_p50.is_some_and(|p| ttft > (1.0 + TTFT_RISE) * p);
        if flat && slower {
            return Some(Saturated::ThroughputFlat);
        }
    }
    None
}

/// Whether the lightest concurrency of a sweep is saturated already (only failures can say so).
pub fn lightest_saturated(point: &Point) -> bool {
    saturated(point, None, None).is_some()
}

/// The knee of rows in rising concurrency (see the module's rule).
pub fn find(points: &[Point]) -> Option<Knee> {
    let base = points.first()?.ttft_p50;
    for (i, point) in points.iter().enumerate() {
        let previous = i.checked_sub(1).map(|j| &points[j]);
        if let Some(why) = saturated(point, previous, base) {
            let before = previous?;
            return Some(Knee {
                concurrency: before.concurrency,
                ttft_p50_s: before.ttft_p50?,
                past: point.concurrency,
                past_ttft_p50_s: point.ttft_p50,
                why,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(concurrency: u32, ttft_ms: f64, rps: f64) -> Point {
        Point {
            concurrency,
            ttft_p50: Some(ttft_ms / 1e3),
            requests_per_s: rps,
            requests: 100,
            failed: 0,
        }
    }

    #[test]
    fn the_knee_is_before_ttft_doubles() {
        // A batch of 4: TTFT flat to 4, then requests wait a whole request for a slot.
        let rows = [
            p(1, 20.0, 10.0),
            p(2, 21.0, 20.0),
            p(4, 22.0, 39.0),
            p(8, 120.0, 40.0),
            p(16, 320.0, 40.0),
        ];
        let knee = find(&rows).unwrap();
        assert_eq!((knee.concurrency, knee.past), (4, 8));
        assert_eq!(knee.why, Saturated::TtftDoubled);
    }

    #[test]
    fn flat_throughput_with_rising_ttft_is_saturation_before_2x() {
        let rows = [p(1, 100.0, 10.0), p(2, 110.0, 19.0), p(4, 150.0, 20.0)];
        let knee = find(&rows).unwrap();
        assert_eq!((knee.concurrency, knee.why), (2, Saturated::ThroughputFlat));
        // Flat throughput with flat TTFT (a client-bound run) is not saturation.
        let rows = [p(1, 100.0, 10.0), p(2, 105.0, 10.5)];
        assert_eq!(find(&rows), None);
    }

    #[test]
    fn failures_saturate_and_an_unsaturated_sweep_has_no_knee() {
        let mut failing = p(8, 20.0, 40.0);
        failing.failed = 11;
        let rows = [p(1, 20.0, 10.0), p(4, 20.0, 40.0), failing];
        assert_eq!(find(&rows).unwrap().why, Saturated::Errors);
        assert_eq!(find(&rows[..2]), None);
        let none = Point {
            ttft_p50: None,
            ..p(1, 0.0, 0.0)
        };
        // Saturated at the lightest concurrency: no knee to give.
        assert_eq!(find(&[none, p(2, 20.0, 10.0)]), None);
        assert_eq!(find(&[]), None);
    }
}
