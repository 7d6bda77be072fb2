//! The tuner: many policies over one trace, the Pareto frontier of misses against cost, and the
//! cheapest policy under a miss budget as a ready-to-apply KEDA ScaledObject.

use super::report::{self, Summary};
use super::run;
use super::seeds::Day;
use crate::policy::Policy;
use rayon::prelude::*;
use std::fmt::Write;

/// The values searched on each axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub metric: String,
    pub targets: Vec<f64>,
    /// Lookaheads, seconds or `auto` ("0": none).
    pub lookaheads: Vec<String>,
    /// How the lookahead projects: "trend" or "history" (only with a lookahead).
    pub forecasts: Vec<String>,
    pub down_windows: Vec<u32>,
    /// Scale-down policy keys: "" (the default 100% per 15 s), "downpods=1", "downpercent=50"...
    pub down_policies: Vec<String>,
    /// `None` keeps a floor of replicas (each of [`Grid::mins`]); `Some(s)` allows zero with
    /// that cooldown.
    pub cooldowns: Vec<Option<f64>>,
    /// The floors a `None` cooldown keeps, replicas (1: no `min` key).
    pub mins: Vec<u32>,
    pub max: u32,
    /// Keys added to every point, e.g. "trend=60,upwindow=30" ("" for none).
    pub with: String,
    /// A further metric per point, `metric:target` (e.g. "kv:0.8"), or "" for none: the point
    /// then scales on both, the HPA taking the larger count.
    pub also: Vec<String>,
    /// Whether points keep the pods' deletion cost (`deletioncost=true`), one point per value.
    pub deletion_costs: Vec<bool>,
    /// Whether points hold replicas through the gaps seen (`hold=auto`), one point per value.
    pub holds: Vec<bool>,
}

impl Default for Grid {
    fn default() -> Self {
        Grid {
            metric: "queue".to_owned(),
            targets: vec![64.0, 96.0, 128.0, 160.0, 192.0],
            lookaheads: ["0", "45", "60", "90"].map(String::from).to_vec(),
            forecasts: vec!["trend".to_owned(), "history".to_owned()],
            down_windows: vec![30, 60, 120, 300],
            down_policies: vec![String::new(), "downpods=1".to_owned()],
            cooldowns: vec![None, Some(60.0), Some(120.0)],
            mins: vec![1],
            max: 8,
            with: String::new(),
            also: vec![String::new()],
            deletion_costs: vec![false],
            holds: vec![false],
        }
    }
}

impl Grid {
    /// Every combination, as policy strings (a forecast only with a lookahead). A point with a
    /// further metric that cannot work (a `kv` beside `min=0` on a metric that cannot wake the
    /// target) is left out.
    /// The most points [`Grid::policies`] can give: the product of the axes' lengths (a point
    /// without a lookahead has no forecast, so this is an upper bound).
    pub fn most_points(&self) -> f64 {
        [
            self.targets.len(),
            self.lookaheads.len(),
            self.forecasts.len(),
            self.down_windows.len(),
            self.down_policies.len(),
            self.floors().len(),
            self.also.len().max(1),
            self.deletion_costs.len(),
            self.holds.len(),
        ]
        .iter()
        .map(|&n| n as f64)
        .product()
    }

    pub fn policies(&self) -> Vec<String> {
        let none = [String::new()];
        let alsos = if self.also.is_empty() {
            &none[..]
        } else {
            &self.also[..]
        };
        let mut heads = Vec::new();
        for also in alsos {
            let (metric, extra) = match also.split_once(':') {
                Some((m, t)) => (
                    format!("{}+{}", self.metric, m.trim()),
                    format!(",{}", t.trim()),
                ),
                None => (self.metric.clone(), String::new()),
            };
            self.heads(&metric, &extra, &mut heads);
        }
        // Each axis after the head as the keys it adds, in the order a policy string reads.
        let windows: Vec<String> = self
            .down_windows
            .iter()
            .map(|w| format!(",downwindow={w}"))
            .collect();
        let downs: Vec<String> = self
            .down_policies
            .iter()
            .map(|d| {
                if d.is_empty() {
                    String::new()
                } else {
                    format!(",{d}")
                }
            })
            .collect();
        let cooldowns = self.floors();
        let holds: Vec<String> = self
            .holds
            .iter()
            .map(|&h| {
                if h {
                    ",hold=auto".to_owned()
                } else {
                    String::new()
                }
            })
            .collect();
        let with = if self.with.is_empty() {
            String::new()
        } else {
            format!(",{}", self.with)
        };
        let costs: Vec<&str> = self
            .deletion_costs
            .iter()
            .map(|&c| if c { ",deletioncost=true" } else { "" })
            .collect();
        let mut out = Vec::new();
        for head in &heads {
            for window in &windows {
                for down in &downs {
                    for cooldown in &cooldowns {
                        for hold in &holds {
                            let spec = format!(
                                "{head}{window}{down}{cooldown},max={}{hold}{with}",
                                self.max
                            );
                            if head.contains('+') && Policy::parse(&spec).is_err() {
                                continue;
                            }
                            out.extend(costs.iter().map(|c| format!("{spec}{c}")));
                        }
                    }
                }
            }
        }
        out
    }

