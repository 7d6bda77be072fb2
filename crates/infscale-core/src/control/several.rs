//! Several signals at once (`queue+kv:48,0.8`, or trigger metadata `metric: queue,kv`): each
//! further metric is evaluated on its own memory (its trend, its held count), and the HPA
//! proposes a count per metric and takes the largest, as `computeReplicasForMetrics` does
//! ([`hpa::replicas_for_metrics`]): a metric that cannot be read never lets it scale down.

use crate::control::decision::{evaluate, proposal, ScalerState};
use crate::control::hpa;
use crate::control::reasons::{NoValue, Step, Steps};
use crate::policy::Policy;
use crate::project::demand::Observation;
use serde::{Deserialize, Serialize};

/// What one further metric remembers: its own decision memory, and its last value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OtherMetric {
    #[serde(default)]
    pub state: ScalerState,
    /// The value of the last evaluation; `None` when it had none.
    #[serde(default)]
    pub value: Option<f64>,
    /// Why there was no value, when there was none (the error KEDA is given for this metric;
    /// not kept between runs: the next evaluation says it again).
    #[serde(skip)]
    pub no_value: Option<NoValue>,
}

/// Evaluates the policy's further metrics on the same observation, keeping each one's value in
/// `state.others` (in the order of `policy.also`), with a step each.
pub fn evaluate_others(
    policy: &Policy,
    obs: &Observation<'_>,
    state: &mut ScalerState,
    lines: &mut Steps,
) {
    if policy.also.is_empty() {
        state.others.clear();
        return;
    }
    state
        .others
        .resize_with(policy.also.len(), OtherMetric::default);
    for (i, other) in state.others.iter_mut().enumerate() {
        let single = policy.single(i + 1);
        let eval = evaluate(&single, obs, &mut other.state);
        other.value = eval.value;
        other.no_value = eval.no_value;
        lines.push(Step::Also {
            metric: single.metric,
            value: eval.value,
            no_value: eval.no_value,
        });
    }
}

/// The HPA's proposal over every metric: `value` for the first, the last evaluation's for the
/// others; the largest readable one (`None` when none is, or when one is missing and the rest
/// would scale below `current`).
pub fn proposal_over_metrics(
    policy: &Policy,
    state: &ScalerState,
    value: Option<f64>,
    status: u32,
    current: u32,
    lines: &mut Steps,
) -> Option<u32> {
    let mut proposals = vec![value.map(|v| proposal(policy, v, status))];
    for (i, other) in state.others.iter().enumerate().take(policy.also.len()) {
        let single = policy.single(i + 1);
        let n = other.value.map(|v| proposal(&single, v, status));
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
