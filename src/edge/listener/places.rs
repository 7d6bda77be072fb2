//! The listener's connection places: the cap on connections open at once, who gives way to a
//! newcomer at that cap, an optional cap per client address, and a way to wait until every
//! connection has closed (an activator's drain at shutdown).
//!
//! At the cap, room is made by a rule a few hostile connections cannot hold (issue 37: the old
//! rule let only a connection that never sent a byte give way, so connections that had spoken,
//! a keep-alive client, a `/queue/watch` stream, an h2 connection answering pings, a dribbled
//! preface, kept the kubelet's probes out for as long as they liked):
//!
//! - a newcomer from an address holding fewer places than another takes the place of the
//!   least recently useful connection of the address holding the most (never useful first, then
//!   one that never spoke, then the oldest): a flood from a few addresses makes room for every
//!   other address, whatever its connections send;
//! - a newcomer from an address already holding the most (or as many as any) may only take the
//!   place of one of its own connections that never sent a byte; otherwise it is refused. A
//!   flood competes with itself, and a busy client is never cut for its own newcomer.
//!
//! "Useful" is what the server says ([`Slot::mark_useful`]): a request began or was answered.
//! Bytes alone (pings, keep-alive comments, a preface a byte at a time) never count.
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
    /// The client address.
    ip: IpAddr,
    /// Whether its client has sent a byte.
    spoke: AtomicBool,
    /// When it was last useful, as a tick of its listener's [`Places`] (0: never).
    useful: AtomicU64,
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

    /// Whether the server has ever called it useful.
    pub(super) fn was_useful(&self) -> bool {
        self.useful.load(Ordering::Acquire) != 0
    }

    /// The connection was useful now (`places` is its listener's, whose ticks order them).
    pub(super) fn mark_useful(&self, places: &Places) {
        let tick = places.ticks.fetch_add(1, Ordering::Relaxed);
        self.useful.store(tick, Ordering::Release);
    }
}

/// Why a new connection got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// The cap is reached, the newcomer's address holds as many places as any, and every one
    /// of its own has spoken.
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
    /// The clock of [`Slot::mark_useful`]: a count, so "least recently" needs no time source.
    ticks: AtomicU64,
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
            ticks: AtomicU64::new(1),
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
    /// there makes no one give way); at the listener's cap, one connection gives way by the rule
    /// in this module's documentation, or the newcomer is refused.
    pub(super) fn take(&self, ip: IpAddr) -> Result<Arc<Slot>, Refused> {
        let mut open = self.lock();
        let mine = open.per_client.get(&ip).copied().unwrap_or(0);
        if self.max_per_client.is_some_and(|max| mine >= max) {
            return Err(Refused::PerClient);
        }
        if open.slots.len() >= self.max {
            let i = gives_way(&open, ip, mine).ok_or(Refused::Full)?;
            if let Some(victim) = open.slots.remove(i) {
                victim.evicted.store(true, Ordering::Release);
                victim.waker.wake();
                forget(&mut open, victim.ip);
            }
        }
        let slot = Arc::new(Slot {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            ip,
            spoke: AtomicBool::new(false),
            useful: AtomicU64::new(0),
            evicted: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        *open.per_client.entry(ip).or_insert(0) += 1;
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

/// Which open connection gives way to a newcomer from `ip` (which holds `mine` places): of the
/// connections of addresses holding more than `mine`, and the newcomer's own that never spoke,
/// one of the address holding the most, the least recently useful (never first), then one that
/// never spoke, then the oldest.
fn gives_way(open: &Open, ip: IpAddr, mine: usize) -> Option<usize> {
    let held = |s: &Slot| open.per_client.get(&s.ip).copied().unwrap_or(0);
    open.slots
        .iter()
        .enumerate()
        .filter(|(_, s)| held(s) > mine || (s.ip == ip && !s.spoke()))
        .min_by_key(|(i, s)| {
            let useful = s.useful.load(Ordering::Acquire);
            (std::cmp::Reverse(held(s)), useful, s.spoke(), *i)
        })
        .map(|(i, _)| i)
}

fn forget(open: &mut Open, ip: IpAddr) {
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

    fn at(last: u8) -> IpAddr {
        [127, 0, 0, last].into()
    }

    #[test]
    fn a_newcomer_from_another_address_takes_a_place_of_the_address_holding_the_most() {
        let s = Places::new(4, None);
        // One address holds three places, spoken and useful (a keep-alive client); another one.
        let flood: Vec<_> = (0..3).map(|_| s.take(at(2)).unwrap()).collect();
        for f in &flood {
            f.speaks();
            f.mark_useful(&s);
        }
        let other = s.take(at(3)).unwrap();
        other.speaks();
        // A probe from a third address: the flood's least recently useful (its first) gives way.
        let probe = s.take(at(9)).unwrap();
        assert!(flood[0].evicted());
        assert!(!flood[1].evicted() && !flood[2].evicted() && !other.evicted());
        // The flood's next newcomers find every one of its own spoken: refused, the probe stays.
        for _ in 0..10 {
            assert_eq!(s.take(at(2)).err(), Some(Refused::Full));
        }
        assert!(!probe.evicted() && !probe.spoke());
    }

    #[test]
    fn of_the_address_holding_the_most_the_least_recently_useful_gives_way() {
        let s = Places::new(4, None);
        let [old, new, spoke, silent] = [(); 4].map(|_| s.take(at(2)).unwrap());
        old.speaks();
        old.mark_useful(&s);
        new.speaks();
        new.mark_useful(&s);
        spoke.speaks(); // pings answered, never a request
                        // A newcomer from another address each: never useful and silent first, then never
                        // useful, then the one useful longest ago (the address still holds the most each time).
        let all = [&old, &new, &spoke, &silent];
        let mut order = Vec::new();
        for ip in [at(3), at(4), at(5)] {
            let _newcomer = s.take(ip).unwrap();
            let gone: Vec<u64> = all
                .iter()
                .filter(|c| c.evicted() && !order.contains(&c.id))
                .map(|c| c.id)
                .collect();
            order.extend(gone);
        }
        assert_eq!(order, [silent.id, spoke.id, old.id]);
        assert!(!new.evicted());
    }

    #[test]
    fn being_useful_again_moves_a_connection_to_the_back() {
        let s = Places::new(3, None);
        let [a, b] = [(); 2].map(|_| s.take(at(2)).unwrap());
        a.mark_useful(&s);
        b.mark_useful(&s);
        a.mark_useful(&s); // a keep-alive client's next request
        let _c = s.take(at(3)).unwrap();
        let _d = s.take(at(4)).unwrap();
        assert!(b.evicted() && !a.evicted());
    }

    #[test]
    fn a_slowloris_from_five_addresses_never_pushes_out_a_probe() {
        let s = Places::new(50, None);
        let mut probes = Vec::new();
        for n in 0..5_000u32 {
            // Five addresses each open connections that send a byte and nothing more.
            if let Ok(c) = s.take(at(2 + (n % 5) as u8)) {
                c.speaks();
            }
            if n % 100 == 0 {
                // The kubelet's probe: a fresh connection, silent when the next ones arrive.
                let p = s.take(HOME).expect("a probe finds a place");
                probes.push(p);
                if probes.len() > 1 {
                    let done = probes.remove(0);
                    assert!(!done.evicted(), "a probe was pushed out by the flood");
                    s.release(&done);
                }
            }
        }
        assert!(probes.iter().all(|p| !p.evicted()));
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
