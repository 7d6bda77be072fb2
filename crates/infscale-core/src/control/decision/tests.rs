//! The decision end to end, with the numbers written out.

use super::*;
use crate::observe::metrics::histogram::Histogram;
use crate::observe::metrics::{Counters, Rates, Replica, Server, Signals};
use crate::reasons::Measured;

fn replica(running: f64, waiting: f64) -> Replica {
    Replica::new(
        format!("pod-{running}-{waiting}"),
        Signals {
            server: Server::Vllm,
            running: Some(running),
            waiting,
            kv: None,
            asleep: None,
            counters: Counters::default(),
        },
        None,
    )
}

fn with_kv(kv: f64) -> Replica {
    let mut r = replica(1.0, 0.0);
    r.signals.kv = Some(kv);
    r
}

fn observe(now: f64, current: u32, replicas: &[Replica], held: f64) -> Observation<'_> {
    Observation {
        now,
        current,
        status: None,
        replicas,
        missing: 0,
        held: Some(held),
        scraped_at: Some(now),
        asleep: &[],
        starting_since: &[],
    }
}

fn run(spec: &str, obs: &Observation<'_>) -> Decision {
    let policy = Policy::parse(spec).unwrap();
    decide(&policy, obs, &mut ScalerState::default())
}

#[test]
fn twelve_in_flight_at_target_four_is_three() {
    let pods = [replica(2.0, 10.0)];
    let d = run("queue:4,max=3", &observe(0.0, 1, &pods, 0.0));
    assert_eq!((d.desired, d.why, d.value), (3, Why::Metric, Some(12.0)));
    let measured = Measured::Queue {
        sum: 12.0,
        running: 2.0,
        waiting: 10.0,
        reporting: 1,
    };
    let active = ActivityCause::InFlight {
        in_flight: 12.0,
        activation: 0.0,
    };
    let proposal = Step::Proposal {
        metric: Metric::Queue,
        value: 12.0,
        target: 4.0,
        replicas: 3,
    };
    assert_eq!(
        d.lines[..],
        [Step::Measured(measured), Step::Activity(active), proposal]
    );
}

#[test]
fn the_steps_render_as_decide_prints_them() {
    let pods = [replica(2.0, 10.0)];
    let d = run("queue:4,max=3", &observe(0.0, 1, &pods, 0.0));
    assert_eq!(
        d.lines.render(),
        [
            "queue 12 = running 2 + waiting 10 on 1 replica(s)",
            "active: 12 request(s) running, waiting or held, above the activation level 0",
            "queue 12 / target 4 per replica = 3 replica(s)",
        ]
    );
    let idle = run("queue:4,min=0", &observe(0.0, 1, &[], 0.0));
    assert_eq!(
        idle.lines.render(),
        [
            "no ready replica: queue = 0 held",
            "idle: every replica read, 0 in flight (activation level 0), nothing held",
            "never active, past the 300 s cooldown: KEDA scales to zero",
        ]
    );
}

#[test]
fn ceil_of_two_point_one_over_point_seven_is_three() {
    let policy = Policy::parse("kv:0.7").unwrap();
    assert_eq!(proposal(&policy, 2.1, 1), 3);
    let pods = [with_kv(0.7), with_kv(0.7), with_kv(0.7)];
    // 0.7 x 3 sums to 2.0999999999999996 in floating point; still 3 replicas.
    let d = run("kv:0.7", &observe(0.0, 1, &pods, 0.0));
    assert_eq!(d.desired, 3);
}

#[test]
fn from_eight_with_a_raw_two_down_policies_limit_the_drop() {
    // Eight replicas with one request in flight each, target 4: raw ceil(8 / 4) = 2.
    let pods: Vec<Replica> = (0..8).map(|_| replica(1.0, 0.0)).collect();
    let cases = [
        ("queue:4,downwindow=0,downpods=1", 7, Why::ScaleDownLimit),
        (
            "queue:4,downwindow=0,downpercent=50",
            4,
            Why::ScaleDownLimit,
        ),
        (
            "queue:4,downwindow=0,downpods=1,downpercent=50",
            4,
            Why::ScaleDownLimit,
        ),
        (
            "queue:4,downwindow=0,downpods=1,downpercent=50,downselect=min",
            7,
            Why::ScaleDownLimit,
        ),
        ("queue:4,downwindow=0", 2, Why::Metric),
        ("queue:4", 8, Why::Stabilized),
    ];
    for (spec, expected, why) in cases {
        let d = run(spec, &observe(100.0, 8, &pods, 0.0));
        assert_eq!((d.desired, d.why), (expected, why), "{spec}: {:?}", d.lines);
        assert_eq!(d.proposal, Some(2), "{spec}");
    }
}

