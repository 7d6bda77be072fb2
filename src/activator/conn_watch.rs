//! What the requests of one client connection share, and the watch that ends the connection:
//! their part of the body budget and the count of requests open on it. (Its place among the
//! listener's connections, and its client address's, are the listener's:
//! [`crate::edge::listener`].)
//!
//! hyper closes an HTTP/1.1 connection idle past the header timeout, but an HTTP/2 connection
//! with no stream open stays up for as long as the client keeps it (its pings are answered), so
//! idle h2 connections filled the connection cap and ordinary requests were reset. Here a
//! connection with no request open for the idle limit is shut down gracefully (GOAWAY for h2),
//! whatever its protocol; at the activator's shutdown every connection is. So is one older than
//! its maximum age, however busy (issue 37): pings, a request every few seconds or a stream of
//! them renew nothing, and its place at the listener comes free (its open requests finish).

use super::budget::Budget;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// One client connection's shared state.
pub struct ConnShared {
    /// The connection's part of the body budget.
    pub bodies: Arc<Budget>,
    /// Requests open (arrived and not yet answered whole), and when that last changed.
    open: watch::Sender<(usize, Instant)>,
}

/// A request open on its connection until dropped (with its response body).
pub struct Open(Arc<ConnShared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0
            .open
            .send_modify(|(n, at)| (*n, *at) = (n.saturating_sub(1), Instant::now()));
    }
}

impl ConnShared {
    pub fn new(body_share: usize) -> Arc<ConnShared> {
        Arc::new(ConnShared {
            bodies: Budget::new(body_share),
            open: watch::Sender::new((0, Instant::now())),
        })
    }

    /// Counts a request open until the guard is dropped.
    pub fn open(self: &Arc<Self>) -> Open {
        self.open
            .send_modify(|(n, at)| (*n, *at) = (*n + 1, Instant::now()));
        Open(self.clone())
    }

    /// Resolves once a request is open.
    pub async fn busy(&self) {
        let mut rx = self.open.subscribe();
        let _ = rx.wait_for(|(open, _)| *open > 0).await;
    }

    /// Resolves once no request has been open for `idle`.
    pub async fn idle_for(&self, idle: Duration) {
        let mut rx = self.open.subscribe();
        loop {
            let (open, since) = *rx.borrow_and_update();
            if open == 0 {
                tokio::select! {
                    _ = tokio::time::sleep_until(since + idle) => return,
                    _ = rx.changed() => {}
                }
            } else if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

/// Serves `conn` to its end, shutting it down gracefully (with `graceful`) once it has had no
/// request open for `idle`, once it is `max_age` old and a request is open (so an HTTP/1.1
/// connection ends with that answer's `Connection: close`, never closed idle under a request
/// its client is sending), or when `shutdown` turns true.
pub async fn serve<F, E>(
    conn: F,
    graceful: impl Fn(Pin<&mut F>),
    shared: &ConnShared,
    (idle, max_age): (Duration, Duration),
    mut shutdown: watch::Receiver<bool>,
) where
    F: Future<Output = Result<(), E>>,
{
    let mut conn = std::pin::pin!(conn);
    let aged = tokio::time::sleep(max_age);
    let mut aged = std::pin::pin!(aged);
    let mut old = false;
    let mut closing = *shutdown.borrow();
    if closing {
        graceful(conn.as_mut());
    }
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            changed = shutdown.changed(), if !closing => {
                if changed.is_err() || *shutdown.borrow() {
                    closing = true;
                    graceful(conn.as_mut());
                }
            }
            _ = shared.idle_for(idle), if !closing => {
                closing = true;
                graceful(conn.as_mut());
            }
            _ = aged.as_mut(), if !old => old = true,
            _ = shared.busy(), if old && !closing => {
                closing = true;
                graceful(conn.as_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_means_nothing_open_for_the_whole_limit() {
        let c = ConnShared::new(1);
        let open = c.open();
        let idle = c.idle_for(Duration::from_secs(20));
        tokio::pin!(idle);
        tokio::select! {
            _ = &mut idle => panic!("idle with a request open"),
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
        }
        drop(open);
        let closed_at = Instant::now();
        idle.await;
        assert_eq!(closed_at.elapsed(), Duration::from_secs(20));
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_closed_gracefully_at_its_age() {
        let c = ConnShared::new(1);
        let _open = c.open();
        let (_tx, rx) = watch::channel(false);
        let closed_at = std::sync::Mutex::new(None);
        let started = Instant::now();
        // A connection that would run for ever, with a request open all along.
        let conn = std::future::pending::<Result<(), ()>>();
        let graceful = |_: Pin<&mut std::future::Pending<Result<(), ()>>>| {
            *closed_at.lock().unwrap() = Some(started.elapsed());
        };
        let limits = (Duration::from_secs(20), Duration::from_secs(600));
        let served = serve(conn, graceful, &c, limits, rx);
        let _ = tokio::time::timeout(Duration::from_secs(900), served).await;
        assert_eq!(*closed_at.lock().unwrap(), Some(Duration::from_secs(600)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_old_connection_between_requests_waits_for_the_next_one() {
        let c = ConnShared::new(1);
        let (_tx, rx) = watch::channel(false);
        let closed_at = std::sync::Mutex::new(None);
        let started = Instant::now();
        let conn = std::future::pending::<Result<(), ()>>();
        let graceful = |_: Pin<&mut std::future::Pending<Result<(), ()>>>| {
            *closed_at.lock().unwrap() = Some(started.elapsed());
        };
        // Idle never runs out here (an hour); the age (10 s) passes between requests.
        let limits = (Duration::from_secs(3600), Duration::from_secs(10));
        let served = serve(conn, graceful, &c, limits, rx);
        let request = async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let open = c.open();
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(open);
        };
        let _ = tokio::time::timeout(Duration::from_secs(120), async {
            tokio::join!(served, request)
        })
        .await;
        // Closed as the next request opened (30 s), not at its age while idle (10 s).
        assert_eq!(*closed_at.lock().unwrap(), Some(Duration::from_secs(30)));
    }
}
