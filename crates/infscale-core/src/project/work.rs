//! The `work` metric over time: what the replicas are asked to do, in replicas' worth of work,
//! read through a line fitted over the recent readings rather than off one scrape.
//!
//! One scrape's token counters say what the replicas did in five seconds, which at a few
//! requests a second is mostly noise; and what a saturated replica did is its capacity, not the
//! demand on it. So each reading's demand is the work the replicas did plus the requests that
//! arrived and were not admitted (the change of the queue on the replicas and at the activator
//! since the last reading, each at the mean work of a request), and the value is a least-squares
//! line through the demands of the window: its value now (which follows a ramp without the lag
//! of a mean), projected along its slope over the lookahead, plus the queue cleared within
//! [`DRAIN_S`]. Unlike a count of requests, none of this falls when replicas are added, and a
//! saturated target reads as more than its replicas can do.

use crate::project::lookahead::{fitted, slope, Point, MAX_POINTS};
use serde::{Deserialize, Serialize};

/// How soon a queue is planned to be cleared, seconds.
pub const DRAIN_S: f64 = 30.0;

/// How long the mean work of a request is remembered once nothing is admitted, seconds.
const PER_REQUEST_MEMORY_S: f64 = 3600.0;

/// One evaluation's reading of the replicas.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// When the replicas were scraped.
    pub at: f64,
    /// The work they did over their last interval, in replicas' worth.
    pub work: f64,
    /// Requests they admitted per second over it, where the server says (`None`: unknown).
    pub admitted: Option<f64>,
    /// Requests waiting on them and held at the activator.
    pub queued: f64,
}

/// The demands of the window and what a request has cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkMemory {
    /// Each reading's demand (work done and arrived unadmitted), replicas' worth.
    #[serde(default)]
    pub demands: Vec<Point>,
    /// The last reading.
    #[serde(default)]
    pub last: Option<Reading>,
    /// The mean work per admitted request last measured, replica-seconds, and when.
    #[serde(default)]
    pub per_request: Option<Point>,
}

/// The demand now and ahead, in replicas' worth of work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fitted {
    /// The fitted line's value now (the last demand alone before there is a line).
    pub now: f64,
    /// Its slope, per second (`None` before two readings).
    pub slope: Option<f64>,
    /// The mean work per request the unadmitted and queued requests were counted at.
    pub per_request: f64,
    /// Requests queued now.
    pub queued: f64,
}

impl Fitted {
    /// The demand `ahead_s` along a rising line (never below now), plus the queue cleared
    /// within [`DRAIN_S`].
    pub fn value(&self, ahead_s: f64) -> f64 {
        let rise = self.slope.unwrap_or(0.0).max(0.0) * ahead_s;
        self.now.max(0.0) + rise + self.per_request * self.queued / DRAIN_S
    }
}

impl WorkMemory {
    /// Notes a reading and fits the line through the demands of the last `window_s`; a
    /// reading no later than the last is the same scrape, and only refits. `nominal` is a
    /// request's work before the replicas have said.
    pub fn note(&mut self, reading: Reading, window_s: f64, nominal: f64) -> Fitted {
        let fresh = reading.at.is_finite()
            && reading.work.is_finite()
            && reading.queued.is_finite()
            && self.last.is_none_or(|r| r.at < reading.at);
        if fresh {
            let now = reading.at;
            if let Some(a) = reading.admitted.filter(|a| *a > 0.0 && reading.work > 0.0) {
                self.per_request = Some(Point {
                    at: now,
                    value: reading.work / a,
                });
            }
            self.per_request = self
                .per_request
                .filter(|p| now - p.at <= PER_REQUEST_MEMORY_S);
            let w = self.per_request.map_or(nominal, |p| p.value);
            let unadmitted = self.last.map_or(0.0, |l| {
                (reading.queued - l.queued) / (now - l.at).max(f64::MIN_POSITIVE)
            });
            self.demands.retain(|p| now - p.at <= window_s);
            self.demands.push(Point {
                at: now,
                value: reading.work + w * unadmitted,
            });
            if self.demands.len() > MAX_POINTS {
                let excess = self.demands.len() - MAX_POINTS;
                self.demands.drain(..excess);
            }
            self.last = Some(reading);
        }
        self.fitted(nominal)
    }

