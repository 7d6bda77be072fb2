//! Days like a target's life: 24-hour days with a diurnal shape, night troughs, weekdays and
//! weekends and bursts on top, played one after another as weeks.
//!
//! The suite's days ([`super::suite`]) are 40-minute stories: a ramp, a peak, a silence, a
//! trickle. A rule that keeps a week's peak standing costs little there, where the peak is most
//! of the day, and a great deal on a real day, whose peak is a few hours and whose night is
//! long. So advice is also judged here on whole days, built from published production shapes
//! ([`shapes`]), each played after the days before it so that whatever a policy learns is
//! carried, as it is by a target that runs all week ([`judge`]).
//!
//! A day's rate is the source's level at that time of its week, times a factor for the day,
//! times a factor per hour (the day-to-day spread a published hour shows), shifted by up to half
//! an hour, with bursts on top: a few episodes a day at a multiple of the rate of their moment
//! (a retry storm, a team's demo) and now and then a batch job at the day's median rate, at any
//! hour, night included. Arrivals within a minute are overdispersed by the source's own
//! minute-scale spread, or, with a recorded trace ([`Micro::Recorded`]), are that trace's own
//! arrivals and lengths superposed and thinned to the rate, so its bursts keep their shape.
//! Every day of a week is drawn from its own seed, so any day can also be played alone.

pub mod judge;
pub mod shapes;

use super::capacity::{saturated_rate, saturated_rate_of};
use super::gpu::GpuModel;
use super::rng::{Lengths, Rng};
use super::trace::{Request, Scenario, Trace, TraceError};
use crate::limits;
use rayon::prelude::*;

/// A day, seconds.
pub const DAY_S: f64 = 86_400.0;

/// A week of a published shape: one relative level per slot over seven days (the highest 1),
/// the spread it shows, and the lengths of its requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The family's name (`week:NAME` in tables).
    pub name: &'static str,
    /// What the shape is and where it was read from.
    pub about: &'static str,
    /// Seconds per slot of `levels`.
    pub slot_s: f64,
    /// Relative rate per slot, seven days from the source's first day; the highest is 1.
    pub levels: Vec<f64>,
    /// The log-normal sigma of an hour's level from one day to another.
    pub hourly_sigma: f64,
    /// The log-normal sigma of a minute's rate around its hour (overdispersion).
    pub minute_sigma: f64,
    pub prompt: Lengths,
    pub output: Lengths,
}

impl Source {
    /// The level at `t` seconds into the source's week (wrapping), linear between slot centres.
    pub fn level_at(&self, t: f64) -> f64 {
        let n = self.levels.len();
        if n == 0 || !t.is_finite() {
            return 0.0;
        }
        let week = self.slot_s * n as f64;
        let x = t.rem_euclid(week) / self.slot_s - 0.5;
        let i = x.floor();
        let w = x - i;
        let at = |k: f64| self.levels[(k as i64).rem_euclid(n as i64) as usize];
        at(i) * (1.0 - w) + at(i + 1.0) * w
    }

    /// The mean level over the week.
    pub fn mean_level(&self) -> f64 {
        self.levels.iter().sum::<f64>() / self.levels.len().max(1) as f64
    }
}

/// Arrivals within a minute.
#[derive(Debug, Clone, PartialEq)]
pub enum Micro {
    /// Poisson at the rate, each minute's rate times a log-normal factor of the source's
    /// `minute_sigma`; lengths from the source.
    Drawn,
    /// A recorded trace's arrivals and lengths: enough copies of it, each from its own starting
    /// point, superposed to reach the day's peak, and every arrival kept with the share the
    /// rate of its moment asks for, so a burst of the recording is a burst of the day.
    Recorded(Trace),
}

/// One burst on top of a day: from `from` to `to`, the rate times `times`, plus `plus`
/// requests per second (a batch job's own rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    pub from: f64,
    pub to: f64,
    pub times: f64,
    pub plus: f64,
}

/// How one day of a week is drawn: its weekday in the source's week and what sets it apart.
#[derive(Debug, Clone, PartialEq)]
pub struct DayPlan {
    /// Which day of the source's week it plays (0: the source's first day).
    pub weekday: usize,
    /// The whole day's rate factor.
    pub factor: f64,
    /// Seconds the shape is shifted later.
    pub shift_s: f64,
    /// The factor per hour boundary (25 values, linear in between).
    pub hourly: Vec<f64>,
    pub episodes: Vec<Episode>,
    /// The seed of the day's arrivals.
    pub seed: u64,
}

