//! infscale's HPA against Kubernetes' own test cases.
//!
//! Reads every `*.json` file in the directory named by `INFSCALE_HPA_VECTORS` (default
//! `../shared/hpa` next to the project root, or this repository's copy in `tests/hpa` where that
//! is absent), runs each vector through the stage its `kind` names, and prints
//! `hpa vectors: N passed, M failed` and then the id, inputs and actual result of each failure.
//! Fails when any vector fails or none was read. The format is defined by the file's
//! `meta.conventions`; harness settings are passed as parameters, never as changed defaults.
//! A vector whose metric is absent, `null`, `{}`, or has no samples (an absent or empty sample
//! list), or whose `metrics` list is empty, means that no metric could be read.

use infscale_core::control::hpa::rate::{self, Events};
use infscale_core::control::hpa::{
    reconcile, replicas_for_metrics, Recommendation, ScaleEvent, Spec, State,
};
use infscale_core::control::hpa::{replicas, stabilize};
use infscale_core::policy::behavior::{
    Behavior, Controller, RateKind, RatePolicy, Rules, Select, Tolerances,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[path = "hpa_vectors/assertion.rs"]
mod assertion;
#[path = "hpa_vectors/conditions.rs"]
mod conditions;
#[path = "hpa_vectors/store.rs"]
mod store;

/// The evaluation time; vectors give ages in seconds before it.
const NOW: f64 = 100_000.0;

type Outcome = Result<(), String>;

fn vectors_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("INFSCALE_HPA_VECTORS") {
        return PathBuf::from(dir);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared/hpa");
    if shared.is_dir() {
        shared
    } else {
        root.join("tests/hpa")
    }
}

#[test]
fn kubernetes_hpa_vectors() {
    check_dir(&vectors_dir());
}

/// The repository's own directory: the shipped file plus `transcribed-vectors.json`, the other
/// cases of the same Kubernetes tests, written out in the same format.
#[test]
fn vectors_kept_in_the_repository() {
    check_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hpa"));
}

fn check_dir(dir: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let (mut passed, mut failures) = (0, Vec::new());
    for file in &files {
        let doc = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                serde_json::from_str::<Value>(&text).map_err(|e| format!("not JSON: {e}"))
            });
        let doc = match doc {
            Ok(doc) => doc,
            Err(e) => {
                failures.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        let Some(vectors) = doc["vectors"].as_array() else {
            failures.push(format!("{}: no \"vectors\" array", file.display()));
            continue;
        };
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        for v in vectors {
            match check_vector(v, &name) {
                Ok(()) => passed += 1,
                Err(failure) => failures.push(failure),
            }
        }
    }
    println!("vectors from {}", dir.display());
    println!("hpa vectors: {passed} passed, {} failed", failures.len());
    for f in &failures {
        println!("{f}");
    }
    assert!(passed > 0, "no vector was read from {}", dir.display());
    assert!(failures.is_empty(), "{} vector(s) failed", failures.len());
}

/// Runs one vector; a failure is reported with its id, kind, file, inputs, expectation and
/// what infscale did (or which part of the vector could not be read).
fn check_vector(v: &Value, file: &str) -> Result<(), String> {
    run(v).map_err(|actual| {
        format!(
            "{} ({}, {file}): inputs {} expected {} actual: {actual}",
            v["id"].as_str().unwrap_or("?"),
            v["kind"].as_str().unwrap_or("?"),
            v["inputs"],
            v["expected"]
        )
    })
}

/// What each stage reads from `expected`; any other key is an assertion the harness cannot
/// check, and fails the vector rather than being passed over.
fn expected_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "stabilization_only" => &["desiredReplicas", "storedRecommendations"],
        "legacy_stabilization_only" => &["desiredReplicas", "storedRecommendationsLength"],
        "rate_limit_only" => &["desiredReplicas", "reason"],
        "scale_up_limit_only" | "scale_down_limit_only" => &["limit"],
        "replicas_change_per_period" => &["replicaChangeInPeriod"],
        "legacy_rules_only" => &[
            "desiredReplicas",
            "reason",
            "desiredReplicasWithProductionFactor2",
        ],
        "metric_replicas" => &["replicas", "usageMilli"],
        "controller_reconcile" => &[
            "desiredReplicas",
            "scalingLimitedReason",
            "expectedConditions",
            "scaleUpdated",
            "eventCreated",
            "reconciliationAction",
        ],
        "integration_step" => &[
            "assertion",
            "unexpected",
            "unexpectedAssertion",
            "steadyStateDesiredReplicas",
        ],
        "store_scale_event" => store::EXPECTED_KEYS,
        _ => &[],
    }
}

