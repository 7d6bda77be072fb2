//! `tune --suite`: the grid judged on the benchmark's families of days, each point by its worst
//! family, then the frontier and the choice checked on days of every family it never saw.
//!
//! One generator's day rewards a fit to that generator. A point here is only as good as the
//! family it handles worst: the frontier trades the worst family's mean miss % against the
//! mean, over families, of each family's cost over its days' clairvoyant bounds.

use super::seeds::progress;
use super::simulate::ROLES;
use super::tune::Args;
use anyhow::bail;
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::seeds::{self, Judged, Judgement};
use infscale_core::sim::suite::{self, Family, Plan};
use infscale_core::sim::tune;
use infscale_core::table::Align::*;
use infscale_core::table::{Names, Table};
use std::process::ExitCode;

/// One point over every family: its worst figures and where they were.
#[derive(Debug, Clone, PartialEq)]
pub struct Robust {
    pub policy: String,
    /// The highest family mean miss %, and that family.
    pub worst_mean: (f64, String),
    /// The highest single day's miss %, and its family.
    pub worst_day: (f64, String),
    /// The mean over families of each family's mean cost over its bounds.
    pub ratio: f64,
    /// The highest family ratio, and that family.
    pub worst_ratio: (f64, String),
}

/// Each point's figures over the judged families (every judgement has the points in order).
pub fn robust(judged: &[(Family, Judgement)]) -> Vec<Robust> {
    let Some((_, first)) = judged.first() else {
        return Vec::new();
    };
    (0..first.policies.len())
        .map(|i| {
            let each = || {
                judged
                    .iter()
                    .map(move |(f, j)| (f.name.clone(), &j.policies[i]))
            };
            let worst = |figure: &dyn Fn(&Judged) -> f64| {
                each()
                    .map(|(name, j)| (figure(j), name))
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .unwrap_or((f64::NAN, String::new()))
            };
            let ratios: Vec<f64> = each().map(|(_, j)| j.bound_ratio()).collect();
            Robust {
                policy: first.policies[i].policy.clone(),
                worst_mean: worst(&Judged::excess_miss_pct_mean),
                worst_day: worst(&Judged::excess_miss_pct_max),
                ratio: ratios.iter().sum::<f64>() / ratios.len().max(1) as f64,
                worst_ratio: worst(&Judged::bound_ratio),
            }
        })
        .collect()
}

/// The points no other beats on both the worst family's mean miss % and the mean ratio to the
/// bound, cheapest first.
pub fn frontier(points: &[Robust]) -> Vec<Robust> {
    let mut sorted: Vec<&Robust> = points.iter().collect();
    sorted.sort_by(|a, b| {
        a.ratio
            .total_cmp(&b.ratio)
            .then(a.worst_mean.0.total_cmp(&b.worst_mean.0))
    });
    let mut best = f64::INFINITY;
    let mut out = Vec::new();
    for p in sorted {
        if p.worst_mean.0 < best {
            best = p.worst_mean.0;
            out.push(p.clone());
        }
    }
    out
}

/// The cheapest point whose worst family misses at most `max_mean` % on average and, when
/// given, whose worst day misses at most `max_day` %.
pub fn cheapest(points: &[Robust], max_mean: f64, max_day: Option<f64>) -> Option<&Robust> {
    points
        .iter()
        .filter(|p| p.worst_mean.0 <= max_mean && max_day.is_none_or(|d| p.worst_day.0 <= d))
        .min_by(|a, b| a.ratio.total_cmp(&b.ratio))
}

/// The table of points; long policies by their role or a number, the full strings below.
pub fn table(points: &[Robust]) -> String {
    let names = Names::of(points.iter().map(|p| p.policy.as_str()), ROLES);
    let mut t = Table::new([
        ("policy", Left),
        ("worst family: mean excess %", Right),
        ("worst day: excess %", Right),
        ("x bound", Right),
        ("worst family: x bound", Right),
    ]);
    for (p, name) in points.iter().zip(&names.shown) {
        t.row([
            name.clone(),
            format!("{:.2}% {}", p.worst_mean.0, p.worst_mean.1),
            format!("{:.2}% {}", p.worst_day.0, p.worst_day.1),
            format!("{:.2}x", p.ratio),
            format!("{:.2}x {}", p.worst_ratio.0, p.worst_ratio.1),
        ]);
    }
    t.render() + &names.key()
}

