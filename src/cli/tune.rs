//! `infscale tune`: a search over policies on one trace, in parallel on all cores.

use super::simulate::{SimArgs, TraceSource, BOUND_CAP, ROLES};
use anyhow::bail;
use infscale_core::policy::scaled_object::{self, Placement};
use infscale_core::sim::bound::{clairvoyant, Bound};
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::report::{self, Summary};
use infscale_core::sim::seeds::{self, Day, Judged, Judgement};
use infscale_core::sim::trace::{replay, Trace};
use infscale_core::sim::tune::{self, Grid};
use rayon::prelude::*;
use std::process::ExitCode;

/// The traces chosen on and the held-out ones, each with what it is (seeds of a scenario, or
/// parts of a recorded trace).
struct Traces {
    chosen: Vec<Trace>,
    chosen_label: String,
    chosen_seeds: Option<Vec<u64>>,
    held_out: Vec<Trace>,
    held_out_label: String,
    held_out_seeds: Option<Vec<u64>>,
}

/// Seconds after the end of a part of a recorded trace, so that its last arrivals can be served.
const PART_TAIL_S: f64 = 30.0;

fn traces(args: &Args, source: &TraceSource) -> anyhow::Result<Traces> {
    if let TraceSource::Csv(whole) = source {
        return Ok(parts(args, whole));
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
    let chosen: Vec<u64> = (first..=last).collect();
    let held: Vec<u64> = (last + 1..=last + h).collect();
    Ok(Traces {
        chosen: super::seeds::traces(source, first..=last, "--replicates")?,
        chosen_label: span(&chosen),
        chosen_seeds: Some(chosen),
        held_out: super::seeds::traces(source, last + 1..=last + h, "--held-out")?,
        held_out_label: span(&held),
        held_out_seeds: Some(held),
    })
}

/// A recorded trace in `--parts` equal parts in time: chosen on the earlier half, held out on
/// the later (a policy tuned on yesterday runs on tomorrow); one part is chosen on and not held
/// out.
fn parts(args: &Args, whole: &Trace) -> Traces {
    let n = usize::try_from(args.parts.max(1)).unwrap_or(1);
    let span = whole.requests.last().map_or(whole.duration, |r| r.arrival);
    let len = span / n as f64;
    let all: Vec<Trace> = (0..n)
        .map(|i| {
            let from = i as f64 * len;
            let to = if i + 1 == n {
                f64::INFINITY
            } else {
                from + len
            };
            let mut part = replay::window(whole, from, to);
            part.duration = len + PART_TAIL_S;
            part.name = format!("{} part {} of {n}", whole.name, i + 1);
            part
        })
        .collect();
    let chosen_n = n.div_ceil(2);
    let label = |a: usize, b: usize| match (a, b) {
        (a, b) if a == b => format!("part {a} of {n}"),
        (a, b) => format!("parts {a}..{b} of {n}"),
    };
    let (chosen, held) = all.split_at(chosen_n.min(all.len()));
    Traces {
        chosen: chosen.to_vec(),
        chosen_label: label(1, chosen_n),
        chosen_seeds: None,
        held_out: held.to_vec(),
        held_out_label: label(chosen_n + 1, n),
        held_out_seeds: None,
    }
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
    /// see docs/operate.md).
    #[arg(long, default_value = "64,96,128,160,192")]
    pub targets: String,
    /// Lookaheads to try, seconds or auto (the learned cold start; 0: none).
    #[arg(long, value_name = "SECONDS,...", default_value = "0,45,60,90")]
    pub lookaheads: String,
    /// How each lookahead projects: trend, history (see `forecast` among the policy keys).
    #[arg(long, default_value = "trend,history")]
    pub forecasts: String,
    /// Scale-down stabilisation windows to try, seconds.
    #[arg(long, value_name = "SECONDS,...", default_value = "30,60,120,300")]
    pub down_windows: String,
    /// Scale-down policies to try: default (100% per 15 s), or keys like downpods=1.
    #[arg(long, default_value = "default,downpods=1")]
    pub down_policies: String,
    /// KEDA cooldowns to try, seconds; `none` keeps one replica (min 1).
    #[arg(long, value_name = "SECONDS,...", default_value = "none,60,120")]
    pub cooldowns: String,
    /// The floors `none` among the cooldowns keeps, replicas (1: no min key).
    #[arg(long, default_value = "1")]
    pub mins: String,
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
    /// Whether points hold replicas through the gaps the traffic came back from (hold=auto):
    /// off, on, or both (each point twice).
    #[arg(long, default_value = "off", value_parser = ["off", "on", "both"])]
    pub hold: String,
    /// Count each request a scale-down cuts as this many SLO misses when choosing (the frontier
    /// and --max-miss); 0 ignores cuts.
    #[arg(long, value_name = "WEIGHT", default_value_t = 0.0)]
    pub cut_weight: f64,
    /// How many points of the grid to run, spread evenly over it (0: all).
    #[arg(long, default_value_t = 0)]
    pub points: usize,
    /// Run every point on this many traces of the scenario (seeds 1..R, or from --seed) and
    /// judge it on all of them, so the choice does not fit one draw's luck.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=infscale_core::limits::MAX_DAYS))]
    pub replicates: u64,
    /// Then run the frontier (and the --max-miss choice) on this many further seeds, after the
    /// ones chosen on, and report those figures too (0: skip) [default: --replicates].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=infscale_core::limits::MAX_DAYS))]
    pub held_out: Option<u64>,
    /// A recorded --trace is cut into this many equal parts in time: the points are judged and
    /// chosen on the earlier half, and the frontier is reported on the later parts it never saw.
    /// Each part starts warm (see --start-replicas).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub parts: u64,
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
    /// The model's Service clients call (serve mode: the activator joins it only while the
    /// model is at zero, waking or idle) [default: --name].
    #[arg(long)]
    pub service: Option<String>,
    /// The activator's admin Service, for scale to zero (as manifests/activator runs it).
    #[arg(long, default_value = "infscale-activator-admin")]
    pub activator_service: String,
    /// The activator Service's namespace (manifests/activator runs one activator for every
    /// model namespace, beside serve).
    #[arg(long, default_value = "infscale")]
    pub activator_namespace: String,
    /// The activator Service's admin port.
    #[arg(long, default_value_t = 9092)]
    pub activator_port: u16,
    /// The activator's admin URL, instead of the Service and port (an activator named by
    /// `serve --allow-activator`).
    #[arg(long)]
    pub activator_url: Option<String>,
    /// Judge every point on the benchmark's families of days (as `simulate --suite`, each family
    /// on --replicates days) by its worst family, and hold out --held-out further days per
    /// family: the robust choice, not the fit to one generator.
    #[arg(long, conflicts_with = "trace")]
    pub suite: bool,
    /// A production trace to add to the suite as a family (as `simulate --suite-trace`).
    #[arg(
        long = "suite-trace",
        value_name = "FILE[@X][,max=N]",
        requires = "suite"
    )]
    pub suite_traces: Vec<String>,
    /// Only these families of the suite, comma-separated.
    #[arg(long, value_name = "LIST", requires = "suite")]
    pub families: Option<String>,
    /// With --suite: the most any single day of any family may miss for the --max-miss choice,
    /// percent.
    #[arg(long, value_name = "PERCENT", requires = "suite")]
    pub max_day_miss: Option<f64>,
    /// With --suite: per family, its best fixed fleet and the best point of the search's own
    /// bounded grid on that family alone, each the cheapest missing at most 0.5% on average and
    /// 2% on the worst day (the anchors `simulate --suite` reads with --anchors, from --json).
    /// The grid is the fixed fleets 1..--max and the recommendation's neighbourhood (88 points
    /// at --max 8; --points samples its 80 reactive points); the other grid flags do not apply.
    #[arg(long, requires = "suite")]
    pub per_family: bool,
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
    /// The grid of the flags, at most [`infscale_core::limits::MAX_GRID_POINTS`] points.
    pub fn grid(&self) -> anyhow::Result<Grid> {
        let grid = self.axes()?;
        let most = grid.most_points();
        if most > infscale_core::limits::MAX_GRID_POINTS as f64 {
            bail!(
                "the grid of --targets, --lookaheads, --forecasts, --down-windows, --down-policies, --cooldowns, --also, --deletion-cost and --hold has up to {most:.0} points, more than {}: give fewer values (--points samples a grid, it does not shrink one)",
                infscale_core::limits::MAX_GRID_POINTS
            );
        }
        Ok(grid)
    }

    fn axes(&self) -> anyhow::Result<Grid> {
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
            lookaheads: self
                .lookaheads
                .split(',')
                .map(|l| match l.trim() {
                    "auto" => Ok("auto".to_owned()),
                    v => v
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .map(|x| {
                            if x == 0.0 {
                                "0".to_owned()
                            } else {
                                v.to_owned()
                            }
                        })
                        .ok_or_else(|| {
                            anyhow::anyhow!("--lookaheads: {v:?} is not seconds or auto")
                        }),
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
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
            mins: list("--mins", &self.mins)?,
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
            holds: match self.hold.as_str() {
                "on" => vec![true],
                "both" => vec![false, true],
                _ => vec![false],
            },
            deletion_costs: match self.deletion_cost.as_str() {
                "on" => vec![true],
                "both" => vec![false, true],
                _ => vec![false],
            },
        })
    }
}

