//! Capacity held through the gaps the traffic has shown it comes back from (`hold=auto`; its
//! step to zero alone is `hold=idle`): a break-even rule per replica, zero included.
//!
//! A replica given back in a lull costs a cold start when the load returns: its billing during
//! the start, and the first tokens that wait meanwhile. Kept through the lull, it costs the lull.
//! Which is cheaper depends on how long lulls last, and the target's own history says that: each
//! time the replicas needed fell below some count and came back to it, the length of that gap is
//! remembered for that count. A count is then held, after the need falls below it, for as long
//! as the longest gap it came back from within the last hour (with a margin), and for at least
//! the cold start (a gap shorter than a cold start is cheaper to bridge whatever happens next: the
//! bound's own rule). Bursts a few minutes apart therefore keep their replicas, a steady fall
//! gives them back a cold start later, and a silence longer than any gap seen (a night) ends at
//! zero. At one replica the same rule answers `IsActive`: a target whose traffic has come back
//! after idle gaps of four minutes stays active through a lull of three.

use serde::{Deserialize, Serialize};

/// A dip shorter than this is noise between two readings, not a gap, seconds.
pub const MIN_GAP_S: f64 = 15.0;

/// Gaps longer than this are not bridged however often they were seen (a night), seconds.
pub const MAX_HOLD_S: f64 = 1800.0;

/// How long a gap is remembered, seconds.
pub const GAP_MEMORY_S: f64 = 3600.0;

/// A learned hold is this much longer than the longest gap it came from.
pub const MARGIN: f64 = 1.25;

/// Gaps remembered at most, over all counts.
const MAX_GAPS: usize = 256;

/// One gap: the count the need fell below and came back to, when it came back, and how long it
/// had been below.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    pub level: u32,
    pub at: f64,
    pub seconds: f64,
}

/// What the rule remembers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    /// For each count `k` (index `k - 1`), when the need last reached it.
    #[serde(default)]
    pub last_needed: Vec<f64>,
    #[serde(default)]
    pub gaps: Vec<Gap>,
}

/// The count held at one moment, and for how long each is held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held {
    /// The highest count still within its hold (0: none).
    pub count: u32,
    /// That count's hold, seconds.
    pub hold_s: f64,
    /// The longest gap behind it, when one was learned.
    pub learned_gap_s: Option<f64>,
}

impl Hold {
    /// Notes that `need` replicas are needed at `now`: a count reached again after a gap
    /// remembers the gap.
    pub fn note(&mut self, need: u32, now: f64) {
        if !now.is_finite() {
            return;
        }
        self.gaps
            .retain(|g| now - g.at <= GAP_MEMORY_S && g.at <= now);
        let need = need.min(1024) as usize;
        if self.last_needed.len() < need {
            self.last_needed.resize(need, f64::NAN);
        }
        for (i, last) in self.last_needed.iter_mut().enumerate().take(need) {
            let gap = now - *last;
            if (MIN_GAP_S..=MAX_HOLD_S).contains(&gap) {
                self.gaps.push(Gap {
                    level: i as u32 + 1,
                    at: now,
                    seconds: gap,
                });
            }
            *last = now;
        }
        if self.gaps.len() > MAX_GAPS {
            let excess = self.gaps.len() - MAX_GAPS;
            self.gaps.drain(..excess);
        }
    }

    /// The same memory with its times `seconds` earlier (the day before a run).
    pub fn earlier_by(&self, seconds: f64) -> Hold {
        Hold {
            last_needed: self.last_needed.iter().map(|t| t - seconds).collect(),
            gaps: self
                .gaps
                .iter()
                .map(|g| Gap {
                    at: g.at - seconds,
                    ..*g
                })
                .collect(),
        }
    }

    /// How long count `level` is held after the need falls below it: the longest gap it came
    /// back from, with the margin, and at least `base` (the cold start); at most [`MAX_HOLD_S`].
    pub fn hold_for(&self, level: u32, base: f64) -> (f64, Option<f64>) {
        let learned = self
            .gaps
            .iter()
            .filter(|g| g.level == level)
            .map(|g| g.seconds)
            .reduce(f64::max);
        let hold = learned.map_or(base, |g| (MARGIN * g).max(base));
        (hold.min(MAX_HOLD_S), learned)
    }

    /// The highest count within its hold at `now`, below the need or not.
    pub fn held(&self, now: f64, base: f64) -> Held {
        for (i, last) in self.last_needed.iter().enumerate().rev() {
            let level = i as u32 + 1;
            let (hold_s, learned_gap_s) = self.hold_for(level, base);
            if now - last <= hold_s {
                return Held {
                    count: level,
                    hold_s,
                    learned_gap_s,
                };
            }
        }
        Held {
            count: 0,
            hold_s: base,
            learned_gap_s: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds the need every 5 s from `from` to `to`.
    fn feed(h: &mut Hold, from: f64, to: f64, need: impl Fn(f64) -> u32) {
        let mut t = from;
        while t < to {
            h.note(need(t), t);
            t += 5.0;
        }
    }

    #[test]
    fn a_steady_fall_gives_replicas_back_a_cold_start_later() {
        let mut h = Hold::default();
        feed(&mut h, 0.0, 300.0, |_| 4);
        feed(&mut h, 300.0, 400.0, |_| 1);
        assert!(h.gaps.is_empty());
        // 4 was last needed at 295 s: held to 385 s with a 90 s cold start, then 1.
        assert_eq!(h.held(380.0, 90.0).count, 4);
        assert_eq!(h.held(395.0, 90.0).count, 1);
    }

    #[test]
    fn bursts_minutes_apart_keep_their_replicas() {
        let mut h = Hold::default();
        // Bursts needing 3 for a minute, with 3-minute lulls needing 1.
        let burst = |t: f64| if t % 240.0 < 60.0 { 3 } else { 1 };
        feed(&mut h, 0.0, 1000.0, burst);
        let (hold, learned) = h.hold_for(3, 90.0);
        assert!(
            learned.is_some_and(|g| (180.0..=190.0).contains(&g)),
            "{learned:?}"
        );
        assert!(hold >= 180.0 * MARGIN, "{hold}");
        // In the middle of the next lull the three are still held.
        assert_eq!(h.held(960.0 + 150.0, 90.0).count, 3);
    }

    #[test]
    fn a_night_is_never_bridged() {
        let mut h = Hold::default();
        feed(
            &mut h,
            0.0,
            600.0,
            |t| if t % 300.0 < 100.0 { 1 } else { 0 },
        );
        assert!(h.hold_for(1, 60.0).1.is_some());
        // Silent for two hours: the gaps were forgotten and the hold has long ended.
        assert_eq!(h.held(600.0 + 7200.0, 60.0).count, 0);
        h.note(1, 600.0 + 7200.0);
        assert!(h.gaps.iter().all(|g| g.seconds <= MAX_HOLD_S));
    }
}
