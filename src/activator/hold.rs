//! A route's live state: whether its upstream is ready, the FIFO of requests held until it is,
//! and the counts the scaler reads.
//!
//! Readiness and the queue are judged under one lock, so a request that finds the route not
//! ready is queued before any release can run, and a release drains the queue in arrival order.
//! A held request that is dropped (its client went away, or it timed out) leaves the queue and
//! the counts at once. Each request keeps the ticket it got on arrival, so one that is held again
//! (its upstream refused the connection) goes back to its place in the line. Once shut down, a
//! route holds nothing more. Every change of a held count or of readiness bumps a shared version,
//! which `/queue/watch` streams; requests forwarded to a ready upstream do not, so the hot path
//! takes one short lock and no notification. A held request whose client gave up is counted as
//! abandoned and still counts as held for the route's `abandonLeaseSeconds`: the client that
//! retries finds the model waking, not the count back at zero.
//!
//! A release keeps arrival order all the way to the upstream. Each released request gets an
//! ordinal, and sends only when every lower ordinal has been written upstream (its [`Turn`]);
//! requests that arrive while a release is still going get the next ordinals and queue behind
//! it. At most `releaseConcurrency` released requests wait for their answer's head at once (a
//! slot frees when the head arrives, not when the answer ends: ten-second streams no longer
//! keep everyone behind the first slots waiting), so a wake never sends an unbounded burst at
//! a fragile server. A released request waits for its turn and slot within its own hold
//! deadline. Released requests not yet sent still count as held.

use super::routes::Route;
use super::telemetry::RouteTelemetry;
use infscale_core::observe::counts::HostCounts;
use std::collections::BTreeSet;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, watch, Notify, OwnedSemaphorePermit, Semaphore};
// tokio's clock, the one the lease's wake-up sleeps on (and a test can pause).
use tokio::time::Instant;

/// Why a held request stops waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The upstream is ready: forward. `ordinal` counts releases on this route from 1.
    Go { ordinal: u64 },
    /// The activator is shutting down: answer 503.
    Shutdown,
}

#[derive(Default)]
struct Queue {
    ready: bool,
    /// Shut down: nothing more is held.
    closed: bool,
    /// Held requests by arrival ticket, oldest first.
    waiters: VecDeque<(u64, oneshot::Sender<Release>)>,
    released: u64,
    /// When each abandoned hold stops counting as held, soonest first.
    leases: VecDeque<Instant>,
    /// Ordinals given out and not yet written upstream: the lowest sends next.
    unsent: BTreeSet<u64>,
}

impl Queue {
    /// Held requests, abandoned ones still on lease included.
    fn held(&mut self) -> usize {
        let now = Instant::now();
        while self.leases.front().is_some_and(|end| *end <= now) {
            self.leases.pop_front();
        }
        self.waiters.len() + self.leases.len() + self.unsent.len()
    }

    /// Requests really held (waiting or released and not yet sent): what `maxHeld` bounds. An
    /// abandoned hold's lease keeps the scaler's count up, not a real client out.
    fn holding(&self) -> usize {
        self.waiters.len() + self.unsent.len()
    }

    /// The next ordinal, marked unsent.
    fn next_ordinal(&mut self) -> u64 {
        self.released += 1;
        self.unsent.insert(self.released);
        self.released
    }
}

/// One route at run time.
pub struct RouteState {
    pub route: Route,
    queue: Mutex<Queue>,
    /// Requests forwarded and not yet finished.
    forwarding: AtomicU64,
    /// Requests seen since start; each one's ticket is the count before it.
    requests: AtomicU64,
    /// Wakes the readiness probe (a request is waiting).
    pub wake: Notify,
    /// Bumped on every change of any route's counts.
    changes: Arc<watch::Sender<u64>>,
    /// The route's series (its abandoned holds among them).
    pub counters: RouteTelemetry,
    /// Requests held at once over every route of this route's namespace: a hold takes a
    /// permit, and gives it back when it leaves the queue.
    namespace_hold: Option<Arc<Semaphore>>,
    /// Wakes the requests waiting for their turn to send.
    turn: Notify,
    /// Released requests in flight at once.
    slots: Arc<Semaphore>,
    /// The ready endpoints a `direct` route sends to, and the next one's turn.
    endpoints: Mutex<Vec<http::uri::Authority>>,
    next_endpoint: AtomicU64,
}

