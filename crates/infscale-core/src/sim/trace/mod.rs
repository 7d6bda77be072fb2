//! Traffic to replay: the default day in 25 minutes, YAML scenarios, and CSV logs.
//!
//! A trace is a list of request arrivals with prompt and output lengths. Generated traces are
//! deterministic for a given seed: arrivals are a non-homogeneous Poisson process over a
//! piecewise-linear rate, drawn by thinning, and lengths come from the scenario's distributions.
//! A CSV (`time_s,prompt_tokens,output_tokens`) replays a user's own log; [`formats`] reads the
//! published traces (Mooncake, BurstGPT, Azure) and tells the formats apart.
//! [`from_prometheus`] builds one from a fleet's request counters and token histograms.

mod csv;
mod datetime;
pub mod formats;
pub mod from_prometheus;
pub mod replay;
mod taken;

use super::rng::{Lengths, Rng};
use crate::limits::{self, show};
pub use csv::CSV_HEADER;
use serde::{Deserialize, Serialize};

/// One request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Seconds from the start of the trace.
    pub arrival: f64,
    pub prompt: u32,
    pub output: u32,
}

/// Arrivals to replay, sorted by time.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub name: String,
    /// How long the simulation runs, seconds (at least past the last arrival).
    pub duration: f64,
    pub requests: Vec<Request>,
}

/// A generated workload: rates over time and length distributions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub seed: u64,
    /// Seconds.
    pub duration: f64,
    /// `[time_s, requests_per_s]` points, linear in between; two points at one time make a step.
    pub rates: Vec<(f64, f64)>,
    pub prompt: Lengths,
    pub output: Lengths,
    /// Arrivals burstier than a Poisson process over the rates (none: Poisson).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bursts: Option<Bursts>,
}

/// How arrivals bunch beyond a Poisson process, the rates' mean kept: production traffic comes
/// in bursts (a batch job, a retry storm, a team's working hours), which a policy tuned on
/// smooth arrivals has never seen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Bursts {
    /// The rate times a log-normal factor of mean 1 drawn afresh every `block` seconds
    /// (overdispersed counts).
    Overdispersed { block: f64, sigma: f64 },
    /// Bursts and idle gaps: "on" periods of mean `on` seconds at `(on + off) / on` times the
    /// rate, "off" periods of mean `off` seconds with no arrivals, both exponential.
    OnOff { on: f64, off: f64 },
}

impl Bursts {
    fn validate(&self) -> Result<(), String> {
        let (low, high) = (limits::MIN_BURST_SECONDS, limits::MAX_SIM_SECONDS);
        let positive = |name: &str, v: f64| {
            if v.is_finite() && (low..=high).contains(&v) {
                Ok(())
            } else {
                Err(format!(
                    "bursts: {name} {} must be a number of seconds from {low} to {high}",
                    show(v)
                ))
            }
        };
        match *self {
            Bursts::Overdispersed { block, sigma } => {
                positive("block", block)?;
                if !(sigma.is_finite() && (0.0..=3.0).contains(&sigma)) {
                    return Err(format!("bursts: sigma {} must be from 0 to 3", show(sigma)));
                }
                Ok(())
            }
            Bursts::OnOff { on, off } => positive("on", on).and_then(|_| positive("off", off)),
        }
    }

    /// The rate's factor over `[0, duration)` as `(from, factor)` steps, drawn from `seed`.
    fn steps(&self, duration: f64, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = Rng::new(seed ^ 0xb0b5_7ea5);
        let mut steps = Vec::new();
        let mut t = 0.0;
        match *self {
            Bursts::Overdispersed { block, sigma } => {
                while t < duration {
                    let factor = (sigma * rng.normal() - sigma * sigma / 2.0).exp();
                    steps.push((t, factor));
                    t += block;
                }
            }
            Bursts::OnOff { on, off } => {
                let high = (on + off) / on;
                // Start at a random phase: on with the share of time it is on.
                let mut is_on = rng.uniform() < on / (on + off);
                while t < duration {
                    steps.push((t, if is_on { high } else { 0.0 }));
                    t += rng.exponential(1.0 / if is_on { on } else { off });
                    is_on = !is_on;
                }
            }
        }
        steps
    }
}

fn default_name() -> String {
    "scenario".to_owned()
}

/// A trace that cannot be read or made, naming where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TraceError(pub String);

impl Scenario {
    /// The default day: 3 req/s, a ramp to 30 between 180 s and 360 s, a hold to 720 s, a fall
    /// back to 3 by 840 s, silence from 960 s, and a trickle from 1320 s to the end at 1500 s.
    /// Lengths calibrated against the seed's reference table: prompts log-normal with mean 1,000
    /// tokens (sigma 0.8, 16..8192), outputs mean 250 (sigma 1.0, 8..4096); see the README.
    pub fn default_day() -> Scenario {
        Scenario {
            name: "default".to_owned(),
            seed: 42,
            duration: 1500.0,
            rates: vec![
                (0.0, 3.0),
                (180.0, 3.0),
                (360.0, 30.0),
                (720.0, 30.0),
                (840.0, 3.0),
                (960.0, 3.0),
                (960.0, 0.0),
                (1320.0, 0.0),
                (1320.0, 0.5),
                (1500.0, 0.5),
            ],
            prompt: Lengths::Lognormal {
                mean: 1000.0,
                sigma: 0.8,
                min: 16,
                max: 8192,
            },
            output: Lengths::Lognormal {
                mean: 250.0,
                sigma: 1.0,
                min: 8,
                max: 4096,
            },
            bursts: None,
        }
    }

