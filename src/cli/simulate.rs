//! `infscale simulate`: policies over a trace through simulated GPU replicas, as a table.

use super::checks::positive_seconds;
use super::gpu::GpuArgs;
use crate::edge::files::read_text;
use anyhow::Context;
use infscale_core::limits;
use infscale_core::policy::Policy;
use infscale_core::sim::bound::clairvoyant;
use infscale_core::sim::cluster::Balancer;
use infscale_core::sim::plot::{self, Panel};
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::report::{self, Summary};
use infscale_core::sim::run::{self, Mode, Settings, Start, Trigger};
use infscale_core::sim::standby::Standby;
use infscale_core::sim::trace::formats::{self, Format, FORMAT_NAMES};
use infscale_core::sim::trace::{replay, Scenario, Trace};
use infscale_core::table::Names;
use std::path::PathBuf;
use std::process::ExitCode;

pub use infscale_core::sim::run::BOUND_CAP;

/// Five reference policies (CPU at two targets, queue, queue with a lookahead, queue with scale
/// to zero), then the ones this project recommends.
pub const DEFAULT_POLICIES: &[&str] = &[
    "cpu:60",
    "cpu:25",
    "queue:24",
    "queue:24,lookahead=90",
    "queue:24,min=0,cooldown=120",
    RECOMMENDED,
    RECOMMENDED_TO_ZERO,
];

/// This project's recommendation, chosen on the worst family of `simulate --suite` (the README's
/// "The benchmark"), not on one day: the queue target three quarters of the 256-slot batch; the
/// history forecast, whose floor orders replicas for the admitted rate a horizon ahead at the
/// rate per replica the replicas sustained; `work` beside it, so a replica saturated by prefill
/// reads as full; a 120 s scale-down window; and the learned reserve, which keeps standing the
/// level the last half hour's bursts reached while they keep coming, and what the same minutes
/// of earlier days needed, and is what makes the short window safe on bursty traffic. Judged
/// too on 24-hour weeks with everything learned carried (`simulate --weeks`).
pub const RECOMMENDED: &str =
    "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto";
/// The same with scale to zero behind the activator, after five idle minutes past the longest
/// lull the traffic came back from (`hold=idle`: none at first; never past 30 minutes, so a
/// night still ends at zero).
pub const RECOMMENDED_TO_ZERO: &str = "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto,min=0,cooldown=300,hold=idle";

/// The short names tables give this project's recommendations, the full strings listed below.
pub const ROLES: &[(&str, &str)] = &[
    ("recommended", RECOMMENDED_TO_ZERO),
    ("always on", RECOMMENDED),
];

