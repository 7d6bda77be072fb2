//! Scale-up and scale-down rate limits, then the min/max clamp.
//!
//! With `behavior`, each policy limits the change over its own period, counted from the scale
//! events stored inside that period (`convertDesiredReplicasWithBehaviorRate`); `selectPolicy`
//! picks the largest (`Max`) or smallest (`Min`) allowed change, or freezes the direction
//! (`Disabled`). Without `behavior`, scale-up is capped at max(2 x current, 4)
//! (`convertDesiredReplicasWithRules`). Percent limits use float64 exactly as Go does: up rounds
//! up, down truncates, and IEEE rounding leaks through (10% up from 50 allows 56).

use super::{Spec, State};
use crate::policy::behavior::{Behavior, Controller, Limited, RateKind, Rules, Select};
use serde::{Deserialize, Serialize};

/// A change of replica count that was applied, as a non-negative magnitude.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScaleEvent {
    pub at: f64,
    pub change: u32,
    #[serde(default)]
    pub outdated: bool,
}

/// The stored scale events, up and down kept apart.
#[derive(Debug, Clone, Copy)]
pub struct Events<'a> {
    pub up: &'a [ScaleEvent],
    pub down: &'a [ScaleEvent],
}

/// Replicas added (or removed) by the events of the last `period_s` seconds
/// (`getReplicasChangePerPeriod`); an event counts iff it is less than `period_s` old.
pub fn change_in_period(period_s: u32, events: &[ScaleEvent], now: f64) -> i64 {
    let period = f64::from(period_s);
    events
        .iter()
        .filter(|e| now - e.at < period)
        .map(|e| i64::from(e.change))
        .sum()
}

/// The count each policy's period started from: current minus what was added plus what was
/// removed inside the period.
fn period_start(current: u32, period_s: u32, events: Events<'_>, now: f64) -> i64 {
    i64::from(current) - change_in_period(period_s, events.up, now)
        + change_in_period(period_s, events.down, now)
}

/// The highest count the scale-up rules allow (`calculateScaleUpLimitWithScalingRules`), before
/// saturation at `current`. An empty policy list leaves the sentinel (i32::MIN under Max).
pub fn scale_up_limit(current: u32, events: Events<'_>, rules: &Rules, now: f64) -> i64 {
    let pick: fn(i64, i64) -> i64 = match rules.select {
        Select::Disabled => return i64::from(current),
        Select::Min => i64::min,
        Select::Max => i64::max,
    };
    let mut result = if rules.select == Select::Min {
        i64::from(i32::MAX)
    } else {
        i64::from(i32::MIN)
    };
    for policy in &rules.policies {
        let start = period_start(current, policy.period_s, events, now);
        let proposed = match policy.kind {
            RateKind::Pods => start + i64::from(policy.value),
            RateKind::Percent => {
                (start as f64 * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i64
            }
        };
        result = pick(result, proposed);
    }
    result
}

/// The lowest count the scale-down rules allow (`calculateScaleDownLimitWithBehaviors`), before
/// saturation at `current`.
pub fn scale_down_limit(current: u32, events: Events<'_>, rules: &Rules, now: f64) -> i64 {
    let pick: fn(i64, i64) -> i64 = match rules.select {
        Select::Disabled => return i64::from(current),
        Select::Min => i64::max,
        Select::Max => i64::min,
    };
    let mut result = if rules.select == Select::Min {
        i64::from(i32::MIN)
    } else {
        i64::from(i32::MAX)
    };
    for policy in &rules.policies {
        let start = period_start(current, policy.period_s, events, now);
        let proposed = match policy.kind {
            RateKind::Pods => start - i64::from(policy.value),
            // Go's int32(float64) conversion truncates toward zero, as `as` does.
            RateKind::Percent => (start as f64 * (1.0 - f64::from(policy.value) / 100.0)) as i64,
        };
        result = pick(result, proposed);
    }
    result
}

fn clamp_to_u32(x: i64) -> u32 {
    x.clamp(0, i64::from(u32::MAX)) as u32
}

/// Applies the rate limits to a stabilised `desired`, then min/max
/// (`convertDesiredReplicasWithBehaviorRate`). The branch is chosen by `desired` against
/// `current`; a limit on the wrong side of `current` saturates at `current`.
pub fn with_behavior(
    current: u32,
    desired: u32,
    spec: &Spec,
    behavior: &Behavior,
    events: Events<'_>,
    now: f64,
) -> (u32, Limited) {
    if desired > current {
        let limit = scale_up_limit(current, events, &behavior.scale_up, now).max(current.into());
        let (allowed, reason) = if i64::from(spec.max) > limit {
            (clamp_to_u32(limit), Limited::ScaleUpLimit)
        } else {
            (spec.max, Limited::TooManyReplicas)
        };
        if desired > allowed {
            return (allowed, reason);
        }
    } else if desired < current {
        let limit =
            scale_down_limit(current, events, &behavior.scale_down, now).min(current.into());
        let (allowed, reason) = if i64::from(spec.min) < limit {
            (clamp_to_u32(limit), Limited::ScaleDownLimit)
        } else {
            (spec.min, Limited::TooFewReplicas)
        };
        if desired < allowed {
            return (allowed, reason);
        }
    }
    (desired, Limited::DesiredWithinRange)
}

/// The legacy clamp (`convertDesiredReplicasWithRules`): scale-up capped at
/// max(factor x current, minimum), then min and max.
pub fn legacy(
    controller: &Controller,
    current: u32,
    desired: u32,
    min: u32,
    max: u32,
) -> (u32, Limited) {
    let cap = (controller.scale_up_limit_factor * f64::from(current))
        .max(controller.scale_up_limit_minimum) as i64;
    let (allowed, reason) = if i64::from(max) > cap {
        (clamp_to_u32(cap), Limited::ScaleUpLimit)
    } else {
        (max, Limited::TooManyReplicas)
    };
    if desired < min {
        return (min, Limited::TooFewReplicas);
    }
    if desired > allowed {
        return (allowed, reason);
    }
    (desired, Limited::DesiredWithinRange)
}

/// Stores an applied change (`storeScaleEvent`). Without `behavior` nothing is stored (the
/// legacy path has no rate policies). Otherwise, in the direction's list: every event older than
/// that direction's longest policy period is marked outdated (`markScaleEventsOutdated`; the mark
/// stays), and the new event overwrites the last outdated one, or is appended when none is.
pub fn store_scale_event(
    state: &mut State,
    behavior: Option<&Behavior>,
    previous: u32,
    new: u32,
    now: f64,
) {
    let Some(behavior) = behavior else {
        return;
    };
    let (events, rules) = if new > previous {
        (&mut state.scale_up_events, &behavior.scale_up)
    } else {
        (&mut state.scale_down_events, &behavior.scale_down)
    };
    store_event(events, rules, previous.abs_diff(new), now);
}

/// One direction's half of [`store_scale_event`]: `events` is that direction's list and
/// `rules` its scaling rules.
pub fn store_event(events: &mut Vec<ScaleEvent>, rules: &Rules, change: u32, now: f64) {
    let longest = rules
        .policies
        .iter()
        .map(|p| f64::from(p.period_s))
        .fold(0.0, f64::max);
    let mut last_outdated = None;
    for (i, event) in events.iter_mut().enumerate() {
        if now - event.at > longest {
            event.outdated = true;
        }
        if event.outdated {
            last_outdated = Some(i);
        }
    }
    let event = ScaleEvent {
        at: now,
        change,
        outdated: false,
    };
    match last_outdated {
        Some(i) => events[i] = event,
        None => events.push(event),
    }
}
