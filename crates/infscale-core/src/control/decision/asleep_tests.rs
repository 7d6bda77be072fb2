//! Replicas read as asleep ([`crate::project::asleep`]) through the whole decision: kept, but
//! no capacity, and the requests waiting on them count as held.

use super::{decide, Decision, ScalerState};
use crate::control::activity::Activity;
use crate::observe::metrics::Replica;
use crate::observe::metrics::{Counters, Server, Signals};
use crate::policy::Policy;
use crate::project::demand::Observation;
use crate::reasons::Step;

fn replica(name: &str, running: f64, waiting: f64, asleep: bool) -> Replica {
    let signals = Signals {
        server: Server::Vllm,
        running: Some(running),
        waiting,
        kv: None,
        asleep: Some(asleep),
        counters: Counters::default(),
    };
    Replica::new(name, signals, None)
}

fn observe<'a>(
    current: u32,
    awake: &'a [Replica],
    asleep: &'a [Replica],
    held: f64,
) -> Observation<'a> {
    Observation {
        now: 0.0,
        current,
        status: None,
        replicas: awake,
        missing: 0,
        asleep,
        held: Some(held),
        scraped_at: Some(0.0),
        starting_since: &[],
    }
}

fn run(current: u32, awake: &[Replica], asleep: &[Replica], held: f64) -> Decision {
    let policy = Policy::parse("queue:4,max=5").unwrap_or_else(|e| panic!("{e}"));
    decide(
        &policy,
        &observe(current, awake, asleep, held),
        &mut ScalerState::default(),
    )
}

#[test]
fn a_sleeping_replica_is_kept_but_gives_no_capacity() {
    // One awake replica with 6 in flight asks for 2 awake; the sleeping one is kept on top.
    let d = run(
        2,
        &[replica("a", 6.0, 0.0, false)],
        &[replica("b", 0.0, 0.0, true)],
        0.0,
    );
    assert_eq!((d.value, d.desired), (Some(10.0), 3), "{:?}", d.lines);
    assert!(d
        .lines
        .iter()
        .any(|l| matches!(l, Step::Asleep { asleep: 1, .. })));
    assert!(d.lines.iter().any(|l| l.to_string().contains("asleep")));
}

#[test]
fn held_requests_with_only_sleeping_replicas_order_an_awake_one() {
    let sleeping = [replica("b", 0.0, 0.0, true)];
    // Nothing ready: 3 held are the value, + 4 for the sleeper = 7, so 2 replicas.
    let d = run(1, &[], &sleeping, 3.0);
    assert_eq!((d.value, d.desired), (Some(7.0), 2), "{:?}", d.lines);
    assert!(d.activity.is_active());
    // Requests queued on the sleeping engine count as held ones do.
    let d = run(1, &[], &[replica("b", 0.0, 2.0, true)], 0.0);
    assert_eq!((d.value, d.desired), (Some(6.0), 2), "{:?}", d.lines);
    assert!(d.activity.is_active());
    // Nothing waiting: idle, and the sleeper is kept (KEDA's cooldown may take it to zero).
    let d = run(1, &[], &sleeping, 0.0);
    assert_eq!(
        (d.value, d.desired, d.activity),
        (Some(4.0), 1, Activity::Idle)
    );
}
