//! One metric's replica proposal, with the tolerance test (`replica_calculator.go`).
//!
//! KEDA serves every trigger to the HPA as an External metric with an `AverageValue` target, in
//! milli-units (`int64(value * 1000)`, truncated). So the proposal for any infscale metric is
//! [`external_per_pod`] on those integers: within tolerance of `value / (target x status
//! replicas)` it keeps the status count, otherwise it asks for `ceil(value / target)`.
//! [`external_value`] (a `Value` target) and [`resource_utilization`] (CPU) complete the HPA's
//! calculator for the cases Kubernetes' own tests exercise.

use serde::{Deserialize, Serialize};

/// The tolerance test, per direction (1.33+): a ratio within it proposes no change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerances {
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Tolerances {
    pub fn uniform(tolerance: f64) -> Tolerances {
        Tolerances {
            scale_down: tolerance,
            scale_up: tolerance,
        }
    }

    /// `1 - down <= ratio <= 1 + up`. NaN and infinite ratios are never within.
    pub fn is_within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}

/// A value as KEDA hands it to the HPA: milli-units, truncated toward zero.
pub fn to_milli(value: f64) -> i64 {
    (value * 1000.0) as i64
}

/// `ceil` for a replica count, with the 1e-9 guard against a quotient that floating point lands
/// just above a whole number (2.1 / 0.7 = 3.0000000000000004). On the milli-unit integers the HPA
/// divides, an exact quotient is computed exactly and an inexact one is at least 1/target above a
/// whole number, so the guard never changes a result the HPA itself computes. Capped at i32::MAX
/// like the HPA's replica counts; negative and NaN give 0.
pub fn ceil_replicas(x: f64) -> u32 {
    let c = (x - 1e-9).ceil();
    if c.is_nan() || c <= 0.0 {
        0
    } else {
        c.min(i32::MAX as f64) as u32
    }
}

/// An External (or Object) metric with an `AverageValue` target (`GetExternalPerPodMetricReplicas`):
/// returns the proposal and the per-pod usage the HPA reports in its status.
pub fn external_per_pod(
    total_milli: i64,
    target_milli: i64,
    status_replicas: u32,
    tolerances: Tolerances,
) -> (u32, i64) {
    let ratio = total_milli as f64 / (target_milli as f64 * status_replicas as f64);
    let replicas = if tolerances.is_within(ratio) {
        status_replicas
    } else {
        ceil_replicas(total_milli as f64 / target_milli as f64)
    };
    let usage = if status_replicas == 0 {
        i64::MAX
    } else {
        (total_milli as f64 / status_replicas as f64).ceil() as i64
    };
    (replicas, usage)
}

/// The sum of metric values in milli-units; a positive overflow saturates at i64::MAX (1.33+).
pub fn sum_milli(values: &[i64]) -> i64 {
    values.iter().fold(0i64, |acc, v| acc.saturating_add(*v))
}

/// Why a Value-target proposal could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    #[error("no ready pods match the HPA's selector")]
    NoReadyPods,
    #[error("the pods' CPU requests sum to zero")]
    NoRequests,
}

/// An External (or Object) metric with a `Value` target (`GetExternalMetricReplicas`): within
/// tolerance of `total / target` it keeps `current`; otherwise `ceil(ratio x ready pods)`. From
/// zero replicas the tolerance is not applied and the result is `ceil(ratio)`.
pub fn external_value(
    total_milli: i64,
    target_milli: i64,
    current_replicas: u32,
    ready_pods: u32,
    tolerances: Tolerances,
) -> Result<u32, ReplicaError> {
    let ratio = total_milli as f64 / target_milli as f64;
    if current_replicas == 0 {
        return Ok(ceil_replicas(ratio));
    }
    if tolerances.is_within(ratio) {
        return Ok(current_replicas);
    }
    if ready_pods == 0 {
        return Err(ReplicaError::NoReadyPods);
    }
    Ok(ceil_replicas(ratio * f64::from(ready_pods)))
}