/// Where the trace comes from and how the loop runs; shared by `simulate` and `tune`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// A YAML scenario (rates over time, length distributions, seed) or a log of arrivals: a CSV
    /// (time_s,prompt_tokens,output_tokens), Mooncake JSONL, BurstGPT or Azure LLM inference CSV
    /// [default: the built-in 25-minute day].
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// How --trace is written; auto tells by the extension and first line.
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = FORMAT_NAMES)]
    pub trace_format: String,
    /// Random seed for a generated trace [default: the scenario's].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Seconds to run a CSV trace [default: two minutes past its last arrival].
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// The control loop: keda (KEDA's poll and its HPA) or hpa (the standalone loop: the whole decision every 15 s).
    #[arg(long, default_value = "keda", value_parser = ["keda", "hpa"])]
    pub mode: String,
    /// KEDA trigger type: external-push activates on a held request at once.
    #[arg(long, default_value = "external-push", value_parser = ["external", "external-push"])]
    pub trigger: String,
    /// KEDA pollingInterval, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = infscale_core::control::cycle::POLLING_INTERVAL_S)]
    pub polling_interval: f64,
    /// How often the scaler scrapes the pods, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = infscale_core::control::cycle::SCRAPE_INTERVAL_S)]
    pub scrape_interval: f64,
    /// A first token later than this misses the SLO, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub slo_ttft: f64,
    /// How long the activator holds a request at zero before answering 504, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub hold_timeout: f64,
    /// Engine step, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = infscale_core::sim::settings::DEFAULT_STEP_S)]
    pub dt: f64,
    /// Most replicas for policies that do not set max.
    #[arg(long, default_value_t = 8)]
    pub max: u32,
    /// The chance (0 to 1) that each replica's scrape fails, to watch the fault rules work: a
    /// replica not read keeps the target active and counts as the HPA counts a missing pod.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    pub unreadable: f64,
    /// How long a replica removed by a scale-down keeps serving what it holds before what is
    /// left is cut, seconds: vLLM's --shutdown-timeout, within the pod's
    /// terminationGracePeriodSeconds. The default is what the example manifests ship; vLLM's own
    /// default, 0, aborts them at SIGTERM; "inf" drains every request.
    #[arg(long, value_name = "SECONDS", default_value_t = infscale_core::sim::run::DEFAULT_DRAIN_S)]
    pub drain: f64,
    /// The preStop pause of a replica removed by a scale-down, seconds: it leaves the balancer
    /// at once and is billed through the pause even when idle, and its drain starts after it.
    /// The example manifests pause 10 s; 0 (the default, every figure in docs/benchmark.md)
    /// lets an idle replica go at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub pre_stop: f64,
    /// Where the scaler's scrapes fall within --scrape-interval, seconds after the HPA's syncs
    /// (keda loop): 0 scrapes in the step the HPA syncs in. A cluster's offset is whatever it
    /// happens to be; a day's cost can move with it.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub scrape_offset: f64,
    /// Play a trace this many times faster (2: twice the rate in half the time); a generated
    /// scenario's rates are multiplied by it.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub rate_scale: f64,
    /// Replicas Ready at time 0: a number, `auto` (as many as the clairvoyant bound holds over
    /// its first cold start; the bound then pays no cold start for them either), or `min` (the
    /// policy's min, at least 1) [default: auto for a recorded trace, which starts mid-day; min
    /// for a generated scenario].
    #[arg(long, value_name = "N|auto|min")]
    pub start_replicas: Option<String>,
    /// Spread the replicas' cold starts around the GPU model's: each drawn log-normal with this
    /// sigma, the model's cold start its median (0: all equal).
    #[arg(long, value_name = "SIGMA", default_value_t = 0.0)]
    pub cold_start_spread: f64,
    /// How requests reach the ready replicas: least-request (a gateway that counts each
    /// replica's outstanding requests) or random (a plain Service: kube-proxy picks per
    /// connection).
    #[arg(long, default_value = "least-request", value_parser = ["least-request", "random"])]
    pub balancer: String,
    /// Keep up to this many replicas a scale-down gives back asleep in a standby pool (vLLM's
    /// sleep mode, llama.cpp's --sleep-idle-seconds, a snapshot to restore) instead of deleting
    /// them; a scale-up wakes them first and cold-starts the rest. The pool starts full; a
    /// sleeper is no capacity to the scaler (0: no pool).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub standby: u32,
    /// Seconds from waking a standby replica to its being Ready.
    #[arg(long, value_name = "SECONDS", default_value_t = infscale_core::sim::standby::DEFAULT_WAKE_S)]
    pub warm_start: f64,
    /// What a standby replica costs per second asleep, as a fraction of a full replica: 1 when
    /// the GPU stays held while it sleeps, less when its weights go to host memory on a shared
    /// node. Replica-minutes include it.
    #[arg(long, value_name = "FRACTION", default_value_t = 1.0)]
    pub standby_price: f64,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// Where a trace comes from: a scenario to generate, or arrivals read from a log (any of the
/// [`formats`]).
pub enum TraceSource {
    Scenario(Scenario),
    Csv(Trace),
}

impl TraceSource {
    /// The trace; a scenario is generated with its seed plus `offset`.
    pub fn trace(&self, offset: u64) -> anyhow::Result<Trace> {
        match self {
            TraceSource::Scenario(s) => {
                let mut s = s.clone();
                s.seed = s.seed.wrapping_add(offset);
                Ok(s.generate()?)
            }
            TraceSource::Csv(t) => Ok(t.clone()),
        }
    }
}

