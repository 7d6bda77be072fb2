//! A client connection as the activator serves it: it holds its place among the listener's
//! connections while open, and fails a write the client has not taken for the stall limit, so a
//! client that stops reading cannot pin a response's buffers.

use super::conn_watch::ClientSlot;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

/// A client connection: holds its place among the listener's connections, and fails a write
/// the client has not taken for `stall`.
pub struct ClientConn {
    inner: TcpStream,
    stall: Duration,
    /// Armed while a write is pending.
    stalled: Option<Pin<Box<Sleep>>>,
    _places: (OwnedSemaphorePermit, ClientSlot),
}

impl ClientConn {
    /// `places`: the connection's place among the listener's and among its client's.
    pub fn new(
        inner: TcpStream,
        stall: Duration,
        places: (OwnedSemaphorePermit, ClientSlot),
    ) -> ClientConn {
        ClientConn {
            inner,
            stall,
            stalled: None,
            _places: places,
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
