//! Every reason's words: the `Display` of each step and cause, one line each. `decide`'s output,
//! the simulator's timeline and the docs show these lines to the digit, so a change here is a
//! change of the documented output.

use super::{fmt, ActivityCause, Measured, MissingRule, NoValue, Step, Wake, Window};
use std::fmt::{Display, Formatter, Result};

/// The error text for a missing value: its cause, or plain "no value" when none was kept.
pub fn no_value_text(cause: Option<&NoValue>) -> String {
    cause.map_or_else(|| "no value".to_owned(), ToString::to_string)
}

impl Display for NoValue {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match *self {
            NoValue::PodsUnknown => write!(f, "the pods are not known yet: no value"),
            NoValue::ActivatorUnread => write!(
                f,
                "no ready replica, and the activator's held count cannot be read: no value"
            ),
            NoValue::NoReplicaRead { missing } => write!(
                f,
                "none of {missing} ready replica(s) could be read: no value (a fault is never \
                 read as zero)"
            ),
            NoValue::NoTtftSample => write!(
                f,
                "no first token was observed in the interval: no TTFT sample"
            ),
            NoValue::NoReadyReplica { metric } => {
                write!(f, "no ready replica, and {metric} needs one: no sample")
            }
            NoValue::MetricMissing {
                metric,
                server,
                lacks,
            } => write!(
                f,
                "the pods serve {server}, which exports no {lacks}: {metric} can never be read \
                 there (no value)"
            ),
            NoValue::NoSample { metric } => write!(
                f,
                "no replica gave a {metric} sample (rates need two scrapes): no value"
            ),
        }
    }
}

impl Display for ActivityCause {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match *self {
            ActivityCause::InFlight {
                in_flight,
                activation,
            } => write!(
                f,
                "active: {} request(s) running, waiting or held, above the activation level {}",
                fmt(in_flight),
                fmt(activation)
            ),
            ActivityCause::ReplicasUnread { missing } => write!(
                f,
                "active: {missing} ready replica(s) could not be read and may be busy (never \
                 read as idle)"
            ),
            ActivityCause::HeldUnread => write!(
                f,
                "unknown: nothing active was read, and the activator's held count cannot be read"
            ),
            ActivityCause::PodsUnknown => write!(
                f,
                "unknown: nothing is held, and the pods are not known yet"
            ),
            ActivityCause::Released => write!(
                f,
                "active: held requests were released, and no scrape has begun since to see them \
                 run"
            ),
            ActivityCause::Idle {
                in_flight,
                activation,
            } => write!(
                f,
                "idle: every replica read, {} in flight (activation level {}), nothing held",
                fmt(in_flight),
                fmt(activation)
            ),
            ActivityCause::WithinHold {
                hold_s,
                learned_gap_s,
            } => {
                write!(
                    f,
                    "active: idle, but within the {} s hold of one replica (",
                    fmt(hold_s)
                )?;
                match learned_gap_s {
                    Some(g) => write!(
                        f,
                        "the traffic came back after idle gaps of up to {} s",
                        fmt(g)
                    )?,
                    None => write!(f, "the lookahead")?,
                }
                write!(f, ")")
            }
        }
    }
}

impl Display for Measured {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match *self {
            Measured::Queue {
                sum,
                running,
                waiting,
                reporting,
            } => write!(
                f,
                "queue {} = running {} + waiting {} on {reporting} replica(s)",
                fmt(sum),
                fmt(running),
                fmt(waiting)
            ),
            Measured::Count {
                metric,
                sum,
                reporting,
            } => write!(f, "{metric} {} on {reporting} replica(s)", fmt(sum)),
            Measured::Average {
                metric,
                mean,
                sum,
                reporting,
            } => write!(
                f,
                "{metric} {} on average over {reporting} replica(s): {} in all",
                fmt(mean),
                fmt(sum)
            ),
            Measured::Ttft {
                p95,
                reporting,
                value,
            } => write!(
                f,
                "TTFT p95 {}s over the interval on {reporting} replica(s): {} x {reporting} = {}",
                fmt(p95),
                fmt(p95),
                fmt(value)
            ),
            Measured::Occupancy {
                in_flight,
                reporting,
                serving,
                needed,
            } => write!(
                f,
                "occupancy: R_needed = in flight {} x {reporting} healthy / max(serving {}, \
                 {reporting}, 1) = {}",
                fmt(in_flight),
                fmt(serving),
                fmt(needed)
            ),
        }
    }
}