#[test]
fn five_held_at_zero_with_target_four_activates_two() {
    let d = run("queue:4,min=0", &observe(0.0, 0, &[], 5.0));
    assert_eq!((d.desired, d.why, d.value), (2, Why::Activate, Some(5.0)));
    assert!(d.activity.is_active());
}

#[test]
fn at_zero_without_requests_stays_at_zero() {
    let d = run("queue:4,min=0", &observe(0.0, 0, &[], 0.0));
    assert_eq!((d.desired, d.why), (0, Why::Idle));
}

#[test]
fn at_zero_with_a_minimum_restores_it() {
    let d = run("queue:4,min=2", &observe(0.0, 0, &[], 0.0));
    assert_eq!((d.desired, d.why), (2, Why::Min));
}

#[test]
fn activation_from_zero_is_capped_at_max() {
    let d = run("queue:4,min=0,max=3", &observe(0.0, 0, &[], 100.0));
    assert_eq!(d.desired, 3);
}

#[test]
fn scale_to_zero_waits_for_the_cooldown() {
    let policy = Policy::parse("queue:4,min=0,cooldown=120").unwrap();
    let mut state = ScalerState::default();
    let busy = [replica(3.0, 0.0)];
    let idle = [replica(0.0, 0.0)];
    let d = decide(&policy, &observe(0.0, 1, &busy, 0.0), &mut state);
    assert_eq!(d.desired, 1);
    let d = decide(&policy, &observe(60.0, 1, &idle, 0.0), &mut state);
    assert_eq!((d.desired, d.activity.is_active()), (1, false));
    let d = decide(&policy, &observe(119.0, 1, &idle, 0.0), &mut state);
    assert_eq!(d.desired, 1);
    let d = decide(&policy, &observe(120.0, 1, &idle, 0.0), &mut state);
    assert_eq!((d.desired, d.why), (0, Why::IdleToZero));
}

#[test]
fn held_requests_keep_a_target_active() {
    let policy = Policy::parse("queue:4,min=0,cooldown=0").unwrap();
    let idle = [replica(0.0, 0.0)];
    let d = decide(
        &policy,
        &observe(0.0, 1, &idle, 1.0),
        &mut ScalerState::default(),
    );
    assert_eq!((d.desired, d.activity.is_active()), (1, true));
}

#[test]
fn a_running_batch_keeps_a_waiting_policy_active() {
    // Scaling on waiting, nothing waits, but 10 run: never taken to zero under load.
    let policy = Policy::parse("waiting:2,min=0,cooldown=0").unwrap();
    let pods = [replica(10.0, 0.0)];
    let d = decide(
        &policy,
        &observe(0.0, 1, &pods, 0.0),
        &mut ScalerState::default(),
    );
    assert_eq!((d.desired, d.activity.is_active()), (1, true));
}

#[test]
fn held_requests_add_to_queue_and_waiting_but_not_running() {
    let pods = [replica(8.0, 0.0)];
    let obs = observe(0.0, 1, &pods, 4.0);
    assert_eq!(run("queue:4", &obs).value, Some(12.0));
    assert_eq!(run("waiting:4", &obs).value, Some(4.0));
    assert_eq!(run("running:4", &obs).value, Some(8.0));
}

#[test]
fn unreadable_replicas_never_read_as_zero() {
    let policy = Policy::parse("queue:4").unwrap();
    let obs = Observation {
        missing: 3,
        ..observe(0.0, 3, &[], 0.0)
    };
    let d = decide(&policy, &obs, &mut ScalerState::default());
    assert_eq!((d.desired, d.why, d.value), (3, Why::NoSamples, None));
}