/// A Resource metric with an `Utilization` target, every pod ready and reporting
/// (`calcPlainMetricReplicas` without its second pass): utilisation is the integer percentage
/// of summed usage over summed requests; within tolerance of `utilisation / target` it keeps
/// `current`, otherwise `ceil(ratio x pods)`.
pub fn resource_utilization(
    usage_milli: &[i64],
    request_milli: &[i64],
    target_percent: u32,
    current_replicas: u32,
    tolerances: Tolerances,
) -> Result<u32, ReplicaError> {
    let usage = sum_milli(usage_milli);
    let requests = sum_milli(request_milli);
    if requests == 0 {
        return Err(ReplicaError::NoRequests);
    }
    let utilization = usage.saturating_mul(100) / requests;
    let ratio = utilization as f64 / f64::from(target_percent);
    if tolerances.is_within(ratio) {
        return Ok(current_replicas);
    }
    Ok(ceil_replicas(ratio * usage_milli.len() as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_PERCENT: Tolerances = Tolerances {
        scale_down: 0.1,
        scale_up: 0.1,
    };

    #[test]
    fn ceil_guard_keeps_exact_quotients() {
        assert_eq!(ceil_replicas(2.1 / 0.7), 3);
        assert_eq!(ceil_replicas(12.0 / 4.0), 3);
        assert_eq!(ceil_replicas(3.01), 4);
        assert_eq!(ceil_replicas(-1.0), 0);
        assert_eq!(ceil_replicas(f64::NAN), 0);
        assert_eq!(ceil_replicas(1e30), i32::MAX as u32);
    }

    #[test]
    fn milli_units_truncate_like_keda() {
        assert_eq!(to_milli(2.1), 2100);
        assert_eq!(to_milli(0.7), 700);
        assert_eq!(to_milli(4.0009), 4000);
        assert_eq!(to_milli(0.0), 0);
    }

    #[test]
    fn twelve_in_flight_at_target_four_is_three() {
        assert_eq!(external_per_pod(12_000, 4_000, 1, TEN_PERCENT).0, 3);
    }

    #[test]
    fn within_tolerance_keeps_the_status_count() {
        // 4.3 per replica against 4: ratio 1.075.
        assert_eq!(external_per_pod(12_900, 4_000, 3, TEN_PERCENT).0, 3);
        // 1.1 exactly is within with the 1.33+ test.
        assert_eq!(external_per_pod(110_000, 100_000, 1, TEN_PERCENT).0, 1);
    }

    #[test]
    fn from_zero_status_replicas_the_ratio_is_never_within() {
        assert_eq!(external_per_pod(5_000, 4_000, 0, TEN_PERCENT).0, 2);
        assert_eq!(external_per_pod(0, 4_000, 0, TEN_PERCENT).0, 0);
    }

    #[test]
    fn value_targets_multiply_by_ready_pods() {
        // 3 replicas, 1 ready: 8600 / 4400 x 1 -> 2.
        assert_eq!(external_value(8_600, 4_400, 3, 1, TEN_PERCENT), Ok(2));
        // From zero the tolerance is not applied: ratio 1.0 -> 1.
        assert_eq!(external_value(1_000, 1_000, 0, 0, TEN_PERCENT), Ok(1));
        assert_eq!(
            external_value(9_000, 1_000, 2, 0, TEN_PERCENT),
            Err(ReplicaError::NoReadyPods)
        );
    }

    #[test]
    fn sums_saturate() {
        let half = i64::MAX / 2 + 1;
        assert_eq!(sum_milli(&[half, half]), i64::MAX);
    }

    #[test]
    fn cpu_utilisation_is_an_integer_percentage() {
        // 1400 m used of 5000 m requested: 28%, against 50% on 5 pods -> ceil(2.8) = 3.
        let usage = [100, 300, 500, 250, 250];
        let requests = [1000; 5];
        assert_eq!(
            resource_utilization(&usage, &requests, 50, 5, TEN_PERCENT),
            Ok(3)
        );
    }

    #[test]
    fn per_direction_tolerance() {
        let t = Tolerances {
            scale_down: 0.5,
            scale_up: 0.05,
        };
        // 37 vs 35: ratio 1.057 > 1.05.
        assert_eq!(external_per_pod(3_700_000, 100_000, 35, t).0, 37);
        // 10 vs 37: ratio 0.27 < 0.5.
        assert_eq!(external_per_pod(1_000_000, 100_000, 37, t).0, 10);
        // 20 vs 37: ratio 0.54, within the down tolerance.
        assert_eq!(external_per_pod(2_000_000, 100_000, 37, t).0, 37);
    }
}
