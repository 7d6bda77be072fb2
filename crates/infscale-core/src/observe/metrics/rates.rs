//! Rates from two scrapes of the same replica.
//!
//! Counters only mean something as change over time. Given the [`Counters`] of an earlier scrape
//! and the interval between the two, [`Rates::between`] yields output and prompt tokens per second, CPU
//! cores in use, Triton's occupancies (Little's law: the rate of a cumulative duration counter is
//! the mean number of requests inside that stage, the occupancy ratio) and the TTFT observations of the
//! interval. A counter that went down means the server restarted: the new value is all that
//! happened since, never a negative rate.

use super::histogram::Histogram;
use super::profile::Counters;
use serde::{Deserialize, Serialize};

/// What happened on one replica between two scrapes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub interval_s: f64,
    pub output_tokens_per_s: Option<f64>,
    /// Prompt tokens prefilled per second: the replica's prefill work.
    #[serde(default)]
    pub prompt_tokens_per_s: Option<f64>,
    /// CPU cores in use on average (`process_cpu_seconds_total` per second).
    pub cpu_cores: Option<f64>,
    /// Triton: mean requests inside the server (queued or executing).
    pub in_flight: Option<f64>,
    /// Triton: mean requests executing (request minus queue time).
    pub executing: Option<f64>,
    /// TTFT observations made during the interval (bucket increases), in seconds.
    pub ttft: Option<Histogram>,
}

/// A replica's counters and when they were read: what the next scrape's rates start from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub at: f64,
    pub counters: Counters,
}

/// The increase of a counter, treating a decrease as a restart from zero.
pub fn increase(now: f64, before: f64) -> f64 {
    if now >= before {
        now - before
    } else {
        now
    }
}

fn per_second(now: Option<f64>, before: Option<f64>, interval_s: f64) -> Option<f64> {
    Some(increase(now?, before?) / interval_s)
}

impl Rates {
    /// Rates over `interval_s` seconds from `before` to `now`; `None` unless the interval is a
    /// positive, finite number of seconds.
    pub fn between(now: &Counters, before: &Counters, interval_s: f64) -> Option<Rates> {
        if !(interval_s.is_finite() && interval_s > 0.0) {
            return None;
        }
        let rate = |a: Option<f64>, b: Option<f64>| per_second(a, b, interval_s);
        let request = rate(now.request_us, before.request_us).map(|us| us / 1e6);
        let queue = rate(now.queue_us, before.queue_us).map(|us| us / 1e6);
        let ttft = match (&now.ttft, &before.ttft) {
            (Some(now), Some(before)) => Some(now.increase_since(before)),
            _ => None,
        };
        Some(Rates {
            interval_s,
            output_tokens_per_s: rate(now.output_tokens, before.output_tokens),
            prompt_tokens_per_s: rate(now.prompt_tokens, before.prompt_tokens),
            cpu_cores: rate(now.cpu_seconds, before.cpu_seconds),
            in_flight: request,
            executing: match (request, queue) {
                (Some(r), Some(q)) => Some((r - q).max(0.0)),
                _ => None,
            },
            ttft,
        })
    }

    /// The TTFT p95 of the interval; `None` when no first token was observed in it.
    pub fn ttft_p95(&self) -> Option<f64> {
        self.ttft.as_ref()?.quantile(0.95)
    }

    /// CPU as a percentage of the pod's request.
    pub fn cpu_percent(&self, request_cores: f64) -> Option<f64> {
        (request_cores > 0.0).then_some(self.cpu_cores? / request_cores * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(tokens: f64, cpu: f64) -> Counters {
        Counters {
            output_tokens: Some(tokens),
            cpu_seconds: Some(cpu),
            ..Counters::default()
        }
    }

    #[test]
    fn rates_per_second() {
        let r = Rates::between(&counters(1300.0, 20.0), &counters(1000.0, 17.0), 15.0).unwrap();
        assert_eq!(r.output_tokens_per_s, Some(20.0));
        assert_eq!(r.cpu_cores, Some(0.2));
        assert_eq!(r.cpu_percent(4.0), Some(5.0));
    }

    #[test]
    fn a_counter_that_went_down_is_a_restart() {
        let r = Rates::between(&counters(150.0, 3.0), &counters(90000.0, 500.0), 15.0).unwrap();
        assert_eq!(r.output_tokens_per_s, Some(10.0));
        assert_eq!(r.cpu_cores, Some(0.2));
    }

    #[test]
    fn no_rates_without_a_positive_interval() {
        let c = counters(1.0, 1.0);
        assert_eq!(Rates::between(&c, &c, 0.0), None);
        assert_eq!(Rates::between(&c, &c, f64::NAN), None);
    }

    #[test]
    fn missing_counters_give_no_rate() {
        let r = Rates::between(&Counters::default(), &counters(1.0, 1.0), 5.0).unwrap();
        assert_eq!(r.output_tokens_per_s, None);
        assert_eq!(r.ttft_p95(), None);
    }

    #[test]
    fn triton_occupancies_from_duration_counters() {
        let before = Counters {
            request_us: Some(4.0e9),
            queue_us: Some(1.0e9),
            ..Counters::default()
        };
        let now = Counters {
            request_us: Some(4.09e9),
            queue_us: Some(1.03e9),
            ..Counters::default()
        };
        let r = Rates::between(&now, &before, 15.0).unwrap();
        assert_eq!(r.in_flight, Some(6.0));
        assert_eq!(r.executing, Some(4.0));
    }
}
