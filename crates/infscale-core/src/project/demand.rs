//! From replica signals to the one number the HPA divides: the metric's value for the target.
//!
//! KEDA serves every external trigger to its HPA as an `AverageValue` metric, so the HPA asks for
//! `ceil(value / target)` replicas. [`measure`] computes that value for each metric: the sum over
//! replicas for queue, waiting and running (plus requests held at an activator, which at zero
//! are the only demand there is); the sum of per-replica utilisations for kv and cpu (so
//! `ceil(value / target)` is the HPA's `ceil(ratio x reporting replicas)`); the fleet TTFT p95
//! times the replicas that observed one; and R_needed (the occupancy ratio) for occupancy.
//! Replicas that are ready but could not be read, or have no sample for the metric, do not vote:
//! [`crate::control::missing`] counts them as the HPA counts a pod with no metric, between
//! [`measure`] and [`finish`], which adds what the replicas do not report. With no
//! replica readable, or the pods not known, there is no value at all, never a zero; except that
//! requests held at the activator before the pods are known are the value (it holds only while
//! no replica is ready). Replicas read as asleep do not vote; the requests waiting on them count
//! as held ([`crate::project::asleep`]).

use crate::observe::metrics::histogram::Histogram;
use crate::observe::metrics::Replica;
use crate::policy::{Metric, Policy};
use crate::project::asleep;
use crate::reasons::{Measured, NoValue, Step, Steps};

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
    /// Replicas read as asleep (their server says so): no capacity, never idle-and-ready;
    /// requests waiting on them count as held ([`crate::project::asleep`]).
    pub asleep: &'a [Replica],
    /// Requests held at the activator for this target (0 without one); `None` when the
    /// activator's count cannot be read.
    pub held: Option<f64>,
    /// When the replicas' scrape began, on the caller's clock; `None` when the pods are not known
    /// (no pod list yet, or it cannot be read).
    pub scraped_at: Option<f64>,
    /// When each replica still starting was created, on the caller's clock (for the credit;
    /// empty where the caller does not know).
    pub starting_since: &'a [f64],
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
    /// Replicas that gave none: ready but unread, or read without a sample.
    pub not_voting: u32,
    /// Whether replicas without a sample were counted as the HPA counts missing pods: the value
    /// then stands for a replica count, not a measured demand (no trend is drawn through it).
    pub counted_missing: bool,
    /// Why there is no value, when there is none.
    pub no_value: Option<NoValue>,
    /// How the value was made, step by step.
    pub lines: Steps,
}

/// The metric's value for a policy from an observation, as the replicas that gave a sample
/// measured it: [`crate::control::missing::demand`] counts the others as the HPA does, then
/// [`finish`]es it.
pub fn measure(policy: &Policy, obs: &Observation<'_>) -> Demand {
    let mut lines = Steps::default();
    let held_read = obs.held.unwrap_or(0.0);
    let in_flight = obs
        .replicas
        .iter()
        .map(|r| r.in_flight().unwrap_or(r.waiting()))
        .sum::<f64>()
        + held_read
        + asleep::in_flight(obs.asleep);
    let (samples, reporting) = per_replica(policy, obs.replicas);
    let silent = (obs.replicas.len() as u32).saturating_sub(reporting);
    let not_voting = obs.missing.saturating_add(silent);
    let held = if policy.metric.counts_held() {
        held_read
    } else {
        0.0
    };
    let at_zero = obs.replicas.is_empty() && obs.missing == 0;
    let metric = policy.metric;
    let measured = if obs.scraped_at.is_none() {
        match obs.held {
            // The activator holds requests only while it sees no ready replica: what it holds
            // is the demand there is, before any pod list or scrape (a new collector answers
            // from it at once rather than a polling interval later).
            Some(h) if h > 0.0 && metric.counts_held() => {
                Ok((h, Step::HeldBeforePods { metric, held: h }))
            }
            _ => Err(NoValue::PodsUnknown),
        }
    } else if reporting == 0 {
        match obs.held {
            Some(_) if at_zero && metric.counts_held() => {
                Ok((held, Step::HeldAtZero { metric, held }))
            }
            Some(h) if at_zero && h == 0.0 => Ok((0.0, Step::IdleAtZero { metric })),
            None if at_zero => Err(NoValue::ActivatorUnread),
            _ => Err(no_sample(metric, obs)),
        }
    } else {
        let (value, how) = combine(metric, obs.replicas, &samples, reporting, held);
        Ok((value, Step::Measured(how)))
    };
    let (value, no_value) = match measured {
        Ok((value, step)) => {
            lines.push(step);
            (Some(value), None)
        }
        Err(cause) => {
            lines.push(Step::NoValue(cause));
            (None, Some(cause))
        }
    };
    let counted_missing = value.is_some() && reporting > 0 && not_voting > 0;
    Demand {
        value,
        in_flight,
        reporting,
        not_voting,
        counted_missing,
        no_value,
        lines,
    }
}

