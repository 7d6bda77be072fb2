//! `infscale demo`: runs the whole loop on this machine and prints what happened, or that it
//! could not keep time there (exit 3) rather than misses the policy did not cause; a request lost
//! while the clock kept time is a failure (exit 1).

use super::simulate::{RECOMMENDED_TO_ZERO, ROLES};
use crate::demo::lag::ClockLag;
use crate::demo::{self, DemoConfig, DemoReport, SimulatedPhases};
use crate::emulate::Dialect;
use infscale_core::limits::DEMO_MAX_REPLICAS;
use infscale_core::policy::Policy;
use infscale_core::sim::report::Summary;
use infscale_core::sim::trace::Scenario;
use infscale_core::table::Align::*;
use infscale_core::table::{Names, Table};
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
    /// Runs in all: when the clock cannot keep time (a busy machine), the demo runs again at
    /// half the speed, down to 1x, up to this many runs (1: never again).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub attempts: u32,
    /// Run only the first SECONDS of the day [default: all of it].
    #[arg(long, value_name = "SECONDS")]
    pub until: Option<f64>,
    /// For tests: the Service answers every Nth request 500, a loss the demo must report.
    #[arg(long, hide = true, value_name = "N")]
    pub fail_every: Option<usize>,
    /// Proxy mode: clients call the activator, which forwards every request through the
    /// Service [default: serve mode, clients call the Service and the activator joins it only
    /// while the model is at zero, waking, or idle].
    #[arg(long)]
    pub proxy_mode: bool,
}

/// Exit status when requests were lost while the clock kept time: a real failure of the loop.
pub const EXIT_LOST: u8 = 1;
/// Exit status when the run could not keep time on this machine: its misses are not a result.
pub const EXIT_NO_TIME: u8 = 3;

/// What the live view's columns are, printed above its first row.
fn legend(target: f64) -> String {
    let t = infscale_core::reasons::fmt(target);
    [
        "live view, a line every 15 s of the day: the time; arrivals per second over the last 15 s;".to_owned(),
        "  replicas ready and starting; requests running and waiting on the replicas; held: requests the activator holds;".to_owned(),
        format!("  value: the metric serve last returned to the HPA, which asks for value / {t} replicas: the requests projected"),
        format!("  over the cold start and raised to the policy's floors (the forecast's floor is replicas x {t}, not a count);"),
        "  | who from -> to (why): a decision by the HPA (hpa), KEDA's poll (keda) or StreamIsActive at zero (push)".to_owned(),
    ]
    .map(|l| l + "\n")
    .concat()
}

/// The policy's name in the summary: its role when it is one of this project's, else "your
/// policy"; the full string is printed below the table.
fn policy_name(label: &str) -> &'static str {
    ROLES
        .iter()
        .find(|(_, full)| *full == label)
        .map_or("your policy", |(role, _)| role)
}

/// The summary: the demo's row above the simulator's for the same day, seed and policy.
fn summary(demo: &Summary, simulated: &Summary, label: &str) -> String {
    let mut t = Table::new([
        ("run", Left),
        ("policy", Left),
        ("reqs", Right),
        ("miss %", Right),
        ("TTFT p50", Right),
        ("TTFT p95", Right),
        ("replica-min", Right),
        ("peak", Right),
    ]);
    let name = policy_name(label);
    for (run, s) in [("demo", demo), ("simulated", simulated)] {
        t.row([
            run.to_owned(),
            name.to_owned(),
            s.requests.to_string(),
            format!("{:.1}%", s.slo_miss_pct),
            format!("{:.2}s", s.ttft_p50_s),
            format!("{:.2}s", s.ttft_p95_s),
            format!("{:.1}", s.replica_minutes),
            s.peak_replicas.to_string(),
        ]);
    }
    t.render() + &Names::always([label], &[name.to_owned()]).key()
}

/// What the simulator's row is: one run of those at every offset of the scrapes.
fn phases_line(p: &SimulatedPhases) -> String {
    let (fewest, most) = (
        format!("{:.1}%", p.miss_low_pct),
        format!("{:.1}%", p.miss_high_pct),
    );
    let misses = if fewest == most {
        fewest
    } else {
        format!("{fewest} to {most}")
    };
    format!(
        "simulated: the middle of {} runs, one per offset of serve's scrapes against the HPA's syncs (this one {} s): {:.1} to {:.1} replica-min, {misses} misses; both bill a removed pod through its {} s preStop pause",
        p.runs,
        infscale_core::limits::show(p.median_offset_s),
        p.low,
        p.high,
        infscale_core::limits::show(crate::demo::deployment::PRE_STOP_S),
    )
}

