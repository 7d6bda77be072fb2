//! A recorded trace replayed as a different day: faster or slower, in parts, or reshaped into
//! the seed's story (a busy stretch at the trace's own rate, the traffic tripling, silence, a
//! trickle).
//!
//! A user's log is one draw of one day. To ask "what if traffic triples?" or to judge a policy
//! on parts of the log it was not tuned on, the arrivals are transformed, never invented: a rate
//! scale plays the same arrivals faster; a story superposes consecutive windows of the log for
//! a rise (so bursts keep their own length and shape) and keeps a seeded share of its arrivals
//! for a trickle; every request keeps its own prompt and output lengths.

use super::{Request, Trace, TraceError};
use crate::sim::rng::Rng;
use serde::{Deserialize, Serialize};

/// The same arrivals `scale` times faster (2: twice the rate, in half the time).
pub fn rate_scaled(trace: &Trace, scale: f64) -> Result<Trace, TraceError> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(TraceError(format!(
            "rate scale {scale}: expected a number above 0 (2 plays the trace twice as fast)"
        )));
    }
    if scale == 1.0 {
        return Ok(trace.clone());
    }
    Ok(Trace {
        name: format!("{} x{scale}", trace.name),
        duration: trace.duration / scale,
        requests: trace
            .requests
            .iter()
            .map(|r| Request {
                arrival: r.arrival / scale,
                ..*r
            })
            .collect(),
    })
}

/// The arrivals in `[from, to)`, shifted to start at 0, as a trace of `to - from` seconds.
pub fn window(trace: &Trace, from: f64, to: f64) -> Trace {
    let lo = trace.requests.partition_point(|r| r.arrival < from);
    let hi = trace.requests.partition_point(|r| r.arrival < to);
    Trace {
        name: format!("{} [{from:.0} s, {to:.0} s)", trace.name),
        duration: (to - from).max(0.0),
        requests: trace.requests[lo..hi]
            .iter()
            .map(|r| Request {
                arrival: r.arrival - from,
                ..*r
            })
            .collect(),
    }
}

/// One stretch of a story: `seconds` long, at `scale` times the trace's own rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stretch {
    pub seconds: f64,
    pub scale: f64,
}

/// A day's shape as stretches, each played from the next part of the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Story {
    pub stretches: Vec<Stretch>,
}

impl Story {
    /// The seed's day: twenty minutes at the trace's own rate, then ten at three times it, six
    /// of silence, and four of a trickle at a fifth of it.
    pub fn seed_day() -> Story {
        let s = |seconds, scale| Stretch { seconds, scale };
        Story {
            stretches: vec![s(1200.0, 1.0), s(600.0, 3.0), s(360.0, 0.0), s(240.0, 0.2)],
        }
    }

    pub fn duration(&self) -> f64 {
        self.stretches.iter().map(|s| s.seconds).sum()
    }

    /// Seconds of the trace the story plays: a stretch at scale `k >= 1` superposes `ceil(k)`
    /// consecutive windows; below 1, one window thinned.
    pub fn trace_seconds(&self) -> f64 {
        self.stretches
            .iter()
            .filter(|s| s.scale > 0.0)
            .map(|s| s.seconds * s.scale.ceil().max(1.0))
            .sum()
    }

    fn validate(&self) -> Result<(), TraceError> {
        for (i, s) in self.stretches.iter().enumerate() {
            if !(s.seconds.is_finite() && s.seconds > 0.0 && s.scale.is_finite() && s.scale >= 0.0)
            {
                return Err(TraceError(format!(
                    "story stretch {i}: {} s at x{}: expected positive seconds and a scale >= 0",
                    s.seconds, s.scale
                )));
            }
        }
        Ok(())
    }
}

/// `source` played as `story`, starting `offset_s` into it (the trace wraps around at its end).
/// A stretch at scale `k` plays `ceil(k)` consecutive windows of the trace on top of each other,
/// each arrival kept with chance `k / ceil(k)` (drawn from `seed`), so the rate is `k` times the
/// trace's and a burst keeps its own length.
pub fn day(source: &Trace, story: &Story, offset_s: f64, seed: u64) -> Result<Trace, TraceError> {
    story.validate()?;
    let span = source
        .requests
        .last()
        .map_or(0.0, |r| r.arrival)
        .max(source.duration);
    if source.requests.is_empty() || span <= 0.0 {
        return Err(TraceError(format!(
            "{}: no arrivals to build a day from",
            source.name
        )));
    }
    let mut rng = Rng::new(seed);
    let mut requests = Vec::new();
    let (mut day_t, mut trace_t) = (0.0, offset_s.rem_euclid(span));
    for stretch in &story.stretches {
        if stretch.scale > 0.0 {
            let layers = stretch.scale.ceil().max(1.0);
            let keep = stretch.scale / layers;
            for _ in 0..layers as u32 {
                for r in wrapped(source, span, trace_t, trace_t + stretch.seconds) {
                    if keep >= 1.0 || rng.uniform() < keep {
                        requests.push(Request {
                            arrival: day_t + r.arrival,
                            ..r
                        });
                    }
                }
                trace_t += stretch.seconds;
            }
        }
        day_t += stretch.seconds;
    }
    requests.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    Ok(Trace {
        name: format!("{} as a day from {:.0} s", source.name, offset_s),
        duration: story.duration(),
        requests,
    })
}

