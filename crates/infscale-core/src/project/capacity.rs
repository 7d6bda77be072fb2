//! What one replica carries, learned from what the replicas were seen to sustain: the rate per
//! replica that the forecast floor, the guard and the credit count on.
//!
//! A rate seen for one scrape interval says little: a five-second burst of short prompts admits
//! far more requests per second than a replica sustains, and a policy that remembers it as the
//! capacity orders too few replicas for the next peak. So only sustained rates count: the mean
//! per-replica admission rate over a whole window (the policy's trend window, 30 s by default) in
//! which every reading was within
//! the target with nothing waiting (a rate known to be safe), or in which requests were waiting
//! at every reading (the replicas admitting all they can: their capacity, for the mix of the
//! moment). The safe rate is the highest sustained safe rate remembered, never more than
//! [`SATURATED_SHARE`] of the capacity last measured: the capacity is the ceiling, and it is
//! measured again whenever the replicas saturate, so a mix of longer prompts lowers it within a
//! window.

use crate::project::lookahead::{Point, MAX_POINTS};
use serde::{Deserialize, Serialize};

/// The most a safe window's rate is raised for the room its replicas had left below the
/// target.
pub const ROOM_CREDIT: f64 = 1.25;

/// How long a sustained safe rate is remembered, seconds: a day, so that the rate the afternoon
/// proved safe still counts at the evening's last burst, when the replicas that proved it have
/// gone and the rate since has been too low to prove anything. It orders replicas only for a
/// rate that is there, so it holds nothing standing when the traffic falls.
pub const SAFE_MEMORY_S: f64 = 86_400.0;

/// How long a measured capacity is remembered, seconds: long enough to span a quiet spell,
/// short enough to follow a change of mix.
pub const CAPACITY_MEMORY_S: f64 = 1800.0;

/// The share of the capacity a replica is planned at: headroom for a burst within a scrape
/// interval and an uneven balancer.
pub const SATURATED_SHARE: f64 = 0.8;

/// One reading: the admitted rate per ready replica, and how the replicas were.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub at: f64,
    pub rate: f64,
    pub within: bool,
    pub saturated: bool,
    /// The target over the measured value per replica (above 1: room left before the target).
    #[serde(default = "one")]
    pub room: f64,
}

fn one() -> f64 {
    1.0
}

/// The learned rates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// The readings of the last window.
    #[serde(default)]
    pub recent: Vec<Reading>,
    /// Sustained rates per replica within the target.
    #[serde(default)]
    pub safe: Vec<Point>,
    /// Sustained rates per replica while saturated.
    #[serde(default)]
    pub saturated: Vec<Point>,
}

impl Capacity {
    /// Notes a reading (one per scrape: a reading no later than the last is ignored) and, once
    /// the last `sustain_s` seconds were alike, their mean.
    pub fn note(&mut self, reading: Reading, sustain_s: f64) {
        let now = reading.at;
        if !(reading.rate.is_finite() && reading.rate >= 0.0 && now.is_finite()) {
            return;
        }
        if self.recent.last().is_some_and(|r| r.at >= now) {
            return;
        }
        self.safe.retain(|p| now - p.at <= SAFE_MEMORY_S);
        self.saturated.retain(|p| now - p.at <= CAPACITY_MEMORY_S);
        self.recent.push(reading);
        // Keep the readings of the window, and the one just before it (its start).
        let keep_from = self
            .recent
            .iter()
            .rposition(|r| now - r.at >= sustain_s)
            .unwrap_or(0);
        self.recent.drain(..keep_from);
        let Some(first) = self.recent.first() else {
            return;
        };
        if now - first.at < sustain_s {
            return;
        }
        // The window's readings after its start: each one's rate covers the interval before it.
        let window = &self.recent[1..];
        let mean = window.iter().map(|r| r.rate).sum::<f64>() / window.len().max(1) as f64;
        if mean <= 0.0 {
            return;
        }
        let point = Point {
            at: now,
            value: mean,
        };
        if window.iter().all(|r| r.saturated) {
            push_bounded(&mut self.saturated, point);
        } else if window.iter().all(|r| r.within && !r.saturated) {
            // Replicas well within the target would have carried more: credit a bounded share of
            // the room they had left, so the rate to plan on can rise past what the replicas
            // happened to carry (they are added before they get busier) until they near the
            // target or saturate.
            let room = window.iter().map(|r| r.room).fold(f64::INFINITY, f64::min);
            let value = mean * room.clamp(1.0, ROOM_CREDIT);
            push_bounded(&mut self.safe, Point { at: now, value });
        }
    }