/// What `admit` decided.
pub enum Admission {
    /// The upstream is ready: forward now; with an ordinal, in turn behind a release still going.
    Forward { ordinal: Option<u64> },
    /// Held: await the release.
    Held(Held),
    /// The route holds its maximum already.
    Full,
    /// The route's namespace holds its maximum already.
    NamespaceFull,
    /// The activator is shutting down.
    Closed,
}

/// A request in the hold queue; dropping it before its release takes it out (abandoned, unless
/// it was [`Held::expire`]d).
pub struct Held {
    ticket: u64,
    pub release: oneshot::Receiver<Release>,
    state: Arc<RouteState>,
    abandoned: bool,
    /// The namespace's share this hold takes, while it waits.
    _namespace: Option<OwnedSemaphorePermit>,
}

impl Held {
    /// The hold timed out (answered 504): leaving is not abandoning.
    pub fn expire(mut self) {
        self.abandoned = false;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Released (the answer was sent, so the queue no longer has it): nothing to do.
        if !matches!(
            self.release.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ) {
            return;
        }
        let lease = self.state.route.abandon_lease;
        let mut q = self.state.lock();
        let Ok(at) = q.waiters.binary_search_by_key(&self.ticket, |(t, _)| *t) else {
            return;
        };
        q.waiters.remove(at);
        let leased = self.abandoned && !lease.is_zero();
        if leased {
            q.leases.push_back(Instant::now() + lease);
        }
        drop(q);
        if self.abandoned {
            self.state.counters.abandoned.inc();
        }
        if leased {
            // The count drops when the lease ends: say so then.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let state = self.state.clone();
                runtime.spawn(async move {
                    tokio::time::sleep(lease).await;
                    state.changed();
                });
            }
        } else {
            self.state.changed();
        }
    }
}

impl RouteState {
    /// A route's state with series of its own, in no namespace's bound.
    pub fn new(route: Route, changes: Arc<watch::Sender<u64>>) -> Arc<RouteState> {
        RouteState::with(route, changes, RouteTelemetry::default(), None)
    }

    /// A route's state counting into `counters`, its holds within `namespace_hold` too.
    pub fn with(
        route: Route,
        changes: Arc<watch::Sender<u64>>,
        counters: RouteTelemetry,
        namespace_hold: Option<Arc<Semaphore>>,
    ) -> Arc<RouteState> {
        let route_slots = route.release_concurrency.max(1);
        Arc::new(RouteState {
            route,
            queue: Mutex::new(Queue::default()),
            forwarding: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            wake: Notify::new(),
            changes,
            counters,
            namespace_hold,
            turn: Notify::new(),
            slots: Arc::new(Semaphore::new(route_slots)),
            endpoints: Mutex::new(Vec::new()),
            next_endpoint: AtomicU64::new(0),
        })
    }

    /// Sets the ready endpoints of a `direct` route; the route is ready while there is one.
    pub fn set_endpoints(&self, mut ready: Vec<http::uri::Authority>) {
        ready.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        ready.dedup();
        let any = !ready.is_empty();
        *self.endpoints.lock().unwrap_or_else(|e| e.into_inner()) = ready;
        self.set_ready(any);
    }

    /// Whether a `direct` route sends to `a` now.
    pub fn has_endpoint(&self, a: &http::uri::Authority) -> bool {
        self.endpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(a)
    }

