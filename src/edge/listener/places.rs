//! The listener's connection places: the cap on connections open at once (where the oldest one
//! that never sent a byte gives way to a newcomer), an optional cap per client address, and a
//! way to wait until every connection has closed (an activator's drain at shutdown).
//!
//! Kept apart from the sockets so that who gives way, who is refused and when the count reaches
//! zero are plain data, tested without a connection.

use futures::task::AtomicWaker;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// One open connection's place.
pub(super) struct Slot {
    id: u64,
    /// The client address, when places are counted per address.
    ip: Option<IpAddr>,
    /// Whether its client has sent a byte.
    spoke: AtomicBool,
    /// Set when it must give way; its task is woken to close it.
    evicted: AtomicBool,
    pub(super) waker: AtomicWaker,
}

impl Slot {
    pub(super) fn spoke(&self) -> bool {
        self.spoke.load(Ordering::Acquire)
    }

    pub(super) fn speaks(&self) {
        self.spoke.store(true, Ordering::Release);
    }

    pub(super) fn evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }
}

/// Why a new connection got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Every open connection has spoken and the cap is reached.
    Full,
    /// Its client address has as many connections as one may.
    PerClient,
}

struct Open {
    /// Oldest first.
    slots: VecDeque<Arc<Slot>>,
    per_client: HashMap<IpAddr, usize>,
}

/// The open connections of one listener.
pub(super) struct Places {
    open: Mutex<Open>,
    max: usize,
    max_per_client: Option<usize>,
    next: AtomicU64,
    /// Connections that gave way or were refused, for logging a flood in a handful of lines.
    turned_away: AtomicU64,
    /// Woken when the last open connection closes.
    emptied: Notify,
}

impl Places {
    pub(super) fn new(max: usize, max_per_client: Option<usize>) -> Places {
        Places {
            open: Mutex::new(Open {
                slots: VecDeque::new(),
                per_client: HashMap::new(),
            }),
            max: max.max(1),
            max_per_client: max_per_client.map(|n| n.max(1)),
            next: AtomicU64::new(0),
            turned_away: AtomicU64::new(0),
            emptied: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// Connections open now.
    pub(super) fn len(&self) -> usize {
        self.lock().slots.len()
    }

    /// A place for a new connection from `ip`. Its address's cap is checked first (a refusal
    /// there makes no one give way); at the listener's cap, the oldest silent connection gives
    /// way, and when every open one has spoken the newcomer is refused.
    pub(super) fn take(&self, ip: IpAddr) -> Result<Arc<Slot>, Refused> {
        let mut open = self.lock();
        let counted = self.max_per_client.map(|max| (max, ip));
        if let Some((max, ip)) = counted {
            if open.per_client.get(&ip).copied().unwrap_or(0) >= max {
                return Err(Refused::PerClient);
            }
        }
        if open.slots.len() >= self.max {
            let silent = open.slots.iter().position(|s| !s.spoke());
            let victim = silent
                .and_then(|i| open.slots.remove(i))
                .ok_or(Refused::Full)?;
            victim.evicted.store(true, Ordering::Release);
            victim.waker.wake();
            forget(&mut open, victim.ip);
        }
        let slot = Arc::new(Slot {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            ip: counted.map(|(_, ip)| ip),
            spoke: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        if let Some(ip) = slot.ip {
            *open.per_client.entry(ip).or_insert(0) += 1;
        }
        open.slots.push_back(slot.clone());
        Ok(slot)
    }

    /// Gives a closed connection's place back (a place it already gave way with is gone).
    pub(super) fn release(&self, slot: &Slot) {
        let mut open = self.lock();
        if let Some(i) = open.slots.iter().position(|s| s.id == slot.id) {
            open.slots.remove(i);
            forget(&mut open, slot.ip);
        }
        if open.slots.is_empty() {
            self.emptied.notify_waiters();
        }
    }

    /// Resolves once no connection is open.
    pub(super) async fn drained(&self) {
        loop {
            let emptied = self.emptied.notified();
            let mut emptied = std::pin::pin!(emptied);
            emptied.as_mut().enable();
            if self.len() == 0 {
                return;
            }
            emptied.await;
        }
    }

    /// Counts a connection turned away; true on the 1st, 2nd, 4th, 8th... (when to log).
    pub(super) fn turned_away(&self) -> bool {
        let n = self.turned_away.fetch_add(1, Ordering::Relaxed) + 1;
        n.is_power_of_two()
    }

    pub(super) fn turned_away_count(&self) -> u64 {
        self.turned_away.load(Ordering::Relaxed)
    }
}

fn forget(open: &mut Open, ip: Option<IpAddr>) {
    let Some(ip) = ip else { return };
    if let Some(n) = open.per_client.get_mut(&ip) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            open.per_client.remove(&ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn at_the_cap_the_oldest_silent_connection_gives_way() {
        let s = Places::new(3, None);
        let a = s.take(HOME).unwrap();
        let b = s.take(HOME).unwrap();
        let c = s.take(HOME).unwrap();
        a.speaks();
        // A fourth: `b`, the oldest silent one, gives way; `a` has spoken and stays.
        let d = s.take(HOME).unwrap();
        assert!(b.evicted());
        assert!(!a.evicted() && !c.evicted());
        // Every open one has spoken: a new one is refused.
        for slot in [&c, &d] {
            slot.speaks();
        }
        assert_eq!(s.take(HOME).err(), Some(Refused::Full));
        // One closes: room again.
        s.release(&c);
        assert!(s.take(HOME).is_ok());
    }

    #[test]
    fn a_client_gets_at_most_its_places_and_they_come_back() {
        let s = Places::new(10, Some(2));
        let a = s.take(HOME).unwrap();
        let _b = s.take(HOME).unwrap();
        assert_eq!(s.take(HOME).err(), Some(Refused::PerClient));
        assert!(s.take([127, 0, 0, 2].into()).is_ok());
        s.release(&a);
        assert!(s.take(HOME).is_ok());
    }

    #[test]
    fn a_refusal_for_the_address_makes_no_one_give_way() {
        let s = Places::new(2, Some(1));
        let a = s.take(HOME).unwrap();
        let b = s.take([127, 0, 0, 2].into()).unwrap();
        assert_eq!(s.take(HOME).err(), Some(Refused::PerClient));
        assert!(!a.evicted() && !b.evicted());
        // A third address at the cap: the oldest silent one (`a`) gives way, and its
        // address's place with it.
        let _c = s.take([127, 0, 0, 3].into()).unwrap();
        assert!(a.evicted());
        assert!(s.take(HOME).is_ok());
    }

    #[tokio::test]
    async fn drained_waits_for_the_last_connection() {
        let s = Arc::new(Places::new(4, None));
        let a = s.take(HOME).unwrap();
        let b = s.take(HOME).unwrap();
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.drained().await }
        });
        s.release(&a);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        s.release(&b);
        waiting.await.unwrap();
        // Nothing open: at once.
        s.drained().await;
    }

    #[test]
    fn a_flood_is_logged_in_a_handful_of_lines() {
        let s = Places::new(1, None);
        let logged = (0..1100).filter(|_| s.turned_away()).count();
        assert_eq!(logged, 11);
    }
}
