//! How often serve mode's path task may knock: the probes it sends through a model's Service,
//! and the writes it asks of the Kubernetes API.
//!
//! Whoever writes a ScaledObject chooses where its trigger's probes go (within the model's own
//! Service: `serviceUrl` is checked to name it) and can make every write fail, so
//! neither may be retried at a fixed short period: the probes of one trigger are paced by a
//! [`Pacer`] of its own and all triggers' by one shared [`Pacer`], and a failure is tried again
//! after a [`Backoff`] that doubles to minutes. A failure that lasts is logged through a
//! [`Quiet`], once and then at most once a period with the count, so that a trigger failing for
//! hours writes a few lines, not thousands.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A token bucket with a burst, as a schedule (the generic cell rate algorithm): each
/// [`Pacer::take`] reserves the next free slot and waits for it, so over any window of `w`
/// seconds at most `burst + w * per_second` takes go through, in the order they asked.
#[derive(Debug)]
pub struct Pacer {
    interval: Duration,
    /// How far ahead of the schedule a take may go: `(burst - 1)` intervals.
    tolerance: Duration,
    /// When the schedule's next slot falls; `None` before the first take.
    next: Mutex<Option<Instant>>,
}

impl Pacer {
    /// At most `per_second` a second after a burst of `burst` (each at least 1).
    pub fn new(per_second: f64, burst: u32) -> Pacer {
        let interval = Duration::from_secs_f64(1.0 / per_second.max(0.001));
        Pacer {
            interval,
            tolerance: interval * burst.max(1).saturating_sub(1),
            next: Mutex::new(None),
        }
    }

    /// Waits for this take's slot.
    pub async fn take(&self) {
        let at = {
            let now = Instant::now();
            let mut next = match self.next.lock() {
                Ok(n) => n,
                Err(poisoned) => poisoned.into_inner(),
            };
            let due = next.map_or(now, |n| n.max(now));
            let at = due.checked_sub(self.tolerance).unwrap_or(now).max(now);
            *next = Some(due + self.interval);
            at
        };
        tokio::time::sleep_until(at).await;
    }
}

/// Pauses that start at `first` and double after each failure in a row up to `max`; from the
/// second on, shortened by up to a fifth at random, so that triggers failing together (an API
/// server refusing them all) do not keep retrying in step.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: u32,
    seed: u64,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Backoff {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Backoff {
            first,
            max,
            failures: 0,
            seed: seed | 1,
        }
    }

    /// The pause after one more failure in a row.
    pub fn next(&mut self) -> Duration {
        let doubled = self
            .first
            .saturating_mul(1u32 << self.failures.min(20))
            .min(self.max);
        self.failures = self.failures.saturating_add(1);
        if self.failures == 1 {
            return doubled;
        }
        // xorshift64: no more is needed to spread retries apart.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let fifth = (self.seed % 1000) as f64 / 1000.0 / 5.0;
        doubled.mul_f64(1.0 - fifth)
    }

    /// A success: the next failure pauses `first` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// When a failure that repeats is logged: its first time, then at most once every `every`,
/// with how many happened since.
#[derive(Debug)]
pub struct Quiet {
    every: Duration,
    last: Option<Instant>,
    unlogged: u64,
    streak: u64,
}

impl Quiet {
    pub fn new(every: Duration) -> Quiet {
        Quiet {
            every,
            last: None,
            unlogged: 0,
            streak: 0,
        }
    }

    /// One more failure: `Some(failures since the last line, this one included)` when a line
    /// is due now.
    pub fn failed(&mut self) -> Option<u64> {
        self.streak += 1;
        self.unlogged += 1;
        let due = self.last.is_none_or(|at| at.elapsed() >= self.every);
        if !due {
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.unlogged))
    }

    /// A success: `Some(failures in the streak it ends)` when there was one.
    pub fn recovered(&mut self) -> Option<u64> {
        self.last = None;
        self.unlogged = 0;
        match std::mem::take(&mut self.streak) {
            0 => None,
            n => Some(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_pacer_lets_its_burst_then_its_rate_through() {
        let pacer = Pacer::new(2.0, 8);
        let start = Instant::now();
        let mut n = 0;
        while start.elapsed() < Duration::from_secs(10) {
            pacer.take().await;
            n += 1;
        }
        // 8 at once, then 2 a second: 8 + 20 by 10 s (and the one that crossed it).
        assert!((27..=29).contains(&n), "{n}");
    }

    #[test]
    fn a_backoff_doubles_to_its_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(300));
        assert_eq!(b.next(), Duration::from_millis(500));
        let second = b.next();
        assert!(second <= Duration::from_secs(1) && second >= Duration::from_millis(800));
        for _ in 0..20 {
            assert!(b.next() <= Duration::from_secs(300));
        }
        assert!(b.next() >= Duration::from_secs(240));
        b.reset();
        assert_eq!(b.next(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_logs_the_first_then_once_a_period_with_the_count() {
        let mut q = Quiet::new(Duration::from_secs(60));
        assert_eq!(q.failed(), Some(1));
        let mut lines = Vec::new();
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Some(n) = q.failed() {
                lines.push(n);
            }
        }
        assert_eq!(lines, vec![60, 60, 60, 60, 60]);
        assert_eq!(q.recovered(), Some(301));
        assert_eq!(q.recovered(), None);
        assert_eq!(q.failed(), Some(1));
    }
}
