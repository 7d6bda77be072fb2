//! What KEDA itself does around the HPA it creates: activation and the step to and from zero.
//!
//! KEDA owns 0 <-> 1: a target is active while its scaler says so (infscale: requests running,
//! waiting or held above the activation level), and KEDA removes the last replica only after
//! `cooldownPeriod` seconds without an active poll. From 1 up the HPA decides, and KEDA's HPA
//! never goes below one replica.

/// KEDA's `IsActive` for a target: requests in flight (running, waiting and held) above the
/// activation level. Judged on requests, whatever the scaling metric, so a deployment that scales
/// on `waiting` is never taken to zero while its batch is still running.
pub fn is_active(in_flight: f64, activation: f64) -> bool {
    in_flight > activation
}

/// Remembers the last active moment; returns how long the target has been idle (`None`: never
/// seen active, which KEDA treats as idle for ever).
pub fn note_activity(last_active: &mut Option<f64>, active: bool, now: f64) -> Option<f64> {
    if active {
        *last_active = Some(now);
    }
    last_active.map(|t| (now - t).max(0.0))
}

/// Whether KEDA takes the last replica away now: inactive for at least the cooldown.
pub fn cooldown_elapsed(idle_s: Option<f64>, cooldown_s: f64) -> bool {
    idle_s.is_none_or(|idle| idle >= cooldown_s)
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
    fn activation_is_strictly_above_the_level() {
        assert!(!is_active(0.0, 0.0));
        assert!(is_active(1.0, 0.0));
        assert!(!is_active(2.0, 2.0));
    }
}