    /// The floor keys of the cooldowns and mins: `,min=0,cooldown=S` for each cooldown, and
    /// for `None` one per min (`""` for 1).
    fn floors(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.cooldowns {
            match c {
                Some(c) => out.push(format!(",min=0,cooldown={c}")),
                None => out.extend(self.mins.iter().map(|&m| match m {
                    1 => String::new(),
                    m => format!(",min={m}"),
                })),
            }
        }
        out
    }

    /// The heads (`metric:target[,lookahead=..]`) for one metric list; `extra` follows the
    /// target (`,0.8` for a further metric's).
    fn heads(&self, metric: &str, extra: &str, heads: &mut Vec<String>) {
        for &target in &self.targets {
            for lookahead in &self.lookaheads {
                if lookahead == "0" {
                    heads.push(format!("{metric}:{target}{extra}"));
                    continue;
                }
                for forecast in &self.forecasts {
                    let mut head = format!("{metric}:{target}{extra},lookahead={lookahead}");
                    if forecast != "trend" {
                        let _ = write!(head, ",forecast={forecast}");
                    }
                    heads.push(head);
                }
            }
        }
    }
}

/// `count` points spread evenly over `all` (every one when there are fewer).
pub fn sample(all: Vec<String>, count: usize) -> Vec<String> {
    if count == 0 || count >= all.len() {
        return all;
    }
    let step = all.len() as f64 / count as f64;
    (0..count)
        .map(|i| all[((i as f64 * step) as usize).min(all.len() - 1)].clone())
        .collect()
}

/// Runs every policy on every day, in parallel on all cores, and summarises each policy over
/// all its runs; `tick` is called once per policy done (for a progress bar). A day's warm start
/// from the bound must be resolved ([`run::Settings::resolved`]), or each run computes the bound.
pub fn run_points(
    specs: &[String],
    policies: &[Policy],
    days: &[Day],
    tick: &(dyn Fn() + Sync),
) -> Vec<Summary> {
    specs
        .par_iter()
        .zip(policies)
        .map(|(spec, policy)| {
            let runs: Vec<_> = days
                .iter()
                .map(|d| run::run(&d.trace, &d.hw, policy, &d.settings))
                .collect();
            tick();
            let slo = days.first().map_or(2.0, |d| d.settings.slo_ttft_s);
            report::summarize_many(spec, &runs, slo)
        })
        .collect()
}

/// The points no other point beats on both misses and cost, cheapest first; misses weigh each
/// cut request `cut_weight` times ([`Summary::weighted_miss_pct`]).
pub fn pareto(summaries: &[Summary], cut_weight: f64) -> Vec<Summary> {
    let miss = |s: &Summary| s.weighted_miss_pct(cut_weight);
    let mut sorted: Vec<&Summary> = summaries.iter().collect();
    sorted.sort_by(|a, b| {
        a.replica_minutes
            .total_cmp(&b.replica_minutes)
            .then(miss(a).total_cmp(&miss(b)))
    });
    let mut frontier: Vec<Summary> = Vec::new();
    let mut best_miss = f64::INFINITY;
    for s in sorted {
        if miss(s) < best_miss {
            best_miss = miss(s);
            frontier.push(s.clone());
        }
    }
    frontier
}

