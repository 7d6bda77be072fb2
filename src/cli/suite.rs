//! `simulate --suite`: every policy on the benchmark's families of days (crates/infscale-core/src/sim/suite.rs),
//! a table per family beside its anchors (src/cli/anchors.rs), then each policy's worst family.

use super::anchors;
use super::simulate::{Args, SimArgs};
use crate::edge::files::read_text;
use anyhow::{bail, Context};
use infscale_core::limits;
use infscale_core::sim::suite::{self, Plan, Recorded};
use infscale_core::sim::trace::formats::{self, Format};
use infscale_core::sim::trace::replay;
use std::path::Path;
use std::process::ExitCode;

/// Days per family when `--seeds` is not given.
pub const DEFAULT_DAYS: u64 = 40;

/// Reads `FILE[@X][,max=N]` as a recorded trace named by the file's stem, at X times its rate,
/// judged with at most N replicas for policies that set no `max` (the suite's `--max` without).
pub fn recorded(full: &str) -> anyhow::Result<Recorded> {
    let (spec, max) = family_max(full)?;
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
    Ok(Recorded { name, trace, max })
}

/// Splits `,max=N` off a `--suite-trace` spec.
fn family_max(spec: &str) -> anyhow::Result<(&str, Option<u32>)> {
    let Some((rest, n)) = spec.rsplit_once(",max=") else {
        return Ok((spec, None));
    };
    match n.parse::<u32>() {
        Ok(m) if (1..=limits::MAX_REPLICAS).contains(&m) => Ok((rest, Some(m))),
        _ => bail!(
            "--suite-trace {spec}: max={n:?}: expected 1 to {} replicas",
            limits::MAX_REPLICAS
        ),
    }
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
    if sim.rate_scale != 1.0 {
        bail!(
            "--rate-scale {}: the suite's families set their own rates; play a recorded trace \
             faster as --suite-trace FILE@X",
            limits::show(sim.rate_scale)
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
    let search = match (&args.anchors, args.search_points.trim()) {
        (Some(_), _) | (None, "none") => None,
        (None, n) => Some(n.parse::<usize>().map_err(|_| {
            anyhow::anyhow!("--search-points {n:?}: expected a number of points or none")
        })?),
    };
    let (judged, searched) =
        anchors::judge(families, specs, &args.sim, search, plan.seeds, args.json)?;
    let anchors = match &args.anchors {
        Some(path) => Some(anchors::read(path, &judged)?),
        None => searched,
    };
    if args.json {
        let json = serde_json::json!({
            "mode": args.sim.mode,
            "slo_ttft_s": plan.settings.slo_ttft_s,
            "drain_s": plan.settings.drain_s,
            "days_per_family": plan.seeds,
            "families": suite::to_json(&judged, anchors.as_ref()),
            "summary": anchors.as_ref().map(|a| suite::summaries(&judged, a)),
            "anchors": anchors,
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
    if let Some(a) = &anchors {
        println!(
            "anchors per family, each the cheapest with at most {}% misses on average and {}% on the worst of {} days (in excess of the bound's own): the best fixed fleet (min=max=N, N 1..{}) and the best of the search's {} points (the fleets and the recommendation's neighbourhood){}{}",
            a.bar.mean_pct,
            a.bar.day_pct,
            plan.seeds,
            args.sim.max,
            a.points,
            anchors::own_max_note(&judged),
            args.anchors
                .as_ref()
                .map_or(String::new(), |p| format!(", read from {}", p.display()))
        );
        println!(
            "x best search: a policy's cost over the best search point's; fleet dominates: the best fixed fleet misses no more on average and on the worst day, at no more cost"
        );
    }
    for (f, j) in &judged {
        println!();
        let a = anchors.as_ref().and_then(|a| a.of(&f.name));
        print!("{}", suite::family_table(f, j, a, super::simulate::ROLES));
    }
    println!("\nworst family per policy:");
    print!(
        "{}",
        suite::worst_table(&judged, anchors.as_ref(), super::simulate::ROLES)
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_names_its_own_max_after_its_rate() {
        assert_eq!(
            family_max("t.jsonl@0.25,max=48").unwrap(),
            ("t.jsonl@0.25", Some(48))
        );
        assert_eq!(family_max("t.csv").unwrap(), ("t.csv", None));
        for bad in ["t.csv,max=0", "t.csv,max=many", "t.csv,max=10001"] {
            let e = family_max(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("1 to 10000"), "{e}");
        }
    }
}
