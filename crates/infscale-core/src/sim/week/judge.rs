//! Weeks judged day by day: each policy plays a run of days without a break (what it learns on
//! one day is there the next, as for a target that runs all week), and each day is judged on
//! its own beside the day's clairvoyant bound and every fixed fleet on the same days.
//!
//! Per day and policy: the misses, the replica-minutes and their ratio to the day's bound,
//! whether a fixed fleet *dominates* it (misses no more that day at no more cost), and the
//! *trough excess*: in the day's quietest hour (the hour the bound needs least), the replicas
//! the policy billed on average over what the bound needs over a start from each moment of it
//! (its most ready replicas within the next cold start). A learned level that outlives the
//! traffic that taught it shows there first.

use super::{Weeks, DAY_S};
use crate::policy::Policy;
use crate::sim::anchors::fixed_fleet;
use crate::sim::bound::{clairvoyant, WINDOW_S};
use crate::sim::replica::Hardware;
use crate::sim::report;
use crate::sim::run::{self, Settings, Start};
use crate::sim::trace::{Trace, TraceError};
use rayon::prelude::*;
use serde::Serialize;

/// An hour, seconds: the ledger's step.
const HOUR_S: f64 = 3600.0;

/// A family of weeks to judge: the weeks, and its own `max` for policies that set none and for
/// its fixed fleets.
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub weeks: Weeks,
    pub max: u32,
}

/// What a judgement plays: every family on runs of `days` days, one run per seed.
#[derive(Debug, Clone)]
pub struct Plan {
    pub families: Vec<Family>,
    pub seeds: Vec<u64>,
    pub days: usize,
    pub hw: Hardware,
    pub settings: Settings,
    /// Play each day alone too (a fresh decision memory, warm started from its bound).
    pub alone: bool,
}

/// One day's figures for one policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayFigures {
    pub requests: usize,
    pub misses: usize,
    pub replica_minutes: f64,
    /// The replicas billed on average in each hour of the day.
    pub hourly: Vec<f64>,
}

impl DayFigures {
    pub fn miss_pct(&self) -> f64 {
        100.0 * self.misses as f64 / self.requests.max(1) as f64
    }
}

/// One day of a run, and its bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Day {
    pub seed: u64,
    /// Its place in the run (0: the first day).
    pub index: usize,
    /// Which day of the source's week it plays.
    pub weekday: usize,
    pub requests: usize,
    pub bound_replica_minutes: f64,
    pub bound_miss_pct: f64,
    /// The quietest hour: the one the bound needs least.
    pub trough_hour: usize,
    /// What the bound needs there over a start, replicas on average.
    pub trough_need: f64,
    /// What the bound needs over a start in each hour, replicas on average.
    pub need_hourly: Vec<f64>,
}

/// One policy over every day of a family.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    pub policy: String,
    /// Played after the days before it.
    pub days: Vec<DayFigures>,
    /// Played alone (when the plan asks).
    pub alone: Vec<DayFigures>,
}

/// A family judged: its days, each policy, and the fixed fleets 1..=max.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FamilyJudgement {
    pub family: String,
    pub about: String,
    pub max: u32,
    pub days: Vec<Day>,
    pub policies: Vec<Judged>,
    pub fleets: Vec<Judged>,
}

/// A policy's figures over a family's days.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub policy: String,
    /// Misses in excess of each day's bound's own, pooled over the days, and on the worst day.
    pub excess_miss_pct: f64,
    pub worst_day_excess_miss_pct: f64,
    /// The worst day (its index among the family's days).
    pub worst_day: usize,
    /// Replica-minutes over the bound's, summed over the days; the highest day's ratio.
    pub pooled_x_bound: f64,
    pub worst_x_bound: f64,
    /// Days some fixed fleet dominates, and the first such (day, fleet).
    pub dominated_days: usize,
    pub dominated_example: Option<(usize, u32)>,
    /// The largest trough excess over the days, replicas.
    pub worst_trough_excess: f64,
}

impl FamilyJudgement {
    /// The verdict on policy `i` (its days after the days before them, or alone).
    pub fn verdict(&self, i: usize, alone: bool) -> Option<Verdict> {
        let j = self.policies.get(i)?;
        let days = if alone { &j.alone } else { &j.days };
        let fleets: Vec<&Vec<DayFigures>> = self
            .fleets
            .iter()
            .map(|f| if alone { &f.alone } else { &f.days })
            .collect();
        Some(verdict(&j.policy, days, &self.days, &fleets))
    }
}