/// Keys of `expected` that are remarks, not assertions.
const REMARKS: [&str; 2] = ["note", "comment"];

fn known_expectations(kind: &str, expected: &Value) -> Outcome {
    let map = expected
        .as_object()
        .ok_or_else(|| format!("expected is not an object: {expected}"))?;
    let known = expected_keys(kind);
    match map
        .keys()
        .find(|k| !known.contains(&k.as_str()) && !REMARKS.contains(&k.as_str()))
    {
        Some(key) => Err(format!("unknown expectation {key:?} for kind {kind:?}")),
        None => Ok(()),
    }
}

fn run(v: &Value) -> Outcome {
    let inputs = &v["inputs"];
    let expected = &v["expected"];
    let kind = v["kind"].as_str().unwrap_or_default();
    if !expected_keys(kind).is_empty() {
        known_expectations(kind, expected)?;
    }
    match kind {
        "stabilization_only" => stabilization(inputs, expected),
        "legacy_stabilization_only" => legacy_stabilization(inputs, expected),
        "rate_limit_only" => rate_limit(inputs, expected),
        "scale_up_limit_only" => raw_limit(inputs, expected, true),
        "scale_down_limit_only" => raw_limit(inputs, expected, false),
        "replicas_change_per_period" => change_per_period(inputs, expected),
        "legacy_rules_only" => legacy_rules(inputs, expected),
        "metric_replicas" => metric_replicas(inputs, expected),
        "controller_reconcile" => controller_reconcile(inputs, expected),
        "integration_step" => integration_step(inputs, expected),
        "store_scale_event" => store::store_scale_event(inputs, expected),
        other => Err(format!("unknown kind {other:?}")),
    }
}

// ---- reading the format ----

pub(crate) fn int(v: &Value, key: &str) -> Result<i64, String> {
    let field = &v[key];
    field
        .as_i64()
        .or_else(|| field.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| format!("field {key:?} is not an integer: {field}"))
}

pub(crate) fn uint(v: &Value, key: &str) -> Result<u32, String> {
    u32::try_from(int(v, key)?).map_err(|_| format!("field {key:?} out of range"))
}

fn ints(v: &Value, key: &str) -> Result<Vec<i64>, String> {
    let list = v[key]
        .as_array()
        .ok_or_else(|| format!("field {key:?} is not a list"))?;
    list.iter()
        .map(|x| {
            x.as_i64()
                .or_else(|| x.as_str().and_then(|s| s.parse().ok()))
                .ok_or_else(|| format!("{key}: {x} is not an integer"))
        })
        .collect()
}

pub(crate) fn float(v: &Value, key: &str) -> Result<f64, String> {
    v[key]
        .as_f64()
        .ok_or_else(|| format!("field {key:?} is not a number"))
}

fn recommendations(v: &Value) -> Result<Vec<Recommendation>, String> {
    let list = v.as_array().ok_or("recommendations are not a list")?;
    list.iter()
        .map(|r| {
            Ok(Recommendation {
                at: NOW - float(r, "secondsAgo")?,
                replicas: uint(r, "replicas")?,
            })
        })
        .collect()
}

/// Scale events `{secondsAgo, replicaChange, outdated?}`; an absent list is empty.
pub(crate) fn events(v: &Value) -> Result<Vec<ScaleEvent>, String> {
    let Some(list) = v.as_array() else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|e| {
            Ok(ScaleEvent {
                at: NOW - float(e, "secondsAgo")?,
                change: uint(e, "replicaChange")?,
                outdated: e["outdated"].as_bool().unwrap_or(false),
            })
        })
        .collect()
}

fn select(v: &Value) -> Result<Select, String> {
    match v.as_str() {
        None | Some("Max") => Ok(Select::Max),
        Some("Min") => Ok(Select::Min),
        Some("Disabled") => Ok(Select::Disabled),
        Some(other) => Err(format!("unknown selectPolicy {other:?}")),
    }
}

