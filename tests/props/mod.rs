//! Strategies shared by the property tests: policies over every decision key, replicas with
//! and without an admission rate, and histories of readings to build a scaler's memory from.

#![allow(dead_code)]

use infscale_core::observe::metrics::histogram::Histogram;
use infscale_core::observe::metrics::{Counters, Rates, Replica, Server, Signals};
use infscale_core::policy::Policy;
use infscale_core::project::demand::Observation;
use proptest::prelude::*;

/// A policy string over the request-count metrics and every key that changes the value.
pub fn policy_spec() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("queue"), Just("waiting"), Just("running")],
        1u32..64,
        0u32..3,
        1u32..12,
        prop_oneof![Just(0.0), Just(30.0), Just(90.0)],
        prop_oneof![Just(""), Just(",forecast=history")],
        prop_oneof![Just(""), Just(",slo=2")],
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(""),
            Just(",downwindow=0"),
            Just(",downwindow=0,downpods=1")
        ],
    )
        .prop_map(
            |(metric, target, min, extra, lookahead, forecast, slo, guard, credit, down)| {
                format!(
                    "{metric}:{target},min={min},max={},lookahead={lookahead}{forecast}{slo},\
                     guard={guard},credit={credit}{down}",
                    min.max(1) + extra
                )
            },
        )
}

pub fn parse(spec: &str) -> Policy {
    Policy::parse(spec).expect("generated policy parses")
}

/// One replica as the decision sees it: running, waiting, and its admissions per second over a
/// 15 s interval (`None`: no earlier scrape, no rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    pub running: u32,
    pub waiting: u32,
    pub per_s: Option<u32>,
}

pub fn load() -> impl Strategy<Value = Load> {
    (
        prop_oneof![3 => 0u32..12, 1 => 0u32..200],
        prop_oneof![2 => Just(0u32), 1 => 0u32..4, 1 => 0u32..100],
        prop::option::weighted(0.8, 0u32..40),
    )
        .prop_map(|(running, waiting, per_s)| Load {
            running,
            waiting,
            per_s,
        })
}

pub fn replica(i: usize, l: &Load) -> Replica {
    let rates = l.per_s.map(|per_s| {
        let mut h = Histogram::default();
        let n = f64::from(per_s) * 15.0;
        h.add(1.0, n);
        h.add(f64::INFINITY, n);
        Rates {
            interval_s: 15.0,
            ttft: Some(h),
            ..Rates::default()
        }
    });
    Replica::new(
        format!("pod-{i}"),
        Signals {
            server: Server::Vllm,
            running: Some(f64::from(l.running)),
            waiting: f64::from(l.waiting),
            kv: None,
            asleep: None,
            counters: Counters::default(),
        },
        rates,
    )
}

pub fn replicas(loads: &[Load]) -> Vec<Replica> {
    loads
        .iter()
        .enumerate()
        .map(|(i, l)| replica(i, l))
        .collect()
}

/// A reading: the replicas' loads, requests held at the activator, unreadable replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub loads: Vec<Load>,
    pub held: u32,
    pub missing: u32,
}

pub fn reading() -> impl Strategy<Value = Reading> {
    (
        prop::collection::vec(load(), 0..6),
        prop_oneof![3 => Just(0u32), 1 => 0u32..20],
        prop_oneof![4 => Just(0u32), 1 => 0u32..3],
    )
        .prop_map(|(loads, held, missing)| Reading {
            loads,
            held,
            missing,
        })
}

/// The observation of `pods` (built by [`replicas`] from `r.loads`) at `now`.
pub fn observe<'a>(now: f64, current: u32, pods: &'a [Replica], r: &Reading) -> Observation<'a> {
    Observation {
        now,
        current,
        status: None,
        replicas: pods,
        missing: r.missing,
        held: Some(f64::from(r.held)),
        scraped_at: Some(now),
        asleep: &[],
        starting_since: &[],
    }
}

/// What one more request adds to a reading: running or waiting on a replica, or one held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bump {
    Running(usize),
    Waiting(usize),
    Held,
}

pub fn bump() -> impl Strategy<Value = Bump> {
    prop_oneof![
        (0usize..6).prop_map(Bump::Running),
        (0usize..6).prop_map(Bump::Waiting),
        Just(Bump::Held),
    ]
}

/// The reading with one more request in flight (on replica `i % n`; held when there is none).
pub fn bumped(r: &Reading, b: Bump) -> Reading {
    let mut out = r.clone();
    let n = out.loads.len();
    match b {
        Bump::Running(i) if n > 0 => out.loads[i % n].running += 1,
        Bump::Waiting(i) if n > 0 => out.loads[i % n].waiting += 1,
        _ => out.held += 1,
    }
    out
}
