//! `infscale decide`: a replica count from pages, held requests and a policy, with its reasons.

use super::read::{read_all, SourceArgs};
use super::table;
use crate::metrics::Replica;
use crate::scaling::{decide, Metric, Observation, Policy, ScalerState};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// /metrics pages of the ready replicas: files, or http(s):// URLs (none: only held requests).
    #[arg(value_name = "FILE|URL")]
    pub sources: Vec<String>,
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
    /// Replicas the target has now (spec.replicas) [default: the number of sources].
    #[arg(long)]
    pub current: Option<u32>,
    /// Pods that exist, ready or starting (status.replicas) [default: --current].
    #[arg(long)]
    pub status: Option<u32>,
    /// Requests held at the activator.
    #[arg(long, default_value_t = 0.0)]
    pub held: f64,
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
    /// JSON file that keeps the HPA's memory, the last activity and counters between runs.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// The time of this decision in seconds [default: now, as Unix time].
    #[arg(long, value_name = "SECONDS")]
    pub now: Option<f64>,
    /// Print the decision as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub read: SourceArgs,
}

fn parse_metric(s: &str) -> Result<Metric, String> {
    s.parse()
        .map_err(|e: crate::scaling::PolicyError| e.to_string())
}

/// The policy from `--policy` and the flags, validated.
fn policy(args: &Args) -> anyhow::Result<Policy> {
    let mut policy = match &args.policy {
        Some(spec) => Policy::parse(spec)?,
        None => Policy::new(Metric::Queue, 0.0),
    };
    if let Some(metric) = args.metric {
        policy.metric = metric;
    }
    if let Some(target) = args.target {
        policy.target = target;
    }
    let keys: [(&str, Option<String>); 18] = [
        ("min", args.min.map(|v| v.to_string())),
        ("max", args.max.map(|v| v.to_string())),
        ("lookahead", args.lookahead.map(|v| v.to_string())),
        ("trend", args.trend.map(|v| v.to_string())),
        ("cooldown", args.cooldown.map(|v| v.to_string())),
        ("activation", args.activation.map(|v| v.to_string())),
        ("tolerance", args.tolerance.map(|v| v.to_string())),
        ("legacy", args.legacy.then(|| "true".to_owned())),
        ("upwindow", args.up_window.map(|v| v.to_string())),
        ("downwindow", args.down_window.map(|v| v.to_string())),
        ("upperiod", args.up_period.map(|v| v.to_string())),
        ("uppods", args.up_pods.map(|v| v.to_string())),
        ("uppercent", args.up_percent.map(|v| v.to_string())),
        ("upselect", args.up_select.clone()),
        ("downperiod", args.down_period.map(|v| v.to_string())),
        ("downpods", args.down_pods.map(|v| v.to_string())),
        ("downpercent", args.down_percent.map(|v| v.to_string())),
        ("downselect", args.down_select.clone()),
    ];
    for (key, value) in keys {
        if let Some(value) = value {
            policy.set(key, &value)?;
        }
    }
    policy.validate()?;
    Ok(policy)
}

fn load_state(path: &Path) -> anyhow::Result<ScalerState> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: not a state file written by infscale", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ScalerState::default()),
        Err(e) => Err(e).with_context(|| format!("{}: cannot read the state", path.display())),
    }
}

fn save_state(path: &Path, state: &ScalerState) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let json = serde_json::to_vec_pretty(state)?;
    std::fs::write(&tmp, json).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let policy = policy(&args)?;
    if !(args.held.is_finite() && args.held >= 0.0) {
        bail!("--held {}: expected a number of requests >= 0", args.held);
    }
    let now = args.now.unwrap_or_else(unix_now);
    if !now.is_finite() {
        bail!("--now {now}: expected a number of seconds");
    }
    let mut state = match &args.state {
        Some(path) => load_state(path)?,
        None => ScalerState::default(),
    };
    let counters = args.state.as_ref().map(|_| &mut state.counters);
    let reads = read_all(&args.sources, &args.read, counters, now).await?;
    let mut replicas: Vec<Replica> = Vec::new();
    let mut missing = 0;
    for read in &reads {
        match &read.replica {
            Ok(replica) => replicas.push(replica.clone()),
            Err(e) if crate::source::Reader::is_url(&read.source) => {
                eprintln!("{}: {e}: this replica does not vote", read.source);
                missing += 1;
            }
            Err(e) => bail!("{}: {e}", read.source),
        }
        for error in read.scan.iter().flat_map(|s| &s.errors) {
            eprintln!("{} (line skipped)", error.at(&read.source));
        }
    }
    let observation = Observation {
        now,
        current: args.current.unwrap_or(reads.len() as u32),
        status: args.status,
        replicas: &replicas,
        missing,
        held: args.held,
    };
    let decision = decide(&policy, &observation, &mut state);
    if let Some(path) = &args.state {
        save_state(path, &state)?;
    }
    if args.json {
        let json = serde_json::json!({
            "policy": format!("{}:{}", policy.metric, policy.target),
            "current": decision.current,
            "desired": decision.desired,
            "value": decision.value,
            "active": decision.active,
            "proposal": decision.proposal,
            "why": decision.why,
            "reasons": decision.lines,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    if !reads.is_empty() {
        print!("{}", table::render(&reads));
    }
    println!("{}", decision.headline(&policy));
    for line in &decision.lines {
        println!("  {line}");
    }
    Ok(ExitCode::SUCCESS)
}