impl Display for MissingRule {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match *self {
            MissingRule::Kept { status } => write!(f, "kept at the current {status}"),
            MissingRule::Up { count } => write!(f, "at 0 on the way up: {count}"),
            MissingRule::Down { count } => write!(f, "at the target on the way down: {count}"),
        }
    }
}

impl Display for Wake {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match *self {
            Wake::Held { held } => write!(
                f,
                "IsActive true at zero ({held} request(s) held): KEDA activates"
            ),
            Wake::Stream => write!(f, "StreamIsActive true at zero: KEDA activates"),
            Wake::Answer { answer } => write!(f, "IsActive {answer:?} at zero: KEDA activates"),
        }
    }
}

fn stabilised(f: &mut Formatter<'_>, window: Window, n: u32) -> Result {
    match window {
        Window::ScaleDown { window_s } => write!(
            f,
            "highest recommendation in the {window_s} s scale-down window is {n}: stabilised at {n}"
        ),
        Window::ScaleUp { window_s } => write!(
            f,
            "lowest recommendation in the {window_s} s scale-up window is {n}: stabilised at {n}"
        ),
        Window::Default { window_s } => write!(
            f,
            "highest recommendation in the {window_s} s window is {n}: stabilised at {n}"
        ),
    }
}

/// The lookahead's and forecast's steps.
fn projection(f: &mut Formatter<'_>, step: &Step) -> Result {
    let show = |rise: Option<f64>| rise.map_or("none yet".to_owned(), fmt);
    match *step {
        Step::NoLookahead => write!(
            f,
            "lookahead: none through a value that stands for unread replicas"
        ),
        Step::Forecast {
            lookahead_s,
            pattern,
            daily,
            from,
            to,
        } => write!(
            f,
            "forecast: {} s ahead, the recent pattern rises {}, the time of day {}: {} -> {}",
            fmt(lookahead_s),
            show(pattern),
            show(daily),
            fmt(from),
            fmt(to)
        ),
        Step::Lookahead {
            slope,
            window_s,
            lookahead_s,
            from,
            to,
        } => write!(
            f,
            "lookahead: trend {}{}/s over the last {} s, {} s ahead: {} -> {}",
            if slope >= 0.0 { "+" } else { "" },
            fmt(slope),
            fmt(window_s),
            fmt(lookahead_s),
            fmt(from),
            fmt(to)
        ),
        Step::TrendNotRising { value } => {
            write!(f, "lookahead: trend not rising, {} stays", fmt(value))
        }
        _ => write!(f, "lookahead: one point so far, no trend yet"),
    }
}

/// The floors under the value.
fn floor(f: &mut Formatter<'_>, step: &Step) -> Result {
    match *step {
        Step::Credit {
            ready,
            arriving,
            carried,
            safe,
            admitted,
            from,
            to,
            current,
        } => write!(
            f,
            "credit: {ready} + {arriving} starting carry {} req/s at {} each, above the {} \
             admitted:          {} -> {} (the current {current})",
            fmt(carried),
            fmt(safe),
            fmt(admitted),
            fmt(from),
            fmt(to)
        ),
        Step::RateForecast {
            admitted,
            ahead,
            lookahead_s,
            time_of_day,
            safe,
            needed,
            capped_at_peak,
            floor,
            target,
        } => {
            write!(
                f,
                "forecast: {} admitted/s now, {} in {} s",
                fmt(admitted),
                fmt(ahead),
                fmt(lookahead_s),
            )?;
            if let Some((rise, within_s)) = time_of_day.filter(|(r, _)| *r > 0.0) {
                write!(
                    f,
                    " (the time of day rises {} within {} s)",
                    fmt(rise),
                    fmt(within_s)
                )?;
            }
            write!(f, ", at {} req/s per replica: ", fmt(safe))?;
            if capped_at_peak {
                write!(f, "capped at the peak need of the last 14 days, ")?;
            }
            write!(
                f,
                "{needed} replica(s), {} = {needed} x {}",
                fmt(floor),
                fmt(target)
            )
        }
        Step::Slo {
            waiting,
            admitted,
            implied,
            slo_s,
            needed,
            floor,
            target,
        } => write!(
            f,
            "slo: {} waiting at {} admitted/s imply {} s to a first token (SLO {} s): at least \
             {needed} replica(s), {} = {needed} x {}",
            fmt(waiting),
            fmt(admitted),
            fmt(implied),
            fmt(slo_s),
            fmt(floor),
            fmt(target)
        ),
        Step::Guard {
            admitted,
            safe,
            keep,
            ready,
            floor,
            target,
        } => write!(
            f,
            "guard: {} admitted/s over {} req/s per replica (the most sustained within the \
             target) keeps {keep} of {ready} ready: {} = {keep} x {}",
            fmt(admitted),
            fmt(safe),
            fmt(floor),
            fmt(target)
        ),
        Step::Saturated {
            waiting,
            current,
            floor,
            target,
        } => write!(
            f,
            "saturated: {} request(s) wait, so work reads capacity, not demand: no fewer than \
             the current {current} replica(s), {} = {current} x {}",
            fmt(waiting),
            fmt(floor),
            fmt(target)
        ),
        Step::Hold {
            need,
            count,
            hold_s,
            learned_gap_s,
            floor,
            target,
        } => {
            write!(
                f,
                "hold: the admitted rate needs {need} replica(s); {count} held for {} s after \
                 the need fell (",
                fmt(hold_s)
            )?;
            match learned_gap_s {
                Some(g) => write!(f, "the traffic came back after gaps of up to {} s", fmt(g))?,
                None => write!(f, "the lookahead: no gap seen yet")?,
            }
            write!(f, "): {} = {count} x {}", fmt(floor), fmt(target))
        }
        Step::Reserve {
            need,
            level,
            since,
            floor,
            target,
        } => write!(
            f,
            "reserve: {} replica(s) needed now; the traffic has burst to {level} faster than \
             a start could follow (last at {} s), so {level} stand ready: {} = {level} x {}",
            fmt(need),
            fmt(since),
            fmt(floor),
            fmt(target)
        ),
        _ => Ok(()),
    }
}