    fn fitted(&self, nominal: f64) -> Fitted {
        let per_request = self.per_request.map_or(nominal, |p| p.value);
        let queued = self.last.map_or(0.0, |r| r.queued);
        let at = self.last.map_or(0.0, |r| r.at);
        Fitted {
            now: fitted(&self.demands, at)
                .unwrap_or_else(|| self.demands.last().map_or(0.0, |p| p.value)),
            slope: slope(&self.demands),
            per_request,
            queued,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds a reading every 5 s from `from` to `to` (work, admitted/s, queued at `t`).
    fn feed(m: &mut WorkMemory, from: f64, to: f64, r: impl Fn(f64) -> (f64, f64, f64)) -> Fitted {
        let mut t = from;
        let mut last = None;
        while t <= to {
            let (work, admitted, queued) = r(t);
            let reading = Reading {
                at: t,
                work,
                admitted: Some(admitted),
                queued,
            };
            last = Some(m.note(reading, 30.0, 0.06));
            t += 5.0;
        }
        last.unwrap()
    }

    #[test]
    fn noise_of_one_scrape_is_averaged_over_the_window() {
        let mut m = WorkMemory::default();
        // 0.3 replicas of work, read as 0.1 and 0.5 by turns.
        let f = feed(&mut m, 0.0, 120.0, |t| {
            let w = if (t / 5.0) as u32 % 2 == 0 { 0.1 } else { 0.5 };
            (w, w * 10.0, 0.0)
        });
        assert!((f.value(0.0) - 0.3).abs() < 0.1, "{f:?}");
        assert!((f.per_request - 0.1).abs() < 1e-9);
    }

    #[test]
    fn a_ramp_is_followed_without_lag_and_projected() {
        let mut m = WorkMemory::default();
        // Work rising 0.01 a second from 0.2.
        let f = feed(&mut m, 0.0, 60.0, |t| (0.2 + 0.01 * t, 10.0, 0.0));
        assert!((f.now - 0.8).abs() < 1e-9, "{f:?}");
        assert!((f.value(90.0) - 1.7).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn a_saturated_replica_reads_what_arrives_not_what_it_does() {
        let mut m = WorkMemory::default();
        // Calm: 0.5 replicas of work at 10 req/s, 0.05 each.
        feed(&mut m, 0.0, 60.0, |_| (0.5, 10.0, 0.0));
        // Then 30 req/s arrive on one replica that admits 20: the queue grows 10 a second.
        let f = feed(&mut m, 65.0, 125.0, |t| (1.0, 20.0, (t - 60.0) * 10.0));
        // 1 done + 10/s x 0.05 arriving unadmitted, and 650 queued x 0.05 cleared in 30 s.
        assert!((f.now - 1.5).abs() < 1e-9, "{f:?}");
        assert!((f.value(0.0) - (1.5 + 650.0 * 0.05 / 30.0)).abs() < 1e-9);
    }

    #[test]
    fn the_same_scrape_twice_counts_once_and_bad_readings_are_ignored() {
        let mut m = WorkMemory::default();
        feed(&mut m, 0.0, 30.0, |_| (0.4, 8.0, 0.0));
        let before = m.clone();
        let again = |work, admitted| Reading {
            at: 30.0,
            work,
            admitted,
            queued: 0.0,
        };
        m.note(again(9.0, Some(1.0)), 30.0, 0.06);
        m.note(
            Reading {
                at: 35.0,
                ..again(f64::NAN, None)
            },
            30.0,
            0.06,
        );
        assert_eq!(m, before);
    }
}
