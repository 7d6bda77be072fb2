//! The memory every request body held or being read shares: a request that would pass it is
//! answered 503 before its body is read, so bodies cannot take the activator past its memory
//! limit however many clients send at once.

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

    /// Bytes in use now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// An empty reservation, to grow as a body arrives.
    pub fn reservation(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes: 0,
        }
    }
}

/// Bytes taken from the budget until dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    /// Takes `n` more bytes, or says the budget cannot give them (taking nothing).
    pub fn grow(&mut self, n: usize) -> bool {
        let taken = self
            .budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n)
                    .filter(|total| *total <= self.budget.max)
            });
        if taken.is_ok() {
            self.bytes += n;
        }
        taken.is_ok()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let b = Budget::new(100);
        let mut r1 = b.reservation();
        assert!(r1.grow(60));
        let mut r2 = b.reservation();
        assert!(!r2.grow(50));
        assert!(r2.grow(40));
        assert_eq!(b.used(), 100);
        drop(r1);
        assert_eq!(b.used(), 40);
        assert!(r2.grow(60));
        drop(r2);
        assert_eq!(b.used(), 0);
    }
}
