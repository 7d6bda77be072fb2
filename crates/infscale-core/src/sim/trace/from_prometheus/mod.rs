//! A trace built from what a fleet already exports: a Prometheus range query of the servers'
//! request counters and token histograms, turned into the requests `simulate --trace` replays.
//!
//! Nobody logs `time_s,prompt_tokens,output_tokens`, but every fleet keeps per-step counts in
//! Prometheus. From them, each step of the query gets as many requests as the request counter
//! grew (fractions carried to the next step, so the total is the counter's growth), arrivals
//! spread uniformly at random within the step (a Poisson process given its count: bursts
//! shorter than the step are not in the data), and lengths drawn from the step's histogram
//! buckets ([`lengths`]). What is drawn is deterministic for a seed.
//!
//! [`response`] reads Prometheus' JSON, [`increase`] counts per step; the shell in
//! `src/cli/trace.rs` asks Prometheus and writes the CSV.

mod increase;
mod lengths;
mod response;

pub use increase::{increases, Seen, Window, MAX_STEPS};
pub use lengths::Lengths;
pub use response::{parse_matrix, Series};

use super::{Request, Trace, TraceError};
use crate::sim::rng::Rng;

/// Per step of a window: requests counted, and what is known of their lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    pub window: Window,
    /// The request counter's growth per step.
    pub requests: Vec<f64>,
    pub prompt: Lengths,
    pub output: Lengths,
}

/// A built trace and the figures its summary prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub trace: Trace,
    pub mean_prompt: f64,
    pub mean_output: f64,
    /// Steps in which the counter did not grow.
    pub quiet_steps: usize,
}

/// The requests of `e`, arrivals in seconds from the window's start.
pub fn build(e: &Exported, seed: u64) -> Result<Built, TraceError> {
    let w = e.window;
    if e.requests.len() != w.steps {
        return Err(TraceError(format!(
            "{} request counts for {} steps",
            e.requests.len(),
            w.steps
        )));
    }
    for (what, l) in [("prompt", &e.prompt), ("output", &e.output)] {
        if !l.fits(w.steps) {
            return Err(TraceError(format!(
                "{what} lengths do not cover the {} steps",
                w.steps
            )));
        }
    }
    let counted: f64 = e.requests.iter().sum();
    if counted < 0.5 {
        return Err(TraceError(
            "the request counter did not grow over the window: no requests to replay".into(),
        ));
    }
    for (what, l) in [("prompt", &e.prompt), ("output", &e.output)] {
        if l.is_empty() {
            return Err(TraceError(format!(
                "no {what} lengths over the window: its histogram or token counter did not grow"
            )));
        }
    }
    let mut rng = Rng::new(seed);
    let mut requests = Vec::with_capacity(counted.round() as usize);
    let mut carry = 0.0;
    let mut quiet_steps = 0;
    for (k, grew) in e.requests.iter().enumerate() {
        let due = grew + carry;
        let last = k + 1 == w.steps;
        let n = if last { due.round() } else { due.floor() }.max(0.0);
        carry = due - n;
        let n = n as usize;
        if n == 0 {
            quiet_steps += 1;
            continue;
        }
        let mut at: Vec<f64> = (0..n).map(|_| rng.uniform()).collect();
        at.sort_by(f64::total_cmp);
        let prompts = e.prompt.draw(k, n, &mut rng);
        let outputs = e.output.draw(k, n, &mut rng);
        for ((u, prompt), output) in at.into_iter().zip(prompts).zip(outputs) {
            requests.push(Request {
                arrival: (k as f64 + u) * w.step,
                prompt,
                output,
            });
        }
    }
    let n = requests.len().max(1) as f64;
    let mean = |f: fn(&Request) -> u32| requests.iter().map(|r| f64::from(f(r))).sum::<f64>() / n;
    Ok(Built {
        mean_prompt: mean(|r| r.prompt),
        mean_output: mean(|r| r.output),
        quiet_steps,
        trace: Trace {
            name: "prometheus".to_owned(),
            duration: w.steps as f64 * w.step,
            requests,
        },
    })
}

