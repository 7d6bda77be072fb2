//! When a released request's bytes are really in the upstream socket, not just in hyper's buffer.
//!
//! A release sends held requests in arrival order: each waits until every earlier one has been
//! written upstream. hyper takes a request's last body frame into its write buffer and writes
//! the buffer to the socket a moment later, in the same poll of the connection's task. Passing
//! the turn on at the frame let the next request, on another connection, reach the socket first
//! whenever the first task was preempted in that moment: a real llama-server behind a byte relay
//! saw held requests 0 and 1 swapped in 2 of 6 runs on a busy 2-core machine
//! (tests/llamacpp.rs).
//!
//! So the body parks its signal in a slot of the thread it was polled on ([`park`]), and the
//! connection's socket wrapper ([`Signalling`]) fires what is parked there after its next write
//! that moves bytes. Body polling and the write happen in one synchronous poll of one task, so the
//! write that fires it is this request's own. If that poll stops short (the socket is full) and
//! another connection writes on the thread first, the signal fires early, as it did before;
//! if no write follows at all (the connection failed), the caller's response future ends the
//! wait. A signal is never lost: a parked sender whose receiver is gone is simply dropped.
//!
//! The socket also tells a request the upstream never read from one it read and dropped
//! ([`super::unsent`]): when the connection ends with a request written and not a byte of its
//! answer read, the end is held back up to [`RESET_WAIT`] after the write and the socket read
//! once more. An upstream that closed with our bytes unread, or before they arrived, has its
//! kernel answer them with a reset, which that read returns in place of the plain end. A
//! connection that ends with nothing written to it since its last answer says so
//! ([`super::unsent::Answered::ended_unwritten`]): a request that failed on it never left.

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use std::cell::RefCell;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// How long after a request's write a plain end of its connection waits for the reset that
/// says the upstream never read it: a round trip on a busy node, many times over.
pub const RESET_WAIT: Duration = Duration::from_millis(50);
use tokio::sync::oneshot::Sender;

thread_local! {
    static PARKED: RefCell<Vec<Sender<Option<Instant>>>> = const { RefCell::new(Vec::new()) };
}

/// Parks `written` until the next write to an upstream socket on this thread, which sends it
/// the time of that write.
pub fn park(written: Sender<Option<Instant>>) {
    PARKED.with(|p| p.borrow_mut().push(written));
}

fn fire() {
    let parked = PARKED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let now = Instant::now();
    for tx in parked {
        let _ = tx.send(Some(now));
    }
}

/// A connector whose connections fire parked signals after each write.
#[derive(Clone)]
pub struct SignallingConnector<C>(pub C);

/// A socket's pending error (a reset that came after the peer's end), taken.
pub trait PendingReset {
    fn reset(&self) -> Option<std::io::Error>;
}

impl PendingReset for hyper_util::rt::TokioIo<tokio::net::TcpStream> {
    fn reset(&self) -> Option<std::io::Error> {
        self.inner().take_error().ok().flatten()
    }
}

impl<C> tower_service::Service<http::Uri> for SignallingConnector<C>
where
    C: tower_service::Service<http::Uri>,
    C::Future: Send + 'static,
    C::Response: PendingReset,
{
    type Response = Signalling<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(Signalling {
                io,
                answered: super::unsent::Answered::default(),
                written: None,
                reset_wait: None,
            })
        })
    }
}

/// An upstream socket that fires the signals parked on its thread once a write moved bytes, and
/// carries whether it has answered a request yet (see [`super::unsent`]).
pub struct Signalling<T> {
    io: T,
    answered: super::unsent::Answered,
    /// When bytes were last written with none read since (a request awaiting its answer).
    written: Option<Instant>,
    /// A plain end held back until a reset could have come.
    reset_wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

fn after_write(r: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
    if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
        fire();
    }
    r
}

impl<T> Signalling<T> {
    fn wrote(&mut self, r: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.written = Some(Instant::now());
        }
        after_write(r)
    }
}

impl<T: Write + Unpin> Write for Signalling<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<T: Read + PendingReset + Unpin> Read for Signalling<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Some(wait) = self.reset_wait.as_mut() {
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.reset_wait = None;
            self.written = None;
            // One more read: a reset that came meanwhile is the answer; else the plain end.
            let mut probe = [0u8; 1];
            let mut one = hyper::rt::ReadBuf::new(&mut probe);
            // A reset after the end is not returned by a read (the end came first): the
            // socket's pending error says it.
            if let Some(e) = self.io.reset() {
                return Poll::Ready(Err(e));
            }
            return match Pin::new(&mut self.io).poll_read(cx, one.unfilled()) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => {
                    buf.put_slice(one.filled());
                    Poll::Ready(Ok(()))
                }
            };
        }
        // Read through a buffer of our own, to see whether this read ends the connection.
        let mut chunk = [0u8; 16 << 10];
        let room = buf.remaining().min(chunk.len());
        if room == 0 {
            return Pin::new(&mut self.io).poll_read(cx, buf);
        }
        let mut own = hyper::rt::ReadBuf::new(&mut chunk[..room]);
        match Pin::new(&mut self.io).poll_read(cx, own.unfilled()) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        if !own.filled().is_empty() {
            self.written = None;
            buf.put_slice(own.filled());
            return Poll::Ready(Ok(()));
        }
        let Some(written) = self.written else {
            // The end, with nothing written since the last answer.
            self.answered.ended_unwritten();
            return Poll::Ready(Ok(()));
        };
        // The end, with a request written and nothing of its answer read.
        let mut wait = Box::pin(tokio::time::sleep_until(written + RESET_WAIT));
        if wait.as_mut().poll(cx).is_ready() {
            self.written = None;
            return Poll::Ready(self.io.reset().map_or(Ok(()), Err));
        }
        self.reset_wait = Some(wait);
        Poll::Pending
    }
}

impl<T: Connection> Connection for Signalling<T> {
    fn connected(&self) -> Connected {
        super::unsent::connected(self.io.connected(), &self.answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_signal_fires_on_the_next_write_on_its_thread() {
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        park(tx);
        assert!(rx.try_recv().is_err(), "not before a write");
        let _ = after_write(Poll::Ready(Ok(0)));
        assert!(rx.try_recv().is_err(), "a write of nothing moved nothing");
        let _ = after_write(Poll::Pending);
        assert!(rx.try_recv().is_err());
        let _ = after_write(Poll::Ready(Ok(10)));
        assert!(rx.try_recv().is_ok());
    }
}