#[test]
fn a_missing_replica_counts_at_the_target_on_the_way_down() {
    // Two pods read 1 each, one could not be read: it counts as 4, so 6 / 3 per pod against 4
    // -> ceil(0.5 x 3) = 2, given as 2 x 4.
    let pods = [replica(1.0, 0.0), replica(1.0, 0.0)];
    let obs = Observation {
        missing: 1,
        ..observe(0.0, 3, &pods, 0.0)
    };
    assert_eq!(run("queue:4", &obs).value, Some(8.0));
    // On the way up it counts as nothing: 2 x 10 = 20 -> 5.
    let pods = [replica(6.0, 4.0), replica(6.0, 4.0)];
    let obs = Observation {
        missing: 1,
        ..observe(0.0, 3, &pods, 0.0)
    };
    let d = run("queue:4", &obs);
    assert_eq!((d.value, d.desired), (Some(20.0), 5));
}

#[test]
fn utilisation_metrics_average_over_reporting_replicas() {
    let pods = [with_kv(0.9), with_kv(0.7)];
    // Mean 0.8 against 0.4: ratio 2 on 2 replicas -> 4.
    let d = run("kv:0.4", &observe(0.0, 2, &pods, 0.0));
    assert_eq!((d.value, d.desired), (Some(1.6), 4));
    // A replica without a kv gauge does not vote; the other reads above target.
    let pods = [with_kv(0.9), replica(3.0, 0.0)];
    let d = run("kv:0.3", &observe(0.0, 2, &pods, 0.0));
    assert_eq!((d.value, d.desired), (Some(0.9), 3));
}

#[test]
fn no_kv_samples_keeps_the_current_count() {
    let pods = [replica(3.0, 0.0), replica(3.0, 0.0)];
    let d = run("kv:0.8", &observe(0.0, 2, &pods, 0.0));
    assert_eq!((d.desired, d.why), (2, Why::NoSamples));
}

fn ttft_replica(observations: &[(f64, f64)]) -> Replica {
    let mut h = Histogram::default();
    for &(le, count) in observations {
        h.add(le, count);
    }
    let rates = Rates {
        interval_s: 15.0,
        ttft: Some(h),
        ..Rates::default()
    };
    let mut r = replica(4.0, 2.0);
    r.rates = Some(rates);
    r
}

#[test]
fn ttft_scales_on_p95_over_target() {
    // Fleet p95 0.875 s (half way through le=1.0) against 0.5 s: ratio 1.75 on 2 replicas -> 4.
    let inf = f64::INFINITY;
    let a = ttft_replica(&[(0.75, 45.0), (1.0, 50.0), (inf, 50.0)]);
    let b = ttft_replica(&[(0.75, 45.0), (1.0, 50.0), (inf, 50.0)]);
    let pods = [a, b];
    let d = run("ttft:0.5", &observe(0.0, 2, &pods, 0.0));
    assert_eq!(d.value, Some(1.75));
    assert_eq!(d.desired, 4);
}

#[test]
fn a_window_without_new_requests_gives_no_ttft_recommendation() {
    let inf = f64::INFINITY;
    let pods = [ttft_replica(&[(1.0, 0.0), (inf, 0.0)])];
    let d = run("ttft:0.5", &observe(0.0, 3, &pods, 0.0));
    assert_eq!((d.desired, d.why, d.proposal), (3, Why::NoSamples, None));
}

#[test]
fn occupancy_is_seed_002_r_needed() {
    // 3 healthy replicas: 30 in flight, 12 executing -> 30 x 3 / max(12, 3, 1) = 7.5;
    // target 2 -> ceil(3.75) = 4.
    let pods = [replica(4.0, 6.0), replica(4.0, 6.0), replica(4.0, 6.0)];
    let d = run("occupancy:2", &observe(0.0, 3, &pods, 0.0));
    assert_eq!((d.value, d.desired), (Some(7.5), 4));
    // Nothing queues, one request each: serving is floored at the replica count -> 3 / 2 -> 2.
    let pods = [replica(1.0, 0.0), replica(1.0, 0.0), replica(1.0, 0.0)];
    let d = run("occupancy:2,downwindow=0", &observe(0.0, 3, &pods, 0.0));
    assert_eq!((d.value, d.desired), (Some(3.0), 2));
    // At zero it degrades to requests in flight.
    let d = run("occupancy:2,min=0", &observe(0.0, 0, &[], 5.0));
    assert_eq!((d.value, d.desired), (Some(5.0), 3));
}

