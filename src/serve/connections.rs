//! The gRPC port's connections, bounded in number and in idleness.
//!
//! The port is reachable by anything in the cluster, and an open TCP connection costs a file
//! descriptor whether or not it ever speaks. So at most `max` connections are kept at once (one
//! past it is closed as it is accepted), and each is closed after `idle` without a byte from the
//! client. A live client is never idle that long: the server sends HTTP/2 pings more often than
//! that (`keepalive`), and the ping's acknowledgement is a byte read. Every accepted socket gets
//! `TCP_NODELAY`, so a push is not held behind Nagle's algorithm.

use super::limits::Limits;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How often the server pings a connection, for a given idle timeout: three pings fit in it.
pub fn keepalive(idle: Duration) -> Duration {
    idle / 3
}

/// An accepted connection, holding its place among the `max` until dropped.
pub struct Guarded {
    inner: TcpStream,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let next = Instant::now() + self.idle;
                    self.deadline.as_mut().reset(next);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "idle connection closed",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Connected for Guarded {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

/// The listener's connections, at most `limits.max_connections` at once, each closed after
/// `limits.connection_idle` without a read.
pub fn incoming(listener: TcpListener, limits: &Limits) -> impl Stream<Item = io::Result<Guarded>> {
    let (max, idle, backoff) = (
        limits.max_connections,
        limits.connection_idle,
        limits.accept_backoff,
    );
    let permits = Arc::new(Semaphore::new(max.max(1)));
    futures::stream::unfold((listener, permits), move |(listener, permits)| async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, say: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                tracing::warn!(%peer, max, "connection refused: the connection cap is reached");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let guarded = Guarded {
                inner: stream,
                idle,
                deadline: Box::pin(tokio::time::sleep(idle)),
                _permit: permit,
            };
            return Some((Ok(guarded), (listener, permits)));
        }
    })
}
