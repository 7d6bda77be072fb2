//! `simulate --seeds N` and the traces `tune` chooses and checks on: a scenario generated once
//! per seed, every policy judged on all of them (crates/infscale-core/src/sim/seeds.rs), with a progress bar.

use super::simulate::{Args, TraceSource, BOUND_CAP};
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::seeds::{self, Day, Judged, Judgement};
use infscale_core::sim::trace::Trace;
use std::io::IsTerminal;
use std::ops::RangeInclusive;
use std::process::ExitCode;

/// The scenario generated with each seed of `seeds`; a CSV is one trace, so `flag` is an error.
pub fn traces(
    source: &TraceSource,
    seeds: RangeInclusive<u64>,
    flag: &str,
) -> anyhow::Result<Vec<Trace>> {
    let TraceSource::Scenario(scenario) = source else {
        bail!("{flag}: a CSV trace is one fixed set of arrivals; seeds apply to a generated scenario (the default or a YAML --trace)");
    };
    seeds
        .map(|seed| {
            let mut s = scenario.clone();
            s.seed = seed;
            s.generate().with_context(|| format!("seed {seed}"))
        })
        .collect()
}

/// A bar on stderr counting `len` jobs; hidden when `hidden` or stderr is not a terminal.
pub fn progress(len: u64, what: &str, hidden: bool) -> anyhow::Result<ProgressBar> {
    if hidden || !std::io::stderr().is_terminal() {
        return Ok(ProgressBar::hidden());
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{bar:40}} {{pos}}/{{len}} {what}, {{elapsed}} ({{eta}} left)"
        ))
        .context("progress bar")?,
    );
    Ok(bar)
}

/// `simulate --seeds n`: every policy on seeds 1..=n, as a table or JSON.
pub fn simulate(args: &Args, n: u64, specs: &[String]) -> anyhow::Result<ExitCode> {
    let source = args.sim.source()?;
    let traces = traces(&source, 1..=n, "--seeds")?;
    let settings = args.sim.settings(&source)?;
    let hw = Hardware::new(args.sim.gpu.model()?);
    let policies = args.sim.policies(specs)?;
    let jobs = traces.len() * (policies.len() + 1);
    let bar = progress(jobs as u64, "runs and bounds", args.json)?;
    let days = Day::all(traces.clone(), &hw, &settings);
    let judged: Judgement = seeds::judge(specs, &policies, &days, BOUND_CAP, &|| bar.inc(1));
    bar.finish_and_clear();
    let name = traces.first().map_or("", |t| t.name.as_str());
    let count = traces.len().max(1) as f64;
    let requests = traces.iter().map(|t| t.requests.len()).sum::<usize>() as f64 / count;
    let bound = judged.bound_mean();
    if args.json {
        let json = serde_json::json!({
            "trace": name,
            "seeds": n,
            "requests": requests,
            "mode": args.sim.mode,
            "slo_ttft_s": settings.slo_ttft_s,
            "clairvoyant_replica_minutes": bound,
            "policies": judged.policies.iter().map(Judged::to_json).collect::<Vec<_>>(),
            "timelines": serde_json::Value::Null,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "trace {name}, seeds 1..{n}: {requests:.0} requests on average over {:.0} s; {} loop, SLO TTFT {} s",
        traces.first().map_or(0.0, |t| t.duration),
        args.sim.mode,
        settings.slo_ttft_s
    );
    print!("{}", seeds::table(&judged.policies, super::simulate::ROLES));
    println!(
        "clairvoyant bound: {bound:.1} replica-min on average; x bound is the mean over seeds of each seed's cost over its own bound"
    );
    Ok(ExitCode::SUCCESS)
}
