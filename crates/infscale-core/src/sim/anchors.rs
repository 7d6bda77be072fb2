//! What knowing the family buys: each family's best fixed fleet (what an operator without an
//! autoscaler runs) and the best policy of a bounded search chosen on that family alone, beside
//! which the suite judges a policy. A policy a fixed fleet beats on misses at no more cost buys
//! nothing; one far dearer than the family's best search leaves money on the table.
//!
//! Both anchors are the cheapest point meeting [`Bar`] over the family's days, misses counted
//! in excess of each day's bound's own. The search's grid is [`search_grid`]: the fixed fleets
//! and the recommendation's neighbourhood.

use super::seeds::{Judged, Judgement};
use super::tune::Grid;
use serde::{Deserialize, Serialize};

/// What a family's anchor must miss at most, percent in excess of the bound's own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    /// The mean over the family's days.
    pub mean_pct: f64,
    /// Its worst day.
    pub day_pct: f64,
}

/// The bar: at most 0.5% on average and 2% on the worst day.
pub const BAR: Bar = Bar {
    mean_pct: 0.5,
    day_pct: 2.0,
};

impl Bar {
    pub fn met_by(&self, p: &Point) -> bool {
        p.excess_mean <= self.mean_pct && p.excess_max <= self.day_pct
    }
}

/// One policy's figures over a family's days.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub policy: String,
    /// The mean miss % in excess of each day's bound's own.
    pub excess_mean: f64,
    /// The worst day's miss % in excess of that day's bound's own.
    pub excess_max: f64,
    /// The mean replica-minutes over the days.
    pub replica_minutes: f64,
    /// The mean over the days of each day's cost over its bound.
    pub bound_ratio: f64,
}

impl Point {
    pub fn of(j: &Judged) -> Point {
        Point {
            policy: j.policy.clone(),
            excess_mean: j.excess_miss_pct_mean(),
            excess_max: j.excess_miss_pct_max(),
            replica_minutes: j.replica_minutes_mean(),
            bound_ratio: j.bound_ratio(),
        }
    }

    /// Whether `fleet` misses no more, on average and on the worst day, at no more cost.
    pub fn dominated_by(&self, fleet: &Point) -> bool {
        fleet.excess_mean <= self.excess_mean
            && fleet.excess_max <= self.excess_max
            && fleet.replica_minutes <= self.replica_minutes
    }

    /// This point's cost as a multiple of `best`'s.
    pub fn times(&self, best: &Point) -> f64 {
        self.replica_minutes / best.replica_minutes
    }
}

/// The best of some points: the cheapest that meets the bar or, when none does, the one that
/// misses least (mean, then worst day, then cost).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    #[serde(flatten)]
    pub point: Point,
    /// Whether it meets the bar (when false, nothing among the points did).
    pub meets_bar: bool,
}

/// The best of `points` against `bar` (None for no points).
pub fn best<'a>(points: impl IntoIterator<Item = &'a Point>, bar: &Bar) -> Option<Best> {
    let points: Vec<&Point> = points.into_iter().collect();
    let cheapest = points
        .iter()
        .filter(|p| bar.met_by(p))
        .min_by(|a, b| a.replica_minutes.total_cmp(&b.replica_minutes));
    if let Some(p) = cheapest {
        return Some(Best {
            point: (*p).clone(),
            meets_bar: true,
        });
    }
    points
        .into_iter()
        .min_by(|a, b| {
            a.excess_mean
                .total_cmp(&b.excess_mean)
                .then(a.excess_max.total_cmp(&b.excess_max))
                .then(a.replica_minutes.total_cmp(&b.replica_minutes))
        })
        .map(|p| Best {
            point: p.clone(),
            meets_bar: false,
        })
}

/// A fixed fleet of `n` replicas as a policy string (the metric never moves it).
pub fn fixed_fleet(n: u32) -> String {
    format!("queue:192,min={n},max={n}")
}

/// The replica count of a [`fixed_fleet`] policy string.
pub fn fleet_size(policy: &str) -> Option<u32> {
    let rest = policy.strip_prefix("queue:192,min=")?;
    let (min, max) = rest.split_once(",max=")?;
    (min == max).then(|| min.parse().ok()).flatten()
}

