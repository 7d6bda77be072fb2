//! One day at every phase of `serve`'s scrapes against KEDA's HPA: what a cluster whose timing
//! nobody chose would cost.
//!
//! A simulated run scrapes in the very step the HPA syncs in ([`Settings::scrape_offset_s`] 0),
//! so every sync reads an evaluation of that instant. A cluster has no such alignment: `serve`'s
//! collector starts when it first sees the ScaledObject, the HPA's sync when the controller
//! first queued it, and the offset between them is whatever it happens to be (the demo's too).
//! A policy whose orders turn on one reading (a forecast near a replica's worth, a scale-down
//! window that keeps its highest recommendation) can cost the same day noticeably more at one
//! offset than at another. [`spread`] runs the day at every offset the engine's step can tell
//! apart and keeps the runs in order of cost; [`Spread::median`] is the run to set beside one
//! from a cluster.

use super::replica::Hardware;
use super::run::{run, Run, Settings};
use super::trace::Trace;
use crate::policy::Policy;

/// One run at one offset of the scrapes.
#[derive(Debug, Clone)]
pub struct Phased {
    /// Seconds past each multiple of the scrape interval at which `serve` scraped.
    pub scrape_offset_s: f64,
    pub run: Run,
}

/// The runs of one day at every offset, cheapest first.
#[derive(Debug, Clone)]
pub struct Spread {
    pub runs: Vec<Phased>,
}

/// Runs `policy` over `trace` once per step of the scrape interval, each with the scrapes that
/// many steps past the HPA's syncs (`settings.scrape_offset_s` is ignored).
pub fn spread(trace: &Trace, hw: &Hardware, policy: &Policy, settings: &Settings) -> Spread {
    let steps = ((settings.scrape_interval_s / settings.dt).round() as u64).max(1);
    let mut runs: Vec<Phased> = (0..steps)
        .map(|k| {
            let offset = k as f64 * settings.dt;
            let at = Settings {
                scrape_offset_s: offset,
                ..settings.clone()
            };
            Phased {
                scrape_offset_s: offset,
                run: run(trace, hw, policy, &at),
            }
        })
        .collect();
    runs.sort_by(|a, b| {
        a.run
            .replica_seconds
            .total_cmp(&b.run.replica_seconds)
            .then(a.scrape_offset_s.total_cmp(&b.scrape_offset_s))
    });
    Spread { runs }
}

impl Spread {
    /// The run in the middle by cost (of an even count, the cheaper of the two middle ones).
    pub fn median(&self) -> Option<&Phased> {
        self.runs.get(self.runs.len().saturating_sub(1) / 2)
    }

    /// The cheapest and the dearest run's replica-minutes.
    pub fn range_minutes(&self) -> Option<(f64, f64)> {
        let minutes = |p: &Phased| p.run.replica_seconds / 60.0;
        Some((minutes(self.runs.first()?), minutes(self.runs.last()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::gpu::GpuModel;
    use crate::sim::trace::Scenario;

    /// The first `duration` seconds of the default day, a reactive policy, steps of `dt`.
    fn short_day(duration: f64, dt: f64) -> (Trace, Hardware, Policy, Settings) {
        let mut scenario = Scenario::default_day();
        scenario.duration = duration;
        let trace = scenario.generate().expect("the default day");
        let hw = Hardware::new(GpuModel::default());
        let policy = Policy::parse("queue:24,lookahead=45").expect("a policy");
        let settings = Settings {
            dt,
            ..Settings::default()
        };
        (trace, hw, policy, settings)
    }

    /// Every offset the step tells apart is run once, the runs come cheapest first, and the
    /// median is one of them, between the ends.
    #[test]
    fn the_day_runs_at_every_offset_and_the_median_lies_between_the_ends() {
        let (trace, hw, policy, settings) = short_day(400.0, 0.5);
        let s = spread(&trace, &hw, &policy, &settings);
        let mut offsets: Vec<f64> = s.runs.iter().map(|p| p.scrape_offset_s).collect();
        offsets.sort_by(f64::total_cmp);
        let expected: Vec<f64> = (0..10).map(|k| f64::from(k) * 0.5).collect();
        assert_eq!(offsets, expected);
        let costs: Vec<f64> = s.runs.iter().map(|p| p.run.replica_seconds).collect();
        assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
        let (low, high) = s.range_minutes().expect("runs");
        let median = s.median().expect("a median").run.replica_seconds / 60.0;
        assert!(low <= median && median <= high, "{low} {median} {high}");
        assert_eq!(s.median().map(|p| p.run.replica_seconds), Some(costs[4]));
    }

    /// At offset 0 the spread's run is the plain run: the default settings scrape in the HPA's
    /// step.
    #[test]
    fn offset_zero_is_the_plain_run() {
        let (trace, hw, policy, settings) = short_day(300.0, 1.0);
        let s = spread(&trace, &hw, &policy, &settings);
        let zero = s
            .runs
            .iter()
            .find(|p| p.scrape_offset_s == 0.0)
            .expect("offset 0");
        let plain = run(&trace, &hw, &policy, &settings);
        let first_tokens = |r: &Run| -> Vec<Option<f64>> {
            r.outcomes.iter().map(|o| o.first_token_s()).collect()
        };
        assert_eq!(zero.run.replica_seconds, plain.replica_seconds);
        assert_eq!(first_tokens(&zero.run), first_tokens(&plain));
    }
}
