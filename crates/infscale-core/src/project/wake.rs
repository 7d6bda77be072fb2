//! Timing wakes: a replica read asleep in one round and awake in a later one woke in between.
//!
//! A wake is a start path of its own (vLLM wakes an 8B model in under a second, llama.cpp
//! reloads its model in seconds, a cold start takes minutes), so it is learned apart from the
//! cold start, into a [`ColdStarts::wakes`](crate::project::cold_start::ColdStarts::wakes).
//! Scrapes see a wake only between two rounds: it is timed from the first round that saw
//! requests waiting for the sleeping replica (on it, or held at the activator), as the users
//! saw it, else from the last round that saw it asleep, to the first that reads it awake. Either
//! is an upper bound at the scrape interval's resolution. Pure: times are parameters.

use crate::project::fleet::Fleet;
use std::collections::BTreeMap;

/// One replica last read asleep.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sleeping {
    last_asleep: f64,
    /// The first round that saw requests waiting for it.
    awaited_since: Option<f64>,
}

/// The replicas read asleep, until they are read awake (a wake) or are gone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WakeTimer {
    asleep: BTreeMap<String, Sleeping>,
    wakes: u64,
}

impl WakeTimer {
    /// Notes a round read at `now` with `held` requests at the activator (`None`: not read).
    /// Returns each wake it ends as `(name, from, awake_at)`, for
    /// [`ColdStarts::observe`](crate::project::cold_start::ColdStarts::observe).
    pub fn note(&mut self, fleet: &Fleet, held: Option<f64>, now: f64) -> Vec<(String, f64, f64)> {
        let held = held.unwrap_or(0.0) > 0.0;
        for r in &fleet.asleep {
            let waiting = r.in_flight().unwrap_or(r.waiting()) > 0.0 || held;
            let entry = self.asleep.entry(r.name.clone()).or_insert(Sleeping {
                last_asleep: now,
                awaited_since: None,
            });
            entry.last_asleep = now;
            if waiting {
                entry.awaited_since.get_or_insert(now);
            }
        }
        let mut woke = Vec::new();
        for r in &fleet.replicas {
            if let Some(s) = self.asleep.remove(&r.name) {
                self.wakes += 1;
                let from = s.awaited_since.unwrap_or(s.last_asleep);
                woke.push((format!("{}/wake-{}", r.name, self.wakes), from, now));
            }
        }
        // A replica no longer listed is gone; an unread one may still sleep.
        let listed = |name: &str| fleet.outcomes.iter().any(|o| o.name == name);
        self.asleep.retain(|name, _| listed(name));
        woke
    }

    /// Replicas read asleep and not seen awake since.
    pub fn sleeping(&self) -> usize {
        self.asleep.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::ServerChoice;
    use crate::project::cold_start::ColdStarts;
    use crate::project::fleet::{read, Fetched, Input};

    fn vllm(awake: u8, waiting: u8) -> String {
        format!(
            "vllm:num_requests_running{{engine=\"0\"}} 0\n\
             vllm:num_requests_waiting{{engine=\"0\"}} {waiting}\n\
             vllm:engine_sleep_state{{engine=\"0\",model_name=\"m\",sleep_state=\"awake\"}} {awake}\n\
             vllm:engine_sleep_state{{engine=\"0\",model_name=\"m\",sleep_state=\"weights_offloaded\"}} {}\n",
            1 - awake
        )
    }

    fn round(pages: &[(&str, &str)], now: f64) -> Fleet {
        let inputs = pages.iter().map(|(name, page)| Input {
            name: (*name).into(),
            fetched: Fetched::Page(page.as_bytes()),
            earlier: None,
            cpu_request_cores: 1.0,
        });
        read(inputs, ServerChoice::Auto, now)
    }

    #[test]
    fn a_wake_is_timed_from_the_first_request_that_waited_for_it() {
        let mut t = WakeTimer::default();
        let mut wakes = ColdStarts::wakes();
        let (asleep, awaited, awake) = (vllm(0, 0), vllm(0, 2), vllm(1, 2));
        assert!(t
            .note(&round(&[("a", &asleep)], 0.0), Some(0.0), 0.0)
            .is_empty());
        assert!(t
            .note(&round(&[("a", &awaited)], 15.0), Some(0.0), 15.0)
            .is_empty());
        assert_eq!(t.sleeping(), 1);
        let woke = t.note(&round(&[("a", &awake)], 30.0), Some(0.0), 30.0);
        assert_eq!(woke, [("a/wake-1".to_owned(), 15.0, 30.0)]);
        for (name, from, at) in &woke {
            wakes.observe(name, *from, *at);
        }
        assert_eq!(wakes.learned(), Some(15.0));
        // Woken with nothing waiting: timed from the last round that saw it asleep.
        t.note(&round(&[("a", &asleep)], 100.0), Some(0.0), 100.0);
        let woke = t.note(&round(&[("a", &awake)], 115.0), Some(0.0), 115.0);
        assert_eq!(woke, [("a/wake-2".to_owned(), 100.0, 115.0)]);
        // Gone while asleep: no wake.
        t.note(&round(&[("a", &asleep)], 200.0), Some(0.0), 200.0);
        assert!(t.note(&round(&[], 215.0), Some(0.0), 215.0).is_empty());
        assert_eq!(t.sleeping(), 0);
    }

    #[test]
    fn a_wake_of_half_a_second_is_not_raised_to_the_cold_starts_floor() {
        let mut wakes = ColdStarts::wakes();
        wakes.observe("a/wake-1", 0.0, 0.5);
        assert_eq!(wakes.learned(), Some(0.5));
        let mut cold = ColdStarts::default();
        cold.observe("a", 0.0, 0.5);
        assert_eq!(cold.learned(), Some(5.0));
    }
}