    /// The endpoint a `direct` route sends its next request to, by turns; `None` when there is
    /// none (or the route sends to its upstream).
    pub fn pick_endpoint(&self) -> Option<http::uri::Authority> {
        let ready = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        if ready.is_empty() {
            return None;
        }
        let n = self.next_endpoint.fetch_add(1, Ordering::Relaxed);
        ready.get((n % ready.len() as u64) as usize).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Counts a request (once, however often it is admitted) and gives it its arrival ticket.
    pub fn count_request(&self) -> u64 {
        self.requests.fetch_add(1, Ordering::Relaxed)
    }

    /// A request asks to go through: forward it, hold it in its ticket's place, or refuse it.
    pub fn admit(self: &Arc<Self>, ticket: u64) -> Admission {
        let mut q = self.lock();
        if q.closed {
            return Admission::Closed;
        }
        if q.ready {
            let ordinal = (!q.unsent.is_empty()).then(|| q.next_ordinal());
            return Admission::Forward { ordinal };
        }
        if q.holding() >= self.route.max_held {
            return Admission::Full;
        }
        let namespace = match &self.namespace_hold {
            None => None,
            Some(pool) => match pool.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => return Admission::NamespaceFull,
            },
        };
        let (tx, rx) = oneshot::channel();
        // Almost always the newest; a request held again goes back to its place.
        let at = q.waiters.partition_point(|(t, _)| *t < ticket);
        q.waiters.insert(at, (ticket, tx));
        drop(q);
        self.changed();
        self.wake.notify_one();
        Admission::Held(Held {
            ticket,
            release: rx,
            state: self.clone(),
            abandoned: true,
            _namespace: namespace,
        })
    }

    /// Whether a request arriving now would be refused (full, or shutting down) rather than
    /// held or forwarded: a streamed request is told so by its status, before the early
    /// answer switches it to a stream.
    pub fn would_refuse(&self) -> bool {
        let q = self.lock();
        let namespace_full = self
            .namespace_hold
            .as_ref()
            .is_some_and(|p| p.available_permits() == 0);
        q.closed || (!q.ready && (q.holding() >= self.route.max_held || namespace_full))
    }

    /// Whether nothing is held, released and unsent, or forwarded here: a retired route may go.
    pub fn is_drained(&self) -> bool {
        self.held() == 0 && self.forwarding.load(Ordering::Relaxed) == 0
    }

    /// The upstream refused a connection although the route was ready (its last replica went
    /// away): not ready until the readiness task, woken now, finds it ready again.
    pub fn upstream_refused(&self) {
        self.set_ready(false);
        self.wake.notify_one();
    }

    /// One endpoint of a `direct` route refused a connection: it gets no more requests until
    /// readiness names it again, and the route is not ready once none is left.
    pub fn endpoint_refused(&self, gone: &http::uri::Authority) {
        let left = {
            let mut ready = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
            ready.retain(|a| a != gone);
            ready.len()
        };
        if left == 0 {
            self.upstream_refused();
        } else {
            self.wake.notify_one();
        }
    }

    /// Sets readiness; on becoming ready, releases every held request in arrival order.
    pub fn set_ready(&self, ready: bool) {
        let mut q = self.lock();
        let was = q.ready;
        q.ready = ready;
        if ready {
            while let Some((_, tx)) = q.waiters.pop_front() {
                let ordinal = q.next_ordinal();
                if tx.send(Release::Go { ordinal }).is_err() {
                    q.unsent.remove(&ordinal);
                }
            }
        }
        drop(q);
        if was != ready {
            tracing::info!(route = %self.route.counts_host, ready, "upstream readiness changed");
            self.changed();
        }
    }

    /// Answers every held request with `Shutdown`, and holds nothing more.
    pub fn shut_down(&self) {
        let mut q = self.lock();
        q.closed = true;
        while let Some((_, tx)) = q.waiters.pop_front() {
            let _ = tx.send(Release::Shutdown);
        }
        drop(q);
        self.changed();
    }

    pub fn is_ready(&self) -> bool {
        self.lock().ready
    }

