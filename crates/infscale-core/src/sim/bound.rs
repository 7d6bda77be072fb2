//! The clairvoyant lower bound: what a planner that knows the whole trace in advance would pay.
//!
//! Window by window (15 s, the HPA's period), it finds the fewest ready replicas with which every
//! request that is waiting or arrives in the window gets its first token within the SLO (or, where
//! no count can manage that, misses no more than the most replicas would), simulating the same
//! engine with replicas that are ready exactly when wanted. Then it prices that plan with the
//! cold start paid in full: for each level of capacity, replicas are billed while needed, through
//! gaps shorter than a cold start (cheaper than stopping and starting again), and for one cold
//! start before each start. Replicas draining after a step down are not billed, so this is a
//! bound from below on what any policy on the same engine can cost.
//!
//! The start is the one the runs have: the GPU model's cold start, whatever sets it (a
//! `cold_start_s` of 10 s prices every start at 10 s). With a standby pool, each start and each
//! gap also has the warm path: a level may sleep through a gap and wake (the gap at the pool's
//! price, plus the wake time in full), or, the first time it is wanted, wake a replica asleep
//! since time 0; whichever of the three is cheapest. The bound lets every level use the pool
//! at once, whatever its size, and bills a sleeper only over the gaps it bridges, so it stays
//! below what a run with that pool pays (whose sleepers are billed all day, and whose woken
//! replicas drain in full before they sleep).

use super::cluster::{Cluster, Fate};
use super::replica::Hardware;
use super::settings::{Settings, Start};
use super::standby::Standby;
use super::trace::Trace;
use serde::Serialize;

/// The planner's window: the HPA's period.
pub const WINDOW_S: f64 = crate::control::cycle::HPA_SYNC_PERIOD_S;

/// The plan and its price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bound {
    pub replica_minutes: f64,
    /// Ready replicas wanted in each window of [`WINDOW_S`].
    pub plan: Vec<u32>,
    /// Replicas already running at time 0, which pay no cold start: the settings' start, or
    /// the plan's first count for a warm start from the bound.
    pub initial: u32,
    /// Requests the plan itself misses: those no count up to the cap serves within the SLO (a
    /// prompt whose prefill alone takes longer, say); what no policy can avoid.
    pub misses: usize,
}

/// Misses among requests waiting at `t0` or arriving in `[t0, t1)`, with `n` ready replicas from
/// `t0`: late first tokens, and none by `t1 + slo`.
fn misses_with(
    base: &Cluster,
    n: u32,
    trace: &Trace,
    from: usize,
    (t0, t1): (f64, f64),
    slo_s: f64,
    dt: f64,
) -> (usize, Cluster, usize) {
    let requests = &trace.requests;
    let mut c = base.clone();
    c.resize(n, t0, 0.0);
    let mut late = 0;
    let mut next = from;
    let mut check = |_: u32, fate: Fate| match fate {
        Fate::FirstToken { ttft } if ttft <= slo_s => {}
        _ => late += 1,
    };
    let mut t = t0;
    while t < t1 - 1e-9 {
        while next < requests.len() && requests[next].arrival < t + dt {
            c.arrive(next as u32, &requests[next]);
            next += 1;
        }
        c.step(t, dt, requests, &mut check);
        t += dt;
    }
    let committed = c.clone();
    let mut tail = c;
    while t < t1 + slo_s {
        tail.step(t, dt, requests, &mut check);
        t += dt;
    }
    // Those still without a first token an SLO after the window count too.
    let unserved = tail
        .replicas
        .iter()
        .map(|r| r.waiting.len() + r.prefilling.len())
        .sum::<usize>()
        + tail.held.len();
    (late + unserved, committed, next)
}

/// The fewest replicas in `0..=cap` that miss no more than `cap` would, and that run (`run(n)`
/// gives a window's misses with `n` replicas, and what to carry on with). Misses
/// only fall as replicas rise, so the search starts at the previous window's count and gallops:
/// down while nothing is missed, up until nothing is (most windows settle in two or three runs);
/// only a window that even `cap` cannot serve without misses searches the whole range.
fn fewest<R>(prev: u32, cap: u32, mut run: impl FnMut(u32) -> (usize, R)) -> (u32, (usize, R)) {
    let first = run(prev);
    // A count known to miss more than the best, and one known to miss nothing, with its run.
    let (fail, ok, chosen) = if first.0 == 0 {
        let mut ok = (prev, first);
        let mut step = 1;
        loop {
            if ok.0 == 0 {
                return ok;
            }
            let n = ok.0.saturating_sub(step);
            let r = run(n);
            if r.0 == 0 {
                ok = (n, r);
                step *= 2;
            } else {
                break (n, ok.0, ok.1);
            }
        }
    } else {
        let mut below = prev;
        let mut step = 1;
        loop {
            let n = (below + step).min(cap);
            if n == below {
                // `prev` is already the cap, and it misses: search the whole range for the
                // fewest that do as well.
                return search(0, cap, first.0, first, &mut run);
            }
            let r = run(n);
            if r.0 == 0 {
                break (below, n, r);
            }
            if n == cap {
                return search(0, cap, r.0, r, &mut run);
            }
            below = n;
            step *= 2;
        }
    };
    // Between them: bisect.
    search(fail + 1, ok, 0, chosen, &mut run)
}

