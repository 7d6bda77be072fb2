//! Judging policies on many traces of one scenario instead of one draw.
//!
//! One trace is one draw of arrivals and lengths; a policy that looks cheap on it may have been
//! lucky. [`judge`] runs every policy on every trace (in parallel on all cores), each trace's
//! clairvoyant bound once for all policies, and keeps each policy's per-trace summaries, so that
//! [`Judged`] can report the mean, the 95th percentile and the worst per-trace miss %, the mean
//! cost, and the mean ratio of each trace's cost to that trace's own bound.

use super::bound::clairvoyant;
use super::replica::Hardware;
use super::report::{self, Summary};
use super::run::{self, Settings};
use super::trace::Trace;
use crate::control::reserve;
use crate::policy::Policy;
use crate::table::{Align::*, Names, Table};
use rayon::prelude::*;
use serde_json::{Map, Value};

/// One policy over many traces.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub policy: String,
    /// One summary per trace, in the traces' order.
    pub per_seed: Vec<Summary>,
    /// Each trace's replica-minutes over that trace's clairvoyant bound.
    pub bound_ratios: Vec<f64>,
    /// Each trace's miss % that even its bound has (requests no replica count serves in time),
    /// which the excess figures leave out.
    pub unavoidable: Vec<f64>,
}

/// The mean of some values (NaN for none).
fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}

/// The q-quantile of values, interpolated linearly between ranks (NaN for none).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    let w = rank - lo as f64;
    sorted[lo] * (1.0 - w) + sorted[hi] * w
}

impl Judged {
    fn miss_pcts(&self) -> Vec<f64> {
        self.per_seed.iter().map(|s| s.slo_miss_pct).collect()
    }

    pub fn slo_miss_pct_mean(&self) -> f64 {
        mean(self.per_seed.iter().map(|s| s.slo_miss_pct))
    }

    pub fn slo_miss_pct_p95(&self) -> f64 {
        quantile(&self.miss_pcts(), 0.95)
    }

    pub fn slo_miss_pct_max(&self) -> f64 {
        quantile(&self.miss_pcts(), 1.0)
    }

    /// Each trace's miss % beyond what its bound misses.
    fn excess_pcts(&self) -> Vec<f64> {
        self.per_seed
            .iter()
            .enumerate()
            .map(|(i, s)| s.slo_miss_pct - self.unavoidable.get(i).copied().unwrap_or(0.0))
            .collect()
    }

    /// The mean miss % beyond the bounds' own.
    pub fn excess_miss_pct_mean(&self) -> f64 {
        mean(self.excess_pcts().into_iter())
    }

    /// The worst trace's miss % beyond its bound's own.
    pub fn excess_miss_pct_max(&self) -> f64 {
        quantile(&self.excess_pcts(), 1.0)
    }

    /// Requests cut by scale-downs, per trace on average.
    pub fn cut_mean(&self) -> f64 {
        mean(self.per_seed.iter().map(|s| s.cut as f64))
    }

    pub fn replica_minutes_mean(&self) -> f64 {
        mean(self.per_seed.iter().map(|s| s.replica_minutes))
    }

    pub fn bound_ratio(&self) -> f64 {
        mean(self.bound_ratios.iter().copied())
    }