/// A time flag: unix seconds (`1733472000`, `1733472000.5`) or UTC `YYYY-MM-DDTHH:MM:SS[.f]Z`.
pub fn unix_seconds(s: &str) -> Result<f64, String> {
    let s = s.trim();
    if let Ok(t) = s.parse::<f64>() {
        return if t.is_finite() && t >= 0.0 {
            Ok(t)
        } else {
            Err(format!("{s:?}: expected unix seconds from 0"))
        };
    }
    let utc = s
        .strip_suffix('Z')
        .ok_or_else(|| format!("{s:?}: expected unix seconds or YYYY-MM-DDTHH:MM:SSZ (UTC)"))?;
    let ticks = super::datetime::datetime_ticks(utc).map_err(|e| format!("{s:?}: {e}"))?;
    Ok(ticks as f64 / super::datetime::TICKS_PER_S as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exported(requests: Vec<f64>, step: f64) -> Exported {
        let steps = requests.len();
        let one = |v: f64| vec![v; steps];
        Exported {
            window: Window::new(0.0, step * steps as f64, step).unwrap(),
            prompt: Lengths::Mean {
                tokens: requests.iter().map(|r| r * 100.0).collect(),
                requests: requests.clone(),
            },
            output: Lengths::Histogram {
                bounds: vec![10.0, 100.0],
                buckets: vec![vec![0.0, 1.0, 0.0]; steps],
                sums: one(50.0),
                counts: one(1.0),
            },
            requests,
        }
    }

    #[test]
    fn fractions_carry_so_the_total_is_the_counters_growth() {
        let b = build(&exported(vec![0.4; 10], 2.0), 1).unwrap();
        assert_eq!(b.trace.requests.len(), 4);
        assert_eq!(b.mean_prompt, 100.0);
        assert!((b.mean_output - 50.0).abs() < 1.0, "{}", b.mean_output);
        assert!(b.quiet_steps >= 6);
    }

    #[test]
    fn arrivals_stay_in_their_step_sorted_and_seeded() {
        let e = exported(vec![3.0, 0.0, 5.0], 10.0);
        let b = build(&e, 9).unwrap();
        let t: Vec<f64> = b.trace.requests.iter().map(|r| r.arrival).collect();
        assert_eq!(t.len(), 8);
        assert!(t[..3].iter().all(|&x| (0.0..10.0).contains(&x)), "{t:?}");
        assert!(t[3..].iter().all(|&x| (20.0..30.0).contains(&x)), "{t:?}");
        assert!(t.windows(2).all(|p| p[0] <= p[1]));
        assert_eq!(build(&e, 9).unwrap(), b);
        assert_ne!(build(&e, 10).unwrap().trace, b.trace);
        assert_eq!(b.quiet_steps, 1);
    }

    #[test]
    fn nothing_counted_is_an_error_not_an_empty_trace() {
        let e = build(&exported(vec![0.0, 0.2], 1.0), 1).unwrap_err();
        assert!(e.0.contains("did not grow"), "{e}");
        let mut x = exported(vec![1.0], 1.0);
        x.prompt = Lengths::Mean {
            tokens: vec![0.0],
            requests: vec![1.0],
        };
        assert!(build(&x, 1).unwrap_err().0.contains("no prompt lengths"));
        x.prompt = Lengths::Mean {
            tokens: vec![1.0, 2.0],
            requests: vec![1.0],
        };
        assert!(build(&x, 1).unwrap_err().0.contains("do not cover"));
    }

    #[test]
    fn times_read_as_unix_seconds_or_utc() {
        assert_eq!(unix_seconds("1733472000").unwrap(), 1_733_472_000.0);
        assert_eq!(unix_seconds("1970-01-02T00:00:01Z").unwrap(), 86_401.0);
        assert!(unix_seconds("yesterday").is_err());
        assert!(unix_seconds("-5").is_err());
        assert!(unix_seconds("2026-13-01T00:00:00Z").is_err());
    }
}
