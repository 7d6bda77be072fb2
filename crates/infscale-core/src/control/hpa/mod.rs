//! The Kubernetes HPA controller's replica algorithm, step for step.
//!
//! infscale's claim is that its decision is the HPA's own, so `decide` explains truthfully and the
//! simulator predicts what KEDA's HPA will do. The stages follow Kubernetes'
//! `pkg/controller/podautoscaler/horizontal.go` and `replica_calculator.go`, in the order
//! `reconcileAutoscaler` runs them: pre-checks against min/max (before any metric is read),
//! metric proposals with tolerance ([`replicas`]) combined as `computeReplicasForMetrics` does
//! ([`replicas_for_metrics`]), stabilisation window ([`stabilize`]), rate limits and min/max
//! ([`rate`]); or, for an HPA without `behavior`, the legacy window and the 2x / 4-pod scale-up
//! cap. Time is a parameter (seconds on any clock the caller keeps), so nothing here reads a
//! clock.

pub mod rate;
pub mod replicas;
pub mod stabilize;

pub use rate::ScaleEvent;
pub use stabilize::Recommendation;

use crate::policy::behavior::{Behavior, Controller, Limited};
use serde::{Deserialize, Serialize};

/// The parts of an HPA's spec that the replica algorithm reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// `minReplicas` (the API defaults a missing one to 1).
    pub min: u32,
    pub max: u32,
    /// `None` selects the legacy path.
    pub behavior: Option<Behavior>,
}

/// What the controller remembers about one HPA between reconciles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Raw recommendations; `None` until the first reconcile seeds it with the current count.
    pub recommendations: Option<Vec<Recommendation>>,
    pub scale_up_events: Vec<ScaleEvent>,
    pub scale_down_events: Vec<ScaleEvent>,
}

/// Why a reconcile ended where it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// `current == 0` with a non-zero minimum: the HPA does not act.
    ScalingDisabled,
    /// `current` above `max`: straight to `max`, whatever the metrics say.
    AboveMax,
    /// `current` below `min`: straight to `min`, whatever the metrics say (even when none can
    /// be read: Kubernetes' `TestTooFewReplicas` and `TestHPAScaleUpToMin`).
    BelowMin,
    /// No metric could be read (or some could not and the rest would scale down): no change.
    NoMetrics,
    /// The normal path, with the limit that applied.
    Normalized(Limited),
}

impl Outcome {
    /// What the controller reports: the `ScalingActive` condition's reason at zero, the rescale
    /// reason of a pre-check, the warning event's reason when no metric could be read, or the
    /// `ScalingLimited` condition's reason on the normal path. A pre-check sets no
    /// `ScalingLimited` condition (`TestTooFewReplicas` in `horizontal_test.go` expects only
    /// `AbleToScale`), so `BelowMin` is not reported as `TooFewReplicas`.
    pub fn reason(self) -> &'static str {
        match self {
            Outcome::ScalingDisabled => "ScalingDisabled",
            Outcome::AboveMax => "Current number of replicas above Spec.MaxReplicas",
            Outcome::BelowMin => "Current number of replicas below Spec.MinReplicas",
            Outcome::NoMetrics => "FailedComputeMetricsReplicas",
            Outcome::Normalized(limited) => limited.name(),
        }
    }
}

/// Combines one proposal per metric (`None`: that metric could not be read) the way
/// `computeReplicasForMetrics` does: the largest readable proposal, or `None` ("no metric could
/// be read") when every metric failed, when there are no metrics, or when some failed and the
/// rest would scale below `current` (a missing metric never lets the HPA scale down).
pub fn replicas_for_metrics(proposals: &[Option<u32>], current: u32) -> Option<u32> {
    let best = proposals.iter().flatten().copied().max()?;
    let some_failed = proposals.iter().any(Option::is_none);
    if some_failed && best < current {
        None
    } else {
        Some(best)
    }
}

/// One reconcile's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconciled {
    /// The raw proposal from the metric, when there was one.
    pub proposal: Option<u32>,
    /// After the stabilisation window (normal path only).
    pub stabilized: Option<u32>,
    pub desired: u32,
    pub outcome: Outcome,
}

/// One reconcile (`reconcileAutoscaler` from the metric proposal on): seeds the history, runs the
/// pre-checks, stabilises, rate-limits and clamps, and stores a scale event when the count
/// changes (the caller is taken to apply the result).
///
/// `proposal` is the combined metric proposal ([`replicas_for_metrics`]); `None` means no
/// metric could be read. The pre-checks come first and do not look at it, so with no metric:
/// `current` below `min` still goes to `min` ([`Outcome::BelowMin`]), above `max` to `max`,
/// zero with a non-zero minimum stays zero ([`Outcome::ScalingDisabled`]), and any other count
/// is kept ([`Outcome::NoMetrics`]; Kubernetes returns an error and does not scale).
pub fn reconcile(
    controller: &Controller,
    spec: &Spec,
    state: &mut State,
    current: u32,
    proposal: Option<u32>,
    now: f64,
) -> Reconciled {
    let history = state.recommendations.get_or_insert_with(|| {
        vec![Recommendation {
            at: now,
            replicas: current,
        }]
    });
    let early = |desired, outcome| Reconciled {
        proposal,
        stabilized: None,
        desired,
        outcome,
    };
    let result = if current == 0 && spec.min != 0 {
        early(0, Outcome::ScalingDisabled)
    } else if current > spec.max {
        early(spec.max, Outcome::AboveMax)
    } else if current < spec.min {
        early(spec.min, Outcome::BelowMin)
    } else if let Some(raw) = proposal {
        let (stabilized, (desired, limited)) = match &spec.behavior {
            Some(behavior) => {
                let down_default = controller.downscale_window_s;
                let stabilized =
                    stabilize::with_behavior(history, behavior, down_default, current, raw, now);
                let events = rate::Events {
                    up: &state.scale_up_events,
                    down: &state.scale_down_events,
                };
                let limited = rate::with_behavior(current, stabilized, spec, behavior, events, now);
                (stabilized, limited)
            }
            None => {
                let window = controller.downscale_window_s;
                let stabilized = stabilize::legacy(history, window, raw, now);
                (
                    stabilized,
                    rate::legacy(controller, current, stabilized, spec.min, spec.max),
                )
            }
        };
        Reconciled {
            proposal,
            stabilized: Some(stabilized),
            desired,
            outcome: Outcome::Normalized(limited),
        }
    } else {
        early(current, Outcome::NoMetrics)
    };
    if result.desired != current {
        rate::store_scale_event(state, spec.behavior.as_ref(), current, result.desired, now);
    }
    result
}

#[cfg(test)]
mod no_metric_cases;
#[cfg(test)]
mod per_pod_cases;
#[cfg(test)]
mod tests;