    /// Every key of a [`Summary`], numbers as their mean over the traces (null where a trace has
    /// none, e.g. a TTFT percentile with no first token), and the many-trace keys: `seeds`,
    /// `slo_miss_pct_p95`, `slo_miss_pct_max` and `bound_ratio`.
    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .per_seed
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .collect();
        let mut out = Map::new();
        if let Some(Value::Object(first)) = rows.first() {
            for (key, value) in first {
                let merged = match value {
                    Value::Number(_) => {
                        let values: Option<Vec<f64>> =
                            rows.iter().map(|r| r.get(key)?.as_f64()).collect();
                        values
                            .map(|v| mean(v.into_iter()))
                            .and_then(serde_json::Number::from_f64)
                            .map_or(Value::Null, Value::Number)
                    }
                    other => other.clone(),
                };
                out.insert(key.clone(), merged);
            }
        }
        out.insert("policy".to_owned(), Value::String(self.policy.clone()));
        let number = |v: f64| serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
        out.insert("seeds".to_owned(), Value::from(self.per_seed.len()));
        out.insert(
            "slo_miss_pct_p95".to_owned(),
            number(self.slo_miss_pct_p95()),
        );
        out.insert(
            "slo_miss_pct_max".to_owned(),
            number(self.slo_miss_pct_max()),
        );
        out.insert("bound_ratio".to_owned(), number(self.bound_ratio()));
        Value::Object(out)
    }
}

/// Every policy judged on the same traces.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// Each trace's clairvoyant bound, replica-minutes.
    pub bounds: Vec<f64>,
    /// The miss % of each bound's own plan: what no policy can avoid on that trace.
    pub bound_miss_pct: Vec<f64>,
    pub policies: Vec<Judged>,
}

impl Judgement {
    /// The mean of the traces' bounds.
    pub fn bound_mean(&self) -> f64 {
        mean(self.bounds.iter().copied())
    }

    /// The mean of the bounds' own miss %.
    pub fn bound_miss_pct_mean(&self) -> f64 {
        mean(self.bound_miss_pct.iter().copied())
    }
}

/// One day to judge on: its trace, its engine and how its loop runs.
#[derive(Debug, Clone)]
pub struct Day {
    pub trace: Trace,
    pub hw: Hardware,
    pub settings: Settings,
}

impl Day {
    /// Each of `traces` on one engine and loop.
    pub fn all(traces: Vec<Trace>, hw: &Hardware, settings: &Settings) -> Vec<Day> {
        traces
            .into_iter()
            .map(|trace| Day {
                trace,
                hw: hw.clone(),
                settings: settings.clone(),
            })
            .collect()
    }
}

/// Days a learning policy runs before each judged day: the reserve's memory, in days
/// ([`reserve::MEMORY_S`]), so each day starts with what two weeks of the
/// family taught it, as a target that has run that long would.
pub const HISTORY_DAYS: usize = (reserve::MEMORY_S / reserve::DAY_S) as usize;

/// The days before day `t`, oldest first: the list's previous [`HISTORY_DAYS`] (wrapping
/// round to its end), never the day itself, so a family of fewer days has fewer before each.
fn days_before(days: &[Day], t: usize) -> Vec<&Trace> {
    let n = days.len();
    let h = HISTORY_DAYS.min(n.saturating_sub(1));
    (1..=h)
        .rev()
        .map(|back| &days[(t + n - back) % n].trace)
        .collect()
}

