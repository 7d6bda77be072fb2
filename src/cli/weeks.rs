//! `simulate --weeks`: every policy on 24-hour days played as weeks (crates/infscale-core/src/sim/week),
//! a table per family with each policy's pooled and worst day beside the days' bounds and the
//! fixed fleets, and the same days played alone with `--alone`.

use super::seeds::progress;
use super::simulate::{Args, ROLES};
use crate::edge::files::read_text;
use anyhow::{bail, Context};
use infscale_core::limits;
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::trace::formats::{self, Format};
use infscale_core::sim::week::judge::{self, Family, FamilyJudgement, Plan, Verdict};
use infscale_core::sim::week::{shapes, Micro, Weeks};
use infscale_core::table::{Align::*, Names, Table};
use std::path::Path;
use std::process::ExitCode;

/// Runs (seeds) per family when `--seeds` is not given.
pub const DEFAULT_RUNS: u64 = 2;
/// Days of a run when `--days` is not given: two weeks.
pub const DEFAULT_DAYS: usize = 14;
/// A day's misses in excess of its bound's that the bar allows, percent.
pub const DAY_BAR_PCT: f64 = 1.0;

/// The plan from the flags.
pub fn plan(args: &Args) -> anyhow::Result<Plan> {
    if args.sim.rate_scale != 1.0 {
        bail!(
            "--rate-scale {}: the week families set their own rates",
            limits::show(args.sim.rate_scale)
        );
    }
    let gpu = args.sim.gpu.model()?;
    let names: Vec<String> = match &args.week_sources {
        Some(list) => list.split(',').map(|s| s.trim().to_owned()).collect(),
        None if args.week_traces.is_empty() => {
            shapes::NAMES.iter().map(|s| s.to_string()).collect()
        }
        None => Vec::new(),
    };
    let mut families = Vec::new();
    for name in &names {
        let source = shapes::source(name).with_context(|| {
            format!(
                "--week-sources: no source {name:?}; the sources are {}",
                shapes::NAMES.join(", ")
            )
        })?;
        families.push(Family {
            name: format!("week:{name}"),
            weeks: Weeks::scaled(source, &gpu, Micro::Drawn)?,
            max: args.sim.max,
        });
    }
    for spec in &args.week_traces {
        let Some((name, path)) = spec.split_once('=') else {
            bail!("--week-trace {spec}: expected SOURCE=FILE, e.g. azure-code=AzureLLMInferenceTrace_code.csv");
        };
        let source = shapes::source(name).with_context(|| {
            format!(
                "--week-trace {spec}: no source {name:?}; the sources are {}",
                shapes::NAMES.join(", ")
            )
        })?;
        let text = read_text(Path::new(path), limits::MAX_TRACE_FILE_BYTES)?;
        let format = formats::detect(path, &text);
        if format == Format::Scenario {
            bail!("--week-trace {spec}: a scenario, not a recorded trace");
        }
        let read = formats::read(format, path, &text, None)?;
        let stem = Path::new(path)
            .file_stem()
            .map_or_else(|| path.to_owned(), |s| s.to_string_lossy().into_owned());
        families.push(Family {
            name: format!("week:{name}+{stem}"),
            weeks: Weeks::scaled(source, &gpu, Micro::Recorded(read.trace))?,
            max: args.sim.max,
        });
    }
    let runs = args.seeds.unwrap_or(DEFAULT_RUNS);
    let first = args.first_seed.unwrap_or(1);
    let days = args.days.map_or(DEFAULT_DAYS, |d| d as usize);
    Ok(Plan {
        families,
        seeds: (first..first.saturating_add(runs)).collect(),
        days,
        hw: Hardware::new(gpu),
        settings: args.sim.settings(&args.sim.source()?)?,
        alone: args.alone,
    })
}