/// The search's grid besides the fixed fleets: the recommendation's neighbourhood. `queue`
/// with `work` beside it (targets 128 and 192; 0.8 and 1.0), the history forecast a 45 or 90 s
/// lookahead ahead, scale-down windows of 120 and 300 s, and floors of 0 (scale to zero after
/// five idle minutes) to 4 replicas: 80 points.
pub fn search_grid(max: u32) -> Grid {
    Grid {
        metric: "queue".to_owned(),
        targets: vec![128.0, 192.0],
        lookaheads: vec!["45".to_owned(), "90".to_owned()],
        forecasts: vec!["history".to_owned()],
        down_windows: vec![120, 300],
        down_policies: vec![String::new()],
        cooldowns: vec![Some(300.0), None],
        mins: vec![1, 2, 3, 4],
        max,
        with: String::new(),
        also: vec!["work:0.8".to_owned(), "work:1.0".to_owned()],
        deletion_costs: vec![false],
        holds: vec![false],
    }
}

/// The search's points: the fixed fleets 1..=max, then `sample` points spread over the
/// [`search_grid`] (0: all of it).
pub fn search_points(max: u32, sample: usize) -> Vec<String> {
    let mut out: Vec<String> = (1..=max).map(fixed_fleet).collect();
    out.extend(super::tune::sample(search_grid(max).policies(), sample));
    out
}

/// A family's anchors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyAnchors {
    pub family: String,
    pub days: usize,
    /// The mean of the days' bounds, replica-minutes: what tells a cache of other days apart.
    pub clairvoyant_replica_minutes: f64,
    /// The best fixed fleet (None when the search held none).
    pub best_fixed: Option<Best>,
    /// The best point of the search, fixed fleets included.
    pub best_search: Option<Best>,
}

/// What the search found on every family, and how it was run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anchors {
    pub bar: Bar,
    pub days_per_family: u64,
    /// Points searched per family.
    pub points: usize,
    pub families: Vec<FamilyAnchors>,
}

impl Anchors {
    /// The anchors of the family named `name`.
    pub fn of(&self, name: &str) -> Option<&FamilyAnchors> {
        self.families.iter().find(|f| f.family == name)
    }
}

/// A family's anchors from the search's judgement on it: the fixed fleets among its points
/// ([`fleet_size`]) and every point.
pub fn of_family(family: &str, j: &Judgement, bar: &Bar) -> FamilyAnchors {
    let points: Vec<Point> = j.policies.iter().map(Point::of).collect();
    let fleets = points.iter().filter(|p| fleet_size(&p.policy).is_some());
    FamilyAnchors {
        family: family.to_owned(),
        days: j.bounds.len(),
        clairvoyant_replica_minutes: j.bound_mean(),
        best_fixed: best(fleets, bar),
        best_search: best(&points, bar),
    }
}

/// One judged policy against its family's anchors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Against {
    /// Whether the family's best fixed fleet misses no more at no more cost.
    pub dominated_by_fixed: bool,
    /// Its cost as a multiple of the family's best search point's.
    pub x_best_search: f64,
}

impl FamilyAnchors {
    pub fn against(&self, p: &Point) -> Against {
        Against {
            dominated_by_fixed: self
                .best_fixed
                .as_ref()
                .is_some_and(|f| p.dominated_by(&f.point)),
            x_best_search: self
                .best_search
                .as_ref()
                .map_or(f64::NAN, |b| p.times(&b.point)),
        }
    }
}

/// One policy over every family, against each family's anchors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    /// The mean of its cost over the family's best search point's, over the families whose
    /// best search point meets the bar (elsewhere the point it is measured against fails too).
    pub x_best_search_mean: f64,
    /// How many families that mean is over.
    pub x_best_search_families: usize,
    /// The highest family mean excess miss %, and that family.
    pub worst_mean: (f64, String),
    /// The highest single day's excess miss %, and its family.
    pub worst_day: (f64, String),
    /// The families whose best fixed fleet dominates it, by name.
    pub dominated_in: Vec<String>,
}