#[test]
fn lookahead_projects_the_trend_over_the_cold_start() {
    let policy = Policy::parse("queue:10,lookahead=90,max=50").unwrap();
    let mut state = ScalerState::default();
    let mut last = None;
    for (t, inflight) in [(0.0, 10.0), (15.0, 25.0), (30.0, 40.0)] {
        let pods = [replica(inflight, 0.0)];
        last = Some(decide(&policy, &observe(t, 4, &pods, 0.0), &mut state));
    }
    let d = last.unwrap();
    // +1 request/s for 90 s on top of 40: 130 -> 13 replicas, limited to 4 + 4 = 8 this step.
    assert_eq!(d.value, Some(130.0));
    assert_eq!(d.proposal, Some(13));
    assert_eq!((d.desired, d.why), (8, Why::ScaleUpLimit));
}

#[test]
fn within_tolerance_keeps_the_count() {
    // 4.3 per replica against 4 on 3 replicas: ratio 1.075.
    let pods = [replica(4.3, 0.0), replica(4.3, 0.0), replica(4.3, 0.0)];
    let d = run("queue:4", &observe(0.0, 3, &pods, 0.0));
    assert_eq!((d.desired, d.why), (3, Why::Tolerance));
}

#[test]
fn the_hpa_from_serves_value_gives_the_decided_count() {
    // Invariant 1: with no window, tolerance or rate limit in the way, decide's count is
    // ceil(value / target) on KEDA's milli-units: the HPA's arithmetic on what serve returns.
    let spec = "queue:4,downwindow=0,uptolerance=0,downtolerance=0,uppods=1000,max=1000";
    let policy = Policy::parse(spec).unwrap();
    let loads = [
        (0.0, 0.0),
        (1.0, 0.0),
        (7.0, 3.0),
        (24.0, 40.0),
        (33.3, 0.1),
        (0.7, 2.1),
    ];
    for (running, waiting) in loads {
        let pods = [replica(running, waiting), replica(running / 2.0, waiting)];
        let obs = observe(0.0, 2, &pods, 1.0);
        let value = evaluate(&policy, &obs, &mut ScalerState::default())
            .value
            .unwrap();
        let d = decide(&policy, &obs, &mut ScalerState::default());
        let hpa = replicas::ceil_replicas(
            replicas::to_milli(value) as f64 / replicas::to_milli(policy.target) as f64,
        );
        assert_eq!(
            d.desired,
            hpa.clamp(1, 1000),
            "{running} + {waiting}: {:?}",
            d.lines
        );
    }
}

#[test]
fn state_round_trips_through_json() {
    let policy = Policy::parse("queue:4,lookahead=60,min=0").unwrap();
    let mut state = ScalerState::default();
    let pods = [replica(5.0, 5.0)];
    decide(&policy, &observe(10.0, 1, &pods, 0.0), &mut state);
    decide(&policy, &observe(25.0, 3, &pods, 2.0), &mut state);
    let json = serde_json::to_string(&state).unwrap();
    let back: ScalerState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
    assert_eq!(state.last_active, Some(25.0));
    assert_eq!(state.trend.len(), 2);
    assert!(state
        .hpa
        .recommendations
        .as_ref()
        .is_some_and(|r| !r.is_empty()));
}

#[test]
fn an_unreadable_replica_never_lets_the_target_sleep() {
    // One replica idle and read, one that could not be read: active, whatever the cooldown.
    let policy = Policy::parse("queue:2,min=0,cooldown=0").unwrap();
    let mut state = ScalerState::default();
    let idle = [replica(0.0, 0.0)];
    for t in 0..50 {
        let obs = Observation {
            current: 2,
            missing: 1,
            ..observe(f64::from(t) * 15.0, 2, &idle, 0.0)
        };
        let d = decide(&policy, &obs, &mut state);
        assert_eq!(
            d.activity,
            crate::control::activity::Activity::Active,
            "{:?}",
            d.lines
        );
        assert!(d.desired >= 1, "{t}: {:?}", d.lines);
        assert_ne!(d.why, Why::IdleToZero);
    }
}