/// The numbers a run would otherwise only read at its end, checked before it starts.
pub(crate) fn check_numbers(args: &Args) -> anyhow::Result<()> {
    if !(args.cut_weight.is_finite() && (0.0..=1e6).contains(&args.cut_weight)) {
        bail!(
            "--cut-weight {}: expected a number from 0 to 1000000",
            infscale_core::limits::show(args.cut_weight)
        );
    }
    for (flag, v) in [
        ("--max-miss", args.max_miss),
        ("--max-day-miss", args.max_day_miss),
    ] {
        if let Some(v) = v.filter(|v| !(v.is_finite() && (0.0..=100.0).contains(v))) {
            bail!(
                "{flag} {}: expected a percent from 0 to 100",
                infscale_core::limits::show(v)
            );
        }
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_numbers(&args)?;
    let source = args.sim.source()?;
    let all = traces(&args, &source)?;
    let traces = &all.chosen;
    let Some(trace) = traces.first() else {
        bail!("no trace to tune on");
    };
    let settings = args.sim.settings(&source)?;
    let hw = Hardware::new(args.sim.gpu.model()?);
    let specs = tune::sample(args.grid()?.policies(), args.points);
    if specs.is_empty() {
        bail!("the grid is empty: give at least one value on every axis");
    }
    let policies = args.sim.policies(&specs)?;
    // Each chosen trace's bound once: its cost for the ratio, its first count for a warm start.
    let bounds: Vec<Bound> = traces
        .par_iter()
        .map(|t| clairvoyant(t, &hw, &settings, BOUND_CAP))
        .collect();
    let days: Vec<Day> = traces
        .iter()
        .zip(&bounds)
        .map(|(t, b)| Day {
            trace: t.clone(),
            hw: hw.clone(),
            settings: settings.resolved(b),
        })
        .collect();
    let bar = super::seeds::progress(specs.len() as u64, "points", args.json)?;
    let summaries: Vec<Summary> = tune::run_points(&specs, &policies, &days, &|| bar.inc(1));
    bar.finish_and_clear();
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
        let days = Day::all(all.held_out.clone(), &hw, &settings);
        let judged = seeds::judge(&checked, &checked_policies, &days, BOUND_CAP, &|| {
            bar.inc(1)
        });
        bar.finish_and_clear();
        Some(judged)
    };
    let mode = &args.sim.mode;
    let bound_minutes =
        bounds.iter().map(|b| b.replica_minutes).sum::<f64>() / bounds.len().max(1) as f64;
    if args.json {
        let json = serde_json::json!({
            "mode": mode,
            "seeds": all.chosen_seeds,
            "chosen_on": all.chosen_label,
            "points": summaries,
            "frontier": frontier,
            "clairvoyant_replica_minutes": bound_minutes,
            "held_out": held_out.as_ref().map(|h| serde_json::json!({
                "seeds": all.held_out_seeds,
                "parts": all.held_out_label,
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
                seeds.first().copied().unwrap_or(1),
                all.chosen_label
            ),
            None => format!("; chosen on {}", all.chosen_label),
        }
    );
    print!("{}", report::table(&frontier, Some(bound_minutes), ROLES));
    println!("clairvoyant bound: {bound_minutes:.1} replica-min");
    if args.all {
        println!("\nall points:");
        print!("{}", report::table(&summaries, Some(bound_minutes), ROLES));
    }
    if let Some(h) = &held_out {
        println!(
            "\nheld out: the frontier on {}, traffic the choice never saw:",
            all.held_out_label
        );
        print!("{}", seeds::table(&h.policies, ROLES));
        println!(
            "clairvoyant bound: {:.1} replica-min on average; x bound is the mean of each seed's ratio",
            h.bound_mean()
        );
    }
    if let (Some(max_miss), Some(best)) = (args.max_miss, chosen) {
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
                all.held_out_label,
                j.slo_miss_pct_mean(),
                j.slo_miss_pct_p95(),
                j.slo_miss_pct_max(),
                j.replica_minutes_mean(),
                j.bound_ratio()
            );
        }
        print!("{}", args.scaled_object(&best.policy, &settings, &hw)?);
    }
    Ok(ExitCode::SUCCESS)
}

impl Args {
    /// `spec` as the ScaledObject `--max-miss` prints, placed as the flags say.
    pub fn scaled_object(
        &self,
        spec: &str,
        settings: &infscale_core::sim::run::Settings,
        hw: &Hardware,
    ) -> anyhow::Result<String> {
        let policy = self.sim.policy(spec)?;
        let target = Placement {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            scaler_address: self.scaler_address.clone(),
            activator_url: (policy.min == 0).then(|| {
                self.activator_url.clone().unwrap_or_else(|| {
                    scaled_object::activator_url(
                        &self.activator_service,
                        &self.activator_namespace,
                        self.activator_port,
                    )
                })
            }),
            service: self.service.clone().unwrap_or_else(|| self.name.clone()),
            polling_interval_s: settings.polling_interval_s,
            cold_start_s: hw.gpu.cold_start_s(),
        };
        Ok(scaled_object::render(&policy, &target))
    }
}
