//! A policy as a KEDA ScaledObject, both ways: [`render`] writes the YAML `tune` prints, and
//! [`read`] takes a ScaledObject back to the policy it deploys. Each key goes where the key
//! table ([`crate::policy::keys`]) says KEDA, its HPA or `infscale serve` reads it, so what `tune`
//! recommends is what runs. Pure: text in, text out.

use crate::policy::behavior::{Behavior, Controller, RateKind, RatePolicy, Rules, Select};
use crate::policy::keys::{self, num, Home};
use crate::policy::{Metric, Policy, PolicyError};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Where and how a policy is deployed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Placement {
    /// The Deployment, and the ScaledObject's name.
    pub name: String,
    pub namespace: String,
    /// Where KEDA reaches `infscale serve`.
    pub scaler_address: String,
    /// The activator's admin URL, written when the policy scales to zero (in serve mode: clients
    /// call `service`, and the activator joins it only while the model is at zero, waking or
    /// idle).
    pub activator_url: Option<String>,
    /// The model's Service, in serve mode.
    pub service: String,
    pub polling_interval_s: f64,
    /// The replicas' cold start, written as `coldStartSeconds` beside a lookahead.
    pub cold_start_s: f64,
}

/// The activator's admin URL as the shipped manifests run it: the `infscale-activator-admin`
/// Service in namespace `infscale`, beside `serve` (which the shipped `serve` is started to
/// accept with `--allow-activator`), admin port 9092.
pub fn activator_url(service: &str, namespace: &str, port: u16) -> String {
    format!("http://{service}.{namespace}.svc:{port}")
}

/// KEDA's `fallback` for a ScaledObject: past `failure_threshold` failed `GetMetrics` in a row
/// KEDA feeds the HPA `replicas` (with `behavior`) instead of the metric. `tune` writes
/// `currentReplicasIfHigher` with `replicas` the policy's floor (at least 1): while `serve`
/// cannot tell the load, the target keeps what it runs and never scales down blind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub failure_threshold: u32,
    pub replicas: u32,
    pub behavior: String,
}

/// The `fallback.behavior` values KEDA takes.
pub const FALLBACK_BEHAVIORS: [&str; 4] = [
    "static",
    "currentReplicas",
    "currentReplicasIfHigher",
    "currentReplicasIfLower",
];

impl Fallback {
    /// What `tune` writes for `policy`: 3 failures, the policy's floor (at least 1), and
    /// `currentReplicasIfHigher`.
    pub fn for_policy(policy: &Policy) -> Fallback {
        Fallback {
            failure_threshold: 3,
            replicas: policy.min.max(1),
            behavior: "currentReplicasIfHigher".to_owned(),
        }
    }
}

fn rules_yaml(
    out: &mut String,
    name: &str,
    rules: &Rules,
    default_window: u32,
    tolerance: Option<f64>,
) {
    let _ = writeln!(out, "        {name}:");
    let window = rules.window_s.unwrap_or(default_window);
    let _ = writeln!(out, "          stabilizationWindowSeconds: {window}");
    let select = match rules.select {
        Select::Max => "Max",
        Select::Min => "Min",
        Select::Disabled => "Disabled",
    };
    let _ = writeln!(out, "          selectPolicy: {select}");
    if let Some(t) = rules.tolerance.or(tolerance) {
        let _ = writeln!(out, "          tolerance: \"{}\"", num(t));
    }
    let _ = writeln!(out, "          policies:");
    for p in &rules.policies {
        let kind = match p.kind {
            RateKind::Pods => "Pods",
            RateKind::Percent => "Percent",
        };
        let _ = writeln!(
            out,
            "            - type: {kind}\n              value: {}\n              periodSeconds: {}",
            p.value, p.period_s
        );
    }
}

