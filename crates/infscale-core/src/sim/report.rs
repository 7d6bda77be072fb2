//! From a run to the numbers a user compares: SLO misses, TTFT percentiles, replica-minutes.
//!
//! A request fails when its first token came later than the SLO, when the activator answered
//! it with a timeout, when it never got a first token before the trace ended, or when a
//! scale-down cut it before it finished: a stream aborted mid-way is as failed, for its user, as
//! one that never started. The miss % counts every failed request once. Percentiles are over
//! the requests that got a first token. Goodput per GPU-hour is the requests that did not fail,
//! over the GPU-hours spent (replica-hours times [`GPUS_PER_REPLICA`]).

use super::cluster::RequestOutcome;
use super::gpu::GPUS_PER_REPLICA;
use super::run::Run;
use serde::Serialize;

/// One policy's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    pub requests: usize,
    /// Failed requests: late, rejected, unanswered or cut.
    pub slo_miss: usize,
    pub slo_miss_pct: f64,
    /// Requests whose first token was late (or never came), cut or not.
    pub late: usize,
    pub rejected: usize,
    /// Requests cut by a scale-down: their replica stopped, at the end of its drain,
    /// before they finished (those cut before a first token are misses too).
    pub cut: usize,
    pub ttft_p50_s: f64,
    pub ttft_p95_s: f64,
    pub ttft_p99_s: f64,
    /// Replica-minutes billed: every replica that existed in full, and the standby pool's time
    /// asleep at its price.
    pub replica_minutes: f64,
    /// Replica-minutes asleep in the standby pool, not priced (0 without a pool).
    pub standby_minutes: f64,
    pub peak_replicas: u32,
    pub scale_events: u32,
    /// Deletion-cost annotations written (the API writes `deletionCost` costs), per run.
    pub cost_writes: f64,
    /// Requests that met the TTFT SLO per GPU-hour spent (0 when no GPU-hour was spent).
    pub goodput_per_gpu_hour: f64,
}

impl Summary {
    /// The miss % with each request cut after a first token in time counted `cut_weight` times
    /// (1: the miss %; 0: cuts ignored, only late first tokens count).
    pub fn weighted_miss_pct(&self, cut_weight: f64) -> f64 {
        if self.requests == 0 {
            return self.slo_miss_pct;
        }
        let cut_in_time = self.slo_miss.saturating_sub(self.late) as f64;
        100.0 * (self.late as f64 + cut_weight * cut_in_time) / self.requests as f64
    }
}

/// The q-quantile of sorted values, interpolated linearly between ranks.
pub fn quantile(sorted: &[f32], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = q * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let w = rank - lo as f64;
    f64::from(sorted[lo]) * (1.0 - w) + f64::from(sorted[hi]) * w
}

/// Whether a request's first token missed the SLO (or never came).
fn is_late(o: &RequestOutcome, slo_s: f64) -> bool {
    o.first_token_s().is_none_or(|ttft| ttft > slo_s)
}

/// Failed requests: late, rejected, unanswered, or cut by a scale-down.
pub fn misses(outcomes: &[RequestOutcome], slo_s: f64) -> usize {
    outcomes
        .iter()
        .filter(|o| o.cut || is_late(o, slo_s))
        .count()
}

pub fn summarize(policy: &str, run: &Run, slo_s: f64) -> Summary {
    summarize_many(policy, std::slice::from_ref(run), slo_s)
}

/// One summary over several runs of a policy (traces from several seeds): misses and TTFT
/// percentiles over all their requests, replica-minutes and scale events averaged, the highest
/// peak.
pub fn summarize_many(policy: &str, runs: &[Run], slo_s: f64) -> Summary {
    let outcomes = || runs.iter().flat_map(|r| r.outcomes.iter());
    let mut ttfts: Vec<f32> = outcomes()
        .filter_map(|o| o.first_token_s().map(|s| s as f32))
        .collect();
    ttfts.sort_unstable_by(f32::total_cmp);
    let requests = outcomes().count();
    let slo_miss: usize = runs.iter().map(|r| misses(&r.outcomes, slo_s)).sum();
    let late = outcomes().filter(|o| is_late(o, slo_s)).count();
    let n = runs.len().max(1) as f64;
    let replica_seconds: f64 = runs.iter().map(|r| r.replica_seconds).sum();
    Summary {
        policy: policy.to_owned(),
        requests,
        slo_miss,
        slo_miss_pct: if requests == 0 {
            0.0
        } else {
            100.0 * slo_miss as f64 / requests as f64
        },
        late,
        rejected: outcomes().filter(|o| o.rejected).count(),
        cut: outcomes().filter(|o| o.cut).count(),
        ttft_p50_s: quantile(&ttfts, 0.50),
        ttft_p95_s: quantile(&ttfts, 0.95),
        ttft_p99_s: quantile(&ttfts, 0.99),
        replica_minutes: replica_seconds / 60.0 / n,
        standby_minutes: runs.iter().map(|r| r.standby_seconds).sum::<f64>() / 60.0 / n,
        peak_replicas: runs.iter().map(|r| r.peak).max().unwrap_or(0),
        scale_events: (runs.iter().map(|r| f64::from(r.scale_events)).sum::<f64>() / n).round()
            as u32,
        cost_writes: runs.iter().map(|r| f64::from(r.cost_writes)).sum::<f64>() / n,
        goodput_per_gpu_hour: goodput_per_gpu_hour(requests - slo_miss, replica_seconds),
    }
}

/// Good requests (in time, not cut) per GPU-hour, over `replica_seconds` of replicas.
pub fn goodput_per_gpu_hour(good: usize, replica_seconds: f64) -> f64 {
    let gpu_hours = replica_seconds / 3600.0 * GPUS_PER_REPLICA;
    if gpu_hours > 0.0 {
        good as f64 / gpu_hours
    } else {
        0.0
    }
}