    /// Requests held now, abandoned ones on lease included.
    pub fn held(&self) -> usize {
        self.lock().held()
    }

    /// Requests waiting in the queue (not counting leases).
    pub fn waiting(&self) -> usize {
        self.lock().waiters.len()
    }

    /// Waits until every lower ordinal has been written upstream and a release slot is free;
    /// the turn passes on when the returned guard says [`Turn::sent`] or drops.
    pub async fn turn(self: &Arc<Self>, ordinal: u64) -> Turn {
        let mut turn = Turn {
            state: self.clone(),
            ordinal,
            slot: None,
            sent: false,
        };
        loop {
            let notified = self.turn.notified();
            if self.lock().unsent.first() == Some(&ordinal) {
                break;
            }
            notified.await;
        }
        turn.slot = self.slots.clone().acquire_owned().await.ok();
        turn
    }

    /// Marks a request forwarded until the returned guard drops. (Forwarding is not pushed on
    /// the watch stream: only held counts and readiness wake the scaler; `/queue` reads it.)
    pub fn forwarding(self: &Arc<Self>) -> Forwarding {
        self.forwarding.fetch_add(1, Ordering::Relaxed);
        Forwarding(self.clone())
    }

    /// The counts `/queue` reports for this route.
    pub fn counts(&self) -> HostCounts {
        let held = self.held() as u64;
        HostCounts {
            concurrency: held + self.forwarding.load(Ordering::Relaxed),
            request_count: self.requests.load(Ordering::Relaxed),
            held: Some(held),
        }
    }
}

/// A released request's place in the sending order, and its release slot.
pub struct Turn {
    state: Arc<RouteState>,
    ordinal: u64,
    slot: Option<OwnedSemaphorePermit>,
    sent: bool,
}

impl Turn {
    /// The request is written upstream: the next one may send.
    pub fn sent(&mut self) {
        if self.sent {
            return;
        }
        self.sent = true;
        self.state.lock().unsent.remove(&self.ordinal);
        self.state.turn.notify_waiters();
        self.state.changed();
    }

    /// The release slot, to keep until the response ends.
    pub fn take_slot(&mut self) -> Option<OwnedSemaphorePermit> {
        self.slot.take()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.sent();
    }
}

