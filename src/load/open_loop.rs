//! The open loop: requests arrive as a Poisson process at a fixed rate whatever the server does,
//! each on its own task, as users arrive at a public endpoint. A server slower than the rate
//! builds a queue, which is the point; the in-flight bound keeps the client's own memory bounded
//! and counts the arrivals past it as `overflow`.
//!
//! The arrival times come from a seed, so two runs with the same seed send the same number of
//! requests at the same offsets.

use super::config::Limits;
use super::outcome::ErrorKind;
use super::recorder::Recorder;
use super::request::Template;
use super::response::send_timed;
use infscale_core::sim::rng::Rng;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The arrival offsets, in seconds, of a Poisson process at `rate` per second in `[0, duration)`.
pub fn arrivals(rate: f64, duration: f64, seed: u64) -> impl Iterator<Item = f64> {
    let mut rng = Rng::new(seed);
    let mut t = 0.0;
    std::iter::from_fn(move || {
        t += rng.exponential(rate);
        (t < duration).then_some(t)
    })
}

/// Sends a request at each arrival for `duration`, then waits for those in flight (each within
/// the timeout).
pub async fn run(
    client: &reqwest::Client,
    template: Arc<Template>,
    rate: f64,
    seed: u64,
    duration: Duration,
    limits: Limits,
) -> Recorder {
    let start = Instant::now();
    let recorder = Arc::new(Mutex::new(Recorder::default()));
    let max_in_flight = limits.max_in_flight.clamp(1, Semaphore::MAX_PERMITS) as u32;
    let slots = Arc::new(Semaphore::new(max_in_flight as usize));
    let mut overflow = 0u64;
    for (index, at) in arrivals(rate, duration.as_secs_f64(), seed).enumerate() {
        tokio::time::sleep_until(start + Duration::from_secs_f64(at)).await;
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            overflow += 1;
            continue;
        };
        let (client, template, recorder) = (client.clone(), template.clone(), recorder.clone());
        tokio::spawn(async move {
            let body = template.body(index as u64);
            let outcome = send_timed(&client, &template, body, &limits).await;
            recorder
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(outcome);
            drop(slot);
        });
    }
    // Every slot back: every request sent has ended.
    let _all = slots.acquire_many(max_in_flight).await;
    let mut all = recorder.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if overflow > 0 {
        *all.errors.entry(ErrorKind::Overflow).or_default() += overflow;
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_seeded_and_near_the_rate() {
        let a: Vec<f64> = arrivals(100.0, 100.0, 7).collect();
        let b: Vec<f64> = arrivals(100.0, 100.0, 7).collect();
        assert_eq!(a, b);
        // 10,000 expected, sd 100.
        assert!((a.len() as f64 - 10_000.0).abs() < 400.0, "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_ne!(arrivals(100.0, 100.0, 8).count(), 0);
    }
}
