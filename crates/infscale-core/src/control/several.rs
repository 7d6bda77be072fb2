//! Several signals at once (`queue+kv:48,0.8`, or trigger metadata `metric: queue,kv`): each
//! further metric is evaluated on its own memory (its trend, its held count), and the HPA
//! proposes a count per metric and takes the largest, as `computeReplicasForMetrics` does
//! ([`hpa::replicas_for_metrics`]): a metric that cannot be read never lets it scale down.

use crate::control::hpa;
use crate::control::memory::{OtherMetric, ScalerState};
use crate::policy::{Metric, Policy};
use crate::reasons::{NoValue, Step, Steps};

/// The further metrics' memories, one per metric of `policy.also`, in order (none without).
pub fn others<'a>(policy: &Policy, state: &'a mut ScalerState) -> &'a mut [OtherMetric] {
    state
        .others
        .resize_with(policy.also.len(), OtherMetric::default);
    &mut state.others
}

/// Keeps a further metric's evaluation: its value, or why it has none, and a step.
pub fn record(
    other: &mut OtherMetric,
    metric: Metric,
    value: Option<f64>,
    no_value: Option<NoValue>,
    lines: &mut Steps,
) {
    other.value = value;
    other.no_value = no_value;
    lines.push(Step::Also {
        metric,
        value,
        no_value,
    });
}

/// The HPA's proposal over every metric: `value` for the first, the last evaluation's for the
/// others; the largest readable one (`None` when none is, or when one is missing and the rest
/// would scale below `current`).
pub fn proposal_over_metrics(
    policy: &Policy,
    state: &ScalerState,
    value: Option<f64>,
    proposal: impl Fn(&Policy, f64) -> u32,
    current: u32,
    lines: &mut Steps,
) -> Option<u32> {
    let mut proposals = vec![value.map(|v| proposal(policy, v))];
    for (i, other) in state.others.iter().enumerate().take(policy.also.len()) {
        let single = policy.single(i + 1);
        let n = other.value.map(|v| proposal(&single, v));
        if let (Some(value), Some(replicas)) = (other.value, n) {
            lines.push(Step::Proposal {
                metric: single.metric,
                value,
                target: single.target,
                replicas,
            });
        }
        proposals.push(n);
    }
    proposals.resize(policy.also.len() + 1, None);
    let best = hpa::replicas_for_metrics(&proposals, current);
    if let Some(n) = best {
        lines.push(Step::Largest {
            metrics: proposals.len(),
            replicas: n,
        });
    }
    best
}