#[test]
fn an_unreadable_held_count_is_unknown_and_never_sleeps() {
    let policy = Policy::parse("queue:2,min=0,cooldown=0").unwrap();
    let idle = [replica(0.0, 0.0)];
    let obs = Observation {
        held: None,
        ..observe(100.0, 1, &idle, 0.0)
    };
    let d = decide(&policy, &obs, &mut ScalerState::default());
    assert_eq!(d.activity, crate::control::activity::Activity::Unknown);
    assert_eq!(d.desired, 1, "{:?}", d.lines);
    // At zero with the count unread, there is no value either.
    let at_zero = Observation {
        held: None,
        ..observe(100.0, 0, &[], 0.0)
    };
    let e = crate::control::decision::evaluate(&policy, &at_zero, &mut ScalerState::default());
    assert_eq!(
        (e.value, e.activity),
        (None, crate::control::activity::Activity::Unknown)
    );
}

#[test]
fn held_requests_wake_before_the_pods_are_known() {
    let policy = Policy::parse("queue:2,min=0").unwrap();
    let obs = Observation {
        scraped_at: None,
        ..observe(0.0, 0, &[], 1.0)
    };
    let e = crate::control::decision::evaluate(&policy, &obs, &mut ScalerState::default());
    // The held request is the value too: it asks for a replica (ceil(1 / 2) = 1).
    assert_eq!(
        (e.value, e.activity),
        (Some(1.0), crate::control::activity::Activity::Active)
    );
    // A metric that does not count held requests has no value before the pods.
    let kv = Policy::parse("kv:0.8").unwrap();
    let e = crate::control::decision::evaluate(&kv, &obs, &mut ScalerState::default());
    assert_eq!(
        (e.value, e.activity),
        (None, crate::control::activity::Activity::Active)
    );
    let nothing_held = Observation {
        scraped_at: None,
        ..observe(0.0, 0, &[], 0.0)
    };
    let e = crate::control::decision::evaluate(&policy, &nothing_held, &mut ScalerState::default());
    assert_eq!(
        (e.value, e.activity),
        (None, crate::control::activity::Activity::Unknown)
    );
}

#[test]
fn a_release_reads_active_until_a_scrape_after_it() {
    let policy = Policy::parse("queue:2,min=0").unwrap();
    let mut state = ScalerState::default();
    let idle = [replica(0.0, 0.0)];
    // Held at zero at 10 s; the replica is ready and was scraped (idle) at 10.5 s; the request
    // is released at 11 s.
    let held = observe(10.0, 0, &[], 1.0);
    assert!(
        crate::control::decision::evaluate(&policy, &held, &mut state)
            .activity
            .is_active()
    );
    let released = Observation {
        scraped_at: Some(10.5),
        ..observe(11.0, 1, &idle, 0.0)
    };
    let e = crate::control::decision::evaluate(&policy, &released, &mut state);
    assert!(e.activity.is_active(), "{:?}", e.lines);
    let scraped_after = observe(12.0, 1, &idle, 0.0);
    let e = crate::control::decision::evaluate(&policy, &scraped_after, &mut state);
    assert_eq!(
        e.activity,
        crate::control::activity::Activity::Idle,
        "{:?}",
        e.lines
    );
}

#[test]
fn an_overload_with_unreadable_pods_keeps_the_count() {
    // One pod reads 12 in flight, five cannot be read, 4 per replica: the one alone asks for 3,
    // which counting the others at 0 flips to a scale-down, so the HPA keeps 6.
    let pods = [replica(12.0, 0.0)];
    let obs = Observation {
        missing: 5,
        ..observe(0.0, 6, &pods, 0.0)
    };
    let d = run("queue:4", &obs);
    assert_eq!((d.value, d.desired), (Some(24.0), 6), "{:?}", d.lines);
}

/// A replica with `running` and `waiting` that admitted `per_s` requests a second over 15 s.
fn flowing(running: f64, waiting: f64, per_s: f64) -> Replica {
    let mut r = ttft_replica(&[(1.0, per_s * 15.0), (f64::INFINITY, per_s * 15.0)]);
    r.signals.running = Some(running);
    r.signals.waiting = waiting;
    r
}