fn print(r: &DemoReport, label: &str, svg: &std::path::Path) {
    print!("{}", summary(&r.demo, &r.simulated, label));
    println!("{}", phases_line(&r.simulated_phases));
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
    println!(
        "through the activator {}, straight to the replicas {}",
        r.via_activator, r.direct_to_pods
    );
    println!("{}", clock_line(&r.clock_lag));
    println!("timeline: {}", svg.display());
}

/// Whether the run kept time, in one line.
fn clock_line(lag: &ClockLag) -> String {
    let seen = format!(
        "the clock's lateness p99 {:.2} s, max {:.2} s of scenario time at {}x; requests sent late p99 {:.2} s",
        lag.probe.p99_s, lag.probe.max_s, lag.speed, lag.send.p99_s
    );
    match &lag.why {
        None => format!("clock: kept time ({seen})"),
        Some(why) => format!(
            "clock: COULD NOT KEEP TIME on this machine: {why} ({seen}); the misses above are the machine's, not a result"
        ),
    }
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
        "via_activator": r.via_activator,
        "direct_to_pods": r.direct_to_pods,
        "scale_events": r.demo.scale_events,
        "simulated": r.simulated,
        "simulated_phases": r.simulated_phases,
        "speed": r.clock_lag.speed,
        "valid": r.clock_lag.valid,
        "clock_lag": r.clock_lag,
    })
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let speed = args.speed.unwrap_or(if args.quick { 30.0 } else { 12.5 });
    if !(speed.is_finite() && (1.0..=30.0).contains(&speed)) {
        anyhow::bail!(
            "--speed {}: expected 1 to 30 (the scaler's trend window is at least 1 s of wall time)",
            infscale_core::limits::show(speed)
        );
    }
    let label = args
        .policy
        .unwrap_or_else(|| RECOMMENDED_TO_ZERO.to_owned());
    let policy = Policy::parse_with_max(&label, 8)?;
    if policy.max > DEMO_MAX_REPLICAS {
        anyhow::bail!(
            "--policy {label:?}: max {} replicas, more than the {DEMO_MAX_REPLICAS} the demo runs on one machine",
            policy.max
        );
    }
    let mut scenario = Scenario::default_day();
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if let Some(until) = args.until {
        let day = scenario.duration;
        if !(until.is_finite() && until > 0.0 && until <= day) {
            anyhow::bail!(
                "--until {}: expected seconds above 0, at most the day's {day}",
                infscale_core::limits::show(until)
            );
        }
        scenario.duration = until;
    }
    let dialect: Dialect = args.dialect.parse().map_err(anyhow::Error::msg)?;
    let mut cfg = DemoConfig {
        scenario,
        speed,
        policy,
        label,
        gpu: infscale_core::sim::gpu::GpuModel::default(),
        dialect,
        slo_ttft_s: 2.0,
        svg: Some(args.svg.clone()),
        fail_every: args.fail_every.unwrap_or(0),
        serve_mode: !args.proxy_mode,
    };
    let mut attempts = Vec::new();
    let report = loop {
        if !args.json {
            println!(
                "demo: the default day ({} s) at {}x on 127.0.0.1: emulated vLLM replicas, the activator, serve, KEDA and its HPA over gRPC",
                cfg.scenario.duration, cfg.speed
            );
            print!("{}", legend(cfg.policy.target));
        }
        let quiet = args.json;
        let report = demo::run(cfg.clone(), move |line| {
            if !quiet {
                println!("{line}");
            }
        })
        .await?;
        let lag = &report.clock_lag;
        attempts.push(serde_json::json!({
            "speed": lag.speed,
            "valid": lag.valid,
            "why": lag.why,
            "slo_miss_pct": report.demo.slo_miss_pct,
            "lost": report.lost,
        }));
        let slower = cfg.speed / 2.0;
        let again = !lag.valid && attempts.len() < args.attempts as usize;
        if !(again && slower >= 1.0) {
            break report;
        }
        eprintln!(
            "demo: could not keep time at {}x ({}); running again at {slower}x",
            cfg.speed,
            lag.why.as_deref().unwrap_or("late")
        );
        cfg.speed = slower;
    };
    if args.json {
        let mut v = json(&report);
        v["attempts"] = serde_json::Value::from(attempts);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print(&report, &cfg.label, &args.svg);
    }
    // A run that could not keep time judges nothing: a client that fell behind sends its
    // backlog at once, and what that loses is the machine's too.
    if let Some(why) = &report.clock_lag.why {
        let lost = if report.lost > 0 {
            format!(
                "; {} requests lost {:?}, which the lag may explain",
                report.lost, report.lost_by
            )
        } else {
            String::new()
        };
        eprintln!(
            "demo: could not keep time at {}x on this machine: {why}{lost}; its misses are not a result (exit {EXIT_NO_TIME})",
            report.clock_lag.speed
        );
        return Ok(ExitCode::from(EXIT_NO_TIME));
    }
    if report.lost > 0 {
        eprintln!(
            "demo: {} requests lost {:?} while the clock kept time: the loop failed (exit {EXIT_LOST})",
            report.lost, report.lost_by
        );
        return Ok(ExitCode::from(EXIT_LOST));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infscale_core::sim::run::Run;

    fn summary_of(policy: &str, minutes: f64) -> Summary {
        let run = Run {
            outcomes: Vec::new(),
            replica_seconds: minutes * 60.0,
            standby_seconds: 0.0,
            scale_events: 0,
            peak: 5,
            cost_writes: 0,
            timeline: Vec::new(),
            series: Vec::new(),
            ledger: Vec::new(),
            learned: Default::default(),
        };
        infscale_core::sim::report::summarize(policy, &run, 2.0)
    }

    #[test]
    fn the_summary_names_the_policy_and_keeps_every_figure_under_its_heading() {
        let (demo, sim) = (summary_of("demo x", 66.3), summary_of("simulated x", 53.3));
        let text = summary(&demo, &sim, RECOMMENDED_TO_ZERO);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[1].starts_with("demo       recommended"), "{text}");
        assert!(lines[2].starts_with("simulated  recommended"), "{text}");
        assert_eq!(lines[3], format!("recommended:  {RECOMMENDED_TO_ZERO}"));
        // Right-aligned figures end where their heading ends.
        let end = |l: &str, w: &str| l.find(w).map(|at| at + w.len());
        assert_eq!(
            end(lines[0], "replica-min"),
            end(lines[1], "66.3"),
            "{text}"
        );
        assert_eq!(
            end(lines[0], "replica-min"),
            end(lines[2], "53.3"),
            "{text}"
        );
        assert_eq!(
            policy_name(super::super::simulate::RECOMMENDED),
            "always on"
        );
        assert_eq!(policy_name("queue:24"), "your policy");
        let own = summary(&demo, &sim, "queue:24");
        assert!(own.ends_with("your policy:  queue:24\n"), "{own}");
    }

    #[test]
    fn the_phases_line_gives_the_range_and_the_pause() {
        let line = phases_line(&SimulatedPhases {
            runs: 20,
            low: 51.46,
            high: 68.44,
            miss_low_pct: 0.0,
            miss_high_pct: 0.6934,
            median_offset_s: 1.5,
        });
        assert_eq!(
            line,
            "simulated: the middle of 20 runs, one per offset of serve's scrapes against the HPA's syncs (this one 1.5 s): 51.5 to 68.4 replica-min, 0.0% to 0.7% misses; both bill a removed pod through its 10 s preStop pause"
        );
        let even = phases_line(&SimulatedPhases {
            runs: 20,
            low: 50.93,
            high: 65.31,
            miss_low_pct: 0.32,
            miss_high_pct: 0.32,
            median_offset_s: 3.0,
        });
        assert!(even.contains("65.3 replica-min, 0.3% misses;"), "{even}");
    }

    #[test]
    fn the_legend_names_the_target() {
        let l = legend(192.0);
        assert!(
            l.contains("value / 192 replicas") && l.contains("replicas x 192"),
            "{l}"
        );
        assert_eq!(l.lines().count(), 5);
    }
}
