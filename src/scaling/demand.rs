//! From replica signals to the one number the HPA divides: the metric's value for the target.
//!
//! KEDA serves every external trigger to its HPA as an `AverageValue` metric, so the HPA asks for
//! `ceil(value / target)` replicas. [`measure`] computes that value for each metric: the sum over
//! replicas for queue, waiting and running (plus requests held at an activator, which at zero
//! are the only demand there is); the sum of per-replica utilisations for kv and cpu (so
//! `ceil(value / target)` is the HPA's `ceil(ratio x reporting replicas)`); the fleet TTFT p95
//! times the replicas that observed one; and seed 002's R_needed for occupancy. Replicas that
//! are ready but could not be read, or have no sample for the metric, do not vote; as the HPA does
//! with a missing pod, they count at the target when the rest read below it (so a fault never
//! pulls the count down) and at nothing when the rest read above it. With no replica readable,
//! there is no value at all, never a zero.

use super::policy::{Metric, Policy};
use crate::metrics::histogram::Histogram;
use crate::metrics::Replica;

/// What the decision sees at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// Seconds on the caller's clock.
    pub now: f64,
    /// The scale target's `spec.replicas`.
    pub current: u32,
    /// Pods that exist, ready or starting (`status.replicas`); `None` means `current`.
    pub status: Option<u32>,
    /// Ready replicas that were read.
    pub replicas: &'a [Replica],
    /// Ready replicas that could not be read.
    pub missing: u32,
    /// Requests held at the activator for this target.
    pub held: f64,
}

impl Observation<'_> {
    pub fn status_replicas(&self) -> u32 {
        self.status.unwrap_or(self.current)
    }
}

/// The metric's value and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    /// The value for the HPA; `None` when no replica gave a sample (keep the current count).
    pub value: Option<f64>,
    /// Requests running, waiting or held: what activity (and activation) is judged on.
    pub in_flight: f64,
    /// Replicas that gave a sample for the metric.
    pub reporting: u32,
    /// How the value was made, one short line per step.
    pub lines: Vec<String>,
}

/// Computes the metric's value for a policy from an observation.
pub fn measure(policy: &Policy, obs: &Observation<'_>) -> Demand {
    let mut lines = Vec::new();
    let in_flight = obs
        .replicas
        .iter()
        .map(|r| r.in_flight().unwrap_or(r.waiting()))
        .sum::<f64>()
        + obs.held;
    let (samples, reporting) = per_replica(policy.metric, obs.replicas);
    let silent = obs.replicas.len() as u32 - reporting;
    let not_voting = obs.missing + silent;
    let held = if policy.metric.counts_held() {
        obs.held
    } else {
        0.0
    };
    let mut value = if reporting == 0 {
        if obs.replicas.is_empty() && obs.missing == 0 && policy.metric.counts_held() {
            lines.push(format!(
                "no ready replica: {} = {} held",
                policy.metric,
                fmt(held)
            ));
            Some(held)
        } else {
            lines.push(no_sample_line(policy.metric, obs));
            None
        }
    } else {
        let (value, line) = combine(policy.metric, obs.replicas, &samples, reporting, held);
        lines.push(line);
        Some(value)
    };
    if let (Some(v), true) = (value.as_mut(), reporting > 0 && not_voting > 0) {
        let per_replica = *v / f64::from(reporting);
        if per_replica < policy.target {
            *v += f64::from(not_voting) * policy.target;
            lines.push(format!(
                "{not_voting} replica(s) without a sample count at the target ({} each), as the \
                 HPA counts a missing pod on the way down",
                fmt(policy.target)
            ));
        } else {
            lines.push(format!(
                "{not_voting} replica(s) without a sample count as 0, as the HPA counts a \
                 missing pod on the way up"
            ));
        }
    }
    let held_outside = held > 0.0 && reporting > 0 && policy.metric != Metric::Occupancy;
    if let (Some(v), true) = (value.as_mut(), held_outside) {
        *v += held;
        lines.push(format!(
            "+ {} held at the activator = {}",
            fmt(held),
            fmt(*v)
        ));
    }
    Demand {
        value,
        in_flight,
        reporting,
        lines,
    }
}