/// The summary of the policy at `index` of every family's judgement.
pub fn summary(judged: &[(&FamilyAnchors, &Judgement)], index: usize) -> Summary {
    let mut policy = String::new();
    let (mut ratios, mut dominated_in) = (Vec::new(), Vec::new());
    let mut worst_mean = (f64::NEG_INFINITY, String::new());
    let mut worst_day = (f64::NEG_INFINITY, String::new());
    for (a, j) in judged {
        let Some(p) = j.policies.get(index).map(Point::of) else {
            continue;
        };
        let against = a.against(&p);
        if a.best_search.as_ref().is_some_and(|b| b.meets_bar) {
            ratios.push(against.x_best_search);
        }
        if against.dominated_by_fixed {
            dominated_in.push(a.family.clone());
        }
        if p.excess_mean > worst_mean.0 {
            worst_mean = (p.excess_mean, a.family.clone());
        }
        if p.excess_max > worst_day.0 {
            worst_day = (p.excess_max, a.family.clone());
        }
        policy = p.policy;
    }
    Summary {
        policy,
        x_best_search_mean: ratios.iter().sum::<f64>() / ratios.len() as f64,
        x_best_search_families: ratios.len(),
        worst_mean,
        worst_day,
        dominated_in,
    }
}

/// How a family's anchors read in a table: "3 replicas (or a policy), mean / worst day % at
/// N.NNx bound", marked when it does not meet the bar.
pub fn describe(b: &Option<Best>, fleet: bool) -> String {
    let Some(b) = b else {
        return "none searched".to_owned();
    };
    let p = &b.point;
    let what = match fleet_size(&p.policy) {
        Some(n) if fleet => format!("{n} replicas"),
        Some(n) => format!("{n} replicas fixed"),
        None => p.policy.clone(),
    };
    format!(
        "{what}: excess misses {:.2}% mean, {:.2}% worst day; {:.2}x bound{}",
        p.excess_mean,
        p.excess_max,
        p.bound_ratio,
        if b.meets_bar {
            String::new()
        } else {
            "; none of the points meets the bar, this one misses least".to_owned()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::seeds::tests::summary as run;

    fn point(policy: &str, mean: f64, max: f64, minutes: f64) -> Point {
        Point {
            policy: policy.to_owned(),
            excess_mean: mean,
            excess_max: max,
            replica_minutes: minutes,
            bound_ratio: minutes / 10.0,
        }
    }

    /// A policy judged on days of the given (miss %, replica-minutes).
    fn judged(policy: &str, days: &[(f64, f64)]) -> Judged {
        Judged {
            policy: policy.to_owned(),
            per_seed: days.iter().map(|&(m, c)| run(m, c)).collect(),
            bound_ratios: days.iter().map(|&(_, c)| c / 10.0).collect(),
            unavoidable: vec![0.0; days.len()],
        }
    }

    fn judgement(policies: Vec<Judged>) -> Judgement {
        let n = policies[0].per_seed.len();
        Judgement {
            bounds: vec![10.0; n],
            bound_miss_pct: vec![0.0; n],
            policies,
        }
    }

    #[test]
    fn the_best_fixed_fleet_is_the_cheapest_meeting_the_bar_on_every_day() {
        // Two replicas: fine on average, one bad day; three hold every day; four cost more.
        let j = judgement(vec![
            judged(&fixed_fleet(1), &[(9.0, 10.0), (12.0, 10.0)]),
            judged(&fixed_fleet(2), &[(0.0, 20.0), (2.5, 20.0)]),
            judged(&fixed_fleet(3), &[(0.0, 30.0), (0.4, 30.0)]),
            judged(&fixed_fleet(4), &[(0.0, 40.0), (0.0, 40.0)]),
            judged("queue:64", &[(0.1, 15.0), (0.2, 15.0)]),
        ]);
        let a = of_family("f", &j, &BAR);
        let fixed = a.best_fixed.as_ref().unwrap();
        assert_eq!(fleet_size(&fixed.point.policy), Some(3));
        assert!(fixed.meets_bar);
        assert_eq!(fixed.point.bound_ratio, 3.0);
        // The search's best is any point, the cheaper reactive one here.
        assert_eq!(a.best_search.as_ref().unwrap().point.policy, "queue:64");
        assert!(describe(&a.best_fixed, true)
            .starts_with("3 replicas: excess misses 0.20% mean, 0.40% worst day; 3.00x bound"));
    }

    #[test]
    fn with_no_fleet_meeting_the_bar_the_one_missing_least_is_named() {
        let j = judgement(vec![
            judged(&fixed_fleet(1), &[(9.0, 10.0)]),
            judged(&fixed_fleet(2), &[(3.0, 20.0)]),
        ]);
        let a = of_family("f", &j, &BAR);
        let fixed = a.best_fixed.as_ref().unwrap();
        assert!(!fixed.meets_bar);
        assert_eq!(fleet_size(&fixed.point.policy), Some(2));
        assert!(describe(&a.best_fixed, true).contains("none of the points meets the bar"));
    }

    #[test]
    fn a_fleet_dominates_what_it_matches_on_misses_at_no_more_cost() {
        let fleet = point(&fixed_fleet(3), 0.0, 0.5, 30.0);
        assert!(point("dear", 0.0, 0.5, 31.0).dominated_by(&fleet));
        assert!(point("worse", 0.1, 0.6, 30.0).dominated_by(&fleet));
        assert!(!point("cheaper", 0.2, 3.0, 29.0).dominated_by(&fleet));
        assert!(!point("better day", 0.0, 0.4, 40.0).dominated_by(&fleet));
        assert!(!point("better mean", 0.0, 0.6, 40.0).dominated_by(&point("f", 0.1, 0.5, 30.0)));
    }

    #[test]
    fn the_summary_reads_every_family_against_its_own_anchors() {
        let calm = judgement(vec![
            judged(&fixed_fleet(2), &[(0.0, 20.0)]),
            judged("reactive", &[(0.0, 15.0)]),
            judged("judged", &[(0.1, 30.0)]),
        ]);
        let bursty = judgement(vec![
            judged(&fixed_fleet(2), &[(0.0, 20.0)]),
            judged("reactive", &[(5.0, 10.0)]),
            judged("judged", &[(1.0, 40.0)]),
        ]);
        // Where nothing meets the bar, the cost multiple is shown but not averaged.
        let hard = judgement(vec![
            judged(&fixed_fleet(2), &[(9.0, 20.0)]),
            judged("reactive", &[(12.0, 10.0)]),
            judged("judged", &[(8.0, 5.0)]),
        ]);
        let a = of_family("calm", &calm, &BAR);
        let b = of_family("bursty", &bursty, &BAR);
        let h = of_family("hard", &hard, &BAR);
        assert_eq!(a.best_search.as_ref().unwrap().point.policy, "reactive");
        assert_eq!(b.best_search.as_ref().unwrap().point.policy, fixed_fleet(2));
        assert_eq!(h.best_search.as_ref().unwrap().point.policy, "judged");
        let s = summary(&[(&a, &calm), (&b, &bursty), (&h, &hard)], 2);
        assert_eq!(s.policy, "judged");
        // 30 / 15 on calm, 40 / 20 on bursty.
        assert_eq!(s.x_best_search_mean, 2.0);
        assert_eq!(s.x_best_search_families, 2);
        assert_eq!(s.worst_mean, (8.0, "hard".to_owned()));
        assert_eq!(s.worst_day, (8.0, "hard".to_owned()));
        assert_eq!(s.dominated_in, ["calm", "bursty"]);
    }

    #[test]
    fn the_search_holds_the_fleets_and_the_recommendations_neighbourhood() {
        let all = search_points(8, 0);
        assert_eq!(all.len(), 8 + 80);
        assert_eq!(fleet_size(&all[2]), Some(3));
        assert_eq!(fleet_size("queue:192,min=3,max=4"), None);
        for floor in ["min=0,cooldown=300", "min=2", "min=4"] {
            assert!(all.iter().any(|p| p.contains(floor)), "{floor}");
        }
        assert!(all.contains(
            &"queue+work:192,1.0,lookahead=45,forecast=history,downwindow=300,max=8".to_owned()
        ));
        for p in &all {
            crate::policy::Policy::parse(p).unwrap();
        }
        let sampled = search_points(8, 10);
        assert_eq!(sampled.len(), 18);
    }
}