impl SimArgs {
    pub fn source(&self) -> anyhow::Result<TraceSource> {
        if let Some(d) = self.duration {
            limits::seconds(d, false, limits::MAX_SIM_SECONDS)
                .map_err(|e| anyhow::anyhow!("--duration {e} (31 days)"))?;
        }
        let Some(path) = &self.trace else {
            let mut s = Scenario::default_day();
            if let Some(seed) = self.seed {
                s.seed = seed;
            }
            return self.scaled(TraceSource::Scenario(s));
        };
        let name = path.display().to_string();
        let text = read_text(path, limits::MAX_TRACE_FILE_BYTES)?;
        let format = match self.trace_format.parse::<Format>()? {
            Format::Auto => formats::detect(&name, &text),
            named => named,
        };
        if format == Format::Scenario {
            let cap = limits::MAX_CONFIG_FILE_BYTES;
            if text.len() as u64 > cap {
                anyhow::bail!("{name}: a scenario larger than the {cap}-byte cap for this file");
            }
            let mut s: Scenario = serde_yaml::from_str(&text).with_context(|| name.clone())?;
            if let Some(seed) = self.seed {
                s.seed = seed;
            }
            if let Some(d) = self.duration {
                s.duration = d;
            }
            s.validate().with_context(|| name.clone())?;
            self.scaled(TraceSource::Scenario(s))
        } else {
            if let Some(seed) = self.seed {
                anyhow::bail!(
                    "--seed {seed}: {name} is a recorded trace, one fixed set of arrivals; a seed \
                     draws a generated scenario (the built-in day or a YAML --trace)"
                );
            }
            let read = formats::read(format, &name, &text, self.duration)?;
            for note in &read.notes {
                eprintln!("note: {note}");
            }
            self.scaled(TraceSource::Csv(read.trace))
        }
    }

    /// The source at `--rate-scale`.
    fn scaled(&self, source: TraceSource) -> anyhow::Result<TraceSource> {
        let x = self.rate_scale;
        let flag = || format!("--rate-scale {}", limits::show(x));
        limits::within(x, limits::RATE_SCALE)
            .map_err(|e| anyhow::anyhow!("--rate-scale {e} (2 plays twice as fast)"))?;
        Ok(match source {
            TraceSource::Scenario(mut s) => {
                s.rates.iter_mut().for_each(|p| p.1 *= x);
                s.validate().with_context(flag)?;
                TraceSource::Scenario(s)
            }
            TraceSource::Csv(t) => {
                let t = replay::rate_scaled(&t, x)?;
                if t.duration > limits::MAX_SIM_SECONDS {
                    anyhow::bail!(
                        "{}: the trace then runs {} s, past the longest run, {} s (31 days)",
                        flag(),
                        limits::show(t.duration),
                        limits::MAX_SIM_SECONDS
                    );
                }
                TraceSource::Csv(t)
            }
        })
    }

    /// The run's length of `source` in steps of `--dt`, within [`limits::MAX_SIM_STEPS`].
    fn check_steps(&self, source: &TraceSource) -> anyhow::Result<()> {
        limits::within(self.dt, limits::STEP_SECONDS)
            .map_err(|e| anyhow::anyhow!("--dt {e} seconds"))?;
        let duration = match source {
            TraceSource::Scenario(s) => s.duration,
            TraceSource::Csv(t) => t.duration,
        };
        let steps = duration / self.dt;
        if steps > limits::MAX_SIM_STEPS {
            anyhow::bail!(
                "--dt {}: {duration} s in steps of {} s is {} steps, more than {}",
                self.dt,
                self.dt,
                limits::show(steps.round()),
                limits::show(limits::MAX_SIM_STEPS)
            );
        }
        Ok(())
    }

    /// Who starts warm: `--start-replicas`, or by default a recorded trace from the bound.
    fn start(&self, source: &TraceSource) -> anyhow::Result<Start> {
        let recorded = matches!(source, TraceSource::Csv(_));
        Ok(match self.start_replicas.as_deref().map(str::trim) {
            None if recorded => Start::Bound,
            None | Some("min") => Start::Policy,
            Some("auto") => Start::Bound,
            Some(n) => match n.parse::<u32>() {
                Ok(n) if n <= 1000 => Start::Replicas(n),
                _ => anyhow::bail!(
                    "--start-replicas {n:?}: expected a number of replicas (0..1000), auto or min"
                ),
            },
        })
    }