/// The arrivals of `[from, to)` on the trace repeated every `span` seconds, times from `from`.
fn wrapped(source: &Trace, span: f64, from: f64, to: f64) -> Vec<Request> {
    let mut out = Vec::new();
    let mut lap = (from / span).floor();
    while lap * span < to {
        let base = lap * span;
        let (lo, hi) = ((from - base).max(0.0), (to - base).min(span));
        let w = window(source, lo, hi);
        out.extend(w.requests.into_iter().map(|r| Request {
            arrival: r.arrival + base + lo - from,
            ..r
        }));
        lap += 1.0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steady(n: u32, every: f64) -> Trace {
        Trace {
            name: "t".to_owned(),
            duration: f64::from(n) * every,
            requests: (0..n)
                .map(|i| Request {
                    arrival: f64::from(i) * every,
                    prompt: i,
                    output: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn a_rate_scale_plays_the_same_requests_faster() {
        let t = steady(10, 1.0);
        let fast = rate_scaled(&t, 2.0).unwrap();
        assert_eq!(fast.requests.len(), 10);
        assert_eq!(fast.requests[3].arrival, 1.5);
        assert_eq!(fast.requests[3].prompt, 3);
        assert_eq!(fast.duration, 5.0);
        assert!(rate_scaled(&t, 0.0).is_err());
        assert!(rate_scaled(&t, f64::NAN).is_err());
    }

    #[test]
    fn a_window_is_shifted_to_zero() {
        let w = window(&steady(10, 1.0), 2.5, 6.0);
        let arrivals: Vec<f64> = w.requests.iter().map(|r| r.arrival).collect();
        assert_eq!(arrivals, [0.5, 1.5, 2.5]);
        assert_eq!(w.duration, 3.5);
    }

    #[test]
    fn the_story_triples_by_superposing_and_thins_a_trickle() {
        // One arrival a second for 100 s; a story of 10 s at x1, 10 s at x3, 10 s silent, 10 s
        // at x0.5.
        let t = steady(100, 1.0);
        let s = |seconds, scale| Stretch { seconds, scale };
        let story = Story {
            stretches: vec![s(10.0, 1.0), s(10.0, 3.0), s(10.0, 0.0), s(10.0, 0.5)],
        };
        let d = day(&t, &story, 0.0, 7).unwrap();
        let count = |a: f64, b: f64| {
            d.requests
                .iter()
                .filter(|r| (a..b).contains(&r.arrival))
                .count()
        };
        assert_eq!(count(0.0, 10.0), 10);
        assert_eq!(count(10.0, 20.0), 30);
        assert_eq!(count(20.0, 30.0), 0);
        assert!(
            (1..=9).contains(&count(30.0, 40.0)),
            "{}",
            count(30.0, 40.0)
        );
        assert_eq!(d.duration, 40.0);
        // The tripled stretch plays trace seconds 10..40: prompts 10..39 each once.
        let mut prompts: Vec<u32> = d
            .requests
            .iter()
            .filter(|r| (10.0..20.0).contains(&r.arrival))
            .map(|r| r.prompt)
            .collect();
        prompts.sort_unstable();
        assert_eq!(prompts, (10..40).collect::<Vec<u32>>());
    }

    #[test]
    fn an_offset_wraps_around_the_trace() {
        let t = steady(100, 1.0);
        let story = Story {
            stretches: vec![Stretch {
                seconds: 20.0,
                scale: 1.0,
            }],
        };
        let d = day(&t, &story, 90.0, 1).unwrap();
        let prompts: Vec<u32> = d.requests.iter().map(|r| r.prompt).collect();
        assert_eq!(prompts, (90..100).chain(0..10).collect::<Vec<u32>>());
        assert!(d.requests.windows(2).all(|w| w[0].arrival < w[1].arrival));
        let empty = Trace {
            requests: Vec::new(),
            ..t
        };
        assert!(day(&empty, &story, 0.0, 1).is_err());
    }
}