/// Figures over `days` beside their bounds and the fleets' figures on the same days.
fn verdict(
    policy: &str,
    figures: &[DayFigures],
    days: &[Day],
    fleets: &[&Vec<DayFigures>],
) -> Verdict {
    let excess: Vec<f64> = figures
        .iter()
        .zip(days)
        .map(|(f, d)| (f.miss_pct() - d.bound_miss_pct).max(0.0))
        .collect();
    let requests: usize = figures.iter().map(|f| f.requests).sum();
    let pooled_excess = figures
        .iter()
        .zip(days)
        .map(|(f, d)| f.misses as f64 - d.bound_miss_pct / 100.0 * f.requests as f64)
        .sum::<f64>()
        .max(0.0);
    let (worst_day, worst) =
        excess
            .iter()
            .copied()
            .enumerate()
            .fold(
                (0, f64::NEG_INFINITY),
                |a, (i, e)| if e > a.1 { (i, e) } else { a },
            );
    let cost: f64 = figures.iter().map(|f| f.replica_minutes).sum();
    let bound: f64 = days.iter().map(|d| d.bound_replica_minutes).sum();
    let ratios = figures
        .iter()
        .zip(days)
        .map(|(f, d)| f.replica_minutes / d.bound_replica_minutes.max(1e-9));
    let mut dominated_days = 0;
    let mut dominated_example = None;
    for (k, f) in figures.iter().enumerate() {
        let by = fleets.iter().enumerate().find(|(_, fleet)| {
            fleet.get(k).is_some_and(|x| {
                x.misses <= f.misses && x.replica_minutes <= f.replica_minutes + 1e-6
            })
        });
        if let Some((n, _)) = by {
            dominated_days += 1;
            dominated_example.get_or_insert((k, n as u32 + 1));
        }
    }
    let trough = figures
        .iter()
        .zip(days)
        .map(|(f, d)| f.hourly.get(d.trough_hour).copied().unwrap_or(0.0) - d.trough_need)
        .fold(f64::NEG_INFINITY, f64::max);
    Verdict {
        policy: policy.to_owned(),
        excess_miss_pct: 100.0 * pooled_excess / requests.max(1) as f64,
        worst_day_excess_miss_pct: worst.max(0.0),
        worst_day,
        pooled_x_bound: cost / bound.max(1e-9),
        worst_x_bound: ratios.fold(0.0, f64::max),
        dominated_days,
        dominated_example,
        worst_trough_excess: trough,
    }
}

/// Each day's figures from one run over `days` whole days (its ledger noted every hour).
fn figures(run: &run::Run, trace: &Trace, days: usize, slo_s: f64) -> Vec<DayFigures> {
    let hours_per_day = (DAY_S / HOUR_S) as usize;
    (0..days)
        .map(|d| {
            let (from, to) = (d as f64 * DAY_S, (d + 1) as f64 * DAY_S);
            let lo = trace.requests.partition_point(|r| r.arrival < from);
            let hi = trace.requests.partition_point(|r| r.arrival < to);
            let outcomes = &run.outcomes[lo..hi];
            let at = |h: usize| {
                h.checked_sub(1)
                    .map_or(0.0, |i| run.ledger.get(i).copied().unwrap_or(f64::NAN))
            };
            let hourly: Vec<f64> = (0..hours_per_day)
                .map(|h| {
                    let k = d * hours_per_day + h;
                    (at(k + 1) - at(k)) / HOUR_S
                })
                .collect();
            DayFigures {
                requests: outcomes.len(),
                misses: report::misses(outcomes, slo_s),
                replica_minutes: (at((d + 1) * hours_per_day) - at(d * hours_per_day)) / 60.0,
                hourly,
            }
        })
        .collect()
}