/// Runs every policy on every day and each day's clairvoyant bound (capped at `cap` replicas),
/// in parallel on all cores: the bounds first (a warm start from the bound needs its count),
/// then the runs. `tick` is called once per job done (days x (policies + 1) of them, for a
/// progress bar).
pub fn judge(
    specs: &[String],
    policies: &[Policy],
    days: &[Day],
    cap: u32,
    tick: &(dyn Fn() + Sync),
) -> Judgement {
    let bounds: Vec<_> = days
        .par_iter()
        .with_max_len(1)
        .map(|d| {
            let b = clairvoyant(&d.trace, &d.hw, &d.settings, cap);
            tick();
            b
        })
        .collect();
    let settings: Vec<Settings> = days
        .iter()
        .zip(&bounds)
        .map(|(d, b)| d.settings.resolved(b))
        .collect();
    let jobs: Vec<(usize, usize)> = (0..days.len())
        .flat_map(|t| (0..policies.len()).map(move |p| (t, p)))
        .collect();
    let done: Vec<(usize, usize, Summary)> = jobs
        .par_iter()
        .with_max_len(1)
        .map(|&(t, p)| {
            let (day, settings) = (&days[t], &settings[t]);
            let before = days_before(days, t);
            let r = run::run_after(&before, &day.trace, &day.hw, &policies[p], settings);
            tick();
            (t, p, report::summarize(&specs[p], &r, settings.slo_ttft_s))
        })
        .collect();
    let bound_miss_pct: Vec<f64> = bounds
        .iter()
        .zip(days)
        .map(|(b, d)| 100.0 * b.misses as f64 / d.trace.requests.len().max(1) as f64)
        .collect();
    let bounds: Vec<f64> = bounds.iter().map(|b| b.replica_minutes).collect();
    let mut summaries: Vec<Vec<Option<Summary>>> = vec![vec![None; days.len()]; policies.len()];
    for (t, p, s) in done {
        summaries[p][t] = Some(s);
    }
    let policies = specs
        .iter()
        .zip(summaries)
        .map(|(spec, per_trace)| {
            let per_seed: Vec<Summary> = per_trace.into_iter().flatten().collect();
            let bound_ratios = per_seed
                .iter()
                .zip(&bounds)
                .map(|(s, b)| s.replica_minutes / b)
                .collect();
            Judged {
                policy: spec.clone(),
                per_seed,
                bound_ratios,
                unavoidable: bound_miss_pct.clone(),
            }
        })
        .collect();
    Judgement {
        bounds,
        bound_miss_pct,
        policies,
    }
}

/// The table `simulate --seeds` prints: per policy the mean, 95th percentile and worst per-trace
/// miss %, the mean replica-minutes, and the mean ratio to each trace's bound; long policies by
/// their role in `roles` or a number, the full strings below.
pub fn table(judged: &[Judged], roles: &[(&str, &str)]) -> String {
    let names = Names::of(judged.iter().map(|j| j.policy.as_str()), roles);
    rows(judged, &names).render() + &names.key()
}