#[test]
fn the_guard_stops_a_little_law_collapse() {
    let policy = Policy::parse("queue:48,guard=true,downwindow=0,max=10").unwrap();
    let mut state = ScalerState::default();
    // Eight replicas at 3.75 req/s each hold 9 requests each: well within the target.
    let calm: Vec<Replica> = (0..8).map(|_| flowing(9.0, 0.0, 3.75)).collect();
    // Learned over 30 s, as a sustained rate.
    for now in [0.0, 15.0] {
        decide(&policy, &observe(now, 8, &calm, 0.0), &mut state);
    }
    let d = decide(&policy, &observe(30.0, 8, &calm, 0.0), &mut state);
    // The queue alone asks for ceil(72 / 48) = 2. The guard counts 3.75 req/s per replica as
    // safe, credited up to 1.25x for the room left below the target (9 of 48): 4.6875, so it
    // keeps ceil(30 / 4.6875) = 7.
    assert_eq!(d.desired, 7, "{:?}", d.lines);
    assert!(d.lines.iter().any(|l| matches!(
        l,
        Step::Guard { admitted, keep: 7, ready: 8, .. } if *admitted == 30.0
    )));
    // Without the guard, the same reading collapses to 2.
    let plain = Policy::parse("queue:48,downwindow=0,max=10").unwrap();
    let d = decide(
        &plain,
        &observe(0.0, 8, &calm, 0.0),
        &mut ScalerState::default(),
    );
    assert_eq!(d.desired, 2);
}

#[test]
fn the_slo_floor_buys_what_drains_the_queue_in_time() {
    // 40 waiting at 10 admitted/s: 4 s to a first token against a 2 s SLO: 2 x (1 + 2) = 6.
    let pods = [flowing(100.0, 20.0, 5.0), flowing(100.0, 20.0, 5.0)];
    let d = run(
        "queue:256,slo=2,downwindow=0,max=10",
        &observe(0.0, 2, &pods, 0.0),
    );
    assert_eq!(d.desired, 6, "{:?}", d.lines);
    assert!(d.lines.iter().any(|l| matches!(
        l,
        Step::Slo { implied, needed: 6, .. } if *implied == 4.0
    )));
    let d = run(
        "queue:256,downwindow=0,max=10",
        &observe(0.0, 2, &pods, 0.0),
    );
    assert_eq!(d.desired, 1);
}

#[test]
fn credit_counts_starting_replicas_instead_of_ordering_more() {
    let policy = Policy::parse("queue:20,lookahead=90,credit=true,max=10").unwrap();
    let mut state = ScalerState::default();
    // Learn 10 req/s per replica within the target, sustained over 30 s.
    let calm = [flowing(10.0, 0.0, 10.0)];
    for now in [0.0, 15.0, 30.0] {
        decide(&policy, &observe(now, 1, &calm, 0.0), &mut state);
    }
    // One ready replica fills to 100 at 15 admitted/s while two ordered 30 s ago start: the
    // queue asks for 5; the three of them carry 30 req/s, so the count stays at 3.
    let busy = [flowing(100.0, 0.0, 15.0)];
    let starting = [30.0, 30.0];
    let obs = Observation {
        starting_since: &starting,
        ..observe(60.0, 3, &busy, 0.0)
    };
    let d = decide(&policy, &obs, &mut state);
    assert_eq!(d.desired, 3, "{:?}", d.lines);
    assert!(d.lines.iter().any(|l| matches!(
        l,
        Step::Credit {
            ready: 1,
            arriving: 2,
            current: 3,
            ..
        }
    )));
    let plain = Policy::parse("queue:20,lookahead=90,max=10").unwrap();
    let d = decide(&plain, &obs, &mut ScalerState::default());
    assert!(d.desired > 3);
}

#[test]
fn the_history_forecast_orders_for_the_rate_a_horizon_ahead() {
    let policy = Policy::parse("queue:200,lookahead=60,forecast=history,max=10").unwrap();
    let mut state = ScalerState::default();
    // The admitted rate climbs 0.1 req/s per second on one replica well within its target.
    let mut last = None;
    for i in 0..=6 {
        let t = f64::from(i) * 10.0;
        let rate = 5.0 + 0.1 * t;
        let pods = [flowing(10.0, 0.0, rate)];
        last = Some(decide(&policy, &observe(t, 1, &pods, 0.0), &mut state));
    }
    // At 11 req/s now, 17 in 60 s, at the 11 req/s a replica was seen carrying: 2 replicas.
    let d = last.unwrap();
    assert_eq!(d.desired, 2, "{:?}", d.lines);
}