/// The trigger metadata a policy puts in the ScaledObject, by metadata name (`coldStartSeconds`
/// beside a lookahead).
pub fn trigger_metadata(policy: &Policy, cold_start_s: f64) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for key in keys::KEYS {
        if let (Some(name), Some(value)) = (key.metadata(), (key.render)(policy)) {
            out.push((name, value));
        }
    }
    if policy.lookahead_auto {
        // The prior `auto` starts from, when one is set.
        if policy.lookahead_s > 0.0 {
            out.push(("coldStartSeconds", num(policy.lookahead_s)));
        }
    } else if policy.lookahead_s > 0.0 {
        out.push(("coldStartSeconds", num(cold_start_s)));
    }
    out
}

/// A KEDA ScaledObject that deploys `policy` with infscale as an `external-push` trigger: min,
/// max and cooldown in the spec, the HPA behavior block spelled out (a tolerance other than the
/// controller's default as both directions' `tolerance`, which needs Kubernetes 1.33 or later),
/// the metric, threshold, activation, lookahead and trend in the trigger's metadata.
pub fn render(policy: &Policy, target: &Placement) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "apiVersion: keda.sh/v1alpha1");
    let _ = writeln!(out, "kind: ScaledObject");
    let _ = writeln!(out, "metadata:");
    let _ = writeln!(out, "  name: {}", target.name);
    let _ = writeln!(out, "  namespace: {}", target.namespace);
    let _ = writeln!(out, "spec:");
    let _ = writeln!(out, "  scaleTargetRef:");
    let _ = writeln!(out, "    name: {}", target.name);
    let _ = writeln!(out, "  pollingInterval: {}", num(target.polling_interval_s));
    for key in keys::KEYS {
        if let (Home::Spec(field), Some(value)) = (key.home, (key.render)(policy)) {
            let _ = writeln!(out, "  {field}: {value}");
        }
    }
    let fallback = Fallback::for_policy(policy);
    let _ = writeln!(out, "  fallback:");
    let _ = writeln!(out, "    failureThreshold: {}", fallback.failure_threshold);
    let _ = writeln!(out, "    replicas: {}", fallback.replicas);
    let _ = writeln!(out, "    behavior: {}", fallback.behavior);
    if let Some(b) = &policy.behavior {
        let tolerance = (policy.controller.tolerance != Controller::default().tolerance)
            .then_some(policy.controller.tolerance);
        let _ = writeln!(out, "  advanced:");
        let _ = writeln!(out, "    horizontalPodAutoscalerConfig:");
        let _ = writeln!(out, "      behavior:");
        rules_yaml(&mut out, "scaleUp", &b.scale_up, 0, tolerance);
        let down_window = policy.controller.downscale_window_s;
        rules_yaml(&mut out, "scaleDown", &b.scale_down, down_window, tolerance);
    }
    let _ = writeln!(out, "  triggers:");
    let _ = writeln!(out, "    - type: external-push");
    let _ = writeln!(out, "      metadata:");
    let _ = writeln!(out, "        scalerAddress: {}", target.scaler_address);
    let _ = writeln!(out, "        deployment: {}", target.name);
    for (name, value) in trigger_metadata(policy, target.cold_start_s) {
        let _ = writeln!(out, "        {name}: \"{value}\"");
    }
    if let Some(url) = &target.activator_url {
        // Serve mode: the model's own Service takes the activator in while it is needed; the
        // activator learns the model from the slice serve writes, and counts it under
        // SERVICE.NAMESPACE.svc, the key serve reads.
        let _ = writeln!(out, "        activatorUrl: {url}");
        let _ = writeln!(out, "        serveMode: \"true\"");
        let _ = writeln!(out, "        service: {}", target.service);
        // serve writes a Service's path only once its namespace's admin has opted it in.
        let _ = writeln!(
            out,
            "        # serve mode needs the Service labelled: kubectl label service {} -n {} \
             infscale.io/serve-mode=true",
            target.service, target.namespace
        );
    }
    out
}

/// A ScaledObject that cannot be read as a policy, naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("ScaledObject {field}: {message}")]
pub struct ScaledObjectError {
    pub field: String,
    pub message: String,
}

fn bad(field: &str, message: impl std::fmt::Display) -> ScaledObjectError {
    ScaledObjectError {
        field: field.to_owned(),
        message: message.to_string(),
    }
}

