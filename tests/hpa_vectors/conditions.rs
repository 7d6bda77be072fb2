//! The HPA's status conditions after one reconcile, as `horizontal_test.go` asserts them in a
//! test case's `expectedConditions` (`statusOk` / `statusOkWithOverrides`), derived from what
//! infscale's `reconcile` returned.
//!
//! JSON: `"expectedConditions": [{"type": "AbleToScale", "status": "True", "reason":
//! "SucceededRescale"}, ...]` (`status` may also be a boolean; `reason` may be left out). Each
//! listed condition must be one the reconcile sets, with that status and reason; conditions not
//! listed are not checked. What is derived:
//! * `AbleToScale`: `SucceededRescale` when the count changed; otherwise, on the normal path,
//!   `ScaleUpStabilized` / `ScaleDownStabilized` when the stabilisation window moved the
//!   proposal, else `ReadyForNewScale`; `SucceededGetScale` when no proposal was normalised.
//! * `ScalingActive`: `ValidMetricFound` (True) on the normal path; `ScalingDisabled` (False) at
//!   zero replicas with a non-zero minimum; `FailedGet<Source>Metric` (False) when no metric
//!   could be read, named by the first metric of the vector (`InvalidMetricSourceType` for a
//!   source Kubernetes does not know). Not set by the min/max pre-checks.
//! * `ScalingLimited`: on the normal path only, the limit's reason, True unless the reason is
//!   `DesiredWithinRange`.

use infscale_core::control::hpa::{Outcome, Reconciled};
use infscale_core::policy::behavior::Limited;
use serde_json::Value;

/// One condition: type, status, reason.
pub type Condition = (&'static str, bool, String);

pub fn derive(inputs: &Value, current: u32, r: &Reconciled) -> Vec<Condition> {
    let changed = r.desired != current;
    let rescaled = |otherwise: &str| {
        if changed {
            "SucceededRescale".to_string()
        } else {
            otherwise.to_string()
        }
    };
    match r.outcome {
        Outcome::ScalingDisabled => vec![
            ("AbleToScale", true, rescaled("SucceededGetScale")),
            ("ScalingActive", false, "ScalingDisabled".into()),
        ],
        Outcome::AboveMax | Outcome::BelowMin => {
            vec![("AbleToScale", true, rescaled("SucceededGetScale"))]
        }
        Outcome::NoMetrics => vec![
            ("AbleToScale", true, rescaled("SucceededGetScale")),
            ("ScalingActive", false, failed_metric(inputs)),
        ],
        Outcome::Normalized(limited) => {
            let stabilized = r.stabilized.unwrap_or(r.desired);
            let proposal = r.proposal.unwrap_or(stabilized);
            let settled = if stabilized == proposal {
                "ReadyForNewScale"
            } else if stabilized > proposal {
                "ScaleDownStabilized"
            } else {
                "ScaleUpStabilized"
            };
            vec![
                ("AbleToScale", true, rescaled(settled)),
                ("ScalingActive", true, "ValidMetricFound".into()),
                (
                    "ScalingLimited",
                    limited != Limited::DesiredWithinRange,
                    limited.name().into(),
                ),
            ]
        }
    }
}

/// The `ScalingActive` reason when no metric could be read: the first metric's source type.
fn failed_metric(inputs: &Value) -> String {
    let first = match inputs["metrics"].as_array() {
        Some(list) => list.first().cloned().unwrap_or(Value::Null),
        None => inputs["metric"].clone(),
    };
    match first["sourceType"].as_str() {
        Some(s @ ("Object" | "Pods" | "Resource" | "ContainerResource" | "External")) => {
            format!("FailedGet{s}Metric")
        }
        Some(_) => "InvalidMetricSourceType".into(),
        None => "FailedGetResourceMetric".into(),
    }
}

/// Checks the vector's list against the derived conditions.
pub fn check(want: &Value, got: &[Condition]) -> Result<(), String> {
    let list = want
        .as_array()
        .ok_or_else(|| format!("expectedConditions is not a list: {want}"))?;
    for c in list {
        let kind = c["type"]
            .as_str()
            .ok_or_else(|| format!("condition without a type: {c}"))?;
        let status = match &c["status"] {
            Value::Bool(b) => *b,
            Value::String(s) if s == "True" => true,
            Value::String(s) if s == "False" => false,
            other => return Err(format!("condition {kind}: unknown status {other}")),
        };
        let Some((_, got_status, got_reason)) = got.iter().find(|(t, _, _)| *t == kind) else {
            return Err(format!("condition {kind} not set; set: {got:?}"));
        };
        if *got_status != status {
            return Err(format!(
                "condition {kind} status {got_status}; set: {got:?}"
            ));
        }
        match &c["reason"] {
            Value::Null => {}
            Value::String(reason) if reason == got_reason => {}
            Value::String(_) => return Err(format!("condition {kind} reason {got_reason:?}")),
            other => return Err(format!("condition {kind}: reason {other} is not a string")),
        }
    }
    Ok(())
}