/// A family of weeks: a source, its scale, how its minutes are drawn, and the first weekday.
#[derive(Debug, Clone)]
pub struct Weeks {
    pub source: Source,
    /// Requests per second at the source's highest level.
    pub peak_rate: f64,
    pub micro: Micro,
}

/// The source's highest level carries this many saturated replicas' worth of requests: a
/// week that peaks at five or six replicas with its bursts, within the suite's `max` of 8.
pub const PEAK_REPLICAS: f64 = 3.5;

/// Bursts a day holds on average.
const EPISODES_PER_DAY: f64 = 3.0;
/// The chance that a day holds a batch job, at any hour.
const BATCH_CHANCE: f64 = 0.3;
/// The most a day's shape is shifted either way, seconds.
const MAX_SHIFT_S: f64 = 1800.0;
/// The log-normal sigma of a whole day's level.
const DAY_SIGMA: f64 = 0.1;

impl Weeks {
    /// `source`'s weeks on `gpu`, its highest level at [`PEAK_REPLICAS`] times what one
    /// saturated replica admits of its lengths (a recorded trace's lengths where one is given).
    pub fn scaled(source: Source, gpu: &GpuModel, micro: Micro) -> Result<Weeks, TraceError> {
        let one = match &micro {
            Micro::Drawn => {
                let lengths = Scenario {
                    prompt: source.prompt.clone(),
                    output: source.output.clone(),
                    ..Scenario::default_day()
                };
                saturated_rate(gpu, &lengths)?
            }
            Micro::Recorded(trace) => saturated_rate_of(gpu, trace)?,
        };
        Ok(Weeks {
            source,
            peak_rate: PEAK_REPLICAS * one,
            micro,
        })
    }

