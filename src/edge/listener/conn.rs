//! An accepted connection and the clocks on it: the first byte within a deadline, a first
//! request (as the server says, [`Useful`]) within another, a close after an idle span, a write
//! the client has not taken for the stall limit failed, and a close when it gives way to a
//! newcomer at the cap. It holds its place until dropped.
//!
//! Generic over the byte stream so the clocks are tested on an in-memory pipe under tokio's
//! paused time; the listeners serve TCP streams.

use super::places::{Places, Slot};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The clocks of one connection, from the listener's bounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clocks {
    pub first_byte: Duration,
    pub idle: Option<Duration>,
    pub idle_on_writes: bool,
    pub write_stall: Option<Duration>,
    pub first_request: Option<Duration>,
}

/// A handle on one connection's place, for the server to say when the connection was useful.
/// Bytes alone never are (pings, keep-alive comments, a preface a byte at a time): only what
/// the server calls a request.
#[derive(Clone)]
pub struct Useful {
    slot: Arc<Slot>,
    places: Arc<Places>,
}

impl Useful {
    /// The connection was useful now.
    pub fn now(&self) {
        self.slot.mark_useful(&self.places);
    }
}

/// An accepted connection, holding its place until dropped.
pub struct Conn<S = TcpStream> {
    inner: S,
    peer: SocketAddr,
    slot: Arc<Slot>,
    places: Arc<Places>,
    clocks: Clocks,
    /// The first byte's deadline, then the idle one; none once spoken without an idle limit.
    deadline: Option<Pin<Box<Sleep>>>,
    /// Armed while a write is pending.
    stalled: Option<Pin<Box<Sleep>>>,
    /// The first request's deadline, until the server calls the connection useful.
    unused: Option<Pin<Box<Sleep>>>,
}

impl<S> Conn<S> {
    pub(super) fn new(
        inner: S,
        peer: SocketAddr,
        slot: Arc<Slot>,
        places: Arc<Places>,
        clocks: Clocks,
    ) -> Conn<S> {
        Conn {
            inner,
            peer,
            slot,
            places,
            clocks,
            deadline: Some(Box::pin(tokio::time::sleep(clocks.first_byte))),
            stalled: None,
            unused: clocks
                .first_request
                .map(|d| Box::pin(tokio::time::sleep(d))),
        }
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// What the server marks this connection useful through (a request began, an answer it
    /// asked for went out): at the cap, the least recently useful connection of the address
    /// holding the most gives way first, and one never marked before any other.
    pub fn useful(&self) -> Useful {
        Useful {
            slot: self.slot.clone(),
            places: self.places.clone(),
        }
    }

    /// The client sent bytes: it has spoken, and the idle span starts again.
    fn heard(&mut self) {
        self.slot.speaks();
        self.idle_again();
    }

    fn idle_again(&mut self) {
        match (self.clocks.idle, self.deadline.as_mut()) {
            (Some(idle), Some(deadline)) => deadline.as_mut().reset(Instant::now() + idle),
            (Some(idle), None) => self.deadline = Some(Box::pin(tokio::time::sleep(idle))),
            (None, _) => self.deadline = None,
        }
    }

    /// Bytes were written: with `idle_on_writes`, the idle span starts again (once the client
    /// has spoken: a silent one keeps its first-byte deadline).
    fn wrote(&mut self, n: usize) {
        if self.clocks.idle_on_writes && n > 0 && self.slot.spoke() {
            self.idle_again();
        }
    }

    /// Pending on a read: the connection's end if it gave way or its deadline passed.
    fn read_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.slot.waker.register(cx.waker());
        if self.slot.evicted() {
            return Poll::Ready(Err(gave_way()));
        }
        if self.slot.was_useful() {
            self.unused = None;
        } else if let Some(Poll::Ready(())) = self.unused.as_mut().map(|d| d.as_mut().poll(cx)) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "closed: no request began in time",
            )));
        }
        match self.deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "closed: nothing from the client in time",
            ))),
            _ => Poll::Pending,
        }
    }

    /// A write's outcome, failed once it has been pending for the stall limit.
    fn stalling<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => {
                let Some(stall) = self.clocks.write_stall else {
                    return Poll::Pending;
                };
                let timer = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "closed: the client took nothing written to it in time",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
            done => {
                self.stalled = None;
                done
            }
        }
    }
}

impl<S> Drop for Conn<S> {
    fn drop(&mut self) {
        self.places.release(&self.slot);
    }
}

fn gave_way() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "closed to make room: the connection cap is reached and this one never spoke",
    )
}

impl Conn<TcpStream> {
    /// The local address the connection came in on (its port tells which of a listener's
    /// sockets took it).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Peeks at the first bytes without taking them (to tell a protocol), within the same
    /// deadlines as a read; bytes seen count as the client having spoken.
    pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| {
            if self.slot.evicted() {
                return Poll::Ready(Err(gave_way()));
            }
            let mut read = ReadBuf::new(&mut *buf);
            match self.inner.poll_peek(cx, &mut read) {
                Poll::Ready(Ok(n)) => {
                    if n > 0 {
                        self.heard();
                    }
                    Poll::Ready(Ok(n))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => self.read_pending(cx).map(|r| r.map(|()| 0)),
            }
        })
        .await
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Conn<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.slot.evicted() {
            return Poll::Ready(Err(gave_way()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.heard();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.read_pending(cx),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Conn<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.slot.evicted() {
            return Poll::Ready(Err(gave_way()));
        }
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        let written = this.stalling(cx, polled);
        if let Poll::Ready(Ok(n)) = written {
            this.wrote(n);
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.stalling(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.slot.evicted() {
            return Poll::Ready(Err(gave_way()));
        }
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        let written = this.stalling(cx, polled);
        if let Poll::Ready(Ok(n)) = written {
            this.wrote(n);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// What tonic attaches to every request of a connection: its addresses, and the handle that
/// marks it useful (serve's gRPC port marks it for every call).
#[derive(Clone)]
pub struct ConnInfo {
    /// The local and remote addresses, as tonic's own connect-info has them.
    pub tcp: TcpConnectInfo,
    useful: Useful,
}

impl ConnInfo {
    pub fn useful(&self) -> &Useful {
        &self.useful
    }
}

impl Connected for Conn<TcpStream> {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        ConnInfo {
            tcp: self.inner.connect_info(),
            useful: self.useful(),
        }
    }
}
