//! `infscale tune`: a search over policies on one trace, in parallel on all cores.

use super::simulate::SimArgs;
use crate::scaling::scaled_object::{self, Placement};
use crate::sim::replica::Hardware;
use crate::sim::report::{self, Summary};
use crate::sim::seeds::{self, Judged, Judgement};
use crate::sim::trace::Trace;
use crate::sim::tune::{self, Grid};
use anyhow::bail;
use std::ops::RangeInclusive;
use std::process::ExitCode;

/// The traces chosen on and the held-out ones, with their seeds (none for a CSV trace, which is
/// one trace and has nothing to hold out).
struct Traces {
    chosen: Vec<Trace>,
    chosen_seeds: Option<RangeInclusive<u64>>,
    held_out: Vec<Trace>,
    held_out_seeds: Vec<u64>,
}

fn traces(args: &Args) -> anyhow::Result<Traces> {
    let source = args.sim.source()?;
    if let super::simulate::TraceSource::Csv(_) = source {
        return Ok(Traces {
            chosen: vec![source.trace(0)?],
            chosen_seeds: None,
            held_out: Vec::new(),
            held_out_seeds: Vec::new(),
        });
    }
    let first = args.sim.seed.unwrap_or(1);
    let r = args.replicates.max(1);
    let h = args.held_out.unwrap_or(r);
    let Some(last) = first
        .checked_add(r - 1)
        .filter(|l| l.checked_add(h).is_some())
    else {
        bail!("--seed {first} with --replicates {r} and --held-out {h}: seeds past 2^64");
    };
    let chosen_seeds = first..=last;
    Ok(Traces {
        chosen: super::seeds::traces(&source, chosen_seeds.clone(), "--replicates")?,
        chosen_seeds: Some(chosen_seeds),
        held_out: super::seeds::traces(&source, last + 1..=last + h, "--held-out")?,
        held_out_seeds: (last + 1..=last + h).collect(),
    })
}

