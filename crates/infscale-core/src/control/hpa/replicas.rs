//! One metric's replica proposal, with the tolerance test (`replica_calculator.go`).
//!
//! KEDA serves every trigger to the HPA as an External metric with an `AverageValue` target, in
//! milli-units (`int64(value * 1000)`, truncated). So the proposal for any infscale metric is
//! [`external_per_pod`] on those integers: within tolerance of `value / (target x status
//! replicas)` it keeps the status count, otherwise it asks for `ceil(value / target)`.
//! [`external_value`] (a `Value` target) and [`resource_utilization`] (CPU) complete the HPA's
//! calculator for the cases Kubernetes' own tests exercise, and [`per_pod`] is its per-pod
//! calculation with pods that gave no metric or are not ready (`calcPlainMetricReplicas` and
//! `GetResourceReplicas`, second pass included): the rule infscale follows for a replica it
//! could not read.

use crate::policy::behavior::Tolerances;

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

/// One pod as the HPA's per-pod calculation sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pod {
    /// Ready, with its metric (milli-units; for CPU, milli-cores used) and request (milli-cores;
    /// 0 for a Pods metric).
    Ready { value: i64, request: i64 },
    /// Counted by the selector but gave no metric.
    Missing { request: i64 },
    /// Not ready (pending, or unready for CPU): its metric, if any, is not used.
    Unready { request: i64 },
}

/// The target of a per-pod metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PodTarget {
    /// A Pods metric's `AverageValue`, milli-units.
    AverageValue(i64),
    /// A Resource metric's `Utilization`, percent of the request.
    Utilization(u32),
}

impl PodTarget {
    /// The usage ratio over `(value, request)` entries, truncated as the HPA truncates.
    fn ratio(self, entries: &[(i64, i64)]) -> f64 {
        let sum = sum_milli(&entries.iter().map(|e| e.0).collect::<Vec<_>>());
        match self {
            PodTarget::AverageValue(target) => {
                let usage = sum / entries.len().max(1) as i64;
                usage as f64 / target as f64
            }
            PodTarget::Utilization(percent) => {
                let requests = sum_milli(&entries.iter().map(|e| e.1).collect::<Vec<_>>());
                if requests == 0 {
                    return f64::NAN;
                }
                let utilization = sum.saturating_mul(100) / requests;
                utilization as f64 / f64::from(percent)
            }
        }
    }

    /// What a missing pod counts as on the way down: the target (for CPU, `max(100%, target)` of
    /// its request).
    fn at_target(self, request: i64) -> i64 {
        match self {
            PodTarget::AverageValue(target) => target,
            PodTarget::Utilization(percent) => {
                request.saturating_mul(i64::from(percent.max(100))) / 100
            }
        }
    }
}

/// A per-pod metric's proposal (`calcPlainMetricReplicas`, `GetResourceReplicas`). With every
/// pod ready and reporting: `ceil(ratio x ready)` outside the tolerance. Otherwise a second pass:
/// missing pods count at the target when the rest ask to scale down and at 0 when they ask to
/// scale up (left out at a ratio of exactly 1); unready pods count at 0 on a scale-up only; and
/// the current count is kept when the new ratio is within tolerance, flips the direction, or
/// would move the count against it.
pub fn per_pod(
    pods: &[Pod],
    target: PodTarget,
    current: u32,
    tolerances: Tolerances,
) -> Result<u32, ReplicaError> {
    let mut entries: Vec<(i64, i64)> = pods
        .iter()
        .filter_map(|p| match *p {
            Pod::Ready { value, request } => Some((value, request)),
            _ => None,
        })
        .collect();
    if entries.is_empty() {
        return Err(ReplicaError::NoReadyPods);
    }
    let ready = entries.len() as f64;
    let ratio = target.ratio(&entries);
    if ratio.is_nan() {
        return Err(ReplicaError::NoRequests);
    }
    let missing = pods.iter().filter_map(|p| match *p {
        Pod::Missing { request } => Some(request),
        _ => None,
    });
    let unready = pods.iter().filter_map(|p| match *p {
        Pod::Unready { request } => Some(request),
        _ => None,
    });
    let any_missing = pods.iter().any(|p| matches!(p, Pod::Missing { .. }));
    let scale_up_with_unready =
        ratio > 1.0 && pods.iter().any(|p| matches!(p, Pod::Unready { .. }));
    if !scale_up_with_unready && !any_missing {
        if tolerances.is_within(ratio) {
            return Ok(current);
        }
        return Ok(ceil_replicas(ratio * ready));
    }
    if ratio < 1.0 {
        entries.extend(missing.map(|request| (target.at_target(request), request)));
    } else if ratio > 1.0 {
        entries.extend(missing.map(|request| (0, request)));
    }
    if scale_up_with_unready {
        entries.extend(unready.map(|request| (0, request)));
    }
    let new_ratio = target.ratio(&entries);
    let flips = (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0);
    if tolerances.is_within(new_ratio) || flips {
        return Ok(current);
    }
    let proposal = ceil_replicas(new_ratio * entries.len() as f64);
    if (new_ratio < 1.0 && proposal > current) || (new_ratio > 1.0 && proposal < current) {
        return Ok(current);
    }
    Ok(proposal)
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