/// One direction's rules, API defaults filling what the vector leaves out.
pub(crate) fn rules(v: &Value, defaults: Rules) -> Result<Rules, String> {
    if v.is_null() {
        return Ok(defaults);
    }
    let window_s = match &v["stabilizationWindowSeconds"] {
        Value::Null if v.get("stabilizationWindowSeconds").is_some() => None,
        Value::Null => defaults.window_s,
        _ => Some(uint(v, "stabilizationWindowSeconds")?),
    };
    let policies = match v["policies"].as_array() {
        None => defaults.policies,
        Some(list) => list
            .iter()
            .map(|p| {
                let kind = match p["type"].as_str() {
                    Some("Pods") => RateKind::Pods,
                    Some("Percent") => RateKind::Percent,
                    other => return Err(format!("unknown policy type {other:?}")),
                };
                Ok(RatePolicy {
                    kind,
                    value: uint(p, "value")?,
                    period_s: uint(p, "periodSeconds")?,
                })
            })
            .collect::<Result<_, String>>()?,
    };
    Ok(Rules {
        window_s,
        select: select(&v["selectPolicy"])?,
        policies,
        tolerance: v["tolerance"].as_f64(),
    })
}

fn behavior(v: &Value) -> Result<Option<Behavior>, String> {
    if v.is_null() {
        return Ok(None);
    }
    Ok(Some(Behavior {
        scale_up: rules(&v["scaleUp"], Rules::default_up())?,
        scale_down: rules(&v["scaleDown"], Rules::default_down())?,
    }))
}

/// The controller's flags from a vector's harness settings (production defaults otherwise).
fn controller(inputs: &Value) -> Controller {
    let h = &inputs["harness"];
    let defaults = Controller::default();
    Controller {
        tolerance: h["tolerance"].as_f64().unwrap_or(defaults.tolerance),
        downscale_window_s: h["downscaleStabilizationWindowSeconds"]
            .as_u64()
            .map_or(defaults.downscale_window_s, |w| w as u32),
        scale_up_limit_factor: h["scaleUpLimitFactor"]
            .as_f64()
            .unwrap_or(defaults.scale_up_limit_factor),
        scale_up_limit_minimum: defaults.scale_up_limit_minimum,
    }
}

pub(crate) fn check<T: PartialEq + std::fmt::Debug>(what: &str, actual: T, expected: T) -> Outcome {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("{what} {actual:?}"))
    }
}

// ---- the stages ----

fn stabilization(inputs: &Value, expected: &Value) -> Outcome {
    let b = behavior(&inputs["behavior"])?.ok_or("stabilization needs a behavior")?;
    let mut history = recommendations(&inputs["priorRecommendations"])?;
    let default_down = controller(inputs).downscale_window_s;
    let current = uint(inputs, "currentReplicas")?;
    let desired = uint(inputs, "desiredReplicas")?;
    let got = stabilize::with_behavior(&mut history, &b, default_down, current, desired, NOW);
    check("desiredReplicas", got, uint(expected, "desiredReplicas")?)?;
    if expected.get("storedRecommendations").is_some() {
        let stored: Vec<i64> = history.iter().map(|r| i64::from(r.replicas)).collect();
        check(
            "storedRecommendations",
            stored,
            ints(expected, "storedRecommendations")?,
        )?;
    }
    Ok(())
}

fn legacy_stabilization(inputs: &Value, expected: &Value) -> Outcome {
    let mut history = recommendations(&inputs["priorRecommendations"])?;
    let window = uint(inputs, "downscaleStabilizationWindowSeconds")?;
    let got = stabilize::legacy(&mut history, window, uint(inputs, "desiredReplicas")?, NOW);
    check("desiredReplicas", got, uint(expected, "desiredReplicas")?)?;
    if expected.get("storedRecommendationsLength").is_some() {
        check(
            "storedRecommendationsLength",
            history.len() as i64,
            int(expected, "storedRecommendationsLength")?,
        )?;
    }
    Ok(())
}

