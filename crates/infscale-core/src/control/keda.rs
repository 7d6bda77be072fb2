//! What KEDA itself does around the HPA it creates: activation and the step to and from zero.
//!
//! KEDA owns 0 <-> 1: a target is active while its scaler says so (infscale: requests running,
//! waiting or held above the activation level), and KEDA removes the last replica only after
//! `cooldownPeriod` seconds without an active poll. From 1 up the HPA decides, and KEDA's HPA
//! never goes below one replica. [`poll`] is one pass of KEDA's operator loop. Activity itself is
//! judged on requests, whatever the scaling metric (`activity::judge`), so a deployment that
//! scales on `waiting` is never taken to zero while its batch is still running. When `IsActive`
//! fails (activity unknown), KEDA neither wakes the target nor takes it to zero, and the failed
//! poll does not count as active.

use crate::control::activity::Activity;
use crate::reasons::Step;

/// Remembers the last active moment; returns how long the target has been idle (`None`: never
/// seen active, which KEDA treats as idle for ever).
pub fn note_activity(last_active: &mut Option<f64>, active: bool, now: f64) -> Option<f64> {
    if active {
        *last_active = Some(now);
    }
    last_active.map(|t| (now - t).max(0.0))
}

/// Whether KEDA takes the last replica away now: inactive for at least the cooldown.
fn cooldown_elapsed(idle_s: Option<f64>, cooldown_s: f64) -> bool {
    idle_s.is_none_or(|idle| idle >= cooldown_s)
}

/// What one poll of KEDA's operator does to a target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Poll {
    /// At zero and active (or with a minimum above zero): scale to `to` (max(min, 1)).
    Activate { to: u32 },
    /// Inactive for the cooldown with min 0: scale to zero.
    ToZero { idle_s: Option<f64> },
    /// Nothing for KEDA to do; the HPA owns the count (or it stays at zero).
    Keep { idle_s: Option<f64> },
}

/// One poll: records activity in `last_active`, then wakes a target at zero or takes its last
/// replica away after the cooldown (only on an idle answer, never on an unknown one).
pub fn poll(
    min: u32,
    cooldown_s: f64,
    current: u32,
    activity: Activity,
    last_active: &mut Option<f64>,
    now: f64,
) -> Poll {
    let active = activity.is_active();
    let idle_s = note_activity(last_active, active, now);
    if current == 0 {
        if active || min > 0 {
            return Poll::Activate { to: min.max(1) };
        }
        return Poll::Keep { idle_s };
    }
    if min == 0 && activity == Activity::Idle && cooldown_elapsed(idle_s, cooldown_s) {
        return Poll::ToZero { idle_s };
    }
    Poll::Keep { idle_s }
}

/// Why KEDA takes the last replica away: the reason line of the step, as data.
pub fn to_zero_line(idle_s: Option<f64>, cooldown_s: f64) -> Step {
    Step::ToZero { idle_s, cooldown_s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_and_cooldown() {
        let mut last = None;
        assert_eq!(note_activity(&mut last, false, 0.0), None);
        assert!(cooldown_elapsed(None, 300.0));
        assert_eq!(note_activity(&mut last, true, 10.0), Some(0.0));
        assert_eq!(note_activity(&mut last, false, 250.0), Some(240.0));
        assert!(!cooldown_elapsed(Some(240.0), 300.0));
        assert!(cooldown_elapsed(Some(300.0), 300.0));
    }

    #[test]
    fn polls_wake_and_sleep() {
        let mut last = None;
        assert_eq!(
            poll(0, 60.0, 0, Activity::Idle, &mut last, 0.0),
            Poll::Keep { idle_s: None }
        );
        assert_eq!(
            poll(0, 60.0, 0, Activity::Active, &mut last, 10.0),
            Poll::Activate { to: 1 }
        );
        assert_eq!(
            poll(0, 60.0, 1, Activity::Idle, &mut last, 40.0),
            Poll::Keep { idle_s: Some(30.0) }
        );
        assert_eq!(
            poll(0, 60.0, 1, Activity::Idle, &mut last, 70.0),
            Poll::ToZero { idle_s: Some(60.0) }
        );
        assert_eq!(
            poll(2, 60.0, 0, Activity::Idle, &mut last, 80.0),
            Poll::Activate { to: 2 }
        );
        assert_eq!(
            poll(1, 60.0, 3, Activity::Idle, &mut last, 900.0),
            Poll::Keep {
                idle_s: Some(890.0)
            }
        );
    }

    #[test]
    fn an_unknown_answer_never_sleeps() {
        let mut last = Some(0.0);
        assert_eq!(
            poll(0, 60.0, 1, Activity::Unknown, &mut last, 600.0),
            Poll::Keep {
                idle_s: Some(600.0)
            }
        );
        assert_eq!(
            poll(0, 60.0, 0, Activity::Unknown, &mut last, 700.0),
            Poll::Keep {
                idle_s: Some(700.0)
            }
        );
    }
}
