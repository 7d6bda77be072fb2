//! `infscale demo`: runs the whole loop on this machine and prints what happened.

use super::simulate::RECOMMENDED_TO_ZERO;
use crate::demo::{self, DemoConfig, DemoReport};
use crate::emulate::Dialect;
use crate::scaling::Policy;
use crate::sim::report::Summary;
use crate::sim::trace::Scenario;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Under a minute: the day at 30x instead of 12.5x.
    #[arg(long)]
    pub quick: bool,
    /// Simulated seconds per wall second [default: 12.5, or 30 with --quick].
    #[arg(long)]
    pub speed: Option<f64>,
    /// The policy, as for `simulate` [default: this project's recommendation with scale to zero].
    #[arg(long)]
    pub policy: Option<String>,
    /// The scenario's seed [default: the default day's].
    #[arg(long)]
    pub seed: Option<u64>,
    /// The metrics dialect the emulated replicas speak.
    #[arg(long, default_value = "vllm")]
    pub dialect: String,
    /// Where to write the SVG timeline.
    #[arg(long, default_value = "infscale-demo.svg")]
    pub svg: PathBuf,
    /// Print the summary as one JSON object (and no live view).
    #[arg(long)]
    pub json: bool,
}

fn row(s: &Summary) -> String {
    format!(
        "{:<70} {:>6} {:>6.1}% {:>8.2}s {:>8.2}s {:>11.1} {:>5}",
        s.policy,
        s.requests,
        s.slo_miss_pct,
        s.ttft_p50_s,
        s.ttft_p95_s,
        s.replica_minutes,
        s.peak_replicas
    )
}

fn print(r: &DemoReport, svg: &std::path::Path) {
    println!(
        "{:<70} {:>6} {:>7} {:>9} {:>9} {:>11} {:>5}",
        "run", "reqs", "miss %", "TTFT p50", "TTFT p95", "replica-min", "peak"
    );
    println!("{}", row(&r.demo));
    println!("{}", row(&r.simulated));
    println!(
        "lost {}{}; held at zero and then served {}; fewest ready replicas {}",
        r.lost,
        if r.lost_by.is_empty() {
            String::new()
        } else {
            format!(" {:?}", r.lost_by)
        },
        r.held_after_zero,
        r.min_replicas_seen
    );
    println!("timeline: {}", svg.display());
}

fn json(r: &DemoReport) -> serde_json::Value {
    serde_json::json!({
        "requests": r.demo.requests,
        "lost": r.lost,
        "lost_by": r.lost_by,
        "slo_miss_pct": r.demo.slo_miss_pct,
        "ttft_p50_s": r.demo.ttft_p50_s,
        "ttft_p95_s": r.demo.ttft_p95_s,
        "replica_minutes": r.demo.replica_minutes,
        "peak_replicas": r.demo.peak_replicas,
        "min_replicas_seen": r.min_replicas_seen,
        "held_after_zero": r.held_after_zero,
        "scale_events": r.demo.scale_events,
        "simulated": r.simulated,
    })
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let speed = args.speed.unwrap_or(if args.quick { 30.0 } else { 12.5 });
    if !(speed.is_finite() && (1.0..=30.0).contains(&speed)) {
        anyhow::bail!("--speed {speed}: expected 1 to 30 (the scaler's trend window is at least 1 s of wall time)");
    }
    let label = args
        .policy
        .unwrap_or_else(|| RECOMMENDED_TO_ZERO.to_owned());
    let policy = Policy::parse_with_max(&label, 8)?;
    let mut scenario = Scenario::default_day();
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    let dialect: Dialect = args.dialect.parse().map_err(anyhow::Error::msg)?;
    let cfg = DemoConfig {
        scenario,
        speed,
        policy,
        label,
        gpu: crate::sim::gpu::GpuModel::default(),
        dialect,
        slo_ttft_s: 2.0,
        svg: Some(args.svg.clone()),
    };
    if !args.json {
        println!(
            "demo: the default day ({} s) at {speed}x on 127.0.0.1: emulated vLLM replicas, the activator, serve, KEDA and its HPA over gRPC",
            cfg.scenario.duration
        );
    }
    let quiet = args.json;
    let report = demo::run(cfg, move |line| {
        if !quiet {
            println!("{line}");
        }
    })
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json(&report))?);
    } else {
        print(&report, &args.svg);
    }
    Ok(ExitCode::SUCCESS)
}
