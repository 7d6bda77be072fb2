//! The decision: demand, lookahead and activation ([`evaluate`], all that `serve` answers KEDA
//! with), then KEDA's step to or from zero and the HPA's reconcile ([`decide`], what `decide`
//! prints and the simulator applies). One path for every job, so the replica count that the HPA
//! derives from `serve`'s value is the count `decide` prints.

use super::missing;
use crate::control::activity::{self, Activity, Facts};
use crate::control::hpa::{self, replicas, Outcome, Reconciled};
use crate::control::keda;
pub use crate::control::memory::ScalerState;
use crate::control::reserve::Need;
use crate::control::several;
use crate::policy::behavior::Limited;
use crate::policy::{Forecast, HoldRule, Metric, Policy};
use crate::project::asleep;
use crate::project::demand::{Demand, Observation};
use crate::project::floors;
use crate::project::forecast;
use crate::project::lookahead;
use crate::project::work;
use crate::reasons::{fmt, ActivityCause, NoValue, Step, Steps, Window};
use serde::{Deserialize, Serialize};

/// What `serve` needs: the value for `GetMetrics` and the answer for `IsActive`.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub demand: Demand,
    /// The metric value after the lookahead; `None` when there is none to give (no replica gave
    /// a sample, or the pods are not known): KEDA's HPA then keeps the current count.
    pub value: Option<f64>,
    /// The answer to `IsActive`: active, idle, or (something unread) not known.
    pub activity: Activity,
    /// Why there is no value, when there is none: the error KEDA is given.
    pub no_value: Option<NoValue>,
    /// Why the activity is what it is: the error KEDA is given when it is unknown.
    pub activity_cause: ActivityCause,
    /// The steps, from the measurement to the further metrics.
    pub lines: Steps,
}

/// Measures demand, applies the cold-start lookahead and judges activity (`IsActive`, by
/// [`activity::judge`]), updating the trend and the held memory in `state`.
pub fn evaluate(policy: &Policy, obs: &Observation<'_>, state: &mut ScalerState) -> Evaluation {
    state.held.note(obs.held, obs.now);
    let mut demand = missing::demand(policy, obs);
    let flow = floors::flow(obs);
    // Work does not fall when replicas are added: its demand now is the need.
    let (work_now, work_arriving) =
        sustain_work(policy, obs, flow.as_ref(), state, &mut demand).unzip();
    let mut lines = demand.lines.clone();
    let mut rate_need = work_now.map(|w| replicas::ceil_replicas(w / policy.target));
    let value = demand.value.map(|measured| {
        let mut v = project(policy, obs, state, &demand, measured, &mut lines);
        let Some(flow) = flow.filter(|_| !demand.counted_missing) else {
            return v;
        };
        let history = policy.forecast == Forecast::History && policy.lookahead_s > 0.0;
        if policy.guard || policy.credit || history {
            floors::note_capacity(
                &mut state.capacity,
                policy,
                &flow,
                (measured, demand.reporting),
                obs.now,
            );
        }
        if policy.credit {
            v = floors::credit(policy, obs, &flow, &state.capacity, v, &mut lines);
        }
        if history {
            let peak = peak(policy, state, obs.now);
            v = floors::rate_forecast_floor(
                policy,
                &flow,
                &mut state.rate_trend,
                &mut state.rate_daily,
                &state.capacity,
                // The admitted rate is the scrape's: evaluations between scrapes add nothing.
                obs.scraped_at.unwrap_or(obs.now),
                peak,
                v,
                &mut lines,
            );
        }
        v = floors::slo_floor(policy, &flow, v, &mut lines);
        if policy.guard {
            v = floors::guard_floor(policy, &flow, &state.capacity, v, &mut lines);
        }
        rate_need = rate_need.or(state
            .capacity
            .safe_rate()
            .zip(state.capacity.sustained_rate())
            .map(|(safe, per_replica)| {
                let rate = per_replica * f64::from(flow.ready);
                replicas::ceil_replicas(rate / safe).max(u32::from(flow.ready > 0))
            }));
        v
    });
    let value = value.map(|v| saturated_floor(policy, obs, v, &mut lines));
    let value = value.map(|v| hold_floor(policy, state, rate_need, obs.now, v, &mut lines));
    // What arrives now, in replicas of work: `reserve=auto`'s measure (a count of requests in
    // flight, or a queue's drain, grows with the backlog, not with the arrivals).
    let need_now = work_arriving.map(|w| w / policy.target);
    let ready_now = flow.as_ref().map(|f| f64::from(f.ready));
    let value =
        value.map(|v| reserve_floor(policy, state, (need_now, ready_now), obs, v, &mut lines));
    let value = value.map(|v| asleep::plus_slots(policy, obs.asleep, v, &mut lines));
    let (activity, cause) = activity::judge(&Facts {
        in_flight: demand.in_flight,
        activation: policy.activation,
        missing: obs.missing,
        pods_known: obs.scraped_at.is_some(),
        held_known: obs.held.is_some(),
        scraped_since_held: state.held.seen_by(obs.scraped_at),
    });
    let (activity, activity_cause) =
        held_active(policy, state, obs, demand.in_flight, activity, cause);
    lines.push(Step::Activity(activity_cause));
    evaluate_others(policy, obs, state, &mut lines);
    Evaluation {
        no_value: demand.no_value,
        demand,
        value,
        activity,
        activity_cause,
        lines,
    }
}

