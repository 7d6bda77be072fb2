//! The memory every request body held or being read shares, charged as the bytes arrive (never
//! on a declared length: a head that promises 16 MiB and sends nothing costs nothing), within a
//! global cap and a share per client connection: a body that would pass either is answered 503,
//! so bodies cannot take the activator past its memory limit however many clients send at once,
//! and one connection cannot take the whole budget.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Memory shared by every request body held or being read.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    max: usize,
}

impl Budget {
    pub fn new(max: usize) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicUsize::new(0),
            max,
        })
    }

    /// Bytes in use now (the tests read it; the proxy only reserves and releases).
    #[cfg(test)]
    fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// An empty reservation, to grow as a body arrives, from this budget and `share` (the
    /// connection's part of it).
    pub fn reservation(self: &Arc<Self>, share: &Arc<Budget>) -> Reservation {
        Reservation {
            budget: self.clone(),
            share: share.clone(),
            bytes: 0,
        }
    }

    fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= self.max)
            })
            .is_ok()
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Bytes taken from the budget and the connection's share until dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    share: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    /// Takes `n` more bytes, or says the budget or the share cannot give them (taking nothing).
    pub fn grow(&mut self, n: usize) -> bool {
        if !self.share.take(n) {
            return false;
        }
        if !self.budget.take(n) {
            self.share.give(n);
            return false;
        }
        self.bytes += n;
        true
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
        self.share.give(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let b = Budget::new(100);
        let share = Budget::new(usize::MAX);
        let mut r1 = b.reservation(&share);
        assert!(r1.grow(60));
        let mut r2 = b.reservation(&share);
        assert!(!r2.grow(50));
        assert!(r2.grow(40));
        assert_eq!(b.used(), 100);
        drop(r1);
        assert_eq!(b.used(), 40);
        assert!(r2.grow(60));
        drop(r2);
        assert_eq!(b.used(), 0);
        assert_eq!(share.used(), 0);
    }

    #[test]
    fn a_connection_takes_no_more_than_its_share_and_a_refusal_takes_nothing() {
        let b = Budget::new(100);
        let (one, other) = (Budget::new(30), Budget::new(30));
        let mut r1 = b.reservation(&one);
        assert!(r1.grow(30));
        assert!(!b.reservation(&one).grow(1), "the share is spent");
        let mut r2 = b.reservation(&other);
        assert!(r2.grow(30), "another connection's share is its own");
        assert_eq!(b.used(), 60);
        drop(r1);
        assert_eq!((b.used(), one.used()), (30, 0));
    }
}
