//! Stabilisation windows over stored raw recommendations.
//!
//! With `behavior`, scale-up goes only to the lowest recommendation of its window and scale-down
//! only to the highest of its own (`stabilizeRecommendationWithBehaviors`); without it, only the
//! down window applies (`stabilizeRecommendation`). Both record the raw value, overwriting the
//! last record that fell out of every window instead of growing the list.

use crate::policy::behavior::Behavior;
use serde::{Deserialize, Serialize};

/// A raw recommendation and when it was made.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    pub at: f64,
    pub replicas: u32,
}

/// Records `desired` at `at`: over the last entry marked old, or appended.
fn record(history: &mut Vec<Recommendation>, old: Option<usize>, desired: u32, at: f64) {
    let entry = Recommendation {
        at,
        replicas: desired,
    };
    match old {
        Some(i) => history[i] = entry,
        None => history.push(entry),
    }
}

/// The behavior path. A record counts for a window of W seconds iff it is less than W seconds
/// old (a window of 0 ignores the history); the result is `current` clamped into
/// `[lowest in the up window, highest in the down window]`, both windows including `desired`.
pub fn with_behavior(
    history: &mut Vec<Recommendation>,
    behavior: &Behavior,
    default_down_window_s: u32,
    current: u32,
    desired: u32,
    now: f64,
) -> u32 {
    let up_window = f64::from(behavior.scale_up.window_s.unwrap_or(0));
    let down_window = f64::from(
        behavior
            .scale_down
            .window_s
            .unwrap_or(default_down_window_s),
    );
    let mut up_rec = desired;
    let mut down_rec = desired;
    let mut old = None;
    for (i, rec) in history.iter().enumerate() {
        let age = now - rec.at;
        if age < up_window {
            up_rec = up_rec.min(rec.replicas);
        }
        if age < down_window {
            down_rec = down_rec.max(rec.replicas);
        }
        if age > up_window && age > down_window {
            old = Some(i);
        }
    }
    let stabilized = current.max(up_rec).min(down_rec);
    record(history, old, desired, now);
    stabilized
}

/// The legacy path: the highest of `desired` and every record not older than the window (here a
/// record exactly `window` seconds old still counts).
pub fn legacy(history: &mut Vec<Recommendation>, window_s: u32, desired: u32, now: f64) -> u32 {
    let window = f64::from(window_s);
    let mut max = desired;
    let mut old = None;
    for (i, rec) in history.iter().enumerate() {
        if now - rec.at > window {
            old = Some(i);
        } else {
            max = max.max(rec.replicas);
        }
    }
    record(history, old, desired, now);
    max
}
