//! Floors under the value from the flow of requests, not their count: the SLO-aware floor, the
//! Little's-law scale-down guard, and the credit for replicas already starting.
//!
//! A count of requests in flight is a poor witness of load near a replica's knee: by Little's
//! law it is the arrival rate times the latency, and the latency itself grows with the load. With
//! eight replicas at 30 req/s each one holds a handful of short requests, so queue per replica
//! reads low; step down to two and each one is past its knee, and the queue explodes a cold start
//! later. The rates fix what the counts cannot:
//! - the admission rate (first tokens per second, from the TTFT histogram's count) says how fast
//!   the replicas drain their queues, so `waiting / admitted` is the first-token time that the
//!   queue implies, and the SLO-aware floor asks for the replicas that bring it within the SLO;
//! - the guard refuses a step down that would leave each replica more than the rate per replica
//!   they were seen to sustain ([`crate::project::capacity`]);
//! - the credit counts replicas already starting by their expected ready time: while the ready and
//!   the starting replicas together carry the admitted rate at that remembered rate, the queue
//!   built on the ready ones during a cold start does not order a second wave.
//!
//! Each is a floor (or, for the credit, a cut that never asks for fewer than the current count),
//! applied to the value `serve` returns, so KEDA's HPA and `decide` reach the same count.

use crate::observe::metrics::Replica;
use crate::policy::Policy;
use crate::project::capacity::{Capacity, Reading};
use crate::project::demand::Observation;
use crate::project::forecast::Daily;
use crate::project::lookahead::Point;
use crate::reasons::{Step, Steps};

/// The SLO-aware floor acts once the implied first-token time passes this share of the SLO.
const SLO_SHARE: f64 = 0.5;

/// Requests waiting per ready replica that a reading still counts as within the target (and not
/// as saturated): a request arriving between a scrape and its admission is waiting for an
/// instant, not a replica full. Counting every such instant as saturation measured a capacity
/// from the lulls of bursty traffic, and the rate forecast then ordered for it all evening.
pub const MOMENTARY_WAITING: f64 = 0.5;

/// How requests flow through the ready replicas at one observation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flow {
    /// First tokens per second over the last scrape interval, for all ready replicas (those
    /// without a rate counted at the average of those with one).
    pub admitted_per_s: f64,
    /// Requests waiting on replicas or held at the activator.
    pub waiting: f64,
    /// Ready replicas, read or not.
    pub ready: u32,
}

/// A replica's first tokens per second over its last interval, where its server exports a TTFT
/// histogram and an earlier scrape exists.
fn admitted_per_s(r: &Replica) -> Option<f64> {
    let rates = r.rates.as_ref()?;
    let n = rates.ttft.as_ref()?.observations()?;
    (rates.interval_s > 0.0).then(|| n / rates.interval_s)
}

/// The flow, when at least one ready replica gives an admission rate.
pub fn flow(obs: &Observation<'_>) -> Option<Flow> {
    let rates: Vec<f64> = obs.replicas.iter().filter_map(admitted_per_s).collect();
    if rates.is_empty() {
        return None;
    }
    let ready = obs.replicas.len() as u32 + obs.missing;
    let admitted_per_s = rates.iter().sum::<f64>() * f64::from(ready) / rates.len() as f64;
    let waiting = obs.replicas.iter().map(Replica::waiting).sum::<f64>() + obs.held.unwrap_or(0.0);
    Some(Flow {
        admitted_per_s,
        waiting,
        ready,
    })
}

/// The value that makes the HPA ask for `replicas`.
fn value_for(policy: &Policy, replicas: u32) -> f64 {
    f64::from(replicas) * policy.target
}

/// The SLO-aware floor: with the queue implying a first-token time past half the SLO, enough
/// replicas to serve the arrivals and drain the backlog within the SLO, each replica admitting
/// what the ready ones admit now.
pub fn slo_floor(policy: &Policy, flow: &Flow, value: f64, lines: &mut Steps) -> f64 {
    if policy.slo_s <= 0.0 || flow.ready == 0 || flow.admitted_per_s <= 0.0 {
        return value;
    }
    let implied = flow.waiting / flow.admitted_per_s;
    if implied <= SLO_SHARE * policy.slo_s {
        return value;
    }
    let needed = (f64::from(flow.ready) * (1.0 + implied / policy.slo_s)).ceil() as u32;
    let floor = value_for(policy, needed);
    if floor <= value {
        return value;
    }
    lines.push(Step::Slo {
        waiting: flow.waiting,
        admitted: flow.admitted_per_s,
        implied,
        slo_s: policy.slo_s,
        needed,
        floor,
        target: policy.target,
    });
    floor
}

/// Notes one reading of the replicas for the learned capacity ([`Capacity`]): the admitted rate
/// per ready replica, within the target (the measured value per reporting replica at or below
/// it, at most [`MOMENTARY_WAITING`] waiting per replica) or saturated (more waiting: they
/// admit all they can).
pub fn note_capacity(
    capacity: &mut Capacity,
    policy: &Policy,
    flow: &Flow,
    (measured, reporting): (f64, u32),
    now: f64,
) {
    if flow.ready == 0 {
        return;
    }
    let per_replica = measured / f64::from(reporting.max(1));
    let within = reporting > 0 && per_replica <= policy.target;
    let momentary = MOMENTARY_WAITING * f64::from(flow.ready);
    capacity.note(
        Reading {
            at: now,
            rate: flow.admitted_per_s / f64::from(flow.ready),
            within: within && flow.waiting <= momentary,
            saturated: flow.waiting > momentary,
            room: if per_replica > 0.0 {
                policy.target / per_replica
            } else {
                f64::INFINITY
            },
        },
        policy.trend_window_s,
    );
}

