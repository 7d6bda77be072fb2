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

use crate::observe::metrics::Replica;
use crate::policy::Policy;
use crate::reasons::{Step, Steps};

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