/// Evaluates the policy's further metrics on the same observation, each on its own memory,
/// keeping each one's value (in the order of `policy.also`) with a step each.
fn evaluate_others(
    policy: &Policy,
    obs: &Observation<'_>,
    state: &mut ScalerState,
    lines: &mut Steps,
) {
    for (i, other) in several::others(policy, state).iter_mut().enumerate() {
        let single = policy.single(i + 1);
        let eval = evaluate(&single, obs, &mut other.state);
        several::record(other, single.metric, eval.value, eval.no_value, lines);
    }
}

/// `work`: the demand now, on a line fitted through the readings of the trend window, with
/// what arrived unadmitted and the queue, projected over the lookahead ([`work`]); in place of
/// one scrape's work done, and of the lookahead's own projection.
/// Returns the demand now, without the lookahead, and its part that is arriving (without the
/// queue's drain).
fn sustain_work(
    policy: &Policy,
    obs: &Observation<'_>,
    flow: Option<&floors::Flow>,
    state: &mut ScalerState,
    demand: &mut Demand,
) -> Option<(f64, f64)> {
    let (Metric::Work, Some(done), false, Some(at)) = (
        policy.metric,
        demand.value,
        demand.counted_missing,
        obs.scraped_at,
    ) else {
        return None;
    };
    let queued = obs.replicas.iter().map(|r| r.waiting()).sum::<f64>() + obs.held.unwrap_or(0.0);
    let reading = work::Reading {
        at,
        work: done,
        admitted: flow.map(|f| f.admitted_per_s),
        queued,
    };
    let f = state.work.note(
        reading,
        policy.trend_window_s,
        policy.nominal_request_work(),
    );
    let value = f.value(policy.lookahead_s);
    demand.lines.push(Step::Work {
        now: f.now,
        window_s: policy.trend_window_s,
        per_request: f.per_request,
        slope: f.slope.unwrap_or(0.0),
        lookahead_s: policy.lookahead_s,
        queued: f.queued,
        drain_s: work::DRAIN_S,
        value,
    });
    demand.value = Some(value);
    Some((f.value(0.0), f.now.max(0.0)))
}

/// `work` reads what the replicas do, which a saturated replica caps at what it can: while
/// requests wait on the replicas, the value never asks for fewer than the current count, so
/// replicas still starting for the backlog are not taken back before they are Ready.
fn saturated_floor(policy: &Policy, obs: &Observation<'_>, v: f64, lines: &mut Steps) -> f64 {
    if policy.metric != Metric::Work {
        return v;
    }
    let waiting: f64 = obs.replicas.iter().map(|r| r.waiting()).sum();
    let floor = f64::from(obs.current) * policy.target;
    if waiting <= 0.0 || floor <= v {
        return v;
    }
    lines.push(Step::Saturated {
        waiting,
        current: obs.current,
        floor,
        target: policy.target,
    });
    floor
}

