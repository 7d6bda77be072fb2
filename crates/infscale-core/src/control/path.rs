//! Serve mode: when the activator belongs in a model Service's path, and when `IsActive` may
//! say idle.
//!
//! In serve mode clients call the model's own Service. The activator is added to that Service
//! (an EndpointSlice infscale owns) only while it is needed: while no replica is Ready, while
//! requests are held (a wake, until the release has sent them), and while the target is idle,
//! so that the step to zero finds it already there. Everything else goes straight to the pods.
//!
//! Two orderings keep every request. On the way down, `IsActive` says idle only once the
//! activator is seen answering through the Service; until then the target stays active, so KEDA
//! never takes the last replica while the Service points only at it. On the way up, the
//! activator leaves only after the replicas are Ready, nothing is held, and the target has been
//! busy for [`PathRule::settle_s`]: a target that flickers between idle and busy around its
//! activation level does not rewrite the Service's endpoints every scrape.

/// What the rule is told at one evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathFacts {
    pub now: f64,
    /// Ready replicas, when known.
    pub ready: Option<usize>,
    /// Requests held at the activator (unknown counts as some).
    pub held: Option<f64>,
    /// The evaluation's own answer: idle (`IsActive` false).
    pub idle: bool,
    /// The activator was seen answering through the Service since it last entered.
    pub answering: bool,
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathDecision {
    /// Keep (or put) the activator in the Service's path.
    pub in_path: bool,
    /// Answer `IsActive` true although the evaluation says idle: the activator is not yet seen
    /// answering through the Service.
    pub hold_active: bool,
}

/// The rule and its memory.
#[derive(Debug, Clone, PartialEq)]
pub struct PathRule {
    /// How long the target must be busy, with Ready replicas and nothing held, before the
    /// activator leaves the path, seconds.
    pub settle_s: f64,
    /// Since when it has been so.
    busy_since: Option<f64>,
    /// Whether the activator is in the path now (as last decided).
    in_path: bool,
}

impl PathRule {
    /// A rule that starts with the activator in the path: the safe side until the first facts.
    pub fn new(settle_s: f64) -> PathRule {
        PathRule {
            settle_s,
            busy_since: None,
            in_path: true,
        }
    }

    pub fn decide(&mut self, f: PathFacts) -> PathDecision {
        let needed = f.idle || f.ready.is_none_or(|n| n == 0) || f.held.is_none_or(|h| h > 0.0);
        if needed {
            self.busy_since = None;
            self.in_path = true;
        } else {
            let since = *self.busy_since.get_or_insert(f.now);
            if f.now - since >= self.settle_s {
                self.in_path = false;
            }
        }
        PathDecision {
            in_path: self.in_path,
            hold_active: f.idle && !(self.in_path && f.answering),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(now: f64, ready: usize, held: f64, idle: bool, answering: bool) -> PathFacts {
        PathFacts {
            now,
            ready: Some(ready),
            held: Some(held),
            idle,
            answering,
        }
    }

    #[test]
    fn busy_with_ready_replicas_leaves_the_path_after_the_settle() {
        let mut r = PathRule::new(30.0);
        assert!(r.decide(facts(0.0, 2, 0.0, false, false)).in_path);
        assert!(r.decide(facts(29.0, 2, 0.0, false, false)).in_path);
        let d = r.decide(facts(30.0, 2, 0.0, false, false));
        assert_eq!(
            d,
            PathDecision {
                in_path: false,
                hold_active: false
            }
        );
    }

    #[test]
    fn idle_waits_for_the_activator_to_answer_before_saying_so() {
        let mut r = PathRule::new(0.0);
        r.decide(facts(0.0, 1, 0.0, false, false));
        let d = r.decide(facts(5.0, 1, 0.0, true, false));
        assert!(d.in_path && d.hold_active, "{d:?}");
        let d = r.decide(facts(6.0, 1, 0.0, true, true));
        assert!(d.in_path && !d.hold_active, "{d:?}");
    }

    #[test]
    fn a_wake_keeps_the_path_until_the_held_are_sent_and_replicas_ready() {
        let mut r = PathRule::new(10.0);
        // At zero, a request held: active, in the path.
        let d = r.decide(facts(0.0, 0, 1.0, false, true));
        assert!(d.in_path && !d.hold_active);
        // Ready, but the release still sending.
        assert!(r.decide(facts(90.0, 1, 3.0, false, true)).in_path);
        // Sent: busy from now, out after the settle.
        assert!(r.decide(facts(91.0, 1, 0.0, false, true)).in_path);
        assert!(!r.decide(facts(101.0, 1, 0.0, false, true)).in_path);
    }

    #[test]
    fn unknown_counts_keep_the_activator_in_the_path() {
        let mut r = PathRule::new(0.0);
        let unknown = PathFacts {
            now: 0.0,
            ready: None,
            held: Some(0.0),
            idle: false,
            answering: false,
        };
        assert!(r.decide(unknown).in_path);
        let held_unknown = PathFacts {
            ready: Some(2),
            held: None,
            ..unknown
        };
        assert!(r.decide(held_unknown).in_path);
    }

    #[test]
    fn a_flicker_to_idle_restarts_the_settle() {
        let mut r = PathRule::new(30.0);
        r.decide(facts(0.0, 2, 0.0, false, false));
        r.decide(facts(20.0, 2, 0.0, true, true));
        assert!(r.decide(facts(35.0, 2, 0.0, false, true)).in_path);
        assert!(!r.decide(facts(65.0, 2, 0.0, false, true)).in_path);
    }
}