    /// How the loop runs on traces from `source`.
    pub fn settings(&self, source: &TraceSource) -> anyhow::Result<Settings> {
        let positive = [
            ("--polling-interval", self.polling_interval),
            ("--scrape-interval", self.scrape_interval),
            ("--slo-ttft", self.slo_ttft),
            ("--hold-timeout", self.hold_timeout),
            ("--dt", self.dt),
        ];
        for (flag, v) in positive {
            positive_seconds(flag, v)?;
        }
        self.check_steps(source)?;
        if !(1..=limits::MAX_REPLICAS).contains(&self.max) {
            anyhow::bail!(
                "--max {}: expected 1 to {} replicas",
                self.max,
                limits::MAX_REPLICAS
            );
        }
        if self.drain.is_nan() || self.drain < 0.0 {
            anyhow::bail!("--drain {}: expected seconds >= 0, or inf", self.drain);
        }
        limits::seconds(self.pre_stop, true, limits::MAX_SECONDS)
            .map_err(|e| anyhow::anyhow!("--pre-stop {e}"))?;
        if !(self.scrape_offset.is_finite()
            && (0.0..self.scrape_interval).contains(&self.scrape_offset))
        {
            anyhow::bail!(
                "--scrape-offset {}: expected seconds from 0 to below --scrape-interval {}",
                limits::show(self.scrape_offset),
                limits::show(self.scrape_interval)
            );
        }
        if !(self.cold_start_spread.is_finite() && (0.0..=3.0).contains(&self.cold_start_spread)) {
            anyhow::bail!(
                "--cold-start-spread {}: expected a log-normal sigma from 0 to 3",
                self.cold_start_spread
            );
        }
        let start = self.start(source)?;
        let standby = self.standby()?;
        if !(0.0..=1.0).contains(&self.unreadable) {
            anyhow::bail!(
                "--unreadable {}: expected a fraction from 0 to 1",
                self.unreadable
            );
        }
        Ok(Settings {
            mode: if self.mode == "hpa" {
                Mode::Hpa
            } else {
                Mode::Keda
            },
            trigger: if self.trigger == "external" {
                Trigger::External
            } else {
                Trigger::ExternalPush
            },
            dt: self.dt,
            polling_interval_s: self.polling_interval,
            scrape_interval_s: self.scrape_interval,
            slo_ttft_s: self.slo_ttft,
            hold_timeout_s: self.hold_timeout,
            unreadable: self.unreadable,
            drain_s: self.drain,
            pre_stop_s: self.pre_stop,
            scrape_offset_s: self.scrape_offset,
            cold_start_spread: self.cold_start_spread,
            balancer: if self.balancer == "random" {
                Balancer::Random
            } else {
                Balancer::LeastRequest
            },
            start,
            standby,
            ..Settings::default()
        })
    }

    /// The standby pool of `--standby`, `--warm-start` and `--standby-price`.
    fn standby(&self) -> anyhow::Result<Standby> {
        if self.standby > limits::MAX_REPLICAS {
            anyhow::bail!(
                "--standby {}: expected 0 to {} replicas",
                self.standby,
                limits::MAX_REPLICAS
            );
        }
        limits::seconds(self.warm_start, true, limits::MAX_SECONDS)
            .map_err(|e| anyhow::anyhow!("--warm-start {e}"))?;
        if !(0.0..=1.0).contains(&self.standby_price) {
            anyhow::bail!(
                "--standby-price {}: expected a fraction of a full replica from 0 to 1",
                self.standby_price
            );
        }
        Ok(Standby {
            size: self.standby,
            wake_s: self.warm_start,
            price: self.standby_price,
        })
    }

    /// A policy string, with `--max` where it sets none.
    pub fn policy(&self, spec: &str) -> anyhow::Result<Policy> {
        parse_policy(spec, self.max)
    }

    /// Every policy string, parsed as [`SimArgs::policy`] does.
    pub fn policies(&self, specs: &[String]) -> anyhow::Result<Vec<Policy>> {
        self.policies_with_max(specs, self.max)
    }