#[test]
fn the_history_forecast_orders_a_step_the_time_of_day_brought_a_start_before_it() {
    use crate::project::forecast::DAY_S;
    let policy = Policy::parse("queue:200,lookahead=60,forecast=history,max=10").unwrap();
    let mut state = ScalerState::default();
    // A day: 5 req/s on one replica until 08:00, then 20 on four, each carrying 5.
    let quiet = [flowing(10.0, 0.0, 5.0)];
    let busy: Vec<Replica> = (0..4).map(|_| flowing(10.0, 0.0, 5.0)).collect();
    let eight = 8.0 * 3600.0;
    let mut t = 7.0 * 3600.0;
    while t < 9.0 * 3600.0 {
        let (pods, current) = if t < eight {
            (&quiet[..], 1)
        } else {
            (&busy[..], 4)
        };
        decide(&policy, &observe(t, current, pods, 0.0), &mut state);
        t += 15.0;
    }
    let at = |state: &mut ScalerState, t: f64| decide(&policy, &observe(t, 1, &quiet, 0.0), state);
    // The next day, quiet again: ten minutes before eight nothing is ordered; a start (the
    // prior 90 s, longer than the lookahead) before it, the step's four replicas are.
    let mut next = state.clone();
    assert_eq!(at(&mut next, DAY_S + eight - 600.0).desired, 1);
    let d = at(&mut next, DAY_S + eight - 75.0);
    assert_eq!(d.desired, 4, "{:?}", d.lines);
    let text = d.lines.render().join("\n");
    assert!(
        text.contains("the time of day rises 15 within 90 s"),
        "{text}"
    );
    // A restart on a clock three hours behind keeps the cycle at its time of day (its rates
    // per replica it learns again, from the scrapes after it).
    let behind = 3.0 * 3600.0;
    let mut restarted = state.carried(behind);
    let check = DAY_S + eight - 75.0 - behind;
    for back in [60.0, 45.0, 30.0, 15.0] {
        at(&mut restarted, check - back);
    }
    let d = at(&mut restarted, check);
    assert_eq!(d.desired, 4, "{:?}", d.lines);
}

#[test]
fn a_learned_peak_caps_the_history_forecast() {
    use crate::control::reserve::{Reserve, PEAK_DAYS};
    // The ramp above orders 2 replicas by its forecast; a week whose need never passed one
    // replica (and whose fleet never passed two) caps the forecast at 1.
    let climb = |policy: &Policy, state: &mut ScalerState| {
        let mut last = None;
        for i in 0..=6 {
            let t = f64::from(i) * 10.0;
            let pods = [flowing(10.0, 0.0, 5.0 + 0.1 * t)];
            last = Some(decide(policy, &observe(t, 1, &pods, 0.0), state));
        }
        last.unwrap()
    };
    let policy =
        Policy::parse("queue+work:200,1.0,lookahead=60,forecast=history,reserve=auto,max=10")
            .unwrap();
    let week = Reserve {
        reached: vec![-3600.0],
        ready: vec![-3600.0, -3600.0],
        days: PEAK_DAYS,
        ..Reserve::default()
    };
    let mut state = ScalerState {
        reserve: week.clone(),
        ..ScalerState::default()
    };
    let d = climb(&policy, &mut state);
    assert_eq!(d.desired, 1, "{:?}", d.lines);
    assert!(d.lines.iter().any(|l| matches!(
        l,
        Step::RateForecast {
            needed: 1,
            capped_at_peak: true,
            ..
        }
    )));
    let text = d.lines.render().join("\n");
    assert!(
        text.contains("capped at the peak need of the last 14 days"),
        "{text}"
    );
    // A day short of the week, nothing is capped.
    let mut state = ScalerState {
        reserve: Reserve {
            days: PEAK_DAYS - 1,
            ..week
        },
        ..ScalerState::default()
    };
    assert_eq!(climb(&policy, &mut state).desired, 2);
}