/// The guard: no fewer ready replicas than the admitted rate over the highest safe rate per
/// replica, and never more than are ready now (it only stops steps down). It holds with requests
/// waiting too: skipping it then let one more waiting request order fewer replicas than the
/// same reading without it.
pub fn guard_floor(
    policy: &Policy,
    flow: &Flow,
    capacity: &Capacity,
    value: f64,
    lines: &mut Steps,
) -> f64 {
    let Some(safe) = capacity.safe_rate() else {
        return value;
    };
    if flow.ready == 0 {
        return value;
    }
    let keep = ((flow.admitted_per_s / safe - 1e-9).ceil().max(1.0) as u32).min(flow.ready);
    let floor = value_for(policy, keep);
    if floor <= value {
        return value;
    }
    lines.push(Step::Guard {
        admitted: flow.admitted_per_s,
        safe,
        keep,
        ready: flow.ready,
        floor,
        target: policy.target,
    });
    floor
}

/// The forecast's floor (`forecast=history`): the admitted rate projected over the horizon along
/// its trend (fitted over the horizon, at least `trend` seconds) or by the rise the time of day
/// brought on earlier days (`daily`, [`Daily::rise`]), the larger, in replicas at the highest rate
/// per replica remembered within the target. Rates grow linearly with users where in-flight
/// counts do not, so this is the view of a ramp that orders the replicas a cold start early;
/// the time of day is the view of a step, which has no trend until it has come.
/// With a `peak` learned (`reserve=auto`, [`crate::control::reserve::Reserve::peak`]) it orders
/// no more than that: the rate per replica is learned from what the replicas were seen to carry,
/// low on a ramp's way up, and a forecast on it alone ordered twice the replicas the ramp's top
/// needed.
#[allow(clippy::too_many_arguments)]
pub fn rate_forecast_floor(
    policy: &Policy,
    flow: &Flow,
    history: &mut Vec<Point>,
    daily: &mut Daily,
    capacity: &Capacity,
    now: f64,
    peak: Option<u32>,
    value: f64,
    lines: &mut Steps,
) -> f64 {
    let window = policy.trend_window_s.max(policy.lookahead_s);
    let p = crate::project::lookahead::project(
        history,
        now,
        flow.admitted_per_s,
        policy.lookahead_s,
        window,
    );
    // From the line's level now, not the last scrape's rate: one scrape's burst is no reason
    // to order a replica. A line through points closer than half its window (the first
    // scrapes of a replica just woken, say) is not a trend yet.
    let span = history.last().map_or(0.0, |l| l.at) - history.first().map_or(0.0, |f| f.at);
    let (level, slope) = if span >= window / 2.0 {
        (
            crate::project::lookahead::fitted(history, now).unwrap_or(flow.admitted_per_s),
            p.slope.unwrap_or(0.0),
        )
    } else {
        (flow.admitted_per_s, 0.0)
    };
    // A step has no trend to read until it has come: the time of day looks a start ahead.
    let step_s = policy.lookahead_s.max(policy.start_s());
    let time_of_day = daily.rise(now, step_s);
    daily.record(now, flow.admitted_per_s);
    let rise = (slope * policy.lookahead_s).max(time_of_day.unwrap_or(0.0));
    let ahead = level.max(0.0) + rise.max(0.0);
    let Some(safe) = capacity.safe_rate() else {
        return value;
    };
    let forecast = (ahead / safe - 1e-9).ceil().max(1.0) as u32;
    let needed = peak.map_or(forecast, |p| forecast.min(p.max(1)));
    let floor = value_for(policy, needed).min(value_for(policy, policy.max));
    if floor <= value {
        return value;
    }
    lines.push(Step::RateForecast {
        admitted: flow.admitted_per_s,
        ahead,
        lookahead_s: policy.lookahead_s,
        time_of_day: time_of_day.map(|rise| (rise, step_s)),
        safe,
        needed,
        capped_at_peak: needed < forecast,
        floor,
        target: policy.target,
    });
    floor
}

/// The credit for replicas starting: while the replicas ready now and those starting (each
/// expected Ready one cold start, the lookahead, after it was ordered) can carry the admitted
/// rate at the highest safe rate per replica, the value asks for no more than the current count:
/// a queue built on the ready replicas during a cold start is not a reason to order more.
pub fn credit(
    policy: &Policy,
    obs: &Observation<'_>,
    flow: &Flow,
    capacity: &Capacity,
    value: f64,
    lines: &mut Steps,
) -> f64 {
    // The count that keeps every replica ready or starting (`serve` knows the ready ones as
    // its current count; the starting ones are on their way).
    let current = obs
        .current
        .max(flow.ready + obs.starting_since.len() as u32);
    let cap = value_for(policy, current);
    if value <= cap {
        return value;
    }
    let Some(safe) = capacity.safe_rate() else {
        return value;
    };
    let arriving = obs
        .starting_since
        .iter()
        .filter(|&&since| since + policy.lookahead_s.max(1.0) >= obs.now)
        .count() as u32;
    let carried = f64::from(flow.ready + arriving) * safe;
    // With requests waiting, the admitted rate is the replicas' ceiling, not the demand.
    if arriving == 0 || carried < flow.admitted_per_s || flow.waiting > 0.0 {
        return value;
    }
    lines.push(Step::Credit {
        ready: flow.ready,
        arriving,
        carried,
        safe,
        admitted: flow.admitted_per_s,
        from: value,
        to: cap,
        current,
    });
    cap
}