/// `hold=auto`: notes the replicas the admitted rate needs at the rate per replica the
/// replicas sustain (a need that, unlike a count of requests, does not fall when replicas are
/// added), and holds a count the traffic came back to after gaps as long as it has been below
/// it ([`crate::control::hold`]).
fn hold_floor(
    policy: &Policy,
    state: &mut ScalerState,
    rate_need: Option<u32>,
    now: f64,
    v: f64,
    lines: &mut Steps,
) -> f64 {
    let (HoldRule::Auto, Some(need)) = (policy.hold, rate_need) else {
        return v;
    };
    state.hold.note(need, now);
    let held = state.hold.held(now, policy.lookahead_s);
    let floor = f64::from(held.count) * policy.target;
    if floor <= v {
        return v;
    }
    lines.push(Step::Hold {
        need,
        count: held.count,
        hold_s: held.hold_s,
        learned_gap_s: held.learned_gap_s,
        floor,
        target: policy.target,
    });
    floor
}

/// `reserve=auto`: notes the need now against what the policy alone would have had Ready, and
/// keeps the level the bursts that outran it reached ([`crate::control::reserve`]). Evaluations
/// between scrapes add nothing: the need is the scrape's.
fn reserve_floor(
    policy: &Policy,
    state: &mut ScalerState,
    (need, ready_now): (Option<f64>, Option<f64>),
    obs: &Observation<'_>,
    v: f64,
    lines: &mut Steps,
) -> f64 {
    let (true, Some(work), Some(at)) = (policy.reserve, need, obs.scraped_at) else {
        return v;
    };
    let newer = state.reserve.orders.last().is_none_or(|o| o.at < at);
    // Shown as the need: the work, or the requests where they need more.
    let mut need = work;
    if newer {
        let ordered = v / policy.target;
        let running = obs.replicas.iter().filter_map(|r| r.running());
        let in_flight = (
            running.sum(),
            obs.replicas.iter().map(|r| r.waiting()).sum(),
        );
        let requests = state
            .reserve
            .requests_need(at, in_flight, obs.replicas.len());
        need = requests.map_or(work, |r| work.max(r));
        state.reserve.note(
            at,
            Need { work, requests },
            ordered,
            ready_now,
            policy.start_s(),
            policy.down_window_s(),
        );
    }
    let level = state.reserve.level(obs.now, policy.start_s());
    let floor = f64::from(level.replicas.min(policy.max)) * policy.target;
    if floor <= v {
        return v;
    }
    lines.push(Step::Reserve {
        need,
        level: level.replicas,
        since: level.since,
        floor,
        target: policy.target,
    });
    floor
}

/// `reserve=auto`'s peak need, from this metric's memory or a further metric's (the need is read
/// where `work` is evaluated): the forecast orders no more.
fn peak(policy: &Policy, state: &ScalerState, now: f64) -> Option<u32> {
    if !policy.reserve {
        return None;
    }
    std::iter::once(&state.reserve)
        .chain(state.others.iter().map(|o| &o.state.reserve))
        .filter_map(|r| r.peak(now))
        .max()
}

/// `hold=auto` or `hold=idle` at one replica: a target idle within the hold of one replica stays
/// active, so KEDA's cooldown starts only once the lull has outlasted the idle gaps the traffic
/// came back from.
fn held_active(
    policy: &Policy,
    state: &mut ScalerState,
    obs: &Observation<'_>,
    in_flight: f64,
    activity: Activity,
    cause: ActivityCause,
) -> (Activity, ActivityCause) {
    if policy.hold == HoldRule::Off || obs.scraped_at.is_none() {
        return (activity, cause);
    }
    state
        .idle
        .note(u32::from(in_flight > policy.activation), obs.now);
    if activity != Activity::Idle || obs.replicas.is_empty() {
        return (activity, cause);
    }
    let held = state.idle.held(obs.now, 0.0);
    if held.count == 0 {
        return (activity, cause);
    }
    let cause = ActivityCause::WithinHold {
        hold_s: held.hold_s,
        learned_gap_s: held.learned_gap_s,
    };
    (Activity::Active, cause)
}