/// How the value was measured, before the lookahead and the floors.
fn measure(f: &mut Formatter<'_>, step: &Step) -> Result {
    match *step {
        Step::NoValue(cause) => cause.fmt(f),
        Step::HeldBeforePods { metric, held } => write!(
            f,
            "the pods are not known yet; {} held at the activator, which holds only while no \
             replica is ready: {metric} = {} held",
            fmt(held),
            fmt(held)
        ),
        Step::HeldAtZero { metric, held } => {
            write!(f, "no ready replica: {metric} = {} held", fmt(held))
        }
        Step::IdleAtZero { metric } => {
            write!(f, "no ready replica and nothing held: {metric} = 0")
        }
        Step::Measured(m) => m.fmt(f),
        Step::CountedMissing {
            not_voting,
            reporting,
            alone,
            rule,
            value,
            count,
            target,
        } => write!(
            f,
            "{not_voting} replica(s) without a sample: the {reporting} that reported ask for \
             {alone}; counted as the HPA counts missing pods ({rule}), so {} = {count} x {}",
            fmt(value),
            fmt(target)
        ),
        Step::HeldUnreadAsZero => write!(
            f,
            "the activator's held count cannot be read: counted as 0 while replicas are ready \
             (the activator forwards to them)"
        ),
        Step::PlusHeld { held, value } => {
            write!(f, "+ {} held at the activator = {}", fmt(held), fmt(value))
        }
        Step::AsleepRequests { requests, value } => write!(
            f,
            "+ {} waiting on replicas asleep (they serve nothing until woken) = {}",
            fmt(requests),
            fmt(value)
        ),
        Step::Work {
            now,
            window_s,
            per_request,
            slope,
            lookahead_s,
            queued,
            drain_s,
            value,
        } => write!(
            f,
            "work demand {} now on the line through the last {} s (work done and requests \
             arriving unadmitted at {} each), {}/s, {} s ahead; {} queued cleared within {} s: {}",
            fmt(now),
            fmt(window_s),
            fmt(per_request),
            fmt(slope),
            fmt(lookahead_s),
            fmt(queued),
            fmt(drain_s),
            fmt(value)
        ),
        _ => Ok(()),
    }
}

/// The HPA's steps: proposals, window, limits and bounds.
fn hpa(f: &mut Formatter<'_>, step: &Step) -> Result {
    match *step {
        Step::Also {
            metric,
            value: Some(v),
            ..
        } => write!(f, "also {metric}: {}", fmt(v)),
        Step::Also {
            metric,
            value: None,
            no_value,
        } => write!(
            f,
            "also {metric}: no value ({})",
            no_value_text(no_value.as_ref())
        ),
        Step::Proposal {
            metric,
            value,
            target,
            replicas,
        } => write!(
            f,
            "{metric} {} / target {} per replica = {replicas} replica(s)",
            fmt(value),
            fmt(target)
        ),
        Step::WithinTolerance {
            value,
            target,
            status,
            ratio,
            replicas,
        } => write!(
            f,
            "{} / ({} x {status} replica(s)) = ratio {}, within the tolerance: {replicas} \
             replica(s)",
            fmt(value),
            fmt(target),
            fmt(ratio)
        ),
        Step::Largest { metrics, replicas } => write!(
            f,
            "the largest of the {metrics} metrics' proposals: {replicas} replica(s)"
        ),
        Step::HpaAtZero => write!(f, "the HPA does not act at zero replicas"),
        Step::AboveMax { max } => write!(f, "above max {max}: straight to max"),
        Step::BelowMin { min } => write!(f, "below min {min}: straight to min"),
        Step::NoValueKept => write!(f, "no value: the HPA keeps the current count"),
        Step::Stabilised { window, count } => stabilised(f, window, count),
        Step::Limited { from, to, limit } => {
            write!(f, "{from} limited to {to} ({})", limit.name())
        }
        _ => Ok(()),
    }
}