    /// A constant rate for `duration` seconds with the default lengths (the speed benchmark's
    /// 24-hour trace).
    pub fn steady(rate: f64, duration: f64, seed: u64) -> Scenario {
        Scenario {
            name: format!("steady {rate} req/s for {duration} s"),
            seed,
            duration,
            rates: vec![(0.0, rate), (duration, rate)],
            ..Scenario::default_day()
        }
    }

    pub fn validate(&self) -> Result<(), TraceError> {
        let bad = |m: String| Err(TraceError(format!("scenario {}: {m}", self.name)));
        let (longest, fastest) = (limits::MAX_SIM_SECONDS, limits::MAX_RATE);
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration <= longest) {
            return bad(format!(
                "duration {} must be a number of seconds above 0, at most {longest} (31 days)",
                show(self.duration)
            ));
        }
        if self.rates.is_empty() {
            return bad("rates needs at least one [time, rate] point".into());
        }
        for (i, &(t, r)) in self.rates.iter().enumerate() {
            if !(t.is_finite() && (0.0..=longest).contains(&t) && r.is_finite() && r >= 0.0) {
                return bad(format!(
                    "rates[{i}] = [{}, {}]: time and rate must be numbers >= 0, the time at most {longest} s",
                    show(t),
                    show(r)
                ));
            }
            if r > fastest {
                return bad(format!(
                    "rates[{i}] = [{}, {}]: a rate above {fastest} requests per second",
                    show(t),
                    show(r)
                ));
            }
            if i > 0 && t < self.rates[i - 1].0 {
                return bad(format!(
                    "rates[{i}] at {t} s comes before the point above it"
                ));
            }
        }
        let expected = self.expected_requests();
        if expected > limits::MAX_TRACE_REQUESTS as f64 {
            return bad(format!(
                "its rates over {} s make {expected:.0} requests, more than {} (lower the rates or the duration)",
                self.duration,
                limits::MAX_TRACE_REQUESTS
            ));
        }
        self.prompt
            .validate("prompt")
            .and_then(|_| self.output.validate("output"))
            .and_then(|_| self.bursts.as_ref().map_or(Ok(()), Bursts::validate))
            .map_err(|m| TraceError(format!("scenario {}: {m}", self.name)))
    }

    /// The requests the rates make over the duration (their integral; bursts keep the mean).
    pub fn expected_requests(&self) -> f64 {
        let Some(&(t0, r0)) = self.rates.first() else {
            return 0.0;
        };
        let end = self.duration;
        // Flat before the first point, linear between points, flat after the last.
        let mut total = r0 * t0.min(end);
        for w in self.rates.windows(2) {
            let ((a, ra), (b, rb)) = (w[0], w[1]);
            if a >= end || b <= a {
                continue;
            }
            let stop = b.min(end);
            let r_stop = ra + (rb - ra) * (stop - a) / (b - a);
            total += (ra + r_stop) / 2.0 * (stop - a);
        }
        if let Some(&(tl, rl)) = self.rates.last() {
            total += rl * (end - tl).max(0.0);
        }
        total
    }

    /// Requests per second at `t`: linear between points, flat before the first and after the
    /// last; at a step (two points at one time) the later point holds from that time on.
    pub fn rate_at(&self, t: f64) -> f64 {
        let points = &self.rates;
        let Some(first) = points.first() else {
            return 0.0;
        };
        if t < first.0 {
            return first.1;
        }
        let i = points.partition_point(|p| p.0 <= t);
        if i >= points.len() {
            return points[points.len() - 1].1;
        }
        let (t0, r0) = points[i - 1];
        let (t1, r1) = points[i];
        if t1 <= t0 {
            return r1;
        }
        r0 + (r1 - r0) * (t - t0) / (t1 - t0)
    }

    /// The trace this scenario describes.
    pub fn generate(&self) -> Result<Trace, TraceError> {
        self.validate()?;
        let steps = self
            .bursts
            .map(|b| b.steps(self.duration, self.seed))
            .unwrap_or_default();
        let factor_at = |t: f64| {
            let i = steps.partition_point(|s| s.0 <= t);
            i.checked_sub(1).map_or(1.0, |i| steps[i].1)
        };
        let top = steps.iter().map(|s| s.1).fold(1.0, f64::max);
        let peak = self.rates.iter().map(|p| p.1).fold(0.0, f64::max) * top;
        let draws = peak * self.duration;
        if draws > limits::MAX_TRACE_DRAWS {
            return Err(TraceError(format!(
                "scenario {}: arrivals drawn at its peak of {} requests per second (the rates' peak times its largest burst factor, {}) over {} s are {} draws, more than {} (lower the rates, the bursts or the duration)",
                self.name,
                show(peak.round()),
                show(top),
                self.duration,
                show(draws.round()),
                show(limits::MAX_TRACE_DRAWS)
            )));
        }
        let mut rng = Rng::new(self.seed);
        let mut requests = Vec::with_capacity(((draws / 2.0) as usize).min(1 << 20));
        let mut t = 0.0;
        if peak > 0.0 {
            loop {
                t += rng.exponential(peak);
                if t >= self.duration {
                    break;
                }
                if requests.len() >= limits::MAX_TRACE_REQUESTS {
                    return Err(TraceError(format!(
                        "scenario {}: more than {} requests by {t:.0} s (lower the rates, the bursts or the duration)",
                        self.name,
                        limits::MAX_TRACE_REQUESTS
                    )));
                }
                if rng.uniform() * peak < self.rate_at(t) * factor_at(t) {
                    requests.push(Request {
                        arrival: t,
                        prompt: self.prompt.sample(&mut rng),
                        output: self.output.sample(&mut rng),
                    });
                }
            }
        }
        Ok(Trace {
            name: self.name.clone(),
            duration: self.duration,
            requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_day_has_the_seed_shape() {
        let s = Scenario::default_day();
        for (t, rate) in [
            (0.0, 3.0),
            (270.0, 16.5),
            (500.0, 30.0),
            (780.0, 16.5),
            (900.0, 3.0),
            (1000.0, 0.0),
            (1400.0, 0.5),
        ] {
            assert_eq!(s.rate_at(t), rate, "at {t}");
        }
        assert_eq!(s.rate_at(960.0), 0.0);
        let trace = s.generate().unwrap();
        let n = trace.requests.len() as f64;
        // The integral of the rate: 540 + 2970 + 10800 + 1980 + 360 + 90 = 16740.
        assert!((n - 16740.0).abs() < 400.0, "{n}");
        assert!(trace
            .requests
            .iter()
            .all(|r| !(960.0..1320.0).contains(&r.arrival)));
    }

    #[test]
    fn the_expected_requests_are_the_rates_integral() {
        // 540 + 2970 + 10800 + 1980 + 360 + 90, as the default day's test counts.
        assert!((Scenario::default_day().expected_requests() - 16_740.0).abs() < 1e-6);
        // Flat before the first point and after the last; cut at the duration.
        let s = Scenario {
            duration: 100.0,
            rates: vec![(10.0, 2.0), (20.0, 4.0), (200.0, 4.0)],
            ..Scenario::default_day()
        };
        assert!((s.expected_requests() - (20.0 + 30.0 + 320.0)).abs() < 1e-9);
        let month = Scenario::steady(1e5, crate::limits::MAX_SIM_SECONDS, 1);
        let e = month.validate().unwrap_err().to_string();
        assert!(e.contains("more than 50000000"), "{e}");
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        let a = Scenario::default_day().generate().unwrap();
        let b = Scenario::default_day().generate().unwrap();
        assert_eq!(a, b);
        let c = Scenario {
            seed: 7,
            ..Scenario::default_day()
        }
        .generate()
        .unwrap();
        assert_ne!(a.requests, c.requests);
    }

    #[test]
    fn a_csv_trace_round_trips() {
        let a = Scenario::default_day().generate().unwrap();
        let b = Trace::from_csv("default", &a.to_csv(), Some(a.duration)).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn csv_errors_name_file_and_line() {
        let e = Trace::from_csv(
            "log.csv",
            "time_s,prompt_tokens,output_tokens\n1.0,10,5\n2.0,ten,5\n",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("log.csv:3: prompt_tokens"), "{e}");
        let e = Trace::from_csv("log.csv", "1.0,10\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("log.csv:1:"), "{e}");
        assert!(Trace::from_csv("x", "-1,10,5\n", None).is_err());
        assert!(Trace::from_csv("x", "1,10,0\n", None).is_err());
    }

    #[test]
    fn csv_rows_are_sorted_and_the_run_outlasts_them() {
        let t = Trace::from_csv("x", "5,10,5\n1,10,5\n", None).unwrap();
        assert_eq!(t.requests[0].arrival, 1.0);
        assert_eq!(t.duration, 125.0);
    }

    #[test]
    fn scenarios_read_from_yaml_and_are_checked() {
        let yaml = "name: burst\nseed: 3\nduration: 600\nrates: [[0, 1], [300, 1], [300, 20], [600, 20]]\n\
                    prompt: {dist: uniform, min: 100, max: 200}\noutput: {dist: constant, value: 300}\n";
        let s: Scenario = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(s.rate_at(299.0), 1.0);
        assert_eq!(s.rate_at(300.0), 20.0);
        assert!(s
            .generate()
            .unwrap()
            .requests
            .iter()
            .all(|r| r.output == 300));
        let bad = Scenario {
            rates: vec![(10.0, 1.0), (5.0, 1.0)],
            ..s.clone()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("rates[1]"));
        assert!(serde_yaml::from_str::<Scenario>("duration: 1\nrates: []\nprompt: {dist: constant, value: 1}\noutput: {dist: constant, value: 1}\ncolour: red\n").is_err());
    }
}