    /// Every policy string, with `max` where it sets none (a suite family's own).
    pub fn policies_with_max(&self, specs: &[String], max: u32) -> anyhow::Result<Vec<Policy>> {
        specs.iter().map(|s| parse_policy(s, max)).collect()
    }
}

/// A policy string, with `max` where it sets none.
fn parse_policy(spec: &str, max: u32) -> anyhow::Result<Policy> {
    Policy::parse_with_max(spec, max).with_context(|| format!("policy {spec:?}"))
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policies, e.g. queue:24 or queue:24,lookahead=90,min=0 [default: the five reference policies and
    /// this project's recommendations].
    #[arg(value_name = "POLICY")]
    pub policies: Vec<String>,
    /// Print each decision with its reasons.
    #[arg(long)]
    pub timeline: bool,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the generated or read trace as CSV.
    #[arg(long, value_name = "FILE")]
    pub write_trace: Option<PathBuf>,
    /// Draw replicas, demand and TTFT over time, one row per policy, as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Run every policy on the scenario generated with seeds 1..N and print per policy the
    /// mean, 95th percentile and worst per-seed miss %, the mean replica-minutes and the mean
    /// ratio to each seed's clairvoyant bound (not for a CSV trace).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=limits::MAX_DAYS),
        conflicts_with_all = ["seed", "timeline", "write_trace", "plot"])]
    pub seeds: Option<u64>,
    /// Judge every policy on the benchmark's families of days (the built-in day, perturbed
    /// engines, burstier arrivals, other length mixes, and each --suite-trace), each family on
    /// its own days (--seeds, default 40), and print a table per family beside its anchors (its
    /// best fixed fleet and the best point of a bounded search, each the cheapest missing at
    /// most 0.5% on average and 2% on the worst day) and each policy's worst family.
    #[arg(long, conflicts_with_all = ["seed", "timeline", "write_trace", "plot", "trace"])]
    pub suite: bool,
    /// A production trace (any --trace-format but a scenario) to add to the suite as a family
    /// of days in the seed's story; FILE@X plays it at X times its rate, and ,max=N judges it
    /// with at most N replicas where a policy sets no max (its fleets and search go up to N;
    /// --max otherwise). Repeatable.
    #[arg(
        long = "suite-trace",
        value_name = "FILE[@X][,max=N]",
        requires = "suite"
    )]
    pub suite_traces: Vec<String>,
    /// Only these families of the suite, comma-separated (e.g. default,on-off,trace:conv).
    #[arg(long, value_name = "LIST", requires = "suite")]
    pub families: Option<String>,
    /// Read each family's anchors from this JSON (`tune --suite --per-family --json`, or an
    /// earlier `simulate --suite --json`) instead of searching; it must be of the same days.
    #[arg(long, value_name = "FILE", requires = "suite")]
    pub anchors: Option<PathBuf>,
    /// Without --anchors: how many points of the search's grid to run beside the fixed fleets,
    /// spread evenly over it (0: all 80; none: no search and no anchors).
    #[arg(long, value_name = "N|none", default_value = "0")]
    pub search_points: String,
    /// Judge every policy on 24-hour days played as weeks: days with a diurnal shape, night
    /// troughs, weekdays and weekends and bursts on top, built from published production shapes
    /// (--week-sources), each run of --days days played without a break so that what a policy
    /// learns is carried from day to day, one run per seed (--seeds, default 2); a table per
    /// family with each policy's pooled and worst day beside the days' bounds and fixed fleets.
    #[arg(long, conflicts_with_all = ["suite", "seed", "timeline", "write_trace", "plot", "trace"])]
    pub weeks: bool,
    /// The week families' published shapes, comma-separated: azure-code, azure-conv, burstgpt
    /// [default: all three].
    #[arg(long, value_name = "LIST", requires = "weeks")]
    pub week_sources: Option<String>,
    /// A recorded trace (any --trace-format but a scenario) whose arrivals and lengths play a
    /// source's weeks, as SOURCE=FILE (a family `week:SOURCE+STEM`): copies of it superposed and
    /// thinned to the week's rate, so its bursts keep their shape. Repeatable.
    #[arg(long = "week-trace", value_name = "SOURCE=FILE", requires = "weeks")]
    pub week_traces: Vec<String>,
    /// Days of each --weeks run, played without a break [default: 14].
    #[arg(long, value_name = "N", requires = "weeks",
        value_parser = clap::value_parser!(u64).range(1..=28))]
    pub days: Option<u64>,
    /// The first seed of the --weeks runs (the runs are seeds FIRST.. with --seeds of them).
    #[arg(long, value_name = "N", requires = "weeks")]
    pub first_seed: Option<u64>,
    /// With --weeks: play each day alone as well, from nothing learned, warm started from its
    /// bound.
    #[arg(long, requires = "weeks")]
    pub alone: bool,
    /// With --weeks: write each day of each run as a CSV trace into this directory
    /// (`FAMILY-seed-S-day-D.csv`, times from the day's midnight), and judge nothing: the days to
    /// replay in another simulator, or one by one with --trace.
    #[arg(long, value_name = "DIR", requires = "weeks")]
    pub write_days: Option<PathBuf>,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// The policies to run: the flags' or the default ones.