/// The fewest count in `lo..=hi` missing at most `best`, given `hi` does with run `at_hi`.
fn search<R>(
    mut lo: u32,
    mut hi: u32,
    best: usize,
    at_hi: (usize, R),
    run: &mut impl FnMut(u32) -> (usize, R),
) -> (u32, (usize, R)) {
    let mut chosen = at_hi;
    while lo < hi {
        let mid = (lo + hi) / 2;
        let r = run(mid);
        if r.0 <= best {
            hi = mid;
            chosen = r;
        } else {
            lo = mid + 1;
        }
    }
    (hi, chosen)
}

/// Computes the bound for `trace` under `settings` (its SLO, step and start), with at most `cap`
/// replicas.
pub fn clairvoyant(trace: &Trace, hw: &Hardware, settings: &Settings, cap: u32) -> Bound {
    let (slo_s, dt) = (settings.slo_ttft_s, settings.dt);
    let mut cluster = Cluster::new(hw.clone(), 1, f64::INFINITY);
    let mut plan = Vec::new();
    let mut next = 0;
    let mut t0 = 0.0;
    while t0 < trace.duration - 1e-9 {
        let t1 = (t0 + WINDOW_S).min(trace.duration);
        let span = (t0, t1);
        let prev = plan.last().copied().unwrap_or(1).min(cap);
        let (hi, (_, after)) = fewest(prev, cap, |n| {
            let (missed, committed, after) = misses_with(&cluster, n, trace, next, span, slo_s, dt);
            (missed, (committed, after))
        });
        (cluster, next) = after;
        plan.push(hi);
        t0 = t1;
    }
    let initial = match settings.start {
        Start::Policy => 1,
        Start::Replicas(n) => n,
        // What the plan needs before a replica ordered at time 0 could be Ready.
        Start::Bound => {
            let first = (hw.gpu.cold_start_s() / WINDOW_S).ceil().max(1.0) as usize;
            plan.iter().take(first).copied().max().unwrap_or(1)
        }
    };
    let starts = Starts {
        cold_s: hw.gpu.cold_start_s(),
        standby: settings.standby,
    };
    let replica_minutes = price(&plan, WINDOW_S, &starts, initial) / 60.0;
    let misses = plan_misses(trace, hw, &plan, settings);
    Bound {
        replica_minutes,
        plan,
        initial,
        misses,
    }
}

/// The requests that miss the SLO with the plan's ready replicas, window by window, played
/// through the engine once more, to the end of the trace and an SLO past it.
fn plan_misses(trace: &Trace, hw: &Hardware, plan: &[u32], settings: &Settings) -> usize {
    let (slo_s, dt) = (settings.slo_ttft_s, settings.dt);
    let requests = &trace.requests;
    let mut cluster = Cluster::new(hw.clone(), 1, f64::INFINITY);
    let mut served_in_time = 0;
    let mut count = |_: u32, fate: Fate| {
        if matches!(fate, Fate::FirstToken { ttft } if ttft <= slo_s) {
            served_in_time += 1;
        }
    };
    let (mut next, mut t, mut window) = (0, 0.0, usize::MAX);
    let end = trace.duration + slo_s;
    while t < end - 1e-9 {
        let w = (t / WINDOW_S) as usize;
        if w != window {
            window = w;
            let n = plan.get(w).or(plan.last()).copied().unwrap_or(1);
            cluster.resize(n, t, 0.0);
        }
        while next < requests.len() && requests[next].arrival < t + dt {
            cluster.arrive(next as u32, &requests[next]);
            next += 1;
        }
        cluster.step(t, dt, requests, &mut count);
        t += dt;
    }
    requests.len().saturating_sub(served_in_time)
}

/// How a level of capacity comes back, for pricing: the cold start, and the standby pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Starts {
    pub cold_s: f64,
    pub standby: Standby,
}

impl Starts {
    /// Every start cold, `cold_s` seconds.
    pub fn cold(cold_s: f64) -> Starts {
        Starts {
            cold_s,
            standby: Standby::default(),
        }
    }

    /// The cheapest way for one level through an idle gap of `gap_s`: keep running, stop and
    /// start cold, or (with a pool) sleep and wake.
    fn gap(&self, gap_s: f64) -> f64 {
        self.asleep_for(gap_s).min(gap_s.min(self.cold_s))
    }

    /// The cheapest first start, at `at_s`, of a level not running at time 0: cold, or (with a
    /// pool, which starts full) a replica asleep since time 0, woken.
    fn first(&self, at_s: f64) -> f64 {
        self.asleep_for(at_s).min(self.cold_s)
    }

    /// A level asleep through `span_s` and woken to be Ready at its end: asleep at the pool's
    /// price, then the wake in full (infinite without a pool).
    fn asleep_for(&self, span_s: f64) -> f64 {
        let sb = self.standby;
        if sb.size == 0 {
            return f64::INFINITY;
        }
        sb.price * (span_s - sb.wake_s).max(0.0) + sb.wake_s.min(span_s)
    }
}