    /// The mean admitted rate per replica over the readings of the last window (the
    /// window's start excluded): a rate that a single scrape's burst does not move much.
    pub fn sustained_rate(&self) -> Option<f64> {
        let window = self.recent.get(1..).filter(|w| !w.is_empty())?;
        Some(window.iter().map(|r| r.rate).sum::<f64>() / window.len() as f64)
    }

    /// The capacity per replica last measured: the median of the sustained saturated rates
    /// remembered.
    pub fn measured(&self) -> Option<f64> {
        let mut rates: Vec<f64> = self.saturated.iter().map(|p| p.value).collect();
        if rates.is_empty() {
            return None;
        }
        rates.sort_by(f64::total_cmp);
        Some(rates[rates.len() / 2])
    }

    /// The rate per replica to plan on: the highest sustained safe rate, at most
    /// [`SATURATED_SHARE`] of the measured capacity (or that share alone, before any safe rate).
    pub fn safe_rate(&self) -> Option<f64> {
        let safe = self.safe.iter().map(|p| p.value).reduce(f64::max);
        let ceiling = self.measured().map(|c| SATURATED_SHARE * c);
        match (safe, ceiling) {
            (Some(s), Some(c)) => Some(s.min(c)),
            (s, c) => s.or(c),
        }
        .filter(|r| *r > 0.0)
    }
}

/// Appends `p`, keeping at most [`MAX_POINTS`]: past that, every other old point goes.
fn push_bounded(points: &mut Vec<Point>, p: Point) {
    points.push(p);
    if points.len() > MAX_POINTS {
        let mut i = 0;
        points.retain(|_| {
            i += 1;
            i % 2 == 0 || i > MAX_POINTS / 2
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(c: &mut Capacity, from: f64, to: f64, rate: impl Fn(f64) -> f64, saturated: bool) {
        let mut t = from;
        while t < to {
            c.note(
                Reading {
                    at: t,
                    rate: rate(t),
                    within: !saturated,
                    saturated,
                    room: 1.0,
                },
                30.0,
            );
            t += 5.0;
        }
    }

    #[test]
    fn a_short_burst_is_not_a_capacity() {
        let mut c = Capacity::default();
        // 10 req/s per replica, with one five-second burst at 19.4.
        feed(
            &mut c,
            0.0,
            300.0,
            |t| if t == 150.0 { 19.4 } else { 10.0 },
            false,
        );
        // The burst counts only as one reading of a 30 s window's six: at most 10 + 9.4 / 6.
        let safe = c.safe_rate().unwrap();
        assert!(safe < 11.6, "{safe}");
    }

    #[test]
    fn a_measured_capacity_caps_what_was_seen_safe() {
        let mut c = Capacity::default();
        feed(&mut c, 0.0, 300.0, |_| 16.0, false);
        assert_eq!(c.safe_rate(), Some(16.0));
        // Then the mix changes and the replicas saturate at 13.8 req/s.
        feed(&mut c, 300.0, 420.0, |_| 13.8, true);
        let safe = c.safe_rate().unwrap();
        assert!((safe - SATURATED_SHARE * 13.8).abs() < 1e-9, "{safe}");
        assert!(c.measured().is_some_and(|m| (m - 13.8).abs() < 1e-9));
    }

    #[test]
    fn mixed_windows_teach_nothing_and_old_readings_are_ignored() {
        let mut c = Capacity::default();
        let mut t = 0.0;
        while t < 300.0 {
            let saturated = (t / 5.0) as u32 % 2 == 0;
            c.note(
                Reading {
                    at: t,
                    rate: 12.0,
                    within: !saturated,
                    saturated,
                    room: 1.0,
                },
                30.0,
            );
            t += 5.0;
        }
        assert_eq!(c.safe_rate(), None);
        c.note(
            Reading {
                at: 10.0,
                rate: 99.0,
                within: true,
                saturated: false,
                room: 1.0,
            },
            30.0,
        );
        assert!(c.recent.iter().all(|r| r.rate != 99.0));
        assert!(c.recent.len() <= 14, "{}", c.recent.len());
    }
}