fn rate_limit(inputs: &Value, expected: &Value) -> Outcome {
    let b = behavior(&inputs["behavior"])?.ok_or("rate limits need a behavior")?;
    let spec = Spec {
        min: uint(inputs, "minReplicas")?,
        max: uint(inputs, "maxReplicas")?,
        behavior: Some(b.clone()),
    };
    let up = events(&inputs["priorScaleUpEvents"])?;
    let down = events(&inputs["priorScaleDownEvents"])?;
    let evs = Events {
        up: &up,
        down: &down,
    };
    let current = uint(inputs, "currentReplicas")?;
    let desired = uint(inputs, "desiredReplicas")?;
    let (got, reason) = rate::with_behavior(current, desired, &spec, &b, evs, NOW);
    check("desiredReplicas", got, uint(expected, "desiredReplicas")?)?;
    if let Some(want) = expected["reason"].as_str() {
        check("reason", reason.name(), want)?;
    }
    Ok(())
}

fn raw_limit(inputs: &Value, expected: &Value, up: bool) -> Outcome {
    let defaults = if up {
        Rules::default_up()
    } else {
        Rules::default_down()
    };
    let r = rules(&inputs["scalingRules"], defaults)?;
    let up_events = events(&inputs["priorScaleUpEvents"])?;
    let down_events = events(&inputs["priorScaleDownEvents"])?;
    let evs = Events {
        up: &up_events,
        down: &down_events,
    };
    let current = uint(inputs, "currentReplicas")?;
    let limit = if up {
        rate::scale_up_limit(current, evs, &r, NOW)
    } else {
        rate::scale_down_limit(current, evs, &r, NOW)
    };
    check("limit", limit, int(expected, "limit")?)
}

fn change_per_period(inputs: &Value, expected: &Value) -> Outcome {
    let evs = events(&inputs["events"])?;
    let got = rate::change_in_period(uint(inputs, "periodSeconds")?, &evs, NOW);
    check(
        "replicaChangeInPeriod",
        got,
        int(expected, "replicaChangeInPeriod")?,
    )
}

fn legacy_rules(inputs: &Value, expected: &Value) -> Outcome {
    let c = Controller {
        scale_up_limit_factor: float(inputs, "scaleUpLimitFactor")?,
        scale_up_limit_minimum: float(inputs, "scaleUpLimitMinimum")?,
        ..Controller::default()
    };
    let (got, reason) = rate::legacy(
        &c,
        uint(inputs, "currentReplicas")?,
        uint(inputs, "desiredReplicas")?,
        uint(inputs, "minReplicas")?,
        uint(inputs, "maxReplicas")?,
    );
    check("desiredReplicas", got, uint(expected, "desiredReplicas")?)?;
    check(
        "reason",
        reason.name(),
        expected["reason"].as_str().unwrap_or_default(),
    )?;
    if expected
        .get("desiredReplicasWithProductionFactor2")
        .is_some()
    {
        let production = Controller {
            scale_up_limit_factor: 2.0,
            ..c
        };
        let (got, _) = rate::legacy(
            &production,
            uint(inputs, "currentReplicas")?,
            uint(inputs, "desiredReplicas")?,
            uint(inputs, "minReplicas")?,
            uint(inputs, "maxReplicas")?,
        );
        check(
            "desiredReplicasWithProductionFactor2",
            got,
            uint(expected, "desiredReplicasWithProductionFactor2")?,
        )?;
    }
    Ok(())
}

/// A metric's samples under the first of `keys` present; `None` when absent or empty (nothing
/// was read).
fn samples(metric: &Value, keys: &[&str]) -> Result<Option<Vec<i64>>, String> {
    match keys.iter().find(|k| !metric[**k].is_null()) {
        None => Ok(None),
        Some(key) => {
            let values = ints(metric, key)?;
            Ok((!values.is_empty()).then_some(values))
        }
    }
}