/// The value projected over the lookahead, by the policy's forecast.
fn project(
    policy: &Policy,
    obs: &Observation<'_>,
    state: &mut ScalerState,
    demand: &Demand,
    v: f64,
    lines: &mut Steps,
) -> f64 {
    if policy.lookahead_s <= 0.0 || (policy.metric == Metric::Work && !demand.counted_missing) {
        // `work` projects along its own fitted line.
        return v;
    }
    if demand.counted_missing {
        lines.push(Step::NoLookahead);
        return v;
    }
    if policy.forecast == Forecast::History {
        let f = forecast::project(
            &mut state.trend,
            &mut state.daily,
            obs.now,
            v,
            policy.lookahead_s,
            policy.trend_window_s,
        );
        lines.push(Step::Forecast {
            lookahead_s: policy.lookahead_s,
            pattern: f.pattern,
            daily: f.daily,
            from: v,
            to: f.value,
        });
        return f.value;
    }
    let p = lookahead::project(
        &mut state.trend,
        obs.now,
        v,
        policy.lookahead_s,
        policy.trend_window_s,
    );
    lines.push(match p.slope {
        Some(slope) if p.value > v => Step::Lookahead {
            slope,
            window_s: policy.trend_window_s,
            lookahead_s: policy.lookahead_s,
            from: v,
            to: p.value,
        },
        Some(_) => Step::TrendNotRising { value: v },
        None => Step::OnePoint,
    });
    p.value
}

/// Why the decision ended where it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Why {
    /// The metric's proposal went through unchanged.
    Metric,
    /// Within the tolerance: no change proposed.
    Tolerance,
    /// The stabilisation window held the count.
    Stabilized,
    ScaleUpLimit,
    ScaleDownLimit,
    /// Clamped at max.
    Max,
    /// Clamped at min.
    Min,
    /// No replica gave a sample: keep the current count.
    NoSamples,
    /// KEDA woke the target from zero.
    Activate,
    /// At zero with nothing to do.
    Idle,
    /// KEDA took the last replica away after the cooldown.
    IdleToZero,
}

impl Why {
    pub fn name(self) -> &'static str {
        match self {
            Why::Metric => "metric",
            Why::Tolerance => "tolerance",
            Why::Stabilized => "stabilised",
            Why::ScaleUpLimit => "scale-up limit",
            Why::ScaleDownLimit => "scale-down limit",
            Why::Max => "max",
            Why::Min => "min",
            Why::NoSamples => "no samples",
            Why::Activate => "activate",
            Why::Idle => "idle",
            Why::IdleToZero => "idle-to-zero",
        }
    }
}

/// A replica count and its reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub current: u32,
    pub desired: u32,
    /// The value `serve` would return to KEDA for the same inputs.
    pub value: Option<f64>,
    /// What `serve` would answer `IsActive` with.
    pub activity: Activity,
    /// The HPA's raw proposal from the value, when one was made.
    pub proposal: Option<u32>,
    pub why: Why,
    /// The steps, in order (one line each when rendered).
    pub lines: Steps,
}

impl Decision {
    pub fn direction(&self) -> &'static str {
        match self.desired.cmp(&self.current) {
            std::cmp::Ordering::Greater => "up",
            std::cmp::Ordering::Less => "down",
            std::cmp::Ordering::Equal => "hold",
        }
    }

    /// `queue:4 (min 1, max 3): current 1 -> desired 3 (up; metric)`
    pub fn headline(&self, policy: &Policy) -> String {
        format!(
            "{}:{} (min {}, max {}): current {} -> desired {} ({}; {})",
            policy.metric,
            fmt(policy.target),
            policy.min,
            policy.max,
            self.current,
            self.desired,
            self.direction(),
            self.why.name()
        )
    }
}

