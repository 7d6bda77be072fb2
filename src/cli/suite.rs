//! `simulate --suite`: every policy on the benchmark's families of days (crates/infscale-core/src/sim/suite.rs),
//! a table per family, then each policy's worst family.

use super::seeds::progress;
use super::simulate::{Args, SimArgs, BOUND_CAP};
use crate::edge::files::read_text;
use crate::limits;
use crate::sim::seeds::{self, Judgement};
use crate::sim::suite::{self, Family, Plan, Recorded};
use crate::sim::trace::formats::{self, Format};
use crate::sim::trace::replay;
use anyhow::{bail, Context};
use std::path::Path;
use std::process::ExitCode;

/// Days per family when `--seeds` is not given.
pub const DEFAULT_DAYS: u64 = 20;

/// Reads `FILE[@X]` as a recorded trace named by the file's stem, at X times its rate.
pub fn recorded(spec: &str) -> anyhow::Result<Recorded> {
    let (path, scale) = match spec.rsplit_once('@') {
        Some((p, x)) => (
            p,
            x.parse::<f64>()
                .with_context(|| format!("--suite-trace {spec}: {x:?} is not a rate scale"))?,
        ),
        None => (spec, 1.0),
    };
    limits::within(scale, limits::RATE_SCALE)
        .map_err(|e| anyhow::anyhow!("--suite-trace {spec}: a rate scale of {e}"))?;
    let text = read_text(Path::new(path), limits::MAX_TRACE_FILE_BYTES)?;
    let format = formats::detect(path, &text);
    if format == Format::Scenario {
        bail!("--suite-trace {path}: a scenario, not a recorded trace (the suite generates its own days)");
    }
    let read = formats::read(format, path, &text, None)?;
    for note in &read.notes {
        eprintln!("note: {note}");
    }
    let stem = Path::new(path)
        .file_stem()
        .map_or_else(|| path.to_owned(), |s| s.to_string_lossy().into_owned());
    let name = if scale == 1.0 {
        stem
    } else {
        format!("{stem}@{scale}")
    };
    let trace = replay::rate_scaled(&read.trace, scale)?;
    if trace.duration > limits::MAX_SIM_SECONDS {
        bail!(
            "--suite-trace {spec}: the trace then runs {} s, past the longest run, {} s (31 days)",
            limits::show(trace.duration),
            limits::MAX_SIM_SECONDS
        );
    }
    Ok(Recorded { name, trace })
}

/// The suite's plan from the flags `simulate --suite` and `tune --suite` share: the engine and
/// loop of `sim`, `seeds` days from `first`, the `--suite-trace` files and the `--families`.
pub fn plan(
    sim: &SimArgs,
    seeds: u64,
    first: u64,
    traces: &[String],
    families: Option<&str>,
) -> anyhow::Result<Plan> {
    if traces.len() > limits::MAX_SUITE_TRACES {
        bail!(
            "--suite-trace given {} times: at most {}",
            traces.len(),
            limits::MAX_SUITE_TRACES
        );
    }
    let base = sim.source()?;
    Ok(Plan {
        seeds,
        first,
        gpu: sim.gpu.model()?,
        settings: sim.settings(&base)?,
        recorded: traces
            .iter()
            .map(|s| recorded(s))
            .collect::<anyhow::Result<_>>()?,
        only: families
            .map(|l| l.split(',').map(|f| f.trim().to_owned()).collect())
            .unwrap_or_default(),
    })
}

pub fn simulate(args: &Args, specs: &[String]) -> anyhow::Result<ExitCode> {
    let plan = plan(
        &args.sim,
        args.seeds.unwrap_or(DEFAULT_DAYS),
        1,
        &args.suite_traces,
        args.families.as_deref(),
    )?;
    let families = suite::families(&plan)?;
    let policies = args.sim.policies(specs)?;
    let days: usize = families.iter().map(|f| f.days.len()).sum();
    let bar = progress(
        (days * (policies.len() + 1)) as u64,
        "runs and bounds",
        args.json,
    )?;
    let judged: Vec<(Family, Judgement)> = families
        .into_iter()
        .map(|f| {
            let j = seeds::judge(specs, &policies, &f.days, BOUND_CAP, &|| bar.inc(1));
            (f, j)
        })
        .collect();
    bar.finish_and_clear();
    if args.json {
        let json = serde_json::json!({
            "mode": args.sim.mode,
            "slo_ttft_s": plan.settings.slo_ttft_s,
            "drain_s": plan.settings.drain_s,
            "days_per_family": plan.seeds,
            "families": suite::to_json(&judged),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "suite: {} families x {} days; {} loop, SLO TTFT {} s, drain {} s; a cut request is a miss",
        judged.len(),
        plan.seeds,
        args.sim.mode,
        plan.settings.slo_ttft_s,
        plan.settings.drain_s
    );
    for (f, j) in &judged {
        println!();
        print!("{}", suite::family_table(f, j));
    }
    println!("\nworst family per policy:");
    print!("{}", suite::worst_table(&judged));
    Ok(ExitCode::SUCCESS)
}