/// One metric's proposal (and usage) the way the replica calculator makes it; `Ok(None)` when
/// the metric could not be read (no samples, or the calculator's own error, which Kubernetes
/// counts as an invalid metric, as it does a source type it does not know). `Err` is kept for a
/// vector the harness cannot read.
fn proposal(
    metric: &Value,
    current: u32,
    status: u32,
    tolerances: Tolerances,
) -> Result<Option<(u32, Option<i64>)>, String> {
    if metric.is_null() || metric.as_object().is_some_and(|o| o.is_empty()) {
        return Ok(None);
    }
    let source = metric["sourceType"].as_str().unwrap_or_default();
    let target = metric["targetType"].as_str().unwrap_or_default();
    // `totalMilli` stands in for the samples only where the vector lists none at all.
    let totals = match metric["totalMilli"].as_i64() {
        Some(total) if metric["valuesMilli"].is_null() => Some(vec![total]),
        _ => samples(metric, &["valuesMilli"])?,
    };
    match (source, target) {
        ("External" | "Object", "Value") => {
            let Some(values) = totals else {
                return Ok(None);
            };
            let total = replicas::sum_milli(&values);
            let ready = uint(metric, "readyPods").unwrap_or(current);
            let target = int(metric, "targetMilli")?;
            Ok(
                replicas::external_value(total, target, current, ready, tolerances)
                    .ok()
                    .map(|got| (got, Some(total))),
            )
        }
        ("External" | "Object", "AverageValue") => {
            let Some(values) = totals else {
                return Ok(None);
            };
            let total = replicas::sum_milli(&values);
            let status = uint(metric, "statusReplicas").unwrap_or(status);
            let (got, usage) =
                replicas::external_per_pod(total, int(metric, "targetMilli")?, status, tolerances);
            Ok(Some((got, Some(usage))))
        }
        ("Pods", "AverageValue") => {
            // Per-pod values averaged over the pods that reported (`calcPlainMetricReplicas`).
            let Some(values) = samples(metric, &["podValuesMilli", "valuesMilli"])? else {
                return Ok(None);
            };
            let total = replicas::sum_milli(&values);
            let ratio = total as f64 / values.len() as f64 / int(metric, "targetMilli")? as f64;
            let got = if tolerances.is_within(ratio) {
                current
            } else {
                replicas::ceil_replicas(ratio * values.len() as f64)
            };
            Ok(Some((got, Some(total / values.len() as i64))))
        }
        ("Resource", "Utilization") => {
            let Some(usage) = samples(metric, &["podUsageMilli"])? else {
                return Ok(None);
            };
            let requests = samples(metric, &["podRequestMilli"])?.unwrap_or_default();
            Ok(replicas::resource_utilization(
                &usage,
                &requests,
                uint(metric, "targetAverageUtilization")?,
                current,
                tolerances,
            )
            .ok()
            .map(|got| (got, None)))
        }
        // An unknown source type is an invalid metric to `computeReplicasForMetric`.
        (source, _) if !source.is_empty() && !SOURCE_TYPES.contains(&source) => Ok(None),
        other => Err(format!("unsupported metric {other:?}")),
    }
}

/// The metric source types Kubernetes knows.
const SOURCE_TYPES: [&str; 5] = [
    "Object",
    "Pods",
    "Resource",
    "ContainerResource",
    "External",
];

/// The combined proposal of a vector's `metrics` list (or single `metric`), as
/// `computeReplicasForMetrics` combines them; `None` when no metric could be read.
fn proposals(
    inputs: &Value,
    current: u32,
    status: u32,
    tolerances: Tolerances,
) -> Result<Option<u32>, String> {
    let metrics: Vec<&Value> = match inputs["metrics"].as_array() {
        Some(list) => list.iter().collect(),
        None if inputs["metric"].is_null() => Vec::new(),
        None => vec![&inputs["metric"]],
    };
    let each = metrics
        .into_iter()
        .map(|m| Ok(proposal(m, current, status, tolerances)?.map(|(n, _)| n)))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(replicas_for_metrics(&each, current))
}

fn metric_replicas(inputs: &Value, expected: &Value) -> Outcome {
    let t = &inputs["tolerance"];
    let tolerances = Tolerances {
        scale_up: float(t, "scaleUp")?,
        scale_down: float(t, "scaleDown")?,
    };
    let current = uint(inputs, "currentReplicas")?;
    let (got, usage) = proposal(&inputs["metric"], current, current, tolerances)?
        .ok_or("no metric could be read")?;
    check("replicas", got, uint(expected, "replicas")?)?;
    if expected.get("usageMilli").is_some() {
        check("usageMilli", usage, Some(int(expected, "usageMilli")?))?;
    }
    Ok(())
}

fn spec_of(inputs: &Value) -> Result<Spec, String> {
    Ok(Spec {
        min: uint(inputs, "minReplicas").unwrap_or(1),
        max: uint(inputs, "maxReplicas")?,
        behavior: behavior(&inputs["behavior"])?,
    })
}