/// The HPA's proposal for a value: `AverageValue` on KEDA's milli-units.
pub fn proposal(policy: &Policy, value: f64, status_replicas: u32) -> u32 {
    let tolerances = policy.controller.tolerances(policy.behavior.as_ref());
    replicas::external_per_pod(
        replicas::to_milli(value),
        replicas::to_milli(policy.target),
        status_replicas,
        tolerances,
    )
    .0
}

/// The HPA's part of a decision: its proposal from the value and one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct HpaSync {
    pub desired: u32,
    pub proposal: Option<u32>,
    pub why: Why,
}

/// One HPA sync on the value `serve` would return: the `AverageValue` proposal, then the
/// controller's reconcile (pre-checks, window, rate limits, min/max) with `state.hpa`. Appends
/// its reasons to `lines`.
pub fn hpa_sync(
    policy: &Policy,
    state: &mut ScalerState,
    current: u32,
    status: u32,
    value: Option<f64>,
    now: f64,
    lines: &mut Steps,
) -> HpaSync {
    let mut raw = value.map(|v| proposal(policy, v, status));
    let mut within = false;
    if let (Some(v), Some(n)) = (value, raw) {
        within = replicas::ceil_replicas(in_targets(policy, v)) != n;
        lines.push(proposal_step(policy, v, n, status, within));
    }
    if !policy.also.is_empty() {
        within = false;
        let propose = |p: &Policy, v: f64| proposal(p, v, status);
        raw = several::proposal_over_metrics(policy, state, value, propose, current, lines);
    }
    let spec = hpa::Spec {
        min: policy.hpa_min(),
        max: policy.max,
        behavior: policy.behavior.clone(),
    };
    let r = hpa::reconcile(&policy.controller, &spec, &mut state.hpa, current, raw, now);
    let why = explain(policy, &r, within, lines);
    HpaSync {
        desired: r.desired,
        proposal: raw,
        why,
    }
}

/// Decides the replica count for one observation, as KEDA's poll and its HPA's sync would at
/// the same moment, updating `state` (the result is taken to be applied). From zero the two
/// steps are collapsed: KEDA activates 0 -> 1 and the count shown is what the HPA asks next.
pub fn decide(policy: &Policy, obs: &Observation<'_>, state: &mut ScalerState) -> Decision {
    let eval = evaluate(policy, obs, state);
    let mut lines = eval.lines;
    let current = obs.current;
    let done = |desired, proposal, why, lines| Decision {
        current,
        desired,
        value: eval.value,
        activity: eval.activity,
        proposal,
        why,
        lines,
    };
    let poll = keda::poll(
        policy.min,
        policy.cooldown_s,
        current,
        eval.activity,
        &mut state.last_active,
        obs.now,
    );
    match poll {
        keda::Poll::Activate { to } if !eval.activity.is_active() => {
            lines.push(Step::RestoreMin { min: policy.min });
            done(to, None, Why::Min, lines)
        }
        keda::Poll::Activate { to } => {
            let wanted = if policy.also.is_empty() {
                eval.value.map(|v| proposal(policy, v, 0))
            } else {
                let propose = |p: &Policy, v: f64| proposal(p, v, 0);
                several::proposal_over_metrics(policy, state, eval.value, propose, 0, &mut lines)
            };
            let desired = wanted.unwrap_or(to).max(to).min(policy.max);
            lines.push(Step::Activates {
                in_flight: eval.demand.in_flight,
                to,
                wanted,
            });
            if wanted.is_some_and(|n| n > policy.max) {
                lines.push(Step::CappedAtMax { max: policy.max });
            }
            done(desired, wanted, Why::Activate, lines)
        }
        keda::Poll::Keep { .. } if current == 0 => {
            lines.push(match eval.activity {
                Activity::Unknown => Step::AtZeroUnknown,
                _ => Step::AtZeroIdle,
            });
            done(0, None, Why::Idle, lines)
        }
        keda::Poll::ToZero { idle_s } => {
            lines.push(keda::to_zero_line(idle_s, policy.cooldown_s));
            done(0, None, Why::IdleToZero, lines)
        }
        keda::Poll::Keep { idle_s } => {
            if policy.min == 0 && eval.activity == Activity::Unknown {
                lines.push(Step::UnknownNeverZero);
            } else if policy.min == 0 && !eval.activity.is_active() {
                lines.push(Step::IdleWithinCooldown {
                    idle_s: idle_s.unwrap_or(0.0),
                    cooldown_s: policy.cooldown_s,
                });
            }
            let status = obs.status_replicas();
            let sync = hpa_sync(
                policy, state, current, status, eval.value, obs.now, &mut lines,
            );
            done(sync.desired, sync.proposal, sync.why, lines)
        }
    }
}