/// Every policy judged on every family of `plan`.
fn judge_all(
    plan: &Plan,
    specs: &[String],
    args: &Args,
    what: &str,
) -> anyhow::Result<Vec<(Family, Judgement)>> {
    let families = suite::families(plan)?;
    let days: usize = families.iter().map(|f| f.days.len()).sum();
    let bar = progress((days * (specs.len() + 1)) as u64, what, args.json)?;
    let mut judged = Vec::new();
    for f in families {
        // A family with a max of its own (a busy trace's) runs the points that set none at it.
        let policies = args
            .sim
            .policies_with_max(specs, f.max.unwrap_or(args.sim.max))?;
        let j = seeds::judge(
            specs,
            &policies,
            &f.days,
            super::simulate::BOUND_CAP,
            &|| bar.inc(1),
        );
        judged.push((f, j));
    }
    bar.finish_and_clear();
    Ok(judged)
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let days = args.replicates.max(1);
    let plan = super::suite::plan(
        &args.sim,
        days,
        args.sim.seed.unwrap_or(1),
        &args.suite_traces,
        args.families.as_deref(),
    )?;
    if args.per_family {
        return super::anchors::per_family(&plan, &args.sim, args.points, args.json);
    }
    let settings = plan.settings.clone();
    let hw = Hardware::new(plan.gpu.clone());
    let specs = tune::sample(args.grid()?.policies(), args.points);
    if specs.is_empty() {
        bail!("the grid is empty: give at least one value on every axis");
    }
    let judged = judge_all(&plan, &specs, args, "points x days")?;
    let points = robust(&judged);
    let front = frontier(&points);
    let chosen = match args.max_miss {
        Some(m) => match cheapest(&points, m, args.max_day_miss) {
            Some(best) => Some(best.clone()),
            None => bail!(
                "no point's worst family misses at most {m}% on average{}: widen the grid",
                args.max_day_miss
                    .map_or(String::new(), |d| format!(" with no day above {d}%"))
            ),
        },
        None => None,
    };
    let mut checked: Vec<String> = front.iter().map(|p| p.policy.clone()).collect();
    if let Some(c) = chosen.as_ref().filter(|c| !checked.contains(&c.policy)) {
        checked.push(c.policy.clone());
    }
    let held_days = args.held_out.unwrap_or(days);
    let held = if held_days == 0 {
        None
    } else {
        let held_plan = Plan {
            seeds: held_days,
            first: plan.seed_range().end().saturating_add(1),
            ..plan.clone()
        };
        let j = judge_all(&held_plan, &checked, args, "held-out runs")?;
        Some((robust(&j), held_plan))
    };
    if args.json {
        let point = |p: &Robust| {
            serde_json::json!({
                "policy": p.policy,
                "worst_family_miss_pct": p.worst_mean.0,
                "worst_family": p.worst_mean.1,
                "worst_day_miss_pct": p.worst_day.0,
                "worst_day_family": p.worst_day.1,
                "bound_ratio": p.ratio,
                "worst_bound_ratio": p.worst_ratio.0,
                "worst_bound_ratio_family": p.worst_ratio.1,
            })
        };
        let json = serde_json::json!({
            "mode": args.sim.mode,
            "families": judged.iter().map(|(f, _)| f.name.clone()).collect::<Vec<_>>(),
            "days_per_family": days,
            "points": points.iter().map(point).collect::<Vec<_>>(),
            "frontier": front.iter().map(point).collect::<Vec<_>>(),
            "chosen": chosen.as_ref().map(point),
            "held_out": held.as_ref().map(|(h, _)| h.iter().map(point).collect::<Vec<_>>()),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    let seeds = plan.seed_range();
    println!(
        "{} points on {} families x {} days (seeds {}..{}), {} loop; frontier, cheapest first (x bound: the mean over families):",
        points.len(),
        judged.len(),
        days,
        seeds.start(),
        seeds.end(),
        args.sim.mode
    );
    print!("{}", table(&front));
    if args.all {
        println!("\nall points:");
        print!("{}", table(&points));
    }
    if let Some((h, hp)) = &held {
        let r = hp.seed_range();
        println!(
            "\nheld out: the frontier on {} further days of every family (seeds {}..{}), never seen:",
            held_days,
            r.start(),
            r.end()
        );
        print!("{}", table(h));
    }
    if let (Some(m), Some(best)) = (args.max_miss, &chosen) {
        println!(
            "\n# cheapest whose worst family misses at most {m}%: {} (worst family {:.2}% {}, worst day {:.2}%, {:.2}x bound)",
            best.policy, best.worst_mean.0, best.worst_mean.1, best.worst_day.0, best.ratio
        );
        if let Some(j) = held
            .as_ref()
            .and_then(|(h, _)| h.iter().find(|p| p.policy == best.policy))
        {
            println!(
                "# held out: worst family {:.2}% {}, worst day {:.2}% {}, {:.2}x bound",
                j.worst_mean.0, j.worst_mean.1, j.worst_day.0, j.worst_day.1, j.ratio
            );
        }
        print!("{}", args.scaled_object(&best.policy, &settings, &hw)?);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(policy: &str, worst: f64, ratio: f64) -> Robust {
        Robust {
            policy: policy.to_owned(),
            worst_mean: (worst, "f".to_owned()),
            worst_day: (worst * 2.0, "f".to_owned()),
            ratio,
            worst_ratio: (ratio, "f".to_owned()),
        }
    }

    #[test]
    fn the_frontier_and_the_choice_read_the_worst_family() {
        let points = [
            point("cheap", 5.0, 1.2),
            point("mid", 0.4, 1.6),
            point("dear", 0.0, 2.5),
            point("worse", 0.5, 1.9),
        ];
        let names: Vec<String> = frontier(&points).into_iter().map(|p| p.policy).collect();
        assert_eq!(names, ["cheap", "mid", "dear"]);
        assert_eq!(cheapest(&points, 0.5, None).unwrap().policy, "mid");
        assert_eq!(cheapest(&points, 0.5, Some(0.5)).unwrap().policy, "dear");
        assert!(cheapest(&points, -1.0, None).is_none());
    }
}
