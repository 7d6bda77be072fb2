//! The memory every request body held or being read shares, charged as the bytes arrive (never
//! on a declared length: a head that promises 16 MiB and sends nothing costs nothing), within a
//! global cap and three shares of it: per client connection, per client address and per route.
//! A body that would pass any of them is answered 503, so bodies cannot take the activator past
//! its memory limit however many clients send at once, and one connection, one address or one
//! route cannot take the whole budget: 8 x 16 MiB bodies held at one route at zero left every
//! POST on every route 503 for the hold timeout; now they leave the other routes half the
//! budget, and one address a quarter.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Memory shared by every request body held or being read.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    max: usize,
    /// The parts of it each client address and each route may take (unused in a share).
    parts: Shares<Part>,
}

/// What a part of the budget is kept for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    /// The bodies from one client address.
    Client(std::net::IpAddr),
    /// The bodies of one route (by its counts key).
    Route(String),
}

impl Budget {
    pub fn new(max: usize) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicUsize::new(0),
            max,
            parts: Shares::default(),
        })
    }

    /// The part of this budget kept for `part`, of at most `max` bytes (made at first use).
    pub fn part(&self, part: Part, max: usize) -> Arc<Budget> {
        self.parts.of(&part, max)
    }

    /// Bytes in use now (the tests read it; the proxy only reserves and releases).
    #[cfg(test)]
    fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// An empty reservation, to grow as a body arrives, from this budget and each of `shares`
    /// (the connection's, the address's and the route's parts of it).
    pub fn reservation(self: &Arc<Self>, shares: &[&Arc<Budget>]) -> Reservation {
        Reservation {
            budget: self.clone(),
            shares: shares.iter().map(|s| (*s).clone()).collect(),
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

/// Bytes taken from the budget and its shares until dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    shares: Vec<Arc<Budget>>,
    bytes: usize,
}

impl Reservation {
    /// Takes `n` more bytes, or says the budget or a share cannot give them (taking nothing).
    pub fn grow(&mut self, n: usize) -> bool {
        for (i, share) in self.shares.iter().enumerate() {
            if !share.take(n) {
                for taken in &self.shares[..i] {
                    taken.give(n);
                }
                return false;
            }
        }
        if !self.budget.take(n) {
            for taken in &self.shares {
                taken.give(n);
            }
            return false;
        }
        self.bytes += n;
        true
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
        for share in &self.shares {
            share.give(self.bytes);
        }
    }
}

/// A share of the budget per key (a client address, a route), made on first use and forgotten
/// once no reservation holds it.
#[derive(Debug)]
struct Shares<K> {
    by_key: std::sync::Mutex<std::collections::HashMap<K, Arc<Budget>>>,
}

impl<K> Default for Shares<K> {
    fn default() -> Shares<K> {
        Shares {
            by_key: Default::default(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Shares<K> {
    /// The share of `key`, of `each` bytes when made. Shares no reservation holds are dropped
    /// as the map grows, so it stays about as large as the keys with bodies in memory.
    fn of(&self, key: &K, each: usize) -> Arc<Budget> {
        let mut map = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = map.get(key) {
            return s.clone();
        }
        if map.len() >= 64 && map.len().is_power_of_two() {
            map.retain(|_, s| Arc::strong_count(s) > 1);
        }
        let share = Budget::new(each);
        map.insert(key.clone(), share.clone());
        share
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let b = Budget::new(100);
        let share = Budget::new(usize::MAX);
        let mut r1 = b.reservation(&[&share]);
        assert!(r1.grow(60));
        let mut r2 = b.reservation(&[&share]);
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
        let mut r1 = b.reservation(&[&one]);
        assert!(r1.grow(30));
        assert!(!b.reservation(&[&one]).grow(1), "the share is spent");
        let mut r2 = b.reservation(&[&other]);
        assert!(r2.grow(30), "another connection's share is its own");
        assert_eq!(b.used(), 60);
        drop(r1);
        assert_eq!((b.used(), one.used()), (30, 0));
    }

    /// A route's share spent leaves the budget to the others; a refusal by the second share
    /// gives back what the first took.
    #[test]
    fn one_route_or_address_takes_no_more_than_its_share() {
        let b = Budget::new(100);
        let conn = Budget::new(usize::MAX);
        let route = |r: &str| b.part(Part::Route(r.to_owned()), 50);
        let address = |last: u8| b.part(Part::Client([10, 0, 0, last].into()), 40);
        let (a, other) = (route("a"), route("b"));
        let (one, two) = (address(1), address(2));
        let mut held = b.reservation(&[&conn, &two, &a]);
        assert!(held.grow(40));
        let mut more = b.reservation(&[&conn, &one, &a]);
        assert!(!more.grow(20), "route a's share is spent past 50");
        assert_eq!((conn.used(), one.used(), b.used()), (40, 0, 40));
        let mut b_route = b.reservation(&[&conn, &one, &other]);
        assert!(b_route.grow(40), "route b is untouched");
        assert!(!b_route.grow(1), "address one's share is spent");
        drop((held, more, b_route));
        assert_eq!(b.used(), 0);
        drop((a, other, one, two));
        for i in 0..200u8 {
            drop(address(i));
        }
        let left = b.parts.by_key.lock().unwrap().len();
        assert!(left <= 128, "{left} shares no one holds kept");
    }
}
