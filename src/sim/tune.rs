//! The tuner: many policies over one trace, the Pareto frontier of misses against cost, and the
//! cheapest policy under a miss budget as a ready-to-apply KEDA ScaledObject.

use super::replica::Hardware;
use super::report::{self, Summary};
use super::run::{self, Settings};
use super::trace::Trace;
use crate::scaling::hpa::{RateKind, Select};
use crate::scaling::Policy;
use rayon::prelude::*;
use serde::Serialize;
use std::fmt::Write;

/// The values searched on each axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub metric: String,
    pub targets: Vec<f64>,
    pub lookaheads: Vec<f64>,
    pub down_windows: Vec<u32>,
    /// Scale-down policy keys: "" (the default 100% per 15 s), "downpods=1", "downpercent=50"...
    pub down_policies: Vec<String>,
    /// `None` keeps one replica (min 1); `Some(s)` allows zero with that cooldown.
    pub cooldowns: Vec<Option<f64>>,
    pub max: u32,
}

impl Default for Grid {
    fn default() -> Self {
        Grid {
            metric: "queue".to_owned(),
            targets: vec![16.0, 24.0, 32.0, 40.0, 48.0, 56.0, 64.0],
            lookaheads: vec![0.0, 60.0, 90.0, 120.0, 180.0],
            down_windows: vec![60, 120, 180, 300],
            down_policies: vec![
                String::new(),
                "downpods=1".to_owned(),
                "downpercent=50".to_owned(),
            ],
            cooldowns: vec![None, Some(60.0), Some(120.0), Some(300.0)],
            max: 8,
        }
    }
}

impl Grid {
    /// Every combination, as policy strings.
    pub fn policies(&self) -> Vec<String> {
        let mut out = Vec::new();
        for &target in &self.targets {
            for &lookahead in &self.lookaheads {
                for &window in &self.down_windows {
                    for down in &self.down_policies {
                        for cooldown in &self.cooldowns {
                            let mut spec = format!("{}:{}", self.metric, target);
                            if lookahead > 0.0 {
                                let _ = write!(spec, ",lookahead={lookahead}");
                            }
                            let _ = write!(spec, ",downwindow={window}");
                            if !down.is_empty() {
                                let _ = write!(spec, ",{down}");
                            }
                            if let Some(c) = cooldown {
                                let _ = write!(spec, ",min=0,cooldown={c}");
                            }
                            let _ = write!(spec, ",max={}", self.max);
                            out.push(spec);
                        }
                    }
                }
            }
        }
        out
    }
}

/// `count` points spread evenly over `all` (every one when there are fewer).
pub fn sample(all: Vec<String>, count: usize) -> Vec<String> {
    if count == 0 || count >= all.len() {
        return all;
    }
    let step = all.len() as f64 / count as f64;
    (0..count)
        .map(|i| all[((i as f64 * step) as usize).min(all.len() - 1)].clone())
        .collect()
}

/// Runs every policy on every trace, in parallel on all cores, and summarises each policy over
/// all its runs; `tick` is called once per policy done (for a progress bar).
pub fn evaluate(
    specs: &[String],
    policies: &[Policy],
    traces: &[Trace],
    hw: &Hardware,
    settings: &Settings,
    tick: &(dyn Fn() + Sync),
) -> Vec<Summary> {
    specs
        .par_iter()
        .zip(policies)
        .map(|(spec, policy)| {
            let runs: Vec<_> = traces
                .iter()
                .map(|t| run::run(t, hw, policy, settings))
                .collect();
            tick();
            report::summarize_many(spec, &runs, settings.slo_ttft_s)
        })
        .collect()
}

/// The points no other point beats on both misses and cost, cheapest first.
pub fn pareto(summaries: &[Summary]) -> Vec<Summary> {
    let mut sorted: Vec<&Summary> = summaries.iter().collect();
    sorted.sort_by(|a, b| {
        a.replica_minutes
            .total_cmp(&b.replica_minutes)
            .then(a.slo_miss_pct.total_cmp(&b.slo_miss_pct))
    });
    let mut frontier: Vec<Summary> = Vec::new();
    let mut best_miss = f64::INFINITY;
    for s in sorted {
        if s.slo_miss_pct < best_miss {
            best_miss = s.slo_miss_pct;
            frontier.push(s.clone());
        }
    }
    frontier
}

/// The cheapest point with at most `max_miss_pct` misses.
pub fn cheapest_under(summaries: &[Summary], max_miss_pct: f64) -> Option<&Summary> {
    summaries
        .iter()
        .filter(|s| s.slo_miss_pct <= max_miss_pct)
        .min_by(|a, b| a.replica_minutes.total_cmp(&b.replica_minutes))
}

/// Where the ScaledObject points.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: String,
    pub namespace: String,
    pub scaler_address: String,
    pub activator_url: Option<String>,
    pub polling_interval_s: f64,
    pub cold_start_s: f64,
}

