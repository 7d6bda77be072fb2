//! Kubernetes' own replica-calculator cases for pods that gave no metric or are not ready
//! (`replica_calculator_test.go`), run through [`per_pod`]: the rule infscale applies to a
//! replica it could not read. Each pod of those tests has two containers with a request of 1.0
//! core each, and a CPU level is per container, so a pod requests 2000 m and uses twice its level.

use super::replicas::{per_pod, Pod, PodTarget};
use crate::policy::behavior::Tolerances;

const TOLERANCE: Tolerances = Tolerances {
    scale_down: 0.1,
    scale_up: 0.1,
};

/// A pod from a test's table: `Some(level)` ready with that per-container level, `None` missing,
/// `U` unready.
fn cpu(levels: &[&str]) -> Vec<Pod> {
    cpu_with(levels, &vec![2000; levels.len()])
}

fn cpu_with(levels: &[&str], requests: &[i64]) -> Vec<Pod> {
    levels
        .iter()
        .zip(requests)
        .map(|(l, &request)| match *l {
            "-" => Pod::Missing { request },
            l if l.starts_with('U') => Pod::Unready { request },
            l => Pod::Ready {
                value: 2 * l.parse::<i64>().unwrap(),
                request,
            },
        })
        .collect()
}

fn custom(levels: &[&str]) -> Vec<Pod> {
    levels
        .iter()
        .map(|l| match *l {
            "-" => Pod::Missing { request: 0 },
            l if l.starts_with('U') => Pod::Unready { request: 0 },
            l => Pod::Ready {
                value: l.parse().unwrap(),
                request: 0,
            },
        })
        .collect()
}

fn utilization(pods: &[Pod], percent: u32, current: u32) -> u32 {
    per_pod(pods, PodTarget::Utilization(percent), current, TOLERANCE).unwrap()
}

fn average(pods: &[Pod], target: i64, current: u32) -> u32 {
    per_pod(pods, PodTarget::AverageValue(target), current, TOLERANCE).unwrap()
}

#[test]
fn missing_metrics_cpu() {
    // (name, current, pods, target %, expected)
    let cases: &[(&str, u32, &[&str], u32, u32)] = &[
        ("MissingMetrics", 4, &["400", "95", "-", "-"], 100, 3),
        ("MissingMetricsNoChangeEq", 2, &["1000", "-"], 100, 2),
        ("MissingMetricsNoChangeGt", 2, &["1900", "-"], 100, 2),
        ("MissingMetricsNoChangeLt", 2, &["600", "-"], 100, 2),
        (
            "MissingMetricsUnreadyChange",
            3,
            &["U100", "450", "-"],
            50,
            3,
        ),
        (
            "MissingMetricsHotCpuNoChange",
            3,
            &["U100", "450", "-"],
            50,
            3,
        ),
        (
            "MissingMetricsUnreadyScaleUp",
            3,
            &["U100", "2000", "-"],
            50,
            4,
        ),
        (
            "MissingMetricsHotCpuScaleUp",
            3,
            &["U100", "2000", "-"],
            50,
            4,
        ),
        (
            "MissingMetricsUnreadyScaleDown",
            4,
            &["U100", "100", "100", "-"],
            50,
            3,
        ),
        (
            "DuringRollingUpdateWithMaxSurge",
            2,
            &["100", "100", "-"],
            50,
            2,
        ),
    ];
    for (name, current, levels, target, expected) in cases {
        assert_eq!(
            utilization(&cpu(levels), *target, *current),
            *expected,
            "{name}"
        );
    }
    let over_100 = cpu_with(&["U200", "100", "100", "-"], &[2000, 2000, 4000, 4000]);
    assert_eq!(
        utilization(&over_100, 300, 4),
        2,
        "MissingMetricsScaleDownTargetOver100"
    );
}

#[test]
fn unready_pods_cpu() {
    let cases: &[(&str, u32, &[&str], u32, u32)] = &[
        ("ScaleUpUnreadyLessScale", 3, &["U300", "500", "700"], 30, 4),
        ("ScaleUpHotCpuLessScale", 3, &["U300", "500", "700"], 30, 4),
        ("ScaleUpUnreadyNoScale", 3, &["400", "U500", "U700"], 30, 3),
        ("ScaleHotCpuNoScale", 3, &["400", "U500", "U700"], 30, 3),
        (
            "ScaleDownExcludeUnreadyPods",
            5,
            &["100", "300", "500", "U250", "U250"],
            50,
            2,
        ),
        (
            "ScaleDownExcludeUnscheduledPods",
            5,
            &["100", "U", "U", "U", "U"],
            50,
            1,
        ),
        // Failed and deleted pods are not counted at all.
        ("ScaleUpIgnoresFailedPods", 2, &["500", "700"], 30, 4),
        (
            "ScaleDownIgnoresFailedPods",
            5,
            &["100", "300", "500", "250", "250"],
            50,
            3,
        ),
    ];
    for (name, current, levels, target, expected) in cases {
        assert_eq!(
            utilization(&cpu(levels), *target, *current),
            *expected,
            "{name}"
        );
    }
}

#[test]
fn missing_metrics_custom() {
    let cases: &[(&str, u32, &[&str], i64, u32)] = &[
        (
            "PlainMetricMissingMetricsNoChangeEq",
            5,
            &["20000", "19000", "21000", "-", "-"],
            20000,
            5,
        ),
        (
            "DuringRollingUpdateWithMaxSurgeCM",
            2,
            &["10000", "10000", "-"],
            17000,
            2,
        ),
    ];
    for (name, current, levels, target, expected) in cases {
        assert_eq!(
            average(&custom(levels), *target, *current),
            *expected,
            "{name}"
        );
    }
}

#[test]
fn one_read_at_twelve_and_five_unread_keeps_six() {
    // One pod at 12 in flight, five that could not be read, 4 per replica: the pod alone asks
    // for 3, counting the others at 0 flips that to a scale-down, so the HPA keeps 6.
    let pods = custom(&["12000", "-", "-", "-", "-", "-"]);
    assert_eq!(average(&pods, 4000, 6), 6);
}

#[test]
fn no_ready_pod_is_an_error() {
    assert!(per_pod(
        &custom(&["-", "U"]),
        PodTarget::AverageValue(1000),
        2,
        TOLERANCE
    )
    .is_err());
}
