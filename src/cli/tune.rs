//! `infscale tune`: a search over policies on one trace, in parallel on all cores.

use super::simulate::SimArgs;
use crate::scaling::scaled_object::{self, Placement};
use crate::sim::replica::Hardware;
use crate::sim::report::{self, Summary};
use crate::sim::tune::{self, Grid};
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use std::process::ExitCode;

fn trace_seed(source: &super::simulate::TraceSource) -> u64 {
    match source {
        super::simulate::TraceSource::Scenario(s) => s.seed,
        super::simulate::TraceSource::Csv(_) => 0,
    }
}

fn list<T: std::str::FromStr>(flag: &str, text: &str) -> anyhow::Result<Vec<T>> {
    text.split(',')
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("{flag} {text:?}: {v:?} is not a number"))
        })
        .collect()
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The metric every point scales on.
    #[arg(long, default_value = "queue")]
    pub metric: String,
    /// Per-replica targets to try.
    #[arg(long, default_value = "16,24,32,40,48,56,64")]
    pub targets: String,
    /// Lookaheads to try, seconds (0: none).
    #[arg(long, default_value = "0,60,90,120,180")]
    pub lookaheads: String,
    /// Scale-down stabilisation windows to try, seconds.
    #[arg(long, default_value = "60,120,180,300")]
    pub down_windows: String,
    /// Scale-down policies to try: default (100% per 15 s), or keys like downpods=1.
    #[arg(long, default_value = "default,downpods=1,downpercent=50")]
    pub down_policies: String,
    /// KEDA cooldowns to try, seconds; `none` keeps one replica (min 1).
    #[arg(long, default_value = "none,60,120,300")]
    pub cooldowns: String,
    /// Policy keys added to every point, e.g. trend=60,upwindow=30,tolerance=0.05 (the same keys
    /// as a policy string; they come after the grid's own, so they override them).
    #[arg(long, value_name = "KEYS", default_value = "")]
    pub with: String,
    /// How many points of the grid to run, spread evenly over it (0: all).
    #[arg(long, default_value_t = 500)]
    pub points: usize,
    /// Run every point on this many traces of the scenario (seeds seed, seed+1, ...) and judge it
    /// on all of them, so the choice does not fit one draw's luck.
    #[arg(long, default_value_t = 1)]
    pub replicates: u64,
    /// Print the cheapest point with at most this miss % as a KEDA ScaledObject.
    #[arg(long, value_name = "PERCENT")]
    pub max_miss: Option<f64>,
    /// The Deployment (and ScaledObject) name in the YAML.
    #[arg(long, default_value = "model")]
    pub name: String,
    /// Its namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Where KEDA reaches infscale serve.
    #[arg(long, default_value = "infscale.infscale.svc:9090")]
    pub scaler_address: String,
    /// The activator's Service, in the model's namespace (as manifests/activator runs it), for
    /// scale to zero.
    #[arg(long, default_value = "infscale-activator")]
    pub activator_service: String,
    /// The activator Service's admin port.
    #[arg(long, default_value_t = 9092)]
    pub activator_port: u16,
    /// The activator's admin URL, instead of the Service and port (an activator named by
    /// `serve --allow-activator`).
    #[arg(long)]
    pub activator_url: Option<String>,
    /// Print every point, not only the frontier.
    #[arg(long)]
    pub all: bool,
    /// Print JSON (every point and the frontier).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub sim: SimArgs,
}

impl Args {
    fn grid(&self) -> anyhow::Result<Grid> {
        let cooldowns = self
            .cooldowns
            .split(',')
            .map(|c| match c.trim() {
                "none" => Ok(None),
                v => v
                    .parse()
                    .map(Some)
                    .map_err(|_| anyhow::anyhow!("--cooldowns: {v:?} is not a number or none")),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let down_policies = self
            .down_policies
            .split(',')
            .map(|p| {
                if p.trim() == "default" {
                    String::new()
                } else {
                    p.trim().to_owned()
                }
            })
            .collect();
        Ok(Grid {
            metric: self.metric.clone(),
            targets: list("--targets", &self.targets)?,
            lookaheads: list("--lookaheads", &self.lookaheads)?,
            down_windows: list("--down-windows", &self.down_windows)?,
            down_policies,
            cooldowns,
            max: self.sim.max,
            with: self.with.trim().trim_matches(',').to_owned(),
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let source = args.sim.source()?;
    let replicates = match source {
        super::simulate::TraceSource::Scenario(_) => args.replicates.max(1),
        super::simulate::TraceSource::Csv(_) => 1,
    };
    let traces = (0..replicates)
        .map(|i| source.trace(i))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let trace = &traces[0];
    let settings = args.sim.settings()?;
    let hw = Hardware::new(args.sim.gpu.model()?);
    let specs = tune::sample(args.grid()?.policies(), args.points);
    if specs.is_empty() {
        bail!("the grid is empty: give at least one value on every axis");
    }
    let policies = args.sim.policies(&specs)?;
    let bar = ProgressBar::new(specs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} points, {elapsed} ({eta} left)")
            .context("progress bar")?,
    );
    let summaries: Vec<Summary> =
        tune::run_points(&specs, &policies, &traces, &hw, &settings, &|| bar.inc(1));
    bar.finish_and_clear();
    let frontier = tune::pareto(&summaries);
    let bound_minutes = traces
        .iter()
        .map(|t| {
            crate::sim::bound::clairvoyant(
                t,
                &hw,
                settings.slo_ttft_s,
                settings.dt,
                super::simulate::BOUND_CAP,
            )
        })
        .map(|b| b.replica_minutes)
        .sum::<f64>()
        / traces.len() as f64;
    if args.json {
        let json = serde_json::json!({
            "points": summaries,
            "frontier": frontier,
            "clairvoyant_replica_minutes": bound_minutes,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} points on trace {} ({} requests{}); Pareto frontier, cheapest first:",
        summaries.len(),
        trace.name,
        trace.requests.len(),
        if traces.len() > 1 {
            format!(", {} seeds from {}", traces.len(), trace_seed(&source))
        } else {
            String::new()
        }
    );
    print!("{}", report::table(&frontier, Some(bound_minutes)));
    println!("clairvoyant bound: {bound_minutes:.1} replica-min");
    if args.all {
        println!("\nall points:");
        print!("{}", report::table(&summaries, Some(bound_minutes)));
    }
    if let Some(max_miss) = args.max_miss {
        let Some(best) = tune::cheapest_under(&summaries, max_miss) else {
            bail!(
                "no point has at most {max_miss}% misses: widen the grid (higher max, lookahead)"
            );
        };
        let policy = args.sim.policy(&best.policy)?;
        let target = Placement {
            name: args.name.clone(),
            namespace: args.namespace.clone(),
            scaler_address: args.scaler_address.clone(),
            activator_url: (policy.min == 0).then(|| {
                args.activator_url.clone().unwrap_or_else(|| {
                    scaled_object::activator_url(
                        &args.activator_service,
                        &args.namespace,
                        args.activator_port,
                    )
                })
            }),
            polling_interval_s: settings.polling_interval_s,
            cold_start_s: hw.gpu.cold_start_s(),
        };
        println!(
            "\n# cheapest with at most {max_miss}% misses: {} ({:.2}% misses, {:.1} replica-min)",
            best.policy, best.slo_miss_pct, best.replica_minutes
        );
        print!("{}", scaled_object::render(&policy, &target));
    }
    Ok(ExitCode::SUCCESS)
}