fn rules_yaml(
    out: &mut String,
    name: &str,
    rules: &crate::scaling::hpa::Rules,
    default_window: u32,
) {
    let _ = writeln!(out, "        {name}:");
    let _ = writeln!(
        out,
        "          stabilizationWindowSeconds: {}",
        rules.window_s.unwrap_or(default_window)
    );
    let select = match rules.select {
        Select::Max => "Max",
        Select::Min => "Min",
        Select::Disabled => "Disabled",
    };
    let _ = writeln!(out, "          selectPolicy: {select}");
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

/// A KEDA ScaledObject that deploys `policy` with infscale as an `external-push` trigger, the
/// HPA behavior block spelled out.
pub fn scaled_object(policy: &Policy, target: &Target) -> String {
    let num = crate::scaling::demand::fmt;
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
    let _ = writeln!(out, "  cooldownPeriod: {}", num(policy.cooldown_s));
    let _ = writeln!(out, "  minReplicaCount: {}", policy.min);
    let _ = writeln!(out, "  maxReplicaCount: {}", policy.max);
    if let Some(b) = &policy.behavior {
        let _ = writeln!(out, "  advanced:");
        let _ = writeln!(out, "    horizontalPodAutoscalerConfig:");
        let _ = writeln!(out, "      behavior:");
        rules_yaml(&mut out, "scaleUp", &b.scale_up, 0);
        rules_yaml(
            &mut out,
            "scaleDown",
            &b.scale_down,
            policy.controller.downscale_window_s,
        );
    }
    let _ = writeln!(out, "  triggers:");
    let _ = writeln!(out, "    - type: external-push");
    let _ = writeln!(out, "      metadata:");
    let _ = writeln!(out, "        scalerAddress: {}", target.scaler_address);
    let _ = writeln!(out, "        deployment: {}", target.name);
    let _ = writeln!(out, "        metric: {}", policy.metric);
    let _ = writeln!(out, "        threshold: \"{}\"", num(policy.target));
    let _ = writeln!(
        out,
        "        activationThreshold: \"{}\"",
        num(policy.activation)
    );
    if policy.lookahead_s > 0.0 {
        let _ = writeln!(
            out,
            "        lookaheadSeconds: \"{}\"",
            num(policy.lookahead_s)
        );
        let _ = writeln!(
            out,
            "        coldStartSeconds: \"{}\"",
            num(target.cold_start_s)
        );
    }
    if let Some(url) = &target.activator_url {
        let _ = writeln!(out, "        activatorUrl: {url}");
        let _ = writeln!(out, "        activatorHost: {}", target.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(policy: &str, miss: f64, cost: f64) -> Summary {
        Summary {
            policy: policy.to_owned(),
            requests: 100,
            slo_miss: miss as usize,
            slo_miss_pct: miss,
            rejected: 0,
            ttft_p50_s: 0.0,
            ttft_p95_s: 0.0,
            ttft_p99_s: 0.0,
            replica_minutes: cost,
            peak_replicas: 1,
            scale_events: 0,
        }
    }

    #[test]
    fn the_frontier_keeps_only_undominated_points() {
        let points = [
            s("a", 5.0, 10.0),
            s("b", 1.0, 20.0),
            s("c", 2.0, 25.0),
            s("d", 0.0, 30.0),
            s("e", 5.0, 12.0),
        ];
        let names: Vec<String> = pareto(&points).into_iter().map(|p| p.policy).collect();
        assert_eq!(names, ["a", "b", "d"]);
        assert_eq!(cheapest_under(&points, 1.0).unwrap().policy, "b");
        assert!(cheapest_under(&points, -1.0).is_none());
    }

    #[test]
    fn the_grid_spells_policies_that_parse() {
        let all = Grid::default().policies();
        assert_eq!(all.len(), 7 * 5 * 4 * 3 * 4);
        for spec in sample(all, 50) {
            Policy::parse(&spec).unwrap();
        }
    }

    #[test]
    fn the_scaled_object_carries_the_behavior_block() {
        let p = Policy::parse(
            "queue:48,lookahead=90,downwindow=120,downpods=1,min=0,cooldown=60,max=8",
        )
        .unwrap();
        let t = Target {
            name: "chat".into(),
            namespace: "llm".into(),
            scaler_address: "infscale.infscale.svc:9090".into(),
            activator_url: Some("http://infscale-activator.infscale.svc:9091".into()),
            polling_interval_s: 30.0,
            cold_start_s: 91.0,
        };
        let yaml = scaled_object(&p, &t);
        for needle in [
            "cooldownPeriod: 60",
            "minReplicaCount: 0",
            "stabilizationWindowSeconds: 120",
            "- type: Pods\n              value: 1\n              periodSeconds: 15",
            "threshold: \"48\"",
            "lookaheadSeconds: \"90\"",
            "type: external-push",
        ] {
            assert!(yaml.contains(needle), "{needle} in\n{yaml}");
        }
        let parsed: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(parsed["spec"]["maxReplicaCount"], 8);
    }
}