/// The bound of one day alone, its quietest hour and what it needs there over a start.
fn bound_day(
    trace: &Trace,
    hw: &Hardware,
    settings: &Settings,
    cap: u32,
    (seed, index, weekday): (u64, usize, usize),
) -> (Day, u32) {
    let b = clairvoyant(trace, hw, settings, cap);
    let start = (hw.gpu.cold_start_s() / WINDOW_S).ceil().max(1.0) as usize;
    let need: Vec<f64> = (0..b.plan.len())
        .map(|i| {
            f64::from(
                b.plan[i..(i + start + 1).min(b.plan.len())]
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0),
            )
        })
        .collect();
    let per_hour = (HOUR_S / WINDOW_S) as usize;
    let hourly: Vec<f64> = need
        .chunks(per_hour)
        .map(|c| c.iter().sum::<f64>() / c.len().max(1) as f64)
        .collect();
    let (trough_hour, trough_need) =
        hourly
            .iter()
            .copied()
            .enumerate()
            .fold(
                (0, f64::INFINITY),
                |a, (h, v)| if v < a.1 { (h, v) } else { a },
            );
    let day = Day {
        seed,
        index,
        weekday,
        requests: trace.requests.len(),
        bound_replica_minutes: b.replica_minutes,
        bound_miss_pct: 100.0 * b.misses as f64 / trace.requests.len().max(1) as f64,
        trough_hour,
        trough_need,
        need_hourly: hourly,
    };
    (day, b.initial)
}