#[test]
fn a_metric_the_pods_server_cannot_give_says_so() {
    // `server: auto` found llama.cpp pages: kv has no sample there, ever; not "two scrapes".
    let mut llama = replica(1.0, 0.0);
    llama.signals.server = Server::LlamaCpp;
    let pods = [llama];
    let policy = Policy::parse("kv:0.8").unwrap();
    let e = evaluate(
        &policy,
        &observe(0.0, 1, &pods, 0.0),
        &mut ScalerState::default(),
    );
    assert_eq!(e.value, None);
    let cause = e.no_value.expect("a cause for the missing value");
    assert!(matches!(
        cause,
        NoValue::MetricMissing {
            metric: Metric::Kv,
            server: Server::LlamaCpp,
            ..
        }
    ));
    // The text KEDA receives.
    assert_eq!(
        cause.to_string(),
        "the pods serve llamacpp, which exports no KV-cache usage gauge: kv can never be read \
         there (no value)"
    );
}

#[test]
fn an_unknown_activity_keeps_its_own_cause_behind_further_metrics() {
    // The last step is the further metric's; the cause KEDA is given is still the activity's.
    let mut idle = replica(0.0, 0.0);
    idle.signals.kv = Some(0.1);
    let pods = [idle];
    let obs = Observation {
        held: None,
        ..observe(0.0, 1, &pods, 0.0)
    };
    let policy = Policy::parse("queue+kv:4,0.8").unwrap();
    let e = evaluate(&policy, &obs, &mut ScalerState::default());
    assert_eq!(
        e.activity,
        crate::control::activity::Activity::Unknown,
        "{:?}",
        e.lines
    );
    assert_eq!(e.activity_cause, ActivityCause::HeldUnread);
    assert!(matches!(e.lines.last(), Some(Step::Also { .. })));
}

/// Busy for 100 s, idle for 60, busy again for 30, then idle: the activity 25 s into the
/// second lull, under `spec`.
fn activity_in_second_lull(spec: &str) -> (Activity, ActivityCause) {
    let policy = Policy::parse(spec).unwrap();
    let mut state = ScalerState::default();
    let busy = [replica(2.0, 0.0)];
    let idle = [replica(0.0, 0.0)];
    let mut t = 0.0;
    let mut last = None;
    while t <= 225.0 {
        let lull = (100.0..165.0).contains(&t) || t > 195.0;
        let pods: &[Replica] = if lull { &idle } else { &busy };
        let e = evaluate(&policy, &observe(t, 1, pods, 0.0), &mut state);
        last = Some((e.activity, e.activity_cause));
        t += 5.0;
    }
    last.unwrap()
}

#[test]
fn hold_idle_keeps_a_target_active_through_a_lull_like_one_it_came_back_from() {
    let (activity, cause) = activity_in_second_lull("queue:4,min=0,cooldown=60,hold=idle");
    assert_eq!(activity, Activity::Active);
    assert!(
        matches!(cause, ActivityCause::WithinHold { learned_gap_s: Some(g), .. } if (60.0..=70.0).contains(&g)),
        "{cause:?}"
    );
    // Without it the lull is idle, and KEDA's cooldown starts.
    let (activity, _) = activity_in_second_lull("queue:4,min=0,cooldown=60");
    assert_eq!(activity, Activity::Idle);
}

#[test]
fn hold_idle_holds_no_count_above_one() {
    // Four replicas at 10 req/s each for a minute, then at 2, then at 10 again: the rate needs
    // four replicas, then one, then four; `auto` learns the gap at four and holds four in the
    // next fall, `idle` lets it go.
    let fall = |spec: &str| {
        let policy = Policy::parse(spec).unwrap();
        let mut state = ScalerState::default();
        let mut t = 0.0;
        let mut last = None;
        while t <= 215.0 {
            let high = t < 60.0 || (120.0..180.0).contains(&t);
            let (running, per_s) = if high { (40.0, 10.0) } else { (8.0, 2.0) };
            let pods: Vec<Replica> = (0..4).map(|_| flowing(running, 0.0, per_s)).collect();
            last = Some(decide(&policy, &observe(t, 4, &pods, 0.0), &mut state));
            t += 5.0;
        }
        last.unwrap()
    };
    let held = |d: &Decision| d.lines.iter().any(|s| matches!(s, Step::Hold { .. }));
    assert!(held(&fall(
        "queue:48,forecast=history,lookahead=30,hold=auto"
    )));
    assert!(!held(&fall(
        "queue:48,forecast=history,lookahead=30,hold=idle"
    )));
}