/// KEDA's steps to and from zero.
fn keda(f: &mut Formatter<'_>, step: &Step) -> Result {
    match *step {
        Step::RestoreMin { min } => {
            write!(f, "at zero below min {min}: KEDA restores the minimum")
        }
        Step::Activates {
            in_flight,
            to,
            wanted,
        } => {
            write!(
                f,
                "{} request(s) in flight at zero: KEDA activates 0 -> {to}",
                fmt(in_flight)
            )?;
            match wanted {
                Some(n) => write!(f, ", then its HPA asks for {n}"),
                None => Ok(()),
            }
        }
        Step::CappedAtMax { max } => write!(f, "capped at max {max}"),
        Step::AtZeroUnknown => write!(
            f,
            "at zero, activity not known: KEDA neither wakes nor sleeps"
        ),
        Step::AtZeroIdle => write!(f, "at zero and nothing in flight: stay at zero"),
        Step::ToZero {
            idle_s: Some(idle),
            cooldown_s,
        } => write!(
            f,
            "idle for {} s, at least the {} s cooldown: KEDA scales to zero",
            fmt(idle),
            fmt(cooldown_s)
        ),
        Step::ToZero {
            idle_s: None,
            cooldown_s,
        } => write!(
            f,
            "never active, past the {} s cooldown: KEDA scales to zero",
            fmt(cooldown_s)
        ),
        Step::UnknownNeverZero => write!(
            f,
            "activity not known: KEDA sees an error, and never scales to zero on one"
        ),
        Step::IdleWithinCooldown { idle_s, cooldown_s } => write!(
            f,
            "idle for {} s of the {} s cooldown: keep at least 1",
            fmt(idle_s),
            fmt(cooldown_s)
        ),
        Step::Woken(wake) => wake.fmt(f),
        _ => Ok(()),
    }
}

impl Display for Step {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match self {
            Step::NoValue(_)
            | Step::HeldBeforePods { .. }
            | Step::HeldAtZero { .. }
            | Step::IdleAtZero { .. }
            | Step::Measured(_)
            | Step::CountedMissing { .. }
            | Step::HeldUnreadAsZero
            | Step::PlusHeld { .. }
            | Step::AsleepRequests { .. }
            | Step::Work { .. } => measure(f, self),
            Step::NoLookahead
            | Step::Forecast { .. }
            | Step::Lookahead { .. }
            | Step::TrendNotRising { .. }
            | Step::OnePoint => projection(f, self),
            Step::Credit { .. }
            | Step::RateForecast { .. }
            | Step::Slo { .. }
            | Step::Guard { .. }
            | Step::Saturated { .. }
            | Step::Hold { .. }
            | Step::Reserve { .. } => floor(f, self),
            Step::Asleep {
                asleep,
                target,
                value,
            } => write!(
                f,
                "{asleep} replica(s) asleep, read from the server's sleep state: no capacity, not \
                 ready; kept in the count, + {asleep} x {} = {}",
                fmt(*target),
                fmt(*value)
            ),
            Step::Activity(cause) => cause.fmt(f),
            Step::Also { .. }
            | Step::Proposal { .. }
            | Step::WithinTolerance { .. }
            | Step::Largest { .. }
            | Step::HpaAtZero
            | Step::AboveMax { .. }
            | Step::BelowMin { .. }
            | Step::NoValueKept
            | Step::Stabilised { .. }
            | Step::Limited { .. } => hpa(f, self),
            Step::RestoreMin { .. }
            | Step::Activates { .. }
            | Step::CappedAtMax { .. }
            | Step::AtZeroUnknown
            | Step::AtZeroIdle
            | Step::ToZero { .. }
            | Step::UnknownNeverZero
            | Step::IdleWithinCooldown { .. }
            | Step::Woken(_) => keda(f, self),
        }
    }
}