/// Each replica's sample for the metric (`None` where it has none) and how many have one.
fn per_replica(metric: Metric, replicas: &[Replica]) -> (Vec<Option<f64>>, u32) {
    let samples: Vec<Option<f64>> = replicas
        .iter()
        .map(|r| match metric {
            Metric::Queue => r.in_flight(),
            Metric::Waiting => Some(r.waiting()),
            Metric::Running => r.running(),
            Metric::Kv => r.kv(),
            Metric::Cpu => r.cpu_percent(),
            Metric::Occupancy => r.running().and(r.in_flight()),
            Metric::Ttft => r
                .rates
                .as_ref()
                .and_then(|rates| rates.ttft.as_ref())
                .and_then(|h| h.observations())
                .filter(|n| *n > 0.0),
        })
        .map(|s| s.filter(|v| v.is_finite() && *v >= 0.0))
        .collect();
    let reporting = samples.iter().flatten().count() as u32;
    (samples, reporting)
}

/// The value over the replicas that reported, with the line that explains it. Held requests are
/// added afterwards, except for occupancy, whose formula takes them as in-flight work.
fn combine(
    metric: Metric,
    replicas: &[Replica],
    samples: &[Option<f64>],
    reporting: u32,
    held: f64,
) -> (f64, String) {
    let sum: f64 = samples.iter().flatten().sum();
    match metric {
        Metric::Queue => {
            let running: f64 = replicas
                .iter()
                .zip(samples)
                .filter(|(_, s)| s.is_some())
                .filter_map(|(r, _)| r.running())
                .sum();
            (
                sum,
                format!(
                    "queue {} = running {} + waiting {} on {reporting} replica(s)",
                    fmt(sum),
                    fmt(running),
                    fmt(sum - running)
                ),
            )
        }
        Metric::Waiting | Metric::Running => (
            sum,
            format!("{metric} {} on {reporting} replica(s)", fmt(sum)),
        ),
        Metric::Kv | Metric::Cpu => {
            let mean = sum / f64::from(reporting);
            (
                sum,
                format!(
                    "{metric} {} on average over {reporting} replica(s): {} in all",
                    fmt(mean),
                    fmt(sum)
                ),
            )
        }
        Metric::Ttft => {
            let mut fleet = Histogram::default();
            for rates in replicas.iter().filter_map(|r| r.rates.as_ref()) {
                if let Some(h) = &rates.ttft {
                    fleet.merge(h);
                }
            }
            let p95 = fleet.quantile(0.95).unwrap_or(0.0);
            let value = p95 * f64::from(reporting);
            (
                value,
                format!(
                    "TTFT p95 {}s over the interval on {reporting} replica(s): {} x {reporting} = {}",
                    fmt(p95),
                    fmt(p95),
                    fmt(value)
                ),
            )
        }
        Metric::Occupancy => {
            let serving: f64 = replicas
                .iter()
                .zip(samples)
                .filter(|(_, s)| s.is_some())
                .filter_map(|(r, _)| r.running())
                .sum();
            let healthy = f64::from(reporting);
            let in_flight = sum + held;
            let needed = in_flight * healthy / serving.max(healthy).max(1.0);
            (
                needed,
                format!(
                    "occupancy: R_needed = in flight {} x {reporting} healthy / max(serving {}, {reporting}, 1) = {}",
                    fmt(in_flight),
                    fmt(serving),
                    fmt(needed)
                ),
            )
        }
    }
}

fn no_sample_line(metric: Metric, obs: &Observation<'_>) -> String {
    if obs.replicas.is_empty() && obs.missing > 0 {
        format!(
            "none of {} ready replica(s) could be read: no value (a fault is never read as zero)",
            obs.missing
        )
    } else if metric == Metric::Ttft {
        "no first token was observed in the interval: no TTFT sample".to_owned()
    } else if obs.replicas.is_empty() {
        format!("no ready replica, and {metric} needs one: no sample")
    } else {
        format!("no replica gave a {metric} sample (rates need two scrapes): no value")
    }
}

/// A number as the reasons print it: whole numbers without decimals, others to 3 places.
pub fn fmt(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}