    /// The plan of day `index` (0: the first) of the weeks drawn from `seed`: the weekday goes
    /// round the source's week from a start the seed picks.
    pub fn day_plan(&self, seed: u64, index: usize) -> DayPlan {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9).wrapping_add(index as u64) ^ 0xda75);
        let first = (Rng::new(seed ^ 0x7eed).next_u64() % 7) as usize;
        let lognormal =
            |rng: &mut Rng, sigma: f64| (sigma * rng.normal() - sigma * sigma / 2.0).exp();
        let factor = lognormal(&mut rng, DAY_SIGMA);
        let shift_s = MAX_SHIFT_S * (2.0 * rng.uniform() - 1.0);
        let hourly = (0..=24)
            .map(|_| lognormal(&mut rng, self.source.hourly_sigma))
            .collect();
        let mut episodes = Vec::new();
        // A Poisson count of bursts, each a few minutes, adding a tenth to two fifths of the
        // peak rate whatever the hour: small beside a busy afternoon, large beside a night.
        let mut t = rng.exponential(EPISODES_PER_DAY / DAY_S);
        while t < DAY_S {
            let length = (240.0 * (0.6 * rng.normal()).exp()).clamp(60.0, 1800.0);
            episodes.push(Episode {
                from: t,
                to: (t + length).min(DAY_S),
                times: 1.0,
                plus: self.peak_rate * (0.1 + 0.3 * rng.uniform()),
            });
            t += rng.exponential(EPISODES_PER_DAY / DAY_S);
        }
        if rng.uniform() < BATCH_CHANCE {
            let from = rng.uniform() * DAY_S;
            let length = 600.0 + 1200.0 * rng.uniform();
            episodes.push(Episode {
                from,
                to: (from + length).min(DAY_S),
                times: 1.0,
                plus: 0.5 * self.peak_rate * self.median_level(),
            });
        }
        DayPlan {
            weekday: (first + index) % 7,
            factor,
            shift_s,
            hourly,
            episodes,
            seed: rng.next_u64(),
        }
    }

    /// The median slot level of the source, a batch job's scale.
    fn median_level(&self) -> f64 {
        let mut v = self.source.levels.clone();
        v.sort_unstable_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }

    /// Requests per second at `t` seconds into the day `plan` describes (before the minute's
    /// spread).
    pub fn rate_at(&self, plan: &DayPlan, t: f64) -> f64 {
        let at = plan.weekday as f64 * DAY_S + t - plan.shift_s;
        let h = (t / 3600.0).clamp(0.0, 24.0);
        let i = (h.floor() as usize).min(23);
        let w = h - i as f64;
        let hourly = plan.hourly.get(i).copied().unwrap_or(1.0) * (1.0 - w)
            + plan.hourly.get(i + 1).copied().unwrap_or(1.0) * w;
        let mut rate = self.peak_rate * plan.factor * self.source.level_at(at) * hourly;
        for e in plan.episodes.iter().filter(|e| (e.from..e.to).contains(&t)) {
            rate = rate * e.times + e.plus;
        }
        rate
    }

    /// Day `index` of the weeks drawn from `seed`, as a trace of its own (times from its
    /// midnight).
    pub fn day(&self, seed: u64, index: usize) -> Result<Trace, TraceError> {
        let plan = self.day_plan(seed, index);
        let requests = match &self.micro {
            Micro::Drawn => self.drawn(&plan),
            Micro::Recorded(trace) => self.recorded(&plan, trace)?,
        };
        Ok(Trace {
            name: format!("week:{} seed {seed} day {index}", self.source.name),
            duration: DAY_S,
            requests,
        })
    }

    /// `days` days from `seed`, one after another, as one trace, and each day alone.
    pub fn days(&self, seed: u64, days: usize) -> Result<(Trace, Vec<Trace>), TraceError> {
        if days == 0 || days as f64 * DAY_S > limits::MAX_SIM_SECONDS {
            return Err(TraceError(format!(
                "{days} days: expected from 1 to {}",
                (limits::MAX_SIM_SECONDS / DAY_S) as u32
            )));
        }
        let alone = (0..days)
            .into_par_iter()
            .map(|d| self.day(seed, d))
            .collect::<Result<Vec<_>, _>>()?;
        let total: usize = alone.iter().map(|d| d.requests.len()).sum();
        if total > limits::MAX_TRACE_REQUESTS {
            return Err(TraceError(format!(
                "week:{} at {} req/s: {total} requests over {days} days, more than {} (lower the rate or the days)",
                self.source.name,
                limits::show(self.peak_rate),
                limits::MAX_TRACE_REQUESTS
            )));
        }
        let mut requests = Vec::with_capacity(total);
        for (d, day) in alone.iter().enumerate() {
            let base = d as f64 * DAY_S;
            requests.extend(day.requests.iter().map(|r| Request {
                arrival: r.arrival + base,
                ..*r
            }));
        }
        let whole = Trace {
            name: format!("week:{} seed {seed}, {days} days", self.source.name),
            duration: days as f64 * DAY_S,
            requests,
        };
        Ok((whole, alone))
    }

    /// Poisson arrivals at the day's rate, each minute's rate overdispersed.
    fn drawn(&self, plan: &DayPlan) -> Vec<Request> {
        let mut rng = Rng::new(plan.seed);
        let sigma = self.source.minute_sigma;
        let mut out = Vec::new();
        let mut minute = 0.0;
        while minute < DAY_S {
            let spread = (sigma * rng.normal() - sigma * sigma / 2.0).exp();
            let end = minute + 60.0;
            let top = self.top_rate(plan, minute, end) * spread;
            if top > 0.0 {
                let mut t = minute;
                loop {
                    t += rng.exponential(top);
                    if t >= end {
                        break;
                    }
                    if rng.uniform() * top < self.rate_at(plan, t) * spread {
                        out.push(Request {
                            arrival: t,
                            prompt: self.source.prompt.sample(&mut rng),
                            output: self.source.output.sample(&mut rng),
                        });
                    }
                }
            }
            minute = end;
        }
        out
    }

    /// The highest rate within `[from, to)`: the rate is linear between slot centres, hour
    /// boundaries and episode edges, so its ends and every break inside bound it.
    fn top_rate(&self, plan: &DayPlan, from: f64, to: f64) -> f64 {
        let mut points = vec![from, to - 1e-6];
        let slot = self.source.slot_s;
        let mut s = ((from - plan.shift_s) / slot - 0.5).ceil();
        while (s + 0.5) * slot + plan.shift_s < to {
            points.push((s + 0.5) * slot + plan.shift_s);
            s += 1.0;
        }
        for e in &plan.episodes {
            points.extend(
                [e.from, e.to - 1e-6]
                    .into_iter()
                    .filter(|t| (from..to).contains(t)),
            );
        }
        points
            .into_iter()
            .map(|t| self.rate_at(plan, t))
            .fold(0.0, f64::max)
    }

    /// A recorded trace's arrivals, superposed from spread starting points until they reach
    /// the day's highest rate, each kept with the share the rate of its moment asks for.
    fn recorded(&self, plan: &DayPlan, trace: &Trace) -> Result<Vec<Request>, TraceError> {
        let span = trace
            .requests
            .last()
            .map_or(0.0, |r| r.arrival)
            .max(trace.duration);
        if trace.requests.is_empty() || span <= 0.0 {
            return Err(TraceError(format!(
                "{}: no arrivals to build a day from",
                trace.name
            )));
        }
        let own = trace.requests.len() as f64 / span;
        let top = (0..(DAY_S / 60.0) as usize)
            .map(|m| self.top_rate(plan, m as f64 * 60.0, m as f64 * 60.0 + 60.0))
            .fold(0.0, f64::max);
        let layers = (top / own).ceil().max(1.0) as usize;
        let mut rng = Rng::new(plan.seed);
        let mut out = Vec::new();
        for _ in 0..layers {
            let offset = rng.uniform() * span;
            let mut lap = 0.0;
            // Lap after lap of the recording from `offset`, until the day is covered.
            while lap * span < DAY_S + span {
                for r in &trace.requests {
                    let t = lap * span + r.arrival - offset;
                    if !(0.0..DAY_S).contains(&t) {
                        continue;
                    }
                    let keep = self.rate_at(plan, t) / (layers as f64 * own);
                    if rng.uniform() < keep {
                        out.push(Request { arrival: t, ..*r });
                    }
                }
                lap += 1.0;
            }
        }
        out.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat() -> Weeks {
        Weeks {
            source: Source {
                name: "flat",
                about: "",
                slot_s: 3600.0,
                levels: vec![1.0; 7 * 24],
                hourly_sigma: 0.0,
                minute_sigma: 0.0,
                prompt: Lengths::Constant { value: 100 },
                output: Lengths::Constant { value: 10 },
            },
            peak_rate: 2.0,
            micro: Micro::Drawn,
        }
    }

    /// Seed `seed`'s first day, its count of requests checked against its planned rate (within
    /// four standard deviations of a Poisson count).
    fn day_at_its_rate(w: &Weeks, seed: u64) -> Trace {
        let plan = w.day_plan(seed, 0);
        let day = w.day(seed, 0).unwrap();
        let expected: f64 = (0..86_400)
            .map(|s| w.rate_at(&plan, f64::from(s) + 0.5))
            .sum();
        let n = day.requests.len() as f64;
        assert!(
            (n - expected).abs() < 4.0 * expected.sqrt(),
            "{n} against {expected}"
        );
        day
    }

    #[test]
    fn a_day_follows_its_source_and_bursts_on_top() {
        let w = flat();
        let day = day_at_its_rate(&w, 1);
        assert_eq!(day.duration, DAY_S);
        assert!(day
            .requests
            .windows(2)
            .all(|p| p[0].arrival <= p[1].arrival));
        // The same seed and day give the same day; another day another.
        assert_eq!(w.day(1, 0).unwrap(), day);
        assert_ne!(w.day(1, 1).unwrap().requests, day.requests);
    }

    #[test]
    fn days_are_one_trace_and_each_alone() {
        let w = flat();
        let (whole, alone) = w.days(3, 2).unwrap();
        assert_eq!(whole.duration, 2.0 * DAY_S);
        assert_eq!(alone.len(), 2);
        let second: Vec<f64> = whole
            .requests
            .iter()
            .filter(|r| r.arrival >= DAY_S)
            .map(|r| r.arrival - DAY_S)
            .collect();
        assert_eq!(second.len(), alone[1].requests.len());
        assert!(second
            .iter()
            .zip(&alone[1].requests)
            .all(|(a, r)| (a - r.arrival).abs() < 1e-6));
        assert!(w.days(3, 0).is_err());
        assert!(w.days(3, 40).is_err());
    }

    #[test]
    fn the_level_wraps_round_the_week_between_slot_centres() {
        let mut w = flat();
        w.source.levels = (0..7 * 24)
            .map(|h| if h == 0 { 0.0 } else { 1.0 })
            .collect();
        assert_eq!(w.source.level_at(1800.0), 0.0);
        assert_eq!(w.source.level_at(3600.0), 0.5);
        assert_eq!(w.source.level_at(7.0 * DAY_S + 1800.0), 0.0);
        // Midnight of the week is halfway between the last hour's centre and the first's.
        assert_eq!(w.source.level_at(0.0), 0.5);
        assert_eq!(w.source.level_at(-1800.0), 1.0);
    }

    #[test]
    fn a_recorded_trace_is_thinned_to_the_rate_and_keeps_its_lengths() {
        let mut w = flat();
        let recording = Trace {
            name: "rec".to_owned(),
            duration: 100.0,
            requests: (0..100)
                .map(|i| Request {
                    arrival: f64::from(i),
                    prompt: 7,
                    output: 3,
                })
                .collect(),
        };
        w.micro = Micro::Recorded(recording);
        let day = day_at_its_rate(&w, 2);
        assert!(day.requests.iter().all(|r| r.prompt == 7 && r.output == 3));
    }
}
