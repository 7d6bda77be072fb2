//! Table tests for the HPA stages, with the numbers written out.

use super::rate::{self, Events};
use super::stabilize;
use super::*;
use crate::policy::behavior::{
    Behavior, Controller, Limited, RateKind, RatePolicy, Rules, Select, Tolerances,
};

fn pods(value: u32, period_s: u32) -> RatePolicy {
    RatePolicy {
        kind: RateKind::Pods,
        value,
        period_s,
    }
}

fn percent(value: u32, period_s: u32) -> RatePolicy {
    RatePolicy {
        kind: RateKind::Percent,
        value,
        period_s,
    }
}

fn rules(select: Select, policies: Vec<RatePolicy>) -> Rules {
    Rules {
        window_s: Some(0),
        select,
        policies,
        tolerance: None,
    }
}

fn event(seconds_ago: f64, change: u32) -> ScaleEvent {
    ScaleEvent {
        at: 1000.0 - seconds_ago,
        change,
        outdated: false,
    }
}

const NOW: f64 = 1000.0;
const NO_EVENTS: Events<'static> = Events { up: &[], down: &[] };

fn spec(min: u32, max: u32, behavior: Behavior) -> Spec {
    Spec {
        min,
        max,
        behavior: Some(behavior),
    }
}

#[test]
fn scale_down_policies_from_eight_with_a_raw_two() {
    // (policies, select, expected)
    let cases = [
        (vec![pods(1, 15)], Select::Max, 7),
        (vec![percent(50, 15)], Select::Max, 4),
        (vec![pods(1, 15), percent(50, 15)], Select::Max, 4),
        (vec![pods(1, 15), percent(50, 15)], Select::Min, 7),
        (vec![pods(1, 15), percent(50, 15)], Select::Disabled, 8),
        (vec![percent(100, 15)], Select::Max, 2),
    ];
    for (policies, select, expected) in cases {
        let b = behavior_of(&policies, select);
        let (desired, _) = rate::with_behavior(8, 2, &spec(1, 10, b.clone()), &b, NO_EVENTS, NOW);
        assert_eq!(desired, expected, "{policies:?} {select:?}");
    }
}

fn behavior_of(policies: &[RatePolicy], select: Select) -> Behavior {
    Behavior {
        scale_up: Rules::default_up(),
        scale_down: rules(select, policies.to_vec()),
    }
}

#[test]
fn default_scale_up_is_four_pods_or_double_per_fifteen_seconds() {
    let b = Behavior::default();
    // (current, desired, expected)
    for (current, desired, expected) in [(1, 20, 5), (3, 20, 7), (6, 20, 12), (10, 50, 20)] {
        let (got, reason) = rate::with_behavior(
            current,
            desired,
            &spec(1, 100, b.clone()),
            &b,
            NO_EVENTS,
            NOW,
        );
        assert_eq!(
            (got, reason),
            (expected, Limited::ScaleUpLimit),
            "{current} -> {desired}"
        );
    }
    let (got, reason) = rate::with_behavior(6, 20, &spec(1, 9, b.clone()), &b, NO_EVENTS, NOW);
    assert_eq!((got, reason), (9, Limited::TooManyReplicas));
}

#[test]
fn percent_rounding_is_float64_exact() {
    let up = |current, value| {
        scale_up_limit_of(
            current,
            &rules(Select::Max, vec![percent(value, 15)]),
            NO_EVENTS,
        )
    };
    let down = |current, value| {
        rate::scale_down_limit(
            current,
            NO_EVENTS,
            &rules(Select::Max, vec![percent(value, 15)]),
            NOW,
        )
    };
    assert_eq!(up(3, 1), 4); // ceil(3.03)
    assert_eq!(up(50, 10), 56); // 50 * 1.1 = 55.00000000000001
    assert_eq!(down(5, 50), 2); // int(2.5)
    assert_eq!(down(10, 90), 0); // 10 * 0.09999999999999998
    assert_eq!(down(90, 30), 62); // int(62.99999999999999)
}

fn scale_up_limit_of(current: u32, rules: &Rules, events: Events<'_>) -> i64 {
    rate::scale_up_limit(current, events, rules, NOW)
}