/// A forwarded request in flight; dropping it (response finished or abandoned) ends it.
pub struct Forwarding(Arc<RouteState>);

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.0.forwarding.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activator::routes::{Readiness, Route};
    use std::time::Duration;

    fn state(max_held: usize) -> Arc<RouteState> {
        let route = Route {
            host: None,
            names: Vec::new(),
            any_host: true,
            model: None,
            path_prefix: None,
            upstream: "http://u:1".into(),
            upstream_authority: http::uri::Authority::from_static("u:1"),
            host_header: http::HeaderValue::from_static("u:1"),
            readiness: Readiness::Probe { path: "/h".into() },
            max_held,
            hold_timeout: Duration::from_secs(1),
            counts_host: "u".into(),
            abandon_lease: Duration::ZERO,
            release_concurrency: 4,
            keep_alive: None,
            direct: false,
            port_name: None,
            endpoints: Vec::new(),
        };
        RouteState::new(route, Arc::new(watch::channel(0).0))
    }

    fn held(a: Admission) -> Held {
        match a {
            Admission::Held(h) => h,
            _ => panic!("not held"),
        }
    }

    #[test]
    fn releases_in_arrival_order() {
        let s = state(100);
        let mut waiting: Vec<Held> = (0..50).map(|i| held(s.admit(i))).collect();
        assert_eq!(s.counts().held, Some(50));
        s.set_ready(true);
        for (i, h) in waiting.iter_mut().enumerate() {
            assert_eq!(
                h.release.try_recv(),
                Ok(Release::Go {
                    ordinal: i as u64 + 1
                })
            );
        }
        assert_eq!(s.held(), 50, "released but not yet sent");
        drop(waiting);
        assert!(matches!(
            s.admit(50),
            Admission::Forward { ordinal: Some(51) }
        ));
        s.count_request();
        assert_eq!(s.counts().request_count, 1);
    }

    #[test]
    fn full_refuses_and_dropping_leaves_the_queue() {
        let s = state(2);
        let a = held(s.admit(0));
        let b = held(s.admit(1));
        assert!(matches!(s.admit(2), Admission::Full));
        drop(a);
        assert_eq!(s.held(), 1);
        let _c = held(s.admit(3));
        drop(b);
        assert_eq!(s.counts().held, Some(1));
    }

    #[test]
    fn shutdown_answers_everyone() {
        let s = state(10);
        let mut h = held(s.admit(0));
        s.shut_down();
        assert_eq!(h.release.try_recv(), Ok(Release::Shutdown));
        assert!(matches!(s.admit(1), Admission::Closed));
    }

    #[test]
    fn a_request_held_again_keeps_its_place() {
        let s = state(10);
        let _later = held(s.admit(7));
        let mut again = held(s.admit(3));
        s.set_ready(true);
        assert_eq!(again.release.try_recv(), Ok(Release::Go { ordinal: 1 }));
        s.upstream_refused();
        // Released and not yet sent: still held, no longer waiting.
        assert_eq!((s.held(), s.waiting()), (2, 0));
        assert!(matches!(s.admit(9), Admission::Held(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_hold_counts_for_its_lease() {
        let s = state(10);
        let mut route = s.route.clone();
        route.abandon_lease = Duration::from_millis(200);
        let s = RouteState::new(route, Arc::new(watch::channel(0).0));
        let gone = held(s.admit(0));
        drop(gone);
        assert_eq!((s.held(), s.waiting()), (1, 0));
        assert_eq!(s.counters.abandoned.get(), 1);
        let timed_out = held(s.admit(1));
        timed_out.expire();
        assert_eq!((s.held(), s.counters.abandoned.get()), (1, 1));
        tokio::time::advance(Duration::from_millis(199)).await;
        assert_eq!(s.held(), 1, "the lease still counts");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(s.held(), 0);
    }

    #[tokio::test]
    async fn turns_follow_the_ordinals() {
        let s = state(10);
        let _a = held(s.admit(0));
        let _b = held(s.admit(1));
        s.set_ready(true);
        // A request arriving during the release queues behind it.
        let Admission::Forward { ordinal: Some(3) } = s.admit(2) else {
            panic!("not ordered")
        };
        let order = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = [3u64, 2, 1]
            .into_iter()
            .map(|n| {
                let (s, order) = (s.clone(), order.clone());
                tokio::spawn(async move {
                    let mut turn = s.turn(n).await;
                    order.lock().unwrap().push(n);
                    turn.sent();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 2, 3]);
        assert_eq!(s.held(), 0);
        assert!(matches!(s.admit(4), Admission::Forward { ordinal: None }));
    }

    #[test]
    fn a_namespace_bound_is_shared_by_its_routes_and_freed_as_holds_leave() {
        let pool = Arc::new(Semaphore::new(2));
        let make = || {
            let route = state(10).route.clone();
            RouteState::with(
                route,
                Arc::new(watch::channel(0).0),
                RouteTelemetry::default(),
                Some(pool.clone()),
            )
        };
        let (a, b) = (make(), make());
        let one = held(a.admit(0));
        let _two = held(b.admit(0));
        assert!(matches!(a.admit(1), Admission::NamespaceFull));
        assert!(b.would_refuse());
        drop(one);
        assert!(matches!(b.admit(1), Admission::Held(_)));
    }

    #[test]
    fn forwarding_counts_in_concurrency() {
        let s = state(10);
        s.set_ready(true);
        let f = s.forwarding();
        assert_eq!(s.counts().concurrency, 1);
        drop(f);
        assert_eq!(s.counts().concurrency, 0);
    }
}