/// A deployed ScaledObject, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployed {
    pub name: String,
    pub namespace: String,
    pub policy: Policy,
    /// The infscale trigger's metadata, every value as a string (as KEDA forwards it).
    pub metadata: BTreeMap<String, String>,
    /// `spec.fallback`, when there is one.
    pub fallback: Option<Fallback>,
}

/// `spec.fallback` as KEDA reads it: `failureThreshold` and `replicas` non-negative integers,
/// `behavior` one of KEDA's (`static` when absent).
fn read_fallback(v: &serde_yaml::Value) -> Result<Option<Fallback>, ScaledObjectError> {
    if v.is_null() {
        return Ok(None);
    }
    if !v.is_mapping() {
        return Err(bad("spec.fallback", "not a mapping"));
    }
    let count = |field: &str| {
        let at = format!("spec.fallback.{field}");
        let n = v[field]
            .as_u64()
            .ok_or_else(|| bad(&at, "missing, or not a whole number"))?;
        u32::try_from(n).map_err(|_| bad(&at, "too large"))
    };
    let behavior = match &v["behavior"] {
        serde_yaml::Value::Null => "static".to_owned(),
        b => match b.as_str() {
            Some(b) if FALLBACK_BEHAVIORS.contains(&b) => b.to_owned(),
            _ => {
                return Err(bad(
                    "spec.fallback.behavior",
                    format!("one of {}", FALLBACK_BEHAVIORS.join(", ")),
                ))
            }
        },
    };
    Ok(Some(Fallback {
        failure_threshold: count("failureThreshold")?,
        replicas: count("replicas")?,
        behavior,
    }))
}

/// A YAML scalar as the string KEDA would forward.
fn scalar(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Reads a ScaledObject (YAML) back to the policy it deploys: KEDA's defaults where a field is
/// absent (minReplicaCount 0, maxReplicaCount 100, cooldownPeriod 300), the HPA's where
/// `behavior` leaves a field out, an HPA without `behavior` as `legacy`. The first `external`
/// or `external-push` trigger is infscale's.
pub fn read(yaml: &str) -> Result<Deployed, ScaledObjectError> {
    let doc: serde_yaml::Value = serde_yaml::from_str(yaml).map_err(|e| bad("(document)", e))?;
    let text = |v: &serde_yaml::Value, field: &str| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| bad(field, "missing"))
    };
    let name = text(&doc["metadata"]["name"], "metadata.name")?;
    let namespace = doc["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let spec = &doc["spec"];
    let trigger = spec["triggers"]
        .as_sequence()
        .and_then(|ts| {
            ts.iter()
                .find(|t| matches!(t["type"].as_str(), Some("external" | "external-push")))
        })
        .ok_or_else(|| bad("spec.triggers", "no external or external-push trigger"))?;
    let mut metadata = BTreeMap::new();
    if let Some(map) = trigger["metadata"].as_mapping() {
        for (k, v) in map {
            if let (Some(k), Some(v)) = (k.as_str(), scalar(v)) {
                metadata.insert(k.to_owned(), v);
            }
        }
    }
    let mut policy = Policy::new(Metric::Queue, 1.0);
    policy.min = 0;
    policy.max = 100;
    let set = |policy: &mut Policy, field: &str, key: &keys::Key, value: &str| {
        (key.parse)(key, policy, value).map_err(|e| bad(field, e))
    };
    if let (Some(cold), Some(lookahead)) =
        (metadata.get("coldStartSeconds"), keys::key("lookahead"))
    {
        set(&mut policy, "metadata.coldStartSeconds", lookahead, cold)?;
    }
    for key in keys::KEYS {
        match key.home {
            Home::Trigger(field) => {
                if let Some(v) = metadata.get(field) {
                    set(&mut policy, &format!("metadata.{field}"), key, v)?;
                }
            }
            Home::Spec(field) => {
                if let Some(v) = scalar(&spec[field]) {
                    set(&mut policy, &format!("spec.{field}"), key, &v)?;
                }
            }
            _ => {}
        }
    }
    // `behavior`: each direction's window, select policy and tolerance through the key table
    // (the API's defaults for what is left out), the rate policies as listed.
    let behavior = &spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"];
    policy.behavior = behavior.is_mapping().then(Behavior::default);
    if let Some(b) = policy.behavior.as_mut() {
        for (dir, rules) in [
            ("scaleUp", &mut b.scale_up),
            ("scaleDown", &mut b.scale_down),
        ] {
            if let Some(list) = behavior[dir]["policies"].as_sequence() {
                rules.policies = rate_policies(list, dir)?;
            }
        }
    }
    if policy.behavior.is_some() {
        for key in keys::KEYS {
            let Home::Behavior(dir, field) = key.home else {
                continue;
            };
            if matches!(field, "Pods" | "Percent" | "periodSeconds") {
                continue; // in the policies list, read above
            }
            if let Some(v) = scalar(&behavior[dir.field()][field]) {
                let at = format!("behavior.{}.{field}", dir.field());
                set(&mut policy, &at, key, &v)?;
            }
        }
    }
    policy.validate().map_err(|e: PolicyError| bad("spec", e))?;
    let fallback = read_fallback(&spec["fallback"])?;
    Ok(Deployed {
        name,
        namespace,
        policy,
        metadata,
        fallback,
    })
}