fn controller_reconcile(inputs: &Value, expected: &Value) -> Outcome {
    let c = controller(inputs);
    let spec = spec_of(inputs)?;
    let current = uint(inputs, "currentReplicas")?;
    let status = uint(inputs, "statusReplicas").unwrap_or(current);
    let mut state = State {
        recommendations: match &inputs["priorRecommendations"] {
            Value::Null => None,
            list => Some(recommendations(list)?),
        },
        ..State::default()
    };
    let tolerances = c.tolerances(spec.behavior.as_ref());
    let raw = proposals(inputs, current, status, tolerances)?;
    let r = reconcile(&c, &spec, &mut state, current, raw, NOW);
    check(
        "desiredReplicas",
        r.desired,
        uint(expected, "desiredReplicas")?,
    )?;
    if let Some(want) = expected["scalingLimitedReason"].as_str() {
        let got = match r.outcome {
            infscale_core::control::hpa::Outcome::Normalized(limited) => limited.name(),
            _ => "none",
        };
        check("scalingLimitedReason", got, want)?;
    }
    let changed = r.desired != current;
    for key in ["scaleUpdated", "eventCreated"] {
        if let Some(want) = expected.get(key) {
            let want = want
                .as_bool()
                .ok_or_else(|| format!("{key}: {want} is not a boolean"))?;
            check(key, changed, want)?;
        }
    }
    if let Some(want) = expected.get("reconciliationAction") {
        let got = match r.desired.cmp(&current) {
            std::cmp::Ordering::Greater => "scale_up",
            std::cmp::Ordering::Less => "scale_down",
            std::cmp::Ordering::Equal => "none",
        };
        check("reconciliationAction", Some(got), want.as_str())?;
    }
    if let Some(want) = expected.get("expectedConditions") {
        conditions::check(want, &conditions::derive(inputs, current, &r))?;
    }
    Ok(())
}

/// Runs the real controller's loop for one integration step: a fresh HPA at the step's counts,
/// one reconcile per resync period, each result applied, for ten periods (status stays as given:
/// the test marks pods scheduled only between steps).
fn integration_step(inputs: &Value, expected: &Value) -> Outcome {
    let c = controller(inputs);
    let spec = spec_of(inputs)?;
    let resync = inputs["harness"]["resyncPeriodSeconds"]
        .as_f64()
        .unwrap_or(15.0);
    let mut current = uint(inputs, "currentReplicas")?;
    let status = uint(inputs, "statusReplicas")?;
    let tolerances = c.tolerances(spec.behavior.as_ref());
    let mut state = State::default();
    let mut seen = vec![current];
    for period in 0..10 {
        let raw = proposals(inputs, current, status, tolerances)?;
        let now = NOW + f64::from(period) * resync;
        current = reconcile(&c, &spec, &mut state, current, raw, now).desired;
        seen.push(current);
    }
    assertion::check(&assertion::read(expected)?, &seen)?;
    if let Some(n) = expected["steadyStateDesiredReplicas"].as_u64() {
        check("steady state", u64::from(current), n).map_err(|e| format!("{e} after {seen:?}"))?;
    }
    Ok(())
}

// ---- the harness against itself ----