/// The table `simulate` prints; with a bound, each cost also reads as a ratio to it. A policy
/// longer than a column shows by its role in `roles` (short name, full string) or a number, and
/// the full strings follow the table.
pub fn table(summaries: &[Summary], bound_minutes: Option<f64>, roles: &[(&str, &str)]) -> String {
    use crate::table::{Align::*, Names, Table};
    let names = Names::of(summaries.iter().map(|s| s.policy.as_str()), roles);
    let mut t = Table::new([
        ("policy", Left),
        ("SLO miss", Right),
        ("miss %", Right),
        ("cut", Right),
        ("TTFT p50", Right),
        ("TTFT p95", Right),
        ("TTFT p99", Right),
        ("replica-min", Right),
        ("peak", Right),
        ("scale events", Right),
        ("goodput/GPU-h", Right),
    ]);
    if bound_minutes.is_some() {
        t.column("x bound", Right);
    }
    for (s, name) in summaries.iter().zip(&names.shown) {
        t.row([
            name.clone(),
            s.slo_miss.to_string(),
            format!("{:.1}%", s.slo_miss_pct),
            s.cut.to_string(),
            format!("{:.2}s", s.ttft_p50_s),
            format!("{:.2}s", s.ttft_p95_s),
            format!("{:.2}s", s.ttft_p99_s),
            format!("{:.1}", s.replica_minutes),
            s.peak_replicas.to_string(),
            s.scale_events.to_string(),
            format!("{:.0}", s.goodput_per_gpu_hour),
        ]);
        if let Some(bound) = bound_minutes {
            t.push_cell(format!("{:.2}x", s.replica_minutes / bound));
        }
    }
    t.render() + &names.key()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert_eq!(quantile(&v, 0.25), 2.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn misses_count_late_rejected_unanswered_and_cut() {
        let o = |ttft: f32, rejected, cut| RequestOutcome {
            ttft,
            rejected,
            cut,
        };
        let outcomes = [
            o(0.5, false, false),
            o(2.5, false, false),
            o(f32::NAN, false, false),
            o(f32::NAN, true, false),
            o(2.0, false, false),
            o(0.5, false, true),
            o(f32::NAN, false, true),
        ];
        assert_eq!(misses(&outcomes, 2.0), 5);
        let run = Run {
            outcomes: outcomes.to_vec(),
            replica_seconds: 60.0,
            standby_seconds: 0.0,
            scale_events: 0,
            peak: 1,
            cost_writes: 0,
            timeline: Vec::new(),
            series: Vec::new(),
            ledger: Vec::new(),
            learned: Default::default(),
        };
        let s = summarize("p", &run, 2.0);
        assert_eq!((s.slo_miss, s.late, s.cut), (5, 4, 2));
        // A cut after a first token in time weighs as given; a cut before one is late anyway.
        assert_eq!(s.weighted_miss_pct(1.0), s.slo_miss_pct);
        assert!((s.weighted_miss_pct(0.0) - 400.0 / 7.0).abs() < 1e-9);
        assert!((s.weighted_miss_pct(3.0) - 700.0 / 7.0).abs() < 1e-9);
    }

    #[test]
    fn goodput_counts_requests_in_slo_per_gpu_hour() {
        // Three requests, two within a 2 s SLO, on one replica for 30 minutes: 2 / 0.5 h = 4.
        let o = |ttft: f32| RequestOutcome {
            ttft,
            rejected: false,
            cut: false,
        };
        let run = Run {
            outcomes: vec![o(0.5), o(1.5), o(3.0)],
            replica_seconds: 1800.0,
            standby_seconds: 0.0,
            scale_events: 0,
            peak: 1,
            cost_writes: 0,
            timeline: Vec::new(),
            series: Vec::new(),
            ledger: Vec::new(),
            learned: Default::default(),
        };
        let s = summarize("p", &run, 2.0);
        assert_eq!(s.goodput_per_gpu_hour, 4.0);
        // Over two runs, the requests in SLO over all the GPU-hours: (2 + 2) / 1 h.
        let twice = summarize_many("p", &[run.clone(), run.clone()], 2.0);
        assert_eq!(twice.goodput_per_gpu_hour, 4.0);
        // A request cut by a scale-down after a first token in time is not good output.
        let mut cut = run;
        cut.outcomes[0].cut = true;
        assert_eq!(summarize("p", &cut, 2.0).goodput_per_gpu_hour, 2.0);
        assert_eq!(goodput_per_gpu_hour(5, 0.0), 0.0);
        let table = table(&[s], None, &[]);
        assert!(
            table.lines().next().unwrap().ends_with("goodput/GPU-h"),
            "{table}"
        );
        assert!(table.lines().nth(1).unwrap().ends_with("  4"), "{table}");
    }

    #[test]
    fn a_long_policy_shows_by_its_role_and_every_figure_stands_under_its_heading() {
        let run = Run {
            outcomes: Vec::new(),
            replica_seconds: 600.0,
            standby_seconds: 0.0,
            scale_events: 0,
            peak: 1,
            cost_writes: 0,
            timeline: Vec::new(),
            series: Vec::new(),
            ledger: Vec::new(),
            learned: Default::default(),
        };
        let long = "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120";
        let rows = [summarize("cpu:60", &run, 2.0), summarize(long, &run, 2.0)];
        let text = table(&rows, Some(5.0), &[("recommended", long)]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].starts_with("recommended  "), "{text}");
        assert_eq!(lines[3], format!("recommended:  {long}"));
        for row in &lines[1..3] {
            assert_eq!(row.len(), lines[0].len(), "{text}");
            assert!(row.ends_with("  2.00x"), "{text}");
        }
    }
}