#[test]
fn period_start_counts_both_directions() {
    // Up 4 and down 2 inside the period, current 6: the period started at 4; +300% is 16.
    let up = [event(100.0, 4)];
    let down = [event(50.0, 2)];
    let events = Events {
        up: &up,
        down: &down,
    };
    let limit = scale_up_limit_of(6, &rules(Select::Max, vec![percent(300, 300)]), events);
    assert_eq!(limit, 16);
}

#[test]
fn events_count_only_inside_each_policy_period() {
    let events = [event(100.0, 1), event(60.0, 3), event(20.0, 6)];
    assert_eq!(rate::change_in_period(60, &events, NOW), 6);
    assert_eq!(rate::change_in_period(120, &events, NOW), 10);
    assert_eq!(rate::change_in_period(20, &events, NOW), 0);
}

#[test]
fn limits_saturate_at_current() {
    // Pods 5 per 120 s after +15 inside it: the limit 90 is below 100, so no scale-up at all.
    let up = [event(30.0, 15)];
    let b = Behavior {
        scale_up: rules(Select::Max, vec![pods(5, 120)]),
        scale_down: Rules::default_down(),
    };
    let events = Events { up: &up, down: &[] };
    assert_eq!(
        rate::with_behavior(100, 120, &spec(1, 200, b.clone()), &b, events, NOW),
        (100, Limited::ScaleUpLimit)
    );
    // 10% per 120 s after -30 inside it: the limit 117 is above 100, so no scale-down.
    let down = [event(30.0, 30)];
    let b = Behavior {
        scale_up: Rules::default_up(),
        scale_down: rules(Select::Max, vec![percent(10, 120)]),
    };
    let events = Events {
        up: &[],
        down: &down,
    };
    assert_eq!(
        rate::with_behavior(100, 50, &spec(1, 200, b.clone()), &b, events, NOW),
        (100, Limited::ScaleDownLimit)
    );
}

#[test]
fn select_min_from_one_and_from_five() {
    let r = rules(Select::Min, vec![pods(2, 60), percent(50, 60)]);
    assert_eq!(scale_up_limit_of(1, &r, NO_EVENTS), 2);
    assert_eq!(rate::scale_down_limit(5, NO_EVENTS, &r, NOW), 3);
}