/// The rows of [`table`], each policy shown by its name in `names`, for a caller that adds
/// columns.
pub fn rows(judged: &[Judged], names: &Names) -> Table {
    let mut t = Table::new([
        ("policy", Left),
        ("miss % mean", Right),
        ("miss % p95", Right),
        ("miss % max", Right),
        ("cut mean", Right),
        ("replica-min", Right),
        ("x bound", Right),
    ]);
    for (j, name) in judged.iter().zip(&names.shown) {
        t.row([
            name.clone(),
            format!("{:.2}%", j.slo_miss_pct_mean()),
            format!("{:.2}%", j.slo_miss_pct_p95()),
            format!("{:.2}%", j.slo_miss_pct_max()),
            format!("{:.1}", j.cut_mean()),
            format!("{:.1}", j.replica_minutes_mean()),
            format!("{:.2}x", j.bound_ratio()),
        ]);
    }
    t
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sim::trace::Scenario;

    /// One run's summary with `miss_pct` misses of 100 requests at `minutes` replica-minutes.
    pub(crate) fn summary(miss_pct: f64, minutes: f64) -> Summary {
        Summary {
            policy: "p".to_owned(),
            requests: 100,
            slo_miss: miss_pct as usize,
            slo_miss_pct: miss_pct,
            late: miss_pct as usize,
            rejected: 0,
            cut: 0,
            ttft_p50_s: f64::NAN,
            ttft_p95_s: 1.0,
            ttft_p99_s: 2.0,
            replica_minutes: minutes,
            standby_minutes: 0.0,
            peak_replicas: 3,
            scale_events: 4,
            cost_writes: 0.0,
            goodput_per_gpu_hour: 0.0,
        }
    }

    #[test]
    fn the_figures_are_per_trace_means_and_quantiles() {
        let j = Judged {
            policy: "p".to_owned(),
            per_seed: vec![summary(0.0, 10.0), summary(4.0, 20.0), summary(2.0, 30.0)],
            bound_ratios: vec![1.0, 2.0, 3.0],
            unavoidable: vec![0.0, 1.0, 0.0],
        };
        assert_eq!(j.slo_miss_pct_mean(), 2.0);
        assert_eq!(j.excess_miss_pct_mean(), 5.0 / 3.0);
        assert_eq!(j.excess_miss_pct_max(), 3.0);
        assert_eq!(j.slo_miss_pct_max(), 4.0);
        assert!((j.slo_miss_pct_p95() - 3.8).abs() < 1e-12);
        assert_eq!(j.replica_minutes_mean(), 20.0);
        assert_eq!(j.bound_ratio(), 2.0);
        let v = j.to_json();
        assert_eq!(v["replica_minutes"], 20.0);
        assert_eq!(v["slo_miss"], 2.0);
        assert_eq!(v["seeds"], 3);
        assert!(v["ttft_p50_s"].is_null());
        assert_eq!(v["slo_miss_pct_max"], 4.0);
        assert!(table(&[j], &[]).contains("  2.00%"));
    }

    #[test]
    fn a_day_learns_from_the_days_before_it_never_from_itself() {
        let hw = Hardware::new(crate::sim::gpu::GpuModel::default());
        let days_of = |n: u64| {
            let traces = (1..=n)
                .map(|seed| Scenario::steady(1.0, 10.0 + seed as f64, seed).generate())
                .collect::<Result<Vec<_>, _>>();
            traces.map(|t| Day::all(t, &hw, &Settings::default()))
        };
        let Ok(days) = days_of(20) else {
            panic!("the steady scenario generates");
        };
        // Two weeks before day 16, oldest first; day 3's wrap round the list's end.
        let durations =
            |t: usize| -> Vec<f64> { days_before(&days, t).iter().map(|d| d.duration).collect() };
        let expected: Vec<f64> = (2..16).map(|i| days[i].trace.duration).collect();
        assert_eq!(durations(16), expected);
        let expected: Vec<f64> = (9..20)
            .chain(0..3)
            .map(|i| days[i].trace.duration)
            .collect();
        assert_eq!(durations(3), expected);
        // Three days: two before each, never the day itself; one day: none.
        let Ok(few) = days_of(3) else {
            panic!("the steady scenario generates");
        };
        assert_eq!(days_before(&few, 0).len(), 2);
        let Ok(one) = days_of(1) else {
            panic!("the steady scenario generates");
        };
        assert!(days_before(&one, 0).is_empty());
    }

    #[test]
    fn judging_matches_single_runs_and_shares_one_bound_per_trace() {
        let traces: Vec<Trace> = (1..=2)
            .map(|seed| Scenario::steady(4.0, 120.0, seed).generate().unwrap())
            .collect();
        let hw = Hardware::new(crate::sim::gpu::GpuModel::default());
        let settings = Settings::default();
        let specs = vec!["queue:24".to_owned(), "cpu:60".to_owned()];
        let policies: Vec<Policy> = specs.iter().map(|s| Policy::parse(s).unwrap()).collect();
        let ticks = std::sync::atomic::AtomicUsize::new(0);
        let days = Day::all(traces.clone(), &hw, &settings);
        let judged = judge(&specs, &policies, &days, 8, &|| {
            ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(ticks.into_inner(), 2 * 3);
        for (j, policy) in judged.policies.iter().zip(&policies) {
            for (t, trace) in traces.iter().enumerate() {
                let alone = report::summarize(
                    &j.policy,
                    &run::run(trace, &hw, policy, &settings),
                    settings.slo_ttft_s,
                );
                assert_eq!(j.per_seed[t], alone);
                let bound = clairvoyant(trace, &hw, &settings, 8);
                assert_eq!(judged.bounds[t], bound.replica_minutes);
                assert_eq!(
                    j.bound_ratios[t],
                    alone.replica_minutes / bound.replica_minutes
                );
            }
        }
    }
}