/// Replica-seconds of a plan: for each level of capacity, the windows it is needed, the gaps
/// between them bridged as cheaply as `starts` allows (running through one shorter than a cold
/// start), and a start before each first start (the first `initial` levels are already running
/// at time 0).
pub fn price(plan: &[u32], window_s: f64, starts: &Starts, initial: u32) -> f64 {
    let top = plan.iter().copied().max().unwrap_or(0);
    let mut total = 0.0;
    for level in 1..=top {
        let mut last_end: Option<usize> = None;
        let mut i = 0;
        while i < plan.len() {
            if plan[i] < level {
                i += 1;
                continue;
            }
            let start = i;
            while i < plan.len() && plan[i] >= level {
                i += 1;
            }
            total += (i - start) as f64 * window_s;
            match last_end {
                Some(end) => total += starts.gap((start - end) as f64 * window_s),
                None if start == 0 && level <= initial => {}
                None => total += starts.first(start as f64 * window_s),
            }
            last_end = Some(i);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_what_a_scan_of_every_count_finds() {
        // Misses falling with replicas to a floor (0, or what even the cap misses), from every
        // starting count: the fewest count reaching the floor, as a scan from 0 would find.
        for cap in [1u32, 2, 7, 64] {
            for need in 0..=cap + 3 {
                for floor in [0usize, 3] {
                    let misses = |n: u32| (need.saturating_sub(n) as usize * 5).max(floor);
                    let best = misses(cap);
                    let want = (0..=cap).find(|&n| misses(n) <= best).unwrap();
                    for prev in 0..=cap {
                        let mut runs = 0;
                        let (got, (m, ())) = fewest(prev, cap, |n| {
                            runs += 1;
                            (misses(n), ())
                        });
                        assert_eq!(
                            (got, m),
                            (want, misses(want)),
                            "cap {cap} need {need} prev {prev}"
                        );
                        assert!(runs <= 2 * 7 + 2, "{runs} runs");
                    }
                }
            }
        }
    }

    #[test]
    fn pricing_bridges_short_gaps_and_pays_cold_starts() {
        // One replica all along (already running), a second for windows 2-3 and 6: the gap of
        // two windows (30 s) is shorter than the 91 s cold start, so it stays.
        let plan = [1, 1, 2, 2, 1, 1, 2, 1];
        let seconds = price(&plan, 15.0, &Starts::cold(91.0), 1);
        assert_eq!(seconds, 8.0 * 15.0 + 3.0 * 15.0 + 30.0 + 91.0);
        // A long gap is cheaper to stop for.
        let plan = [1, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(
            price(&plan, 15.0, &Starts::cold(91.0), 1),
            2.0 * 15.0 + 91.0
        );
    }

    #[test]
    fn the_bound_prices_the_starts_the_runs_have() {
        let plan = [1, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        // Every start 10 s (a snapshot restore): the 120 s gap costs one 10 s start.
        assert_eq!(
            price(&plan, 15.0, &Starts::cold(10.0), 1),
            2.0 * 15.0 + 10.0
        );
        // A pool at a quarter of the price, woken in 10 s: 110 s asleep, 10 s waking.
        let pool = Starts {
            cold_s: 91.0,
            standby: Standby {
                size: 1,
                wake_s: 10.0,
                price: 0.25,
            },
        };
        assert_eq!(
            price(&plan, 15.0, &pool, 1),
            2.0 * 15.0 + 0.25 * 110.0 + 10.0
        );
        // A level first wanted at 60 s wakes a replica asleep since time 0.
        assert_eq!(
            price(&[0, 0, 0, 0, 1], 15.0, &pool, 0),
            15.0 + 0.25 * 50.0 + 10.0
        );
    }

    #[test]
    fn with_fast_starts_or_a_pool_the_bound_stays_below_the_runs() {
        use crate::policy::Policy;
        use crate::sim::gpu::GpuModel;
        use crate::sim::run::run;
        use crate::sim::trace::Scenario;
        let mut day = Scenario::default_day();
        day.duration = 1000.0;
        let trace = day.generate().unwrap();
        let policy = Policy::parse_with_max("queue:24,min=0,cooldown=60", 8).unwrap();
        let fast = Hardware::new(GpuModel {
            start_s: Some(10.0),
            ..GpuModel::default()
        });
        let slow = Hardware::new(GpuModel::default());
        let plain = Settings::default();
        let pooled = Settings {
            standby: Standby {
                size: 2,
                wake_s: 10.0,
                price: 0.25,
            },
            ..Settings::default()
        };
        let cold_91 = clairvoyant(&trace, &slow, &plain, 16).replica_minutes;
        for (hw, settings) in [(&fast, &plain), (&slow, &pooled)] {
            let bound = clairvoyant(&trace, hw, settings, 16).replica_minutes;
            let cost = run(&trace, hw, &policy, settings).replica_seconds / 60.0;
            assert!(bound <= cost, "bound {bound} above the run's {cost}");
            assert!(
                bound < cold_91,
                "{bound} not below the 91 s bound {cold_91}"
            );
        }
    }
}