/// A vector of the repository's transcribed file, by id.
fn transcribed(id: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hpa/transcribed-vectors.json");
    let text = std::fs::read_to_string(&path).expect("tests/hpa/transcribed-vectors.json");
    let doc: Value = serde_json::from_str(&text).expect("transcribed-vectors.json is JSON");
    doc["vectors"]
        .as_array()
        .and_then(|list| list.iter().find(|v| v["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("no vector {id}"))
}

fn with_expected(mut v: Value, expected: Value) -> Value {
    v["expected"] = expected;
    v
}

/// `TestHPAWithTolerance/scale_up_in_tolerance` stays at 37: asserting that it never reaches
/// 37 (or never drops to 37, or never equals it) is false and must fail, naming the vector.
#[test]
fn a_false_never_assertion_fails() {
    let v = transcribed("tx-integ-tol-02");
    assert_eq!(check_vector(&v, "t"), Ok(()));
    for assertion in [
        serde_json::json!({"assertion": {"neverAtLeastReplicas": 37}}),
        serde_json::json!({"assertion": {"neverNoMoreThanReplicas": 37}}),
        serde_json::json!({"assertion": {"neverEqualReplicas": 37}}),
        serde_json::json!({"assertion": {"neverReaches": 36}}),
        serde_json::json!({"assertion": {"neverDropsBelow": 38}}),
        serde_json::json!({"unexpected": {"atLeastReplicas": 37}}),
        serde_json::json!({"assertion": {"unexpected": "noMoreThanReplicas(40)"}}),
        serde_json::json!({"assertion": {"atLeastReplicas": 38}}),
    ] {
        let failure = check_vector(&with_expected(v.clone(), assertion.clone()), "t")
            .expect_err(&format!("{assertion} passed"));
        assert!(failure.starts_with("tx-integ-tol-02 "), "{failure}");
    }
}

/// The same conditions, true, in each form the harness reads.
#[test]
fn never_assertions_in_each_form() {
    let up = transcribed("tx-integ-tol-02");
    for assertion in [
        serde_json::json!({"assertion": {"notAtLeastReplicas": 38}}),
        serde_json::json!({"assertion": {"neverReaches": 38, "neverDropsTo": 36}}),
        serde_json::json!({"assertion": {"neverDropsBelow": 37, "equalReplicas": 37}}),
        serde_json::json!({"assertion": {"never": {"atLeastReplicas": 38}}}),
        serde_json::json!({"unexpected": "atLeastReplicas(38)", "assertion": "equalReplicas(37)"}),
        serde_json::json!({"unexpectedAssertion": [{"atLeastReplicas": 38}, "equalReplicas(36)"]}),
    ] {
        let v = with_expected(up.clone(), assertion.clone());
        assert_eq!(check_vector(&v, "t"), Ok(()), "{assertion}");
    }
}

/// A form the harness does not know fails the vector, naming the id and the form; so does an
/// integration step with no assertion at all.
#[test]
fn unknown_forms_fail_by_name() {
    let step = transcribed("tx-integ-tol-02");
    let reconcile = transcribed("tx-ctl-01");
    for (v, form) in [
        (
            with_expected(
                step.clone(),
                serde_json::json!({"assertion": {"soonReplicas": 37}}),
            ),
            "soonReplicas",
        ),
        (
            with_expected(
                step.clone(),
                serde_json::json!({"assertion": "fewerReplicas(3)"}),
            ),
            "fewerReplicas(3)",
        ),
        (
            with_expected(
                step.clone(),
                serde_json::json!({"assertion": {"neverAtLeastReplicas": "x"}}),
            ),
            "neverAtLeastReplicas",
        ),
        (
            with_expected(
                step.clone(),
                serde_json::json!({"steadyStateDesiredReplicas": 37}),
            ),
            "no assertion",
        ),
        (
            with_expected(
                reconcile.clone(),
                serde_json::json!({"desiredReplicas": 5, "expectedEvents": ["SuccessfulRescale"]}),
            ),
            "expectedEvents",
        ),
        (
            with_expected(reconcile, serde_json::json!([5])),
            "not an object",
        ),
    ] {
        let failure = check_vector(&v, "t").expect_err(form);
        assert!(
            failure.starts_with(&format!("{} ", v["id"].as_str().unwrap_or_default())),
            "{failure}"
        );
        assert!(failure.contains(form), "{failure}");
    }
}

/// `TestTooFewReplicas` rescales 2 -> 3 on a pre-check: a vector claiming it did not, or that it
/// set `ScalingLimited`, fails.
#[test]
fn false_conditions_fail() {
    let v = transcribed("tx-ctl-19");
    assert_eq!(check_vector(&v, "t"), Ok(()));
    for expected in [
        serde_json::json!({"desiredReplicas": 3, "expectedConditions": [
            {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}]}),
        serde_json::json!({"desiredReplicas": 3, "expectedConditions": [
            {"type": "ScalingLimited", "status": "True", "reason": "TooFewReplicas"}]}),
        serde_json::json!({"desiredReplicas": 3, "expectedConditions": [
            {"type": "AbleToScale", "status": "Maybe"}]}),
        serde_json::json!({"desiredReplicas": 3, "scaleUpdated": false}),
        serde_json::json!({"desiredReplicas": 3, "reconciliationAction": "none"}),
    ] {
        let failure = check_vector(&with_expected(v.clone(), expected.clone()), "t")
            .expect_err(&format!("{expected} passed"));
        assert!(failure.starts_with("tx-ctl-19 "), "{failure}");
    }
}