#[test]
fn stabilisation_with_behavior() {
    let b = |up: u32, down: u32| Behavior {
        scale_up: Rules {
            window_s: Some(up),
            ..Rules::default_up()
        },
        scale_down: Rules {
            window_s: Some(down),
            ..Rules::default_down()
        },
    };
    // (current, desired, history as (seconds ago, replicas), up window, down window, expected)
    type Case = (u32, u32, &'static [(f64, u32)], u32, u32, u32);
    let cases: [Case; 6] = [
        (100, 5, &[], 0, 0, 5),
        (2, 1, &[(180.0, 3)], 300, 300, 2),
        (1, 4, &[(60.0, 2)], 300, 0, 2),
        (5, 1, &[(200.0, 4), (100.0, 3)], 0, 300, 4),
        (5, 1, &[(400.0, 9), (100.0, 3)], 0, 300, 3),
        (5, 8, &[(10.0, 6)], 0, 0, 8),
    ];
    for (current, desired, history, up, down, expected) in cases {
        let mut recs: Vec<Recommendation> = history
            .iter()
            .map(|&(ago, replicas)| Recommendation {
                at: NOW - ago,
                replicas,
            })
            .collect();
        let got = stabilize::with_behavior(&mut recs, &b(up, down), 300, current, desired, NOW);
        assert_eq!(got, expected, "{current} -> {desired} over {history:?}");
        assert!(recs.iter().any(|r| r.at == NOW && r.replicas == desired));
    }
}

#[test]
fn stabilisation_overwrites_the_last_old_record() {
    let mut recs = vec![
        Recommendation {
            at: 0.0,
            replicas: 9,
        },
        Recommendation {
            at: 100.0,
            replicas: 8,
        },
        Recommendation {
            at: 900.0,
            replicas: 3,
        },
    ];
    stabilize::with_behavior(&mut recs, &Behavior::default(), 300, 3, 2, NOW);
    assert_eq!(recs.len(), 3);
    assert_eq!(
        recs[1],
        Recommendation {
            at: NOW,
            replicas: 2
        }
    );
}

#[test]
fn legacy_stabilisation_keeps_the_highest_in_the_window() {
    let mut recs = vec![
        Recommendation {
            at: NOW - 600.0,
            replicas: 10,
        },
        Recommendation {
            at: NOW - 60.0,
            replicas: 4,
        },
    ];
    assert_eq!(stabilize::legacy(&mut recs, 300, 2, NOW), 4);
    assert_eq!(recs.len(), 2);
    // A record exactly at the window's edge still counts on this path.
    let mut recs = vec![Recommendation {
        at: NOW - 300.0,
        replicas: 7,
    }];
    assert_eq!(stabilize::legacy(&mut recs, 300, 2, NOW), 7);
}

#[test]
fn legacy_rules_cap_scale_up_at_double_or_four() {
    let c = Controller::default();
    // (current, desired, min, max, expected)
    let cases = [
        (5, 7, 3, 8, (7, Limited::DesiredWithinRange)),
        (1, 20, 1, 100, (4, Limited::ScaleUpLimit)),
        (5, 20, 1, 100, (10, Limited::ScaleUpLimit)),
        (5, 20, 1, 8, (8, Limited::TooManyReplicas)),
        (5, 1, 3, 8, (3, Limited::TooFewReplicas)),
    ];
    for (current, desired, min, max, expected) in cases {
        assert_eq!(rate::legacy(&c, current, desired, min, max), expected);
    }
}

#[test]
fn scale_events_are_stored_by_direction_and_reuse_outdated_slots() {
    let b = Behavior::default();
    let mut state = State::default();
    rate::store_scale_event(&mut state, Some(&b), 2, 6, 0.0);
    rate::store_scale_event(&mut state, Some(&b), 6, 5, 5.0);
    assert_eq!(state.scale_up_events.len(), 1);
    assert_eq!(state.scale_down_events[0].change, 1);
    // 20 s later the first up event is older than the 15 s period: its slot is reused.
    rate::store_scale_event(&mut state, Some(&b), 5, 7, 20.0);
    assert_eq!(state.scale_up_events.len(), 1);
    assert_eq!(state.scale_up_events[0].change, 2);
}

#[test]
fn reconcile_prechecks_bypass_everything() {
    let c = Controller::default();
    let s = spec(2, 6, Behavior::default());
    let run = |current, proposal| {
        let mut state = State::default();
        reconcile(&c, &s, &mut state, current, proposal, NOW)
    };
    assert_eq!(run(0, Some(5)).outcome, Outcome::ScalingDisabled);
    assert_eq!(run(0, Some(5)).desired, 0);
    assert_eq!(
        (run(10, Some(1)).desired, run(10, Some(1)).outcome),
        (6, Outcome::AboveMax)
    );
    assert_eq!(
        (run(1, Some(1)).desired, run(1, Some(1)).outcome),
        (2, Outcome::BelowMin)
    );
    assert_eq!(
        (run(4, None).desired, run(4, None).outcome),
        (4, Outcome::NoMetrics)
    );
}

#[test]
fn the_first_reconcile_seeds_the_history_so_scale_down_waits() {
    let c = Controller::default();
    let s = spec(1, 10, Behavior::default());
    let mut state = State::default();
    let r = reconcile(&c, &s, &mut state, 5, Some(2), NOW);
    assert_eq!(r.desired, 5);
    // 301 s later the seeded recommendation has left the window.
    let r = reconcile(&c, &s, &mut state, 5, Some(2), NOW + 301.0);
    assert_eq!(r.desired, 2);
    assert_eq!(state.scale_down_events[0].change, 3);
}

#[test]
fn the_legacy_path_runs_without_behavior() {
    let c = Controller::default();
    let s = Spec {
        min: 1,
        max: 100,
        behavior: None,
    };
    let mut state = State::default();
    let r = reconcile(&c, &s, &mut state, 1, Some(20), NOW);
    assert_eq!(
        (r.desired, r.outcome),
        (4, Outcome::Normalized(Limited::ScaleUpLimit))
    );
    assert!(state.scale_up_events.is_empty());
}

#[test]
fn tolerances_come_from_behavior_or_the_flag() {
    let c = Controller::default();
    assert_eq!(c.tolerances(None), Tolerances::uniform(0.1));
    let mut b = Behavior::default();
    b.scale_up.tolerance = Some(0.05);
    assert_eq!(
        c.tolerances(Some(&b)),
        Tolerances {
            scale_down: 0.1,
            scale_up: 0.05
        }
    );
    let zero = Controller {
        tolerance: 0.0,
        ..c
    };
    assert_eq!(zero.tolerances(None), Tolerances::uniform(0.1));
}