/// A direction's `policies` list; values and periods are checked with the whole policy.
fn rate_policies(
    list: &[serde_yaml::Value],
    dir: &str,
) -> Result<Vec<RatePolicy>, ScaledObjectError> {
    list.iter()
        .map(|p| {
            let kind = match p["type"].as_str() {
                Some("Pods") => RateKind::Pods,
                Some("Percent") => RateKind::Percent,
                _ => {
                    return Err(bad(
                        &format!("behavior.{dir}.policies.type"),
                        "expected Pods or Percent",
                    ))
                }
            };
            let int = |name: &str| {
                p[name]
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        bad(
                            &format!("behavior.{dir}.policies.{name}"),
                            "expected a whole number",
                        )
                    })
            };
            Ok(RatePolicy {
                kind,
                value: int("value")?,
                period_s: int("periodSeconds")?,
            })
        })
        .collect()
}

/// Where two policies would deploy differently (KEDA's fields, the trigger's, the HPA's
/// behavior with each direction's effective tolerance), or `None` when they deploy the same.
/// A tolerance set for the controller and the same one set per direction deploy the same.
pub fn deploy_difference(a: &Policy, b: &Policy) -> Option<String> {
    // What KEDA and `serve` read: every spec and trigger key as written, and `lookahead=auto`'s
    // prior (`coldStartSeconds`, the one trigger value no key writes on its own).
    for key in keys::KEYS {
        if matches!(key.home, Home::Spec(_) | Home::Trigger(_)) {
            let (x, y) = ((key.render)(a), (key.render)(b));
            if x != y {
                return Some(format!("{}: {x:?} vs {y:?}", key.name));
            }
        }
    }
    let prior = |p: &Policy| (p.lookahead_auto && p.lookahead_s > 0.0).then_some(p.lookahead_s);
    if prior(a) != prior(b) {
        return Some(format!(
            "lookahead=auto's prior: {:?} vs {:?}",
            prior(a),
            prior(b)
        ));
    }
    // What the HPA reads: the effective behavior, whichever keys or defaults gave it.
    let tolerances = |p: &Policy| p.controller.tolerances(p.behavior.as_ref());
    let rules = |p: &Policy| {
        p.behavior.clone().map(|mut b| {
            b.scale_up.tolerance = None;
            b.scale_down.tolerance = None;
            b.scale_down.window_s = b
                .scale_down
                .window_s
                .or(Some(p.controller.downscale_window_s));
            b
        })
    };
    if tolerances(a) != tolerances(b) {
        Some(format!(
            "tolerances: {:?} vs {:?}",
            tolerances(a),
            tolerances(b)
        ))
    } else if rules(a) != rules(b) {
        Some(format!("behavior: {:?} vs {:?}", rules(a), rules(b)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(activator: bool) -> Placement {
        Placement {
            name: "chat".into(),
            namespace: "llm".into(),
            scaler_address: "infscale.infscale.svc:9090".into(),
            activator_url: activator
                .then(|| activator_url("infscale-activator-admin", "infscale", 9092)),
            service: "chat".into(),
            polling_interval_s: 30.0,
            cold_start_s: 91.0,
        }
    }

    #[test]
    fn the_scaled_object_carries_the_behavior_block() {
        let p = Policy::parse(
            "queue:48,lookahead=90,downwindow=120,downpods=1,min=0,cooldown=60,max=8",
        )
        .unwrap();
        let yaml = render(&p, &target(true));
        for needle in [
            "cooldownPeriod: 60",
            "minReplicaCount: 0",
            "stabilizationWindowSeconds: 120",
            "- type: Pods\n              value: 1\n              periodSeconds: 15",
            "threshold: \"48\"",
            "lookaheadSeconds: \"90\"",
            "trendSeconds: \"30\"",
            "type: external-push",
            "activatorUrl: http://infscale-activator-admin.infscale.svc:9092",
            "serveMode: \"true\"",
            "service: chat",
            "# serve mode needs the Service labelled: kubectl label service chat -n",
            "fallback:\n    failureThreshold: 3\n    replicas: 1\n    behavior: currentReplicasIfHigher",
        ] {
            assert!(yaml.contains(needle), "{needle} in\n{yaml}");
        }
        let parsed: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(parsed["spec"]["maxReplicaCount"], 8);
    }

    #[test]
    fn what_is_rendered_reads_back() {
        for spec in [
            "queue:48,lookahead=90,trend=45,downwindow=120,downpods=1,min=0,cooldown=60,max=8",
            "waiting:3.5,activation=2,tolerance=0.05,upwindow=30,uppercent=50,upperiod=30",
            "occupancy:2,downpercent=10,downperiod=60,downselect=Min,uptolerance=0.2",
            "queue:24,legacy=true,max=20",
            "queue:24,lookahead=auto,trend=20",
        ] {
            let p = Policy::parse(spec).unwrap();
            let back = read(&render(&p, &target(p.min == 0))).unwrap();
            assert_eq!(deploy_difference(&back.policy, &p), None, "{spec}");
            assert_eq!(back.fallback, Some(Fallback::for_policy(&p)), "{spec}");
            assert_eq!(
                (back.name.as_str(), back.namespace.as_str()),
                ("chat", "llm")
            );
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = read("metadata: {name: a}\nspec: {triggers: [{type: cpu}]}").unwrap_err();
        assert_eq!(e.field, "spec.triggers");
        let yaml = "metadata: {name: a}\nspec:\n  minReplicaCount: lots\n  triggers:\n    - type: external\n      metadata: {threshold: \"4\"}\n";
        assert_eq!(read(yaml).unwrap_err().field, "spec.minReplicaCount");
        let yaml = "metadata: {name: a}\nspec:\n  triggers:\n    - type: external\n      metadata: {threshold: \"0\"}\n";
        assert_eq!(read(yaml).unwrap_err().field, "metadata.threshold");
        let with = |fallback: &str| {
            format!("metadata: {{name: a}}\nspec:\n  fallback: {fallback}\n  triggers:\n    - type: external\n      metadata: {{threshold: \"4\"}}\n")
        };
        let e = read(&with("{failureThreshold: 3, replicas: -1}")).unwrap_err();
        assert_eq!(e.field, "spec.fallback.replicas");
        let e = read(&with(
            "{failureThreshold: 3, replicas: 2, behavior: sometimes}",
        ))
        .unwrap_err();
        assert_eq!(e.field, "spec.fallback.behavior");
        let ok = read(&with("{failureThreshold: 5, replicas: 2}")).unwrap();
        assert_eq!(ok.fallback.unwrap().behavior, "static");
        assert_eq!(read(&with("null")).unwrap().fallback, None);
    }
}
