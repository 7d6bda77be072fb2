//! The policy flags `decide` and `kube` share: the same keys as the simulator's policy strings,
//! set through `Policy::set`, so a flag and a key mean one thing.

use crate::scaling::{Metric, Policy};

#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    /// A whole policy in the simulator's syntax (e.g. queue:24,lookahead=90); flags given beside
    /// it override its keys.
    #[arg(long)]
    pub policy: Option<String>,
    /// What to scale on: queue, waiting, running, kv, cpu, occupancy or ttft [default: queue].
    #[arg(long, value_parser = parse_metric)]
    pub metric: Option<Metric>,
    /// Per-replica target in the metric's unit (requests, 0..1, percent, replicas, seconds).
    #[arg(long, required_unless_present = "policy")]
    pub target: Option<f64>,
    /// Fewest replicas; 0 allows scale to zero (queue, waiting, occupancy, ttft) [default: 1].
    #[arg(long)]
    pub min: Option<u32>,
    /// Most replicas [default: 10].
    #[arg(long)]
    pub max: Option<u32>,
    /// Seconds to project demand ahead along its trend (the cold start) [default: 0].
    #[arg(long, value_name = "SECONDS")]
    pub lookahead: Option<f64>,
    /// Seconds of history the trend is fitted over [default: 30].
    #[arg(long, value_name = "SECONDS")]
    pub trend: Option<f64>,
    /// KEDA cooldownPeriod: idle seconds before the last replica goes [default: 300].
    #[arg(long, value_name = "SECONDS")]
    pub cooldown: Option<f64>,
    /// Requests in flight above which the target is active [default: 0].
    #[arg(long)]
    pub activation: Option<f64>,
    /// The HPA controller's tolerance [default: 0.1].
    #[arg(long)]
    pub tolerance: Option<f64>,
    /// Scale-up stabilisation window [default: 0].
    #[arg(long, value_name = "SECONDS")]
    pub up_window: Option<u32>,
    /// Scale-down stabilisation window [default: 300].
    #[arg(long, value_name = "SECONDS")]
    pub down_window: Option<u32>,
    /// Scale-up policy: at most this many pods per period (replaces the default pair).
    #[arg(long)]
    pub up_pods: Option<u32>,
    /// Scale-up policy: at most this percent per period (replaces the default pair).
    #[arg(long)]
    pub up_percent: Option<u32>,
    /// Period of the scale-up policies [default: 15].
    #[arg(long, value_name = "SECONDS")]
    pub up_period: Option<u32>,
    /// Max, Min or Disabled [default: Max].
    #[arg(long)]
    pub up_select: Option<String>,
    /// Scale-down policy: at most this many pods per period (replaces the default 100%).
    #[arg(long)]
    pub down_pods: Option<u32>,
    /// Scale-down policy: at most this percent per period (replaces the default 100%).
    #[arg(long)]
    pub down_percent: Option<u32>,
    /// Period of the scale-down policies [default: 15].
    #[arg(long, value_name = "SECONDS")]
    pub down_period: Option<u32>,
    /// Max, Min or Disabled [default: Max].
    #[arg(long)]
    pub down_select: Option<String>,
    /// Run the HPA's legacy path (an HPA without `behavior`).
    #[arg(long)]
    pub legacy: bool,
}

fn parse_metric(s: &str) -> Result<Metric, String> {
    s.parse()
        .map_err(|e: crate::scaling::PolicyError| e.to_string())
}

impl PolicyArgs {
    /// The policy from `--policy` and the flags, validated.
    pub fn policy(&self) -> anyhow::Result<Policy> {
        let mut policy = match &self.policy {
            Some(spec) => Policy::parse(spec)?,
            None => Policy::new(Metric::Queue, 0.0),
        };
        if let Some(metric) = self.metric {
            policy.metric = metric;
        }
        if let Some(target) = self.target {
            policy.target = target;
        }
        let keys: [(&str, Option<String>); 18] = [
            ("min", self.min.map(|v| v.to_string())),
            ("max", self.max.map(|v| v.to_string())),
            ("lookahead", self.lookahead.map(|v| v.to_string())),
            ("trend", self.trend.map(|v| v.to_string())),
            ("cooldown", self.cooldown.map(|v| v.to_string())),
            ("activation", self.activation.map(|v| v.to_string())),
            ("tolerance", self.tolerance.map(|v| v.to_string())),
            ("legacy", self.legacy.then(|| "true".to_owned())),
            ("upwindow", self.up_window.map(|v| v.to_string())),
            ("downwindow", self.down_window.map(|v| v.to_string())),
            ("upperiod", self.up_period.map(|v| v.to_string())),
            ("uppods", self.up_pods.map(|v| v.to_string())),
            ("uppercent", self.up_percent.map(|v| v.to_string())),
            ("upselect", self.up_select.clone()),
            ("downperiod", self.down_period.map(|v| v.to_string())),
            ("downpods", self.down_pods.map(|v| v.to_string())),
            ("downpercent", self.down_percent.map(|v| v.to_string())),
            ("downselect", self.down_select.clone()),
        ];
        for (key, value) in keys {
            if let Some(value) = value {
                policy.set(key, &value)?;
            }
        }
        policy.validate()?;
        Ok(policy)
    }
}