/// Judges the policies `specs` on every family of `plan`, each at the family's `max` where it
/// sets none; `tick` is called once per job done.
pub fn judge(
    plan: &Plan,
    specs: &[String],
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<FamilyJudgement>, TraceError> {
    let mut out = Vec::new();
    for family in &plan.families {
        let parse = |s: &String| {
            Policy::parse_with_max(s, family.max).map_err(|e| TraceError(format!("{s}: {e}")))
        };
        let fleet_specs: Vec<String> = (1..=family.max).map(fixed_fleet).collect();
        let fleets: Vec<Policy> = fleet_specs.iter().map(parse).collect::<Result<_, _>>()?;
        let policies: Vec<Policy> = specs.iter().map(parse).collect::<Result<_, _>>()?;
        let mut days = Vec::new();
        let mut judged: Vec<Judged> = specs
            .iter()
            .map(|s| Judged {
                policy: s.clone(),
                days: Vec::new(),
                alone: Vec::new(),
            })
            .collect();
        let mut fleet_judged: Vec<Judged> = fleet_specs
            .iter()
            .map(|s| Judged {
                policy: s.clone(),
                days: Vec::new(),
                alone: Vec::new(),
            })
            .collect();
        for &seed in &plan.seeds {
            let (whole, alone) = family.weeks.days(seed, plan.days)?;
            let bounds: Vec<(Day, u32)> = alone
                .par_iter()
                .enumerate()
                .with_max_len(1)
                .map(|(i, t)| {
                    let weekday = family.weeks.day_plan(seed, i).weekday;
                    let settings = Settings {
                        start: Start::Bound,
                        ..plan.settings.clone()
                    };
                    let b = bound_day(t, &plan.hw, &settings, run::BOUND_CAP, (seed, i, weekday));
                    tick();
                    b
                })
                .collect();
            let first = bounds.first().map_or(1, |b| b.1);
            let settings = Settings {
                start: Start::Replicas(first),
                ledger_every_s: HOUR_S,
                ..plan.settings.clone()
            };
            let all: Vec<&Policy> = policies.iter().chain(&fleets).collect();
            let runs: Vec<Vec<DayFigures>> = all
                .par_iter()
                .with_max_len(1)
                .map(|p| {
                    let r = run::run(&whole, &plan.hw, p, &settings);
                    tick();
                    figures(&r, &whole, plan.days, settings.slo_ttft_s)
                })
                .collect();
            let alone_runs: Vec<Vec<DayFigures>> = if plan.alone {
                let jobs: Vec<(usize, usize)> = (0..all.len())
                    .flat_map(|p| (0..alone.len()).map(move |d| (p, d)))
                    .collect();
                let done: Vec<DayFigures> = jobs
                    .par_iter()
                    .with_max_len(1)
                    .map(|&(p, d)| {
                        let settings = Settings {
                            start: Start::Replicas(bounds[d].1),
                            ledger_every_s: HOUR_S,
                            ..plan.settings.clone()
                        };
                        let r = run::run(&alone[d], &plan.hw, all[p], &settings);
                        tick();
                        figures(&r, &alone[d], 1, settings.slo_ttft_s).remove(0)
                    })
                    .collect();
                done.chunks(alone.len())
                    .map(<[DayFigures]>::to_vec)
                    .collect()
            } else {
                vec![Vec::new(); all.len()]
            };
            days.extend(bounds.into_iter().map(|b| b.0));
            for (k, (r, a)) in runs.into_iter().zip(alone_runs).enumerate() {
                let j = if k < judged.len() {
                    &mut judged[k]
                } else {
                    &mut fleet_judged[k - judged.len()]
                };
                j.days.extend(r);
                j.alone.extend(a);
            }
        }
        out.push(FamilyJudgement {
            family: family.name.clone(),
            about: family.weeks.source.about.to_owned(),
            max: family.max,
            days,
            policies: judged,
            fleets: fleet_judged,
        });
    }
    Ok(out)
}

/// Jobs [`judge`] ticks for, for a progress bar.
pub fn jobs(plan: &Plan, policies: usize) -> u64 {
    let per_seed: usize = plan
        .families
        .iter()
        .map(|f| {
            let runs = policies + f.max as usize;
            plan.days + runs + if plan.alone { runs * plan.days } else { 0 }
        })
        .sum();
    (per_seed * plan.seeds.len()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(index: usize, bound_rm: f64, bound_miss_pct: f64) -> Day {
        Day {
            seed: 1,
            index,
            weekday: index,
            requests: 1000,
            bound_replica_minutes: bound_rm,
            bound_miss_pct,
            trough_hour: 3,
            trough_need: 1.0,
            need_hourly: vec![1.0; 24],
        }
    }

    fn figures(misses: usize, rm: f64, at_trough: f64) -> DayFigures {
        let mut hourly = vec![2.0; 24];
        hourly[3] = at_trough;
        DayFigures {
            requests: 1000,
            misses,
            replica_minutes: rm,
            hourly,
        }
    }

    #[test]
    fn a_verdict_pools_the_days_and_names_the_worst_and_the_dominated() {
        let days = [day(0, 100.0, 0.0), day(1, 200.0, 1.0)];
        // Day 0: 5 misses (0.5%) at 150; day 1: 30 misses (3%, 2% beyond its bound's 1%) at 300.
        let policy = [figures(5, 150.0, 3.5), figures(30, 300.0, 1.5)];
        // Fleet 1 misses more both days; fleet 2 misses no more on day 1 at no more cost.
        let one = vec![figures(50, 100.0, 1.0), figures(90, 200.0, 1.0)];
        let two = vec![figures(6, 200.0, 2.0), figures(30, 300.0, 2.0)];
        let v = verdict("p", &policy, &days, &[&one, &two]);
        // Pooled: 5 + (30 - 10) beyond the bounds over 2,000 requests.
        assert!((v.excess_miss_pct - 1.25).abs() < 1e-9, "{v:?}");
        assert!((v.worst_day_excess_miss_pct - 2.0).abs() < 1e-9);
        assert_eq!(v.worst_day, 1);
        assert!((v.pooled_x_bound - 1.5).abs() < 1e-9);
        assert!((v.worst_x_bound - 1.5).abs() < 1e-9);
        assert_eq!(v.dominated_days, 1);
        assert_eq!(v.dominated_example, Some((1, 2)));
        // The trough: 3.5 billed in day 0's quietest hour against 1 needed.
        assert!((v.worst_trough_excess - 2.5).abs() < 1e-9);
    }

    #[test]
    fn the_jobs_count_every_bound_and_run() {
        let gpu = crate::sim::gpu::GpuModel::default();
        let source = super::super::shapes::source("azure-conv").unwrap();
        let mut plan = Plan {
            families: vec![Family {
                name: "week:azure-conv".to_owned(),
                weeks: Weeks::scaled(source, &gpu, super::super::Micro::Drawn).unwrap(),
                max: 4,
            }],
            seeds: vec![1, 2],
            days: 3,
            hw: Hardware::new(gpu),
            settings: Settings::default(),
            alone: false,
        };
        // Per seed: 3 bounds, and 2 policies and 4 fleets over the run.
        assert_eq!(jobs(&plan, 2), 2 * (3 + 6));
        // Alone, each of the 6 also plays each of the 3 days.
        plan.alone = true;
        assert_eq!(jobs(&plan, 2), 2 * (3 + 6 + 18));
    }
}
