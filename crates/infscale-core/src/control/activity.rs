//! Whether a target is active, idle, or cannot be told: the rules behind `IsActive`.
//!
//! Activity is a reading, never an absence. A target is active while requests run, wait or are
//! held above the activation level; while a ready replica could not be read (it may be busy);
//! and, after held requests were released, until a scrape that began after the release (they
//! run on a replica now, unseen by the scrape before). It is idle only when every replica was
//! read and all were idle and the activator's held count was read as nothing. Anything else
//! (no pod list yet, or an unreadable held count with nothing else active) cannot be told:
//! `serve` answers with an error, and KEDA neither wakes the target nor takes it to zero.

use crate::reasons::ActivityCause;
use serde::{Deserialize, Serialize};

/// What `IsActive` can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activity {
    Active,
    Idle,
    /// Nothing active was seen, and something could not be read.
    Unknown,
}

impl Activity {
    pub fn is_active(self) -> bool {
        self == Activity::Active
    }
}

/// What activity is judged on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Facts {
    /// Requests running or waiting on the replicas read, plus those held (when read).
    pub in_flight: f64,
    /// The activation level: active strictly above it.
    pub activation: f64,
    /// Ready replicas that could not be read.
    pub missing: u32,
    /// Whether the pods are known (a pod list, and a scrape of it).
    pub pods_known: bool,
    /// Whether the activator's held count was read (always, without an activator).
    pub held_known: bool,
    /// Whether the replicas' last scrape began at or after held requests were last seen.
    pub scraped_since_held: bool,
}

/// The activity the facts allow, and why.
pub fn judge(f: &Facts) -> (Activity, ActivityCause) {
    let (in_flight, activation) = (f.in_flight, f.activation);
    if in_flight > activation {
        let cause = ActivityCause::InFlight {
            in_flight,
            activation,
        };
        return (Activity::Active, cause);
    }
    if f.missing > 0 {
        let cause = ActivityCause::ReplicasUnread { missing: f.missing };
        return (Activity::Active, cause);
    }
    if !f.held_known {
        return (Activity::Unknown, ActivityCause::HeldUnread);
    }
    if !f.pods_known {
        return (Activity::Unknown, ActivityCause::PodsUnknown);
    }
    if !f.scraped_since_held {
        return (Activity::Active, ActivityCause::Released);
    }
    let cause = ActivityCause::Idle {
        in_flight,
        activation,
    };
    (Activity::Idle, cause)
}

/// What the decision remembers of the held count, for the release rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldMemory {
    /// The held count at the last evaluation that read it.
    #[serde(default)]
    pub last: f64,
    /// The last moment held requests were seen (or seen gone: a release is not seen before the
    /// evaluation that reads the drop).
    #[serde(default)]
    pub until: Option<f64>,
}

impl HeldMemory {
    /// Records the held count read at `now` (`None`: not read, nothing learnt).
    pub fn note(&mut self, held: Option<f64>, now: f64) {
        let Some(held) = held else { return };
        if held > 0.0 || self.last > 0.0 {
            self.until = Some(now);
        }
        self.last = held;
    }

    /// Whether a scrape that began at `scraped_at` would see what was held as running.
    pub fn seen_by(&self, scraped_at: Option<f64>) -> bool {
        match (scraped_at, self.until) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(s), Some(h)) => s >= h,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            in_flight: 0.0,
            activation: 0.0,
            missing: 0,
            pods_known: true,
            held_known: true,
            scraped_since_held: true,
        }
    }

    #[test]
    fn idle_only_when_everything_was_read() {
        assert_eq!(judge(&facts()).0, Activity::Idle);
        let unread = Facts {
            missing: 1,
            ..facts()
        };
        assert_eq!(judge(&unread).0, Activity::Active);
        let held_unread = Facts {
            held_known: false,
            ..facts()
        };
        assert_eq!(judge(&held_unread).0, Activity::Unknown);
        let no_pods = Facts {
            pods_known: false,
            ..facts()
        };
        assert_eq!(judge(&no_pods).0, Activity::Unknown);
        let released = Facts {
            scraped_since_held: false,
            ..facts()
        };
        assert_eq!(judge(&released).0, Activity::Active);
    }

    #[test]
    fn requests_in_flight_win_over_every_fault() {
        let f = Facts {
            in_flight: 1.0,
            missing: 3,
            pods_known: false,
            held_known: false,
            scraped_since_held: false,
            ..facts()
        };
        assert_eq!(judge(&f).0, Activity::Active);
        let at_level = Facts {
            in_flight: 2.0,
            activation: 2.0,
            ..facts()
        };
        assert_eq!(judge(&at_level).0, Activity::Idle);
    }

    #[test]
    fn a_release_is_active_until_a_later_scrape() {
        let mut m = HeldMemory::default();
        assert!(m.seen_by(Some(0.0)));
        m.note(Some(1.0), 10.0);
        m.note(Some(0.0), 12.0);
        assert_eq!(m.until, Some(12.0));
        assert!(!m.seen_by(Some(11.0)));
        assert!(m.seen_by(Some(12.0)));
        m.note(None, 20.0);
        m.note(Some(0.0), 30.0);
        assert_eq!(m.until, Some(12.0), "nothing held since 12 s");
        assert!(!m.seen_by(None));
    }
}
