//! The HPA's rule for replicas that gave no sample, applied to the measured demand.
//!
//! A replica that is ready but could not be read, or has no sample for the metric, does not
//! vote: the HPA counts it as a pod with no metric (`calcPlainMetricReplicas`: at the target when
//! the rest ask to scale down, at 0 when they ask to scale up, the current count kept when that
//! flips the direction). [`demand`] measures ([`crate::project::demand::measure`]), replaces the
//! value with the one that makes the HPA ask for that count, then adds what the replicas do not
//! report ([`crate::project::demand::finish`]). The rule is the HPA's own arithmetic
//! ([`super::hpa::replicas`]), so it lives here, above the projection that measures.

use super::hpa::replicas::{self, per_pod, Pod, PodTarget};
use crate::policy::Policy;
use crate::project::demand::{self, Demand, Observation};
use crate::reasons::{MissingRule, Step, Steps};

/// The metric's value for a policy from an observation: measured, the replicas without a sample
/// counted as the HPA counts them, then held and sleeping requests added.
pub fn demand(policy: &Policy, obs: &Observation<'_>) -> Demand {
    let mut d = demand::measure(policy, obs);
    if let (Some(v), true) = (d.value.as_mut(), d.counted_missing) {
        *v = as_the_hpa_counts_missing(policy, obs, *v, d.reporting, d.not_voting, &mut d.lines);
    }
    demand::finish(policy, obs, &mut d);
    d
}

/// The value that makes the HPA ask for what its own rule for pods without a metric gives
/// (`calcPlainMetricReplicas`): the replicas that reported, at their average, and the others as
/// missing pods, against the status count.
fn as_the_hpa_counts_missing(
    policy: &Policy,
    obs: &Observation<'_>,
    value: f64,
    reporting: u32,
    not_voting: u32,
    lines: &mut Steps,
) -> f64 {
    let status = obs
        .status_replicas()
        .max(reporting.saturating_add(not_voting));
    let average = replicas::to_milli(value / f64::from(reporting));
    let pods: Vec<Pod> = (0..reporting)
        .map(|_| Pod::Ready {
            value: average,
            request: 0,
        })
        .chain((0..not_voting).map(|_| Pod::Missing { request: 0 }))
        .collect();
    let tolerances = policy.controller.tolerances(policy.behavior.as_ref());
    let target = PodTarget::AverageValue(replicas::to_milli(policy.target));
    let count = per_pod(&pods, target, status, tolerances).unwrap_or(status);
    let alone = replicas::ceil_replicas(value / policy.target);
    let rule = if count == status {
        MissingRule::Kept { status }
    } else if alone > count {
        MissingRule::Up { count }
    } else {
        MissingRule::Down { count }
    };
    // On milli-units, as KEDA hands the value over: exactly `count` targets. The product
    // saturates (a count near i32::MAX at a 1e9 threshold passes i64::MAX), so it stays the
    // largest value, never a wrapped negative one read as 0.
    let adjusted =
        i64::from(count).saturating_mul(replicas::to_milli(policy.target)) as f64 / 1000.0;
    lines.push(Step::CountedMissing {
        not_voting,
        reporting,
        alone,
        rule,
        value: adjusted,
        count,
        target: policy.target,
    });
    adjusted
}