pub fn simulate(args: &Args, specs: &[String]) -> anyhow::Result<ExitCode> {
    let plan = plan(args)?;
    if let Some(dir) = &args.write_days {
        return write_days(&plan, dir);
    }
    // Every policy parses before minutes of runs start.
    args.sim.policies(specs)?;
    let bar = progress(
        judge::jobs(&plan, specs.len()),
        "days, runs and bounds",
        args.json,
    )?;
    let judged = judge::judge(&plan, specs, &|| bar.inc(1))?;
    bar.finish_and_clear();
    if args.json {
        let families: Vec<serde_json::Value> = judged
            .iter()
            .map(|f| {
                serde_json::json!({
                    "family": f.family,
                    "about": f.about,
                    "max": f.max,
                    "days": f.days,
                    "verdicts": (0..f.policies.len()).filter_map(|i| f.verdict(i, false)).collect::<Vec<_>>(),
                    "alone": plan.alone.then(|| {
                        (0..f.policies.len()).filter_map(|i| f.verdict(i, true)).collect::<Vec<_>>()
                    }),
                    "policies": f.policies,
                    "fleets": f.fleets,
                })
            })
            .collect();
        let json = serde_json::json!({
            "seeds": plan.seeds,
            "days_per_run": plan.days,
            "slo_ttft_s": plan.settings.slo_ttft_s,
            "families": families,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "weeks: {} families x {} runs of {} days (seeds {}), each run without a break; SLO TTFT {} s",
        judged.len(),
        plan.seeds.len(),
        plan.days,
        seeds_shown(&plan.seeds),
        plan.settings.slo_ttft_s
    );
    println!(
        "per day: misses in excess of the day's bound's own; x bound: replica-minutes over the bound's \
         (pooled: summed over the days); dominated: days a fixed fleet misses no more at no more cost; \
         trough: in the day's quietest hour, replicas billed over what the bound needs over a start (worst day)"
    );
    for f in &judged {
        println!();
        print!("{}", family_table(f, false));
        if plan.alone {
            println!("the same days, each played alone (nothing learned before it):");
            print!("{}", family_table(f, true));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes every day of every run of `plan` into `dir`, one CSV each.
fn write_days(plan: &Plan, dir: &Path) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let mut written = 0;
    for f in &plan.families {
        let stem = f.name.replace([':', '+'], "-");
        for &seed in &plan.seeds {
            let (_, days) = f.weeks.days(seed, plan.days)?;
            for (d, day) in days.iter().enumerate() {
                let path = dir.join(format!("{stem}-seed-{seed}-day-{d}.csv"));
                std::fs::write(&path, day.to_csv())
                    .with_context(|| format!("{}: cannot write", path.display()))?;
                written += 1;
            }
        }
    }
    println!("{written} days written to {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

fn seeds_shown(seeds: &[u64]) -> String {
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if a != b => format!("{a}..{b}"),
        (Some(a), _) => a.to_string(),
        _ => String::new(),
    }
}

/// A family's table: per policy its verdict, then the cheapest fixed fleet within the bar on
/// every day.
fn family_table(f: &FamilyJudgement, alone: bool) -> String {
    let bound: f64 =
        f.days.iter().map(|d| d.bound_replica_minutes).sum::<f64>() / f.days.len().max(1) as f64;
    let out = if alone {
        String::new()
    } else {
        format!(
            "{}: {}; {} days, max {}, bound {:.0} replica-min a day on average\n",
            f.family,
            f.about,
            f.days.len(),
            f.max,
            bound
        )
    };
    let names = Names::of(f.policies.iter().map(|p| p.policy.as_str()), ROLES);
    let mut t = Table::new([
        ("policy".to_owned(), Left),
        ("excess %".to_owned(), Right),
        ("worst day".to_owned(), Right),
        ("x bound".to_owned(), Right),
        ("worst day x".to_owned(), Right),
        ("dominated".to_owned(), Right),
        ("trough".to_owned(), Right),
    ]);
    let row = |t: &mut Table, name: String, v: &Verdict| {
        t.row([
            name,
            format!("{:.2}%", v.excess_miss_pct),
            format!("{:.2}% (day {})", v.worst_day_excess_miss_pct, v.worst_day),
            format!("{:.2}x", v.pooled_x_bound),
            format!("{:.2}x", v.worst_x_bound),
            match v.dominated_example {
                Some((day, n)) => {
                    format!("{} of {} (day {day}: {n})", v.dominated_days, f.days.len())
                }
                None => format!("0 of {}", f.days.len()),
            },
            format!("{:+.2}", v.worst_trough_excess),
        ]);
    };
    for (i, name) in names.shown.iter().enumerate() {
        if let Some(v) = f.verdict(i, alone) {
            row(&mut t, name.clone(), &v);
        }
    }
    if let Some((n, v)) = best_fleet(f, alone) {
        row(&mut t, format!("best fixed fleet: {n}"), &v);
    }
    out + &t.render() + &names.key()
}

/// The cheapest fixed fleet whose every day is within [`DAY_BAR_PCT`], or else the one whose
/// worst day misses least, with its verdict.
fn best_fleet(f: &FamilyJudgement, alone: bool) -> Option<(u32, Verdict)> {
    let fleets = FamilyJudgement {
        policies: f.fleets.clone(),
        ..f.clone()
    };
    let verdicts: Vec<(u32, Verdict)> = (0..fleets.policies.len())
        .filter_map(|i| Some((i as u32 + 1, fleets.verdict(i, alone)?)))
        .collect();
    verdicts
        .iter()
        .find(|(_, v)| v.worst_day_excess_miss_pct <= DAY_BAR_PCT)
        .or_else(|| {
            verdicts.iter().min_by(|a, b| {
                a.1.worst_day_excess_miss_pct
                    .total_cmp(&b.1.worst_day_excess_miss_pct)
            })
        })
        .cloned()
}
