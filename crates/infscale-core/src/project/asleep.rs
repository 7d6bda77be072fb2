//! Replicas read as asleep: present, passing their health checks, and no capacity.
//!
//! vLLM's sleep mode, llama.cpp's `--sleep-idle-seconds` and the like keep a pod Ready while its
//! weights or KV cache are released; it serves nothing until woken. Counted as a ready replica
//! it would vote for a fleet that has no capacity, and make a target idle-and-ready that is
//! neither. So a replica whose server says it sleeps ([`crate::observe::metrics::Signals`]'s
//! `asleep`) does not vote and is not in the flow's ready count; the requests waiting on it are
//! demand like requests held at an activator ([`plus_requests`]); and, since KEDA's HPA sizes
//! the whole Deployment, the value keeps one target's worth for each sleeping replica on top of
//! what the awake ones need ([`plus_slots`]): the HPA neither deletes an awake replica in place
//! of a sleeping one nor reads the sleepers as room, and held requests order an awake replica.

use crate::control::reasons::{Step, Steps};
use crate::observe::metrics::Replica;
use crate::policy::Policy;

/// Requests running or waiting on sleeping replicas (a sleeping vLLM engine queues them).
pub fn in_flight(asleep: &[Replica]) -> f64 {
    asleep
        .iter()
        .map(|r| r.in_flight().unwrap_or(r.waiting()))
        .sum()
}

/// The value with the requests waiting on sleeping replicas, for the metrics that count held
/// requests: they wait for capacity as held ones do.
pub fn plus_requests(policy: &Policy, asleep: &[Replica], v: f64, lines: &mut Steps) -> f64 {
    let requests = in_flight(asleep);
    if requests <= 0.0 || !policy.metric.counts_held() {
        return v;
    }
    let value = v + requests;
    lines.push(Step::AsleepRequests { requests, value });
    value
}

/// The value with one target's worth for each sleeping replica: what the awake replicas need,
/// with the sleeping ones kept beside them.
pub fn plus_slots(policy: &Policy, asleep: &[Replica], v: f64, lines: &mut Steps) -> f64 {
    if asleep.is_empty() {
        return v;
    }
    let asleep = asleep.len() as u32;
    let value = v + f64::from(asleep) * policy.target;
    lines.push(Step::Asleep {
        asleep,
        target: policy.target,
        value,
    });
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::activity::Activity;
    use crate::control::decision::{decide, ScalerState};
    use crate::observe::metrics::{Counters, Server, Signals};
    use crate::project::demand::Observation;

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

    fn run(
        current: u32,
        awake: &[Replica],
        asleep: &[Replica],
        held: f64,
    ) -> crate::control::decision::Decision {
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
}
