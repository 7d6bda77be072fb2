//! What slow or hostile clients can make the activator hold: connections, time and body memory.
//!
//! Every client of every model passes through the activator, so one client must not be able to
//! starve the others. A listener keeps at most `max_connections` (one more is closed as it is
//! accepted); a request head must arrive within `header_timeout` (which also closes idle
//! keep-alive connections) and its body within `body_timeout`; the bodies held or being read
//! share one memory budget, and a request that would pass it is answered 503 before its body is
//! read; an upstream silent for `upstream_idle` in the middle of a response is cut, and so is a
//! client that reads nothing of its response for `client_stall`. The defaults fit the shipped
//! manifest's 256 MiB memory limit.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

/// The activator's bounds on clients and upstreams.
#[derive(Debug, Clone)]
pub struct ClientLimits {
    /// Client connections per listener at once.
    pub max_connections: usize,
    /// The longest a request head may take, and a keep-alive connection may sit idle.
    pub header_timeout: Duration,
    /// The longest a request body may take to arrive.
    pub body_timeout: Duration,
    /// Bytes of request bodies held or being read, over all routes.
    pub body_budget: usize,
    /// The longest an upstream may stay silent in the middle of a response.
    pub upstream_idle: Duration,
    /// The longest a client may read nothing of its response.
    pub client_stall: Duration,
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        ClientLimits {
            max_connections: 4096,
            header_timeout: Duration::from_secs(20),
            body_timeout: Duration::from_secs(60),
            body_budget: 128 << 20,
            upstream_idle: Duration::from_secs(300),
            client_stall: Duration::from_secs(120),
        }
    }
}

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

/// A client connection: holds its place among the listener's connections, and fails a write
/// the client has not taken for `stall`.
pub struct ClientConn {
    inner: TcpStream,
    stall: Duration,
    /// Armed while a write is pending.
    stalled: Option<Pin<Box<Sleep>>>,
    _permit: OwnedSemaphorePermit,
}

impl ClientConn {
    pub fn new(inner: TcpStream, stall: Duration, permit: OwnedSemaphorePermit) -> ClientConn {
        ClientConn {
            inner,
            stall,
            stalled: None,
            _permit: permit,
        }
    }

    /// A write's outcome, failed once it has been pending for `stall`.
    fn stalling<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => match self.check_stall(cx) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
            done => {
                self.stalled = None;
                done
            }
        }
    }

    /// Whether a write pending since the timer was armed has waited too long.
    fn check_stall(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let stall = self.stall;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + stall)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of its response",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl AsyncRead for ClientConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.stalling(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.stalling(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
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