pub fn specs(args: &Args) -> Vec<String> {
    if args.policies.is_empty() {
        DEFAULT_POLICIES.iter().map(|s| s.to_string()).collect()
    } else {
        args.policies.clone()
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let source = args.sim.source()?;
    let trace = source.trace(0)?;
    let mut settings = args.sim.settings(&source)?;
    settings.record_timeline = args.timeline;
    if args.plot.is_some() {
        settings.series_every_s = 5.0;
    }
    let hw = Hardware::new(args.sim.gpu.model()?);
    if let Some(path) = &args.write_trace {
        std::fs::write(path, trace.to_csv())
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    let specs = specs(&args);
    let policies = args.sim.policies(&specs)?;
    let bound = clairvoyant(&trace, &hw, &settings, BOUND_CAP);
    let settings = settings.resolved(&bound);
    let runs: Vec<run::Run> = policies
        .iter()
        .map(|p| run::run(&trace, &hw, p, &settings))
        .collect();
    let summaries: Vec<Summary> = specs
        .iter()
        .zip(&runs)
        .map(|(spec, r)| report::summarize(spec, r, settings.slo_ttft_s))
        .collect();
    if let Some(path) = &args.plot {
        let names = Names::of(specs.iter().map(String::as_str), ROLES);
        let panels: Vec<Panel<'_>> = specs
            .iter()
            .zip(&names.shown)
            .zip(&runs)
            .map(|((policy, title), run)| Panel { title, policy, run })
            .collect();
        let svg = plot::render(&trace, &panels, settings.slo_ttft_s).map_err(anyhow::Error::msg)?;
        std::fs::write(path, svg).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    if args.json {
        let json = serde_json::json!({
            "trace": trace.name,
            "requests": trace.requests.len(),
            "mode": args.sim.mode,
            "slo_ttft_s": settings.slo_ttft_s,
            "clairvoyant_replica_minutes": bound.replica_minutes,
            "policies": summaries,
            "timelines": if args.timeline {
                serde_json::to_value(runs.iter().map(|r| &r.timeline).collect::<Vec<_>>())?
            } else {
                serde_json::Value::Null
            },
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.timeline {
        for (spec, r) in specs.iter().zip(&runs) {
            println!("== {spec}");
            for e in &r.timeline {
                println!("{:7.2}s {:6} {} -> {} ({})", e.t, e.by, e.from, e.to, e.why);
                for line in &e.lines {
                    println!("           {line}");
                }
            }
        }
    }
    println!(
        "trace {}: {} requests over {:.0} s; {} loop, SLO TTFT {} s",
        trace.name,
        trace.requests.len(),
        trace.duration,
        args.sim.mode,
        settings.slo_ttft_s
    );
    print!(
        "{}",
        report::table(&summaries, Some(bound.replica_minutes), ROLES)
    );
    println!(
        "clairvoyant bound: {:.1} replica-min (a plan that knows the trace, peak {} replicas)",
        bound.replica_minutes,
        bound.plan.iter().max().unwrap_or(&0)
    );
    Ok(ExitCode::SUCCESS)
}