/// The rest of the value, once the HPA's rule has counted the replicas that gave no sample
/// ([`crate::control::missing`]): requests held at the activator, and those waiting on
/// replicas that are asleep.
pub fn finish(policy: &Policy, obs: &Observation<'_>, demand: &mut Demand) {
    let at_zero = obs.replicas.is_empty() && obs.missing == 0;
    let held = match policy.metric.counts_held() {
        true => obs.held.unwrap_or(0.0),
        false => 0.0,
    };
    let (value, lines) = (&mut demand.value, &mut demand.lines);
    if obs.held.is_none() && !at_zero && value.is_some() {
        lines.push(Step::HeldUnreadAsZero);
    }
    let held_outside = held > 0.0 && demand.reporting > 0 && policy.metric != Metric::Occupancy;
    if let (Some(v), true) = (value.as_mut(), held_outside) {
        *v += held;
        lines.push(Step::PlusHeld { held, value: *v });
    }
    if let Some(v) = value.as_mut() {
        *v = asleep::plus_requests(policy, obs.asleep, *v, lines);
    }
}

/// A replica's work over its last interval as a share of its full speed: prompt tokens
/// prefilled per second over the prefill rate, plus output tokens per second over the
/// full-batch decode rate (what arrives unadmitted is added over a window, in
/// [`crate::project::work`]).
fn work(r: &Replica, policy: &Policy) -> Option<f64> {
    let rates = r.rates.as_ref()?;
    let tokens = rates.prompt_tokens_per_s?;
    let output = rates.output_tokens_per_s.unwrap_or(0.0);
    Some(tokens / policy.prefill_rate + output / policy.decode_rate)
}

/// Each replica's sample for the metric (`None` where it has none) and how many have one.
fn per_replica(policy: &Policy, replicas: &[Replica]) -> (Vec<Option<f64>>, u32) {
    let metric = policy.metric;
    let samples: Vec<Option<f64>> = replicas
        .iter()
        .map(|r| match metric {
            Metric::Queue => r.in_flight(),
            Metric::Waiting => Some(r.waiting()),
            Metric::Running => r.running(),
            Metric::Kv => r.kv(),
            Metric::Cpu => r.cpu_percent(),
            Metric::Work => work(r, policy),
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

/// The value over the replicas that reported, with how it was made. Held requests are
/// added afterwards, except for occupancy, whose formula takes them as in-flight work.
fn combine(
    metric: Metric,
    replicas: &[Replica],
    samples: &[Option<f64>],
    reporting: u32,
    held: f64,
) -> (f64, Measured) {
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
                Measured::Queue {
                    sum,
                    running,
                    waiting: sum - running,
                    reporting,
                },
            )
        }
        Metric::Waiting | Metric::Running => (
            sum,
            Measured::Count {
                metric,
                sum,
                reporting,
            },
        ),
        Metric::Kv | Metric::Cpu | Metric::Work => {
            let mean = sum / f64::from(reporting);
            (
                sum,
                Measured::Average {
                    metric,
                    mean,
                    sum,
                    reporting,
                },
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
                Measured::Ttft {
                    p95,
                    reporting,
                    value,
                },
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
                Measured::Occupancy {
                    in_flight,
                    reporting,
                    serving,
                    needed,
                },
            )
        }
    }
}

/// Why replicas known gave no sample for the metric.
fn no_sample(metric: Metric, obs: &Observation<'_>) -> NoValue {
    if obs.replicas.is_empty() && obs.missing > 0 {
        NoValue::NoReplicaRead {
            missing: obs.missing,
        }
    } else if metric == Metric::Ttft {
        NoValue::NoTtftSample
    } else if obs.replicas.is_empty() {
        NoValue::NoReadyReplica { metric }
    } else if let Some((server, lacks)) = obs.replicas.iter().find_map(|r| {
        crate::policy::exports::missing(r.signals.server, metric)
            .map(|lacks| (r.signals.server, lacks))
    }) {
        // Found with `server: auto`: the pods' server can never give this metric.
        NoValue::MetricMissing {
            metric,
            server,
            lacks,
        }
    } else {
        NoValue::NoSample { metric }
    }
}
