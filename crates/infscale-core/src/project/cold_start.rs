//! The learned cold start: how long a target's pods take from creation to Ready, estimated from
//! the starts seen, for `lookaheadSeconds: auto`.
//!
//! The lookahead's horizon is the cold start, and a hand-set one goes stale as images, weights
//! and nodes change. `serve` sees each pod's creation time and the time its Ready condition last
//! turned True; [`ColdStarts`] keeps one sample per pod (the first seen), the [`MAX_STARTS`]
//! most recently created, and answers their median, bounded to [`BOUNDS`]. The median: one
//! pod that waited on a node, or whose readiness blipped long after its start, moves it by one
//! rank only, where a mean or a high quantile would follow it. Before any start is seen the
//! prior (`coldStartSeconds`) is the answer. At zero the activator's held requests time a
//! start as the users saw it, from the first request held to the first replica Ready (KEDA's
//! activation included): [`HoldTimer`] turns that into one more sample. Pure: no I/O, times
//! are parameters.

/// How many recent starts the estimate is taken over.
pub const MAX_STARTS: usize = 20;

/// The learned value's bounds, seconds: no faster than a process start, no slower than half an
/// hour (the lookahead's own bound is an hour).
pub const BOUNDS: (f64, f64) = (5.0, 1800.0);

/// One pod's start.
#[derive(Debug, Clone, PartialEq)]
struct Start {
    pod: String,
    created_s: f64,
    seconds: f64,
}

/// The wakes' lower bound, seconds: a wake from sleep takes well under a second at 8B.
pub const WAKE_FLOOR_S: f64 = 0.1;

/// The starts seen of one target.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdStarts {
    starts: Vec<Start>,
    /// The learned value's lower bound: [`BOUNDS`]'s for cold starts, [`WAKE_FLOOR_S`] for wakes.
    floor: f64,
}

impl Default for ColdStarts {
    fn default() -> Self {
        ColdStarts {
            starts: Vec::new(),
            floor: BOUNDS.0,
        }
    }
}

impl ColdStarts {
    /// The wakes of one target, from asleep to awake ([`crate::project::wake`]): a start path
    /// of its own, learned apart from the cold start, with the same median and a lower floor.
    pub fn wakes() -> Self {
        ColdStarts {
            starts: Vec::new(),
            floor: WAKE_FLOOR_S,
        }
    }

    /// Records that `pod`, created at `created_s`, became Ready at `ready_s` (both on one
    /// clock). A pod already recorded, a negative or non-finite duration is ignored. Returns
    /// whether the sample was taken.
    pub fn observe(&mut self, pod: &str, created_s: f64, ready_s: f64) -> bool {
        let seconds = ready_s - created_s;
        if !(seconds.is_finite() && created_s.is_finite() && seconds >= 0.0)
            || self.starts.iter().any(|s| s.pod == pod)
        {
            return false;
        }
        self.starts.push(Start {
            pod: pod.to_owned(),
            created_s,
            seconds,
        });
        if self.starts.len() > MAX_STARTS {
            // Drop the oldest-created start.
            if let Some(oldest) = self
                .starts
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.created_s.total_cmp(&b.1.created_s))
                .map(|(i, _)| i)
            {
                self.starts.remove(oldest);
            }
        }
        true
    }

    /// Whether these are wakes ([`ColdStarts::wakes`]).
    pub fn is_wakes(&self) -> bool {
        self.floor < BOUNDS.0
    }

    /// How many starts the estimate rests on.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The median of the recent starts, bounded to [`BOUNDS`] (from [`WAKE_FLOOR_S`] for
    /// wakes); `None` before any is seen.
    pub fn learned(&self) -> Option<f64> {
        let mut s: Vec<f64> = self.starts.iter().map(|s| s.seconds).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(median.clamp(self.floor, BOUNDS.1))
    }

    /// The horizon to use: the learned value, or `prior` before any start is seen.
    pub fn horizon(&self, prior: f64) -> f64 {
        self.learned().unwrap_or(prior)
    }
}

/// Times a wake from zero: from the moment requests are held with no replica Ready to the
/// moment one is. A hold that ends with no replica (the requests timed out) is no sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HoldTimer {
    since: Option<f64>,
    wakes: u64,
}

