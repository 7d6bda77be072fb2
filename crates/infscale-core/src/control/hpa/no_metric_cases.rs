//! A reconcile when no metric can be read, and the scale-event store, against Kubernetes' own
//! cases (`TestTooFewReplicas`, `TestZeroReplicas`, `TestTooManyReplicas` and
//! `TestStoreScaleEvents` in `pkg/controller/podautoscaler/horizontal_test.go`,
//! `TestHPAScaleUpToMin` in `test/integration/podautoscaler/podautoscaler_test.go`).

use super::rate;
use super::*;
use crate::policy::behavior::{Behavior, Controller, RateKind, RatePolicy, Rules, Select};

const NOW: f64 = 1000.0;

fn spec(min: u32, max: u32, behavior: Option<Behavior>) -> Spec {
    Spec { min, max, behavior }
}

fn unread(spec: &Spec, current: u32) -> (Reconciled, State) {
    let mut state = State::default();
    let r = reconcile(&Controller::default(), spec, &mut state, current, None, NOW);
    (r, state)
}

#[test]
fn below_min_goes_to_min_without_any_metric() {
    for behavior in [None, Some(Behavior::default())] {
        // TestHPAScaleUpToMin: 1 replica, min 2, no metric served.
        let (r, _) = unread(&spec(2, 10, behavior.clone()), 1);
        assert_eq!((r.desired, r.outcome), (2, Outcome::BelowMin));
        assert_eq!(
            r.outcome.reason(),
            "Current number of replicas below Spec.MinReplicas"
        );
        // TestTooFewReplicas: 2 replicas, min 3, max 5.
        let (r, _) = unread(&spec(3, 5, behavior), 2);
        assert_eq!((r.desired, r.outcome), (3, Outcome::BelowMin));
    }
}

#[test]
fn inside_the_range_the_count_is_kept_without_any_metric() {
    for behavior in [None, Some(Behavior::default())] {
        // Once at the minimum, a second unread reconcile does not move it.
        let (r, state) = unread(&spec(2, 10, behavior.clone()), 2);
        assert_eq!((r.desired, r.outcome), (2, Outcome::NoMetrics));
        assert_eq!(r.outcome.reason(), "FailedComputeMetricsReplicas");
        assert!(state.scale_up_events.is_empty() && state.scale_down_events.is_empty());
        // With a minimum of 0, zero replicas and nothing to read stays at zero.
        let (r, _) = unread(&spec(0, 10, behavior), 0);
        assert_eq!((r.desired, r.outcome), (0, Outcome::NoMetrics));
    }
}

#[test]
fn zero_with_a_minimum_stays_zero_and_above_max_goes_to_max() {
    // TestZeroReplicas: 0 replicas, min 3: autoscaling is disabled.
    let (r, state) = unread(&spec(3, 5, None), 0);
    assert_eq!((r.desired, r.outcome), (0, Outcome::ScalingDisabled));
    assert_eq!(r.outcome.reason(), "ScalingDisabled");
    assert!(state.scale_up_events.is_empty());
    // TestTooManyReplicas: 10 replicas, max 5.
    let (r, _) = unread(&spec(3, 5, None), 10);
    assert_eq!((r.desired, r.outcome), (5, Outcome::AboveMax));
}

#[test]
fn a_scale_to_min_is_stored_as_a_scale_event_with_behavior_only() {
    let (_, state) = unread(&spec(2, 10, Some(Behavior::default())), 1);
    assert_eq!(state.scale_up_events.len(), 1);
    assert_eq!(state.scale_up_events[0].change, 1);
    let (_, state) = unread(&spec(2, 10, None), 1);
    assert!(state.scale_up_events.is_empty());
}

/// (per-metric proposals, current, combined)
type Combination = (&'static [Option<u32>], u32, Option<u32>);

#[test]
fn metrics_combine_as_the_largest_unless_a_failure_would_allow_a_scale_down() {
    let cases: [Combination; 7] = [
        (&[], 3, None),
        (&[None], 3, None),
        (&[None, None], 3, None),
        (&[Some(4), Some(2)], 3, Some(4)),
        // TestScaleUpOneMetricEmpty: CPU says 4, the external metric fails: scale up to 4.
        (&[Some(4), None], 3, Some(4)),
        // TestNoScaleDownOneMetricEmpty: CPU says 3 from 5, the other fails: no change.
        (&[Some(3), None], 5, None),
        (&[None, Some(5)], 5, Some(5)),
    ];
    for (proposals, current, expected) in cases {
        assert_eq!(
            replicas_for_metrics(proposals, current),
            expected,
            "{proposals:?} at {current}"
        );
    }
}

fn event(seconds_ago: f64, change: u32, outdated: bool) -> ScaleEvent {
    ScaleEvent {
        at: NOW - seconds_ago,
        change,
        outdated,
    }
}

#[test]
fn store_scale_events_as_kubernetes_does() {
    let rules = |policies: Vec<RatePolicy>| Rules {
        window_s: Some(0),
        select: Select::Max,
        policies,
        tolerance: None,
    };
    let pods = |value, period_s| RatePolicy {
        kind: RateKind::Pods,
        value,
        period_s,
    };
    let percent = |value, period_s| RatePolicy {
        kind: RateKind::Percent,
        value,
        period_s,
    };
    // TestStoreScaleEvents "replace one entry, use policies with different periods": the
    // longest period is 60 s, both 61 s old events are marked, the last one is overwritten.
    let mut events = vec![
        event(29.0, 8, false),
        event(59.0, 6, false),
        event(61.0, 7, false),
        event(61.0, 9, false),
    ];
    rate::store_event(
        &mut events,
        &rules(vec![pods(10, 60), percent(100, 30)]),
        5,
        NOW,
    );
    let kept: Vec<(u32, bool)> = events.iter().map(|e| (e.change, e.outdated)).collect();
    assert_eq!(kept, [(8, false), (6, false), (7, true), (5, false)]);
    // "two entries, both actual": nothing is older than 120 s, so the event is appended.
    let mut events = vec![event(58.0, 7, false), event(59.0, 6, false)];
    rate::store_event(
        &mut events,
        &rules(vec![pods(10, 120), percent(100, 30)]),
        5,
        NOW,
    );
    assert_eq!(events.len(), 3);
    // "one outdated entry to be kept untouched without behavior".
    let mut state = State {
        scale_down_events: vec![event(61.0, 7, false)],
        ..State::default()
    };
    rate::store_scale_event(&mut state, None, 10, 5, NOW);
    assert_eq!(state.scale_down_events, vec![event(61.0, 7, false)]);
}