/// `value / target` as the HPA divides it, on KEDA's milli-units.
fn in_targets(policy: &Policy, value: f64) -> f64 {
    replicas::to_milli(value) as f64 / replicas::to_milli(policy.target) as f64
}

fn proposal_step(policy: &Policy, value: f64, proposal: u32, status: u32, within: bool) -> Step {
    if within {
        Step::WithinTolerance {
            value,
            target: policy.target,
            status,
            ratio: value / (policy.target * f64::from(status)),
            replicas: proposal,
        }
    } else {
        Step::Proposal {
            metric: policy.metric,
            value,
            target: policy.target,
            replicas: proposal,
        }
    }
}

fn explain(policy: &Policy, r: &Reconciled, within: bool, lines: &mut Steps) -> Why {
    match r.outcome {
        Outcome::ScalingDisabled => {
            lines.push(Step::HpaAtZero);
            Why::Idle
        }
        Outcome::AboveMax => {
            lines.push(Step::AboveMax { max: policy.max });
            Why::Max
        }
        Outcome::BelowMin => {
            lines.push(Step::BelowMin {
                min: policy.hpa_min(),
            });
            Why::Min
        }
        Outcome::NoMetrics => {
            lines.push(Step::NoValueKept);
            Why::NoSamples
        }
        Outcome::Normalized(limited) => {
            let proposal = r.proposal.unwrap_or(r.desired);
            let stabilized = r.stabilized.unwrap_or(proposal);
            if stabilized != proposal {
                lines.push(Step::Stabilised {
                    window: window(policy, proposal, stabilized),
                    count: stabilized,
                });
            }
            let why = match limited {
                Limited::DesiredWithinRange if stabilized != proposal => Why::Stabilized,
                Limited::DesiredWithinRange if within => Why::Tolerance,
                Limited::DesiredWithinRange => Why::Metric,
                Limited::ScaleUpLimit => Why::ScaleUpLimit,
                Limited::ScaleDownLimit => Why::ScaleDownLimit,
                Limited::TooManyReplicas => Why::Max,
                Limited::TooFewReplicas => Why::Min,
            };
            if limited != Limited::DesiredWithinRange {
                lines.push(Step::Limited {
                    from: stabilized,
                    to: r.desired,
                    limit: limited,
                });
            }
            why
        }
    }
}

/// The window that stabilised `proposal` at `stabilized`.
fn window(policy: &Policy, proposal: u32, stabilized: u32) -> Window {
    match &policy.behavior {
        Some(b) if stabilized > proposal => Window::ScaleDown {
            window_s: b
                .scale_down
                .window_s
                .unwrap_or(policy.controller.downscale_window_s),
        },
        Some(b) => Window::ScaleUp {
            window_s: b.scale_up.window_s.unwrap_or(0),
        },
        None => Window::Default {
            window_s: policy.controller.downscale_window_s,
        },
    }
}

#[cfg(test)]
mod asleep_tests;
#[cfg(test)]
mod tests;