impl HoldTimer {
    /// Notes what is known at `now`: the Ready replicas (`None`: not known) and the requests
    /// held (`None`: not read). Returns a finished wake as `(name, held_from, ready_at)`, for
    /// [`ColdStarts::observe`].
    pub fn note(
        &mut self,
        ready: Option<usize>,
        held: Option<f64>,
        now: f64,
    ) -> Option<(String, f64, f64)> {
        match (ready, held) {
            (Some(0), Some(h)) if h > 0.0 => {
                self.since.get_or_insert(now);
                None
            }
            (Some(0), Some(_)) => {
                self.since = None;
                None
            }
            // Still at zero, the held count not read: the wake goes on.
            (Some(0), None) | (None, _) => None,
            (Some(_), _) => {
                let from = self.since.take()?;
                self.wakes += 1;
                Some((format!("wake-{}", self.wakes), from, now))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_from_zero_is_timed_from_the_first_held_request() {
        let mut t = HoldTimer::default();
        assert_eq!(t.note(Some(0), Some(0.0), 0.0), None);
        assert_eq!(t.note(Some(0), Some(2.0), 10.0), None);
        assert_eq!(t.note(Some(0), Some(5.0), 30.0), None);
        assert_eq!(
            t.note(None, None, 40.0),
            None,
            "nothing known changes nothing"
        );
        assert_eq!(
            t.note(Some(0), None, 50.0),
            None,
            "the count unread, still at zero"
        );
        assert_eq!(
            t.note(Some(1), Some(5.0), 75.0),
            Some(("wake-1".into(), 10.0, 75.0))
        );
        assert_eq!(
            t.note(Some(1), Some(0.0), 80.0),
            None,
            "one sample per wake"
        );
        // Held, then given up (timed out) before any replica: no sample.
        assert_eq!(t.note(Some(0), Some(1.0), 100.0), None);
        assert_eq!(t.note(Some(0), Some(0.0), 400.0), None);
        assert_eq!(t.note(Some(1), Some(0.0), 500.0), None);
    }

    #[test]
    fn starts_of_40_and_60_s_give_a_horizon_between_them() {
        let mut c = ColdStarts::default();
        assert_eq!(c.horizon(90.0), 90.0, "the prior before any start");
        assert!(c.observe("a", 1_000.0, 1_040.0));
        assert!(c.observe("b", 1_010.0, 1_070.0));
        assert_eq!(c.learned(), Some(50.0));
        assert_eq!(c.horizon(90.0), 50.0);
    }

    #[test]
    fn one_sample_per_pod_and_bad_times_ignored() {
        let mut c = ColdStarts::default();
        assert!(c.observe("a", 0.0, 40.0));
        assert!(!c.observe("a", 0.0, 400.0), "a pod counts once");
        assert!(!c.observe("b", 100.0, 90.0), "ready before created");
        assert!(!c.observe("c", f64::NAN, 90.0));
        assert_eq!(c.len(), 1);
        assert_eq!(c.learned(), Some(40.0));
    }

    #[test]
    fn the_median_resists_an_outlier() {
        let mut c = ColdStarts::default();
        for (i, s) in [40.0, 45.0, 50.0, 55.0, 3_000.0].iter().enumerate() {
            c.observe(&format!("p{i}"), i as f64, i as f64 + s);
        }
        assert_eq!(c.learned(), Some(50.0));
    }

    #[test]
    fn bounded_and_recent() {
        let mut c = ColdStarts::default();
        c.observe("fast", 0.0, 0.5);
        assert_eq!(c.learned(), Some(BOUNDS.0));
        let mut c = ColdStarts::default();
        c.observe("slow", 0.0, 1e6);
        assert_eq!(c.learned(), Some(BOUNDS.1));
        // Old slow starts age out as newer ones arrive.
        let mut c = ColdStarts::default();
        for i in 0..MAX_STARTS {
            c.observe(&format!("old{i}"), i as f64, i as f64 + 300.0);
        }
        for i in 0..MAX_STARTS {
            let at = 1_000.0 + i as f64;
            c.observe(&format!("new{i}"), at, at + 30.0);
        }
        assert_eq!(c.len(), MAX_STARTS);
        assert_eq!(c.learned(), Some(30.0));
    }
}