/// The cheapest point with at most `max_miss_pct` misses, cuts weighed as in [`pareto`].
pub fn cheapest_under(
    summaries: &[Summary],
    max_miss_pct: f64,
    cut_weight: f64,
) -> Option<&Summary> {
    summaries
        .iter()
        .filter(|s| s.weighted_miss_pct(cut_weight) <= max_miss_pct)
        .min_by(|a, b| a.replica_minutes.total_cmp(&b.replica_minutes))
}

/// Where the ScaledObject points.
#[cfg(test)]
mod tests {
    use super::*;

    fn s(policy: &str, miss: f64, cost: f64) -> Summary {
        Summary {
            policy: policy.to_owned(),
            requests: 100,
            slo_miss: miss as usize,
            slo_miss_pct: miss,
            late: miss as usize,
            rejected: 0,
            cut: 0,
            ttft_p50_s: 0.0,
            ttft_p95_s: 0.0,
            ttft_p99_s: 0.0,
            replica_minutes: cost,
            standby_minutes: 0.0,
            peak_replicas: 1,
            scale_events: 0,
            cost_writes: 0.0,
            goodput_per_gpu_hour: 0.0,
        }
    }

    #[test]
    fn a_further_metric_adds_combined_points() {
        let grid = Grid {
            targets: vec![64.0],
            lookaheads: vec!["0".to_owned()],
            down_windows: vec![60],
            down_policies: vec![String::new()],
            cooldowns: vec![None, Some(60.0)],
            also: vec![String::new(), "kv:0.8".to_owned()],
            ..Grid::default()
        };
        assert_eq!(
            grid.policies(),
            [
                "queue:64,downwindow=60,max=8",
                "queue:64,downwindow=60,min=0,cooldown=60,max=8",
                "queue+kv:64,0.8,downwindow=60,max=8",
                "queue+kv:64,0.8,downwindow=60,min=0,cooldown=60,max=8",
            ]
        );
        for p in grid.policies() {
            Policy::parse(&p).unwrap();
        }
    }

    #[test]
    fn the_frontier_keeps_only_undominated_points() {
        let points = [
            s("a", 5.0, 10.0),
            s("b", 1.0, 20.0),
            s("c", 2.0, 25.0),
            s("d", 0.0, 30.0),
            s("e", 5.0, 12.0),
        ];
        let names: Vec<String> = pareto(&points, 0.0).into_iter().map(|p| p.policy).collect();
        assert_eq!(names, ["a", "b", "d"]);
        assert_eq!(cheapest_under(&points, 1.0, 0.0).unwrap().policy, "b");
        assert!(cheapest_under(&points, -1.0, 0.0).is_none());
    }

    #[test]
    fn weighed_cuts_move_a_point_off_the_frontier() {
        // One late first token and three streams cut after theirs: 4 failed of 100.
        let mut cutting = s("cutting", 4.0, 10.0);
        cutting.late = 1;
        cutting.cut = 3;
        let careful = s("careful", 2.0, 11.0);
        let both = [cutting, careful];
        let names = |w| -> Vec<String> { pareto(&both, w).into_iter().map(|p| p.policy).collect() };
        assert_eq!(names(0.0), ["cutting"]);
        // Weighed 0 the cuts vanish (1% against 2%); weighed 1 each is a failure: 4% against 2%.
        assert_eq!(names(1.0), ["cutting", "careful"]);
        assert_eq!(cheapest_under(&both, 2.5, 1.0).unwrap().policy, "careful");
        let grid = Grid {
            deletion_costs: vec![false, true],
            ..Grid::default()
        };
        assert_eq!(grid.policies().len(), 2 * Grid::default().policies().len());
        assert!(grid
            .policies()
            .iter()
            .any(|p| p.ends_with(",deletioncost=true")));
    }

    #[test]
    fn the_grid_spells_policies_that_parse() {
        let all = Grid::default().policies();
        // 5 targets x (no lookahead + 3 lookaheads x 2 forecasts) x 4 windows x 2 x 3 cooldowns.
        assert_eq!(all.len(), 5 * (1 + 3 * 2) * 4 * 2 * 3);
        assert!(all.iter().any(|p| p.contains(",forecast=history,")));
        assert!(!all
            .iter()
            .any(|p| p.contains("forecast") && !p.contains("lookahead")));
        for spec in sample(all, 50) {
            Policy::parse(&spec).unwrap();
        }
    }
}
