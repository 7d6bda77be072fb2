//! One metric's replica proposal, with the tolerance test (`replica_calculator.go`).
//!
//! KEDA serves every trigger to the HPA as an External metric with an `AverageValue` target, in
//! milli-units (`int64(value * 1000)`, truncated). So the proposal for any infscale metric is
//! [`external_per_pod`] on those integers: within tolerance of `value / (target x status
//! replicas)` it keeps the status count, otherwise it asks for `ceil(value / target)`.

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