/// "seed a" or "seeds a..b" for consecutive seeds.
fn span(seeds: &[u64]) -> String {
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if a != b => format!("seeds {a}..{b}"),
        (Some(a), _) => format!("seed {a}"),
        _ => "no seeds".to_owned(),
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
    /// Per-replica targets to try (the default spans a quarter to three quarters of the 256-slot
    /// batch: nearer the limit, a batch filling faster than it drains reads as within the target;
    /// see the README).
    #[arg(long, default_value = "64,96,128,160,192")]
    pub targets: String,
    /// Lookaheads to try, seconds (0: none).
    #[arg(long, default_value = "0,45,60,90")]
    pub lookaheads: String,
    /// How each lookahead projects: trend, history (see `forecast` among the policy keys).
    #[arg(long, default_value = "trend,history")]
    pub forecasts: String,
    /// Scale-down stabilisation windows to try, seconds.
    #[arg(long, default_value = "30,60,120,300")]
    pub down_windows: String,
    /// Scale-down policies to try: default (100% per 15 s), or keys like downpods=1.
    #[arg(long, default_value = "default,downpods=1")]
    pub down_policies: String,
    /// KEDA cooldowns to try, seconds; `none` keeps one replica (min 1).
    #[arg(long, default_value = "none,60,120")]
    pub cooldowns: String,
    /// Policy keys added to every point, e.g. trend=60,upwindow=30,tolerance=0.05 (the same keys
    /// as a policy string; they come after the grid's own, so they override them).
    #[arg(long, value_name = "KEYS", default_value = "")]
    pub with: String,
    /// A further metric per point, metric:target (e.g. none,kv:0.8): the point scales on both,
    /// the HPA taking the larger count; `none` is the metric alone.
    #[arg(long, default_value = "none")]
    pub also: String,
    /// Whether points keep the pods' deletion cost: off, on, or both (each point twice).
    #[arg(long, default_value = "off", value_parser = ["off", "on", "both"])]
    pub deletion_cost: String,
    /// Count each request a scale-down cuts as this many SLO misses when choosing (the frontier
    /// and --max-miss); 0 ignores cuts.
    #[arg(long, value_name = "WEIGHT", default_value_t = 0.0)]
    pub cut_weight: f64,
    /// How many points of the grid to run, spread evenly over it (0: all).
    #[arg(long, default_value_t = 0)]
    pub points: usize,
    /// Run every point on this many traces of the scenario (seeds 1..R, or from --seed) and
    /// judge it on all of them, so the choice does not fit one draw's luck.
    #[arg(long, default_value_t = 5)]
    pub replicates: u64,
    /// Then run the frontier (and the --max-miss choice) on this many further seeds, after the
    /// ones chosen on, and report those figures too (0: skip) [default: --replicates].
    #[arg(long, value_name = "N")]
    pub held_out: Option<u64>,
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
            forecasts: self
                .forecasts
                .split(',')
                .map(|f| match f.trim() {
                    "trend" | "history" => Ok(f.trim().to_owned()),
                    v => Err(anyhow::anyhow!(
                        "--forecasts: {v:?} is not trend or history"
                    )),
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
            down_windows: list("--down-windows", &self.down_windows)?,
            down_policies,
            cooldowns,
            max: self.sim.max,
            with: self.with.trim().trim_matches(',').to_owned(),
            also: self
                .also
                .split(',')
                .map(|a| match a.trim() {
                    "none" | "" => Ok(String::new()),
                    a if a.contains(':') => Ok(a.to_owned()),
                    a => Err(anyhow::anyhow!(
                        "--also: {a:?} is not none or metric:target (e.g. kv:0.8)"
                    )),
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
            deletion_costs: match self.deletion_cost.as_str() {
                "on" => vec![true],
                "both" => vec![false, true],
                _ => vec![false],
            },
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let all = traces(&args)?;
    let traces = &all.chosen;
    let Some(trace) = traces.first() else {
        bail!("no trace to tune on");
    };
    let settings = args.sim.settings()?;
    let hw = Hardware::new(args.sim.gpu.model()?);
    let specs = tune::sample(args.grid()?.policies(), args.points);
    if specs.is_empty() {
        bail!("the grid is empty: give at least one value on every axis");
    }
    let policies = args.sim.policies(&specs)?;
    let bar = super::seeds::progress(specs.len() as u64, "points", args.json)?;
    let summaries: Vec<Summary> =
        tune::run_points(&specs, &policies, traces, &hw, &settings, &|| bar.inc(1));
    bar.finish_and_clear();
    if !(args.cut_weight.is_finite() && args.cut_weight >= 0.0) {
        bail!("--cut-weight {}: expected a number >= 0", args.cut_weight);
    }
    let frontier = tune::pareto(&summaries, args.cut_weight);
    let chosen = match args.max_miss {
        Some(max_miss) => match tune::cheapest_under(&summaries, max_miss, args.cut_weight) {
            Some(best) => Some(best),
            None => bail!(
                "no point has at most {max_miss}% misses: widen the grid (higher max, lookahead)"
            ),
        },
        None => None,
    };
    // The frontier and the choice, on seeds the choice never saw.
    let mut checked: Vec<String> = frontier.iter().map(|s| s.policy.clone()).collect();
    if let Some(best) = chosen.filter(|b| !checked.contains(&b.policy)) {
        checked.push(best.policy.clone());
    }
    let held_out: Option<Judgement> = if all.held_out.is_empty() {
        None
    } else {
        let checked_policies = args.sim.policies(&checked)?;
        let jobs = all.held_out.len() * (checked.len() + 1);
        let bar = super::seeds::progress(jobs as u64, "held-out runs and bounds", args.json)?;
        let judged = seeds::judge(
            &checked,
            &checked_policies,
            &all.held_out,
            &hw,
            &settings,
            super::simulate::BOUND_CAP,
            &|| bar.inc(1),
        );
        bar.finish_and_clear();
        Some(judged)
    };
    let mode = &args.sim.mode;
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
            "mode": mode,
            "seeds": all.chosen_seeds.as_ref().map(|s| s.clone().collect::<Vec<_>>()),
            "points": summaries,
            "frontier": frontier,
            "clairvoyant_replica_minutes": bound_minutes,
            "held_out": held_out.as_ref().map(|h| serde_json::json!({
                "seeds": all.held_out_seeds,
                "clairvoyant_replica_minutes": h.bound_mean(),
                "points": h.policies.iter().map(Judged::to_json).collect::<Vec<_>>(),
            })),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} points on trace {} ({} requests{}), {mode} loop; Pareto frontier, cheapest first:",
        summaries.len(),
        trace.name,
        trace.requests.len(),
        match &all.chosen_seeds {
            Some(seeds) => format!(
                " with seed {}; chosen on {}",
                seeds.start(),
                span(&seeds.clone().collect::<Vec<_>>())
            ),
            None => String::new(),
        }
    );
    print!("{}", report::table(&frontier, Some(bound_minutes)));
    println!("clairvoyant bound: {bound_minutes:.1} replica-min");
    if args.all {
        println!("\nall points:");
        print!("{}", report::table(&summaries, Some(bound_minutes)));
    }
    if let Some(h) = &held_out {
        println!(
            "\nheld out: the frontier on {}, traces the choice never saw:",
            span(&all.held_out_seeds)
        );
        print!("{}", seeds::table(&h.policies));
        println!(
            "clairvoyant bound: {:.1} replica-min on average; x bound is the mean of each seed's ratio",
            h.bound_mean()
        );
    }
    if let (Some(max_miss), Some(best)) = (args.max_miss, chosen) {
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
        let checked = held_out
            .as_ref()
            .and_then(|h| h.policies.iter().find(|j| j.policy == best.policy));
        if let Some(j) = checked {
            println!(
                "# held out ({}): {:.2}% misses on average (p95 {:.2}%, worst {:.2}%), {:.1} replica-min, {:.2}x bound",
                span(&all.held_out_seeds),
                j.slo_miss_pct_mean(),
                j.slo_miss_pct_p95(),
                j.slo_miss_pct_max(),
                j.replica_minutes_mean(),
                j.bound_ratio()
            );
        }
        print!("{}", scaled_object::render(&policy, &target));
    }
    Ok(ExitCode::SUCCESS)
}
