//! A listener bounded the same way wherever one is open to the cluster (`serve`'s gRPC and
//! metrics ports; meant for every admin or metrics port): a cap on connections, a first byte
//! within a deadline, and a close after an idle span.
//!
//! Every open connection costs a file descriptor whether or not it ever speaks. A port that
//! takes connections without bound lets idle ones exhaust the process's descriptors, and then
//! everything else the process does (scraping pods, reaching the API, answering KEDA) fails:
//! issue 25 saw 1,100 idle connections to `serve`'s metrics port stop every pod scrape. So:
//!
//! - at most `max_connections` are open at once. At the cap, a new connection takes the place of
//!   the oldest one that has not sent a byte (a silent connection gives way), or, when every
//!   open one has spoken, is closed as it is accepted. A flood of silent connections cannot keep
//!   a real client out, and a client that speaks (KEDA's pooled connection, a scrape in
//!   progress, a `/queue/watch` stream) is never pushed out by one;
//! - a connection must send its first byte within `first_byte`;
//! - after that, one with no byte from its client for `idle` is closed (or, with
//!   `idle_on_writes`, with no byte either way: a stream to a silent client stays open).
//!
//! [`serve_http`] adds a request-head timeout for HTTP/1.1 (the same timer closes a keep-alive
//! connection idle between requests). Every accepted socket gets `TCP_NODELAY`.

use futures::task::AtomicWaker;
use futures::StreamExt;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// A listener's bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Connections open at once.
    pub max_connections: usize,
    /// A new connection must send its first byte within this.
    pub first_byte: Duration,
    /// After its first byte, a connection is closed after this long without one.
    pub idle: Duration,
    /// Whether bytes the client takes also count against `idle`, for a port that streams to a
    /// client that sends nothing more (an admin port's `/queue/watch`). Off where the server
    /// pings and a live client answers (gRPC), or every answer is short (metrics).
    pub idle_on_writes: bool,
    /// The pause after a failed `accept` (out of descriptors, say) before the next.
    pub accept_backoff: Duration,
}

/// One open connection's place.
struct Slot {
    id: u64,
    /// Whether its client has sent a byte.
    spoke: AtomicBool,
    /// Set when it must give way; its task is woken to close it.
    evicted: AtomicBool,
    waker: AtomicWaker,
}

/// The open connections, oldest first.
struct Slots {
    open: Mutex<VecDeque<Arc<Slot>>>,
    max: usize,
    next: AtomicU64,
    /// Connections that gave way or were refused, for logging a flood in a handful of lines.
    turned_away: AtomicU64,
}

impl Slots {
    /// A place for a new connection; at the cap, the oldest silent one gives way. `None` when
    /// every open one has spoken.
    fn take(&self) -> Option<Arc<Slot>> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= self.max {
            let silent = open.iter().position(|s| !s.spoke.load(Ordering::Acquire));
            let victim = silent.and_then(|i| open.remove(i))?;
            victim.evicted.store(true, Ordering::Release);
            victim.waker.wake();
        }
        let slot = Arc::new(Slot {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            spoke: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        open.push_back(slot.clone());
        Some(slot)
    }

    fn release(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = open.iter().position(|s| s.id == id) {
            open.remove(i);
        }
    }

    /// Counts a connection turned away; true on the 1st, 2nd, 4th, 8th... (when to log).
    fn turned_away(&self) -> bool {
        let n = self.turned_away.fetch_add(1, Ordering::Relaxed) + 1;
        n.is_power_of_two()
    }
}

/// An accepted connection, holding its place until dropped.
pub struct Conn {
    inner: TcpStream,
    slot: Arc<Slot>,
    slots: Arc<Slots>,
    idle: Duration,
    idle_on_writes: bool,
    deadline: Pin<Box<Sleep>>,
}

impl Conn {
    /// Bytes were written: with `idle_on_writes`, the idle span starts again (once the client
    /// has spoken: a silent one keeps its first-byte deadline).
    fn wrote(&mut self, n: usize) {
        if self.idle_on_writes && n > 0 && self.slot.spoke.load(Ordering::Acquire) {
            let next = Instant::now() + self.idle;
            self.deadline.as_mut().reset(next);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.slots.release(self.slot.id);
    }
}

fn gave_way() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "closed to make room: the connection cap is reached and this one never spoke",
    )
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.slot.evicted.load(Ordering::Acquire) {
            return Poll::Ready(Err(gave_way()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.slot.spoke.store(true, Ordering::Release);
                    let next = Instant::now() + this.idle;
                    this.deadline.as_mut().reset(next);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                this.slot.waker.register(cx.waker());
                if this.slot.evicted.load(Ordering::Acquire) {
                    return Poll::Ready(Err(gave_way()));
                }
                match this.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "closed: nothing from the client in time",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.slot.evicted.load(Ordering::Acquire) {
            return Poll::Ready(Err(gave_way()));
        }
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            this.wrote(n);
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
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
        if this.slot.evicted.load(Ordering::Acquire) {
            return Poll::Ready(Err(gave_way()));
        }
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = written {
            this.wrote(n);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

/// The listener's connections within `bounds`; `port` names it in logs.
pub fn incoming(
    listener: TcpListener,
    bounds: Bounds,
    port: &'static str,
) -> impl Stream<Item = io::Result<Conn>> {
    let slots = Arc::new(Slots {
        open: Mutex::new(VecDeque::new()),
        max: bounds.max_connections.max(1),
        next: AtomicU64::new(0),
        turned_away: AtomicU64::new(0),
    });
    futures::stream::unfold((listener, slots), move |(listener, slots)| async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, say: wait a little rather than spin.
                    tracing::warn!(port, error = %e, "accept failed");
                    tokio::time::sleep(bounds.accept_backoff).await;
                    continue;
                }
            };
            let full = slots.open.lock().map(|o| o.len()).unwrap_or(0) >= slots.max;
            let slot = slots.take();
            if full && slots.turned_away() {
                tracing::warn!(
                    port, %peer, max = slots.max,
                    turned_away = slots.turned_away.load(Ordering::Relaxed),
                    "the connection cap is reached: silent connections give way, or new ones are closed"
                );
            }
            let Some(slot) = slot else {
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let conn = Conn {
                inner: stream,
                slot,
                slots: slots.clone(),
                idle: bounds.idle,
                idle_on_writes: bounds.idle_on_writes,
                deadline: Box::pin(tokio::time::sleep(bounds.first_byte)),
            };
            return Some((Ok(conn), (listener, slots)));
        }
    })
}

/// Serves `app` over HTTP/1.1 on `listener` within `bounds`; a request head must be complete
/// within `head_timeout`, which also closes a keep-alive connection idle between requests.
/// Runs until the task is dropped.
pub async fn serve_http(
    listener: TcpListener,
    bounds: Bounds,
    head_timeout: Duration,
    app: axum::Router,
    port: &'static str,
) {
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(head_timeout);
    let mut conns = std::pin::pin!(incoming(listener, bounds, port));
    while let Some(conn) = conns.next().await {
        let Ok(conn) = conn else { continue };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let http1 = http1.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(conn);
            let _ = http1.serve_connection(io, service).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(max: usize) -> Slots {
        Slots {
            open: Mutex::new(VecDeque::new()),
            max,
            next: AtomicU64::new(0),
            turned_away: AtomicU64::new(0),
        }
    }

    #[test]
    fn at_the_cap_the_oldest_silent_connection_gives_way() {
        let s = slots(3);
        let a = s.take().unwrap();
        let b = s.take().unwrap();
        let c = s.take().unwrap();
        a.spoke.store(true, Ordering::Release);
        // A fourth: `b`, the oldest silent one, gives way; `a` has spoken and stays.
        let d = s.take().unwrap();
        assert!(b.evicted.load(Ordering::Acquire));
        assert!(!a.evicted.load(Ordering::Acquire) && !c.evicted.load(Ordering::Acquire));
        // Every open one has spoken: a new one is refused.
        for slot in [&c, &d] {
            slot.spoke.store(true, Ordering::Release);
        }
        assert!(s.take().is_none());
        // One closes: room again.
        s.release(c.id);
        assert!(s.take().is_some());
    }

    /// A loopback listener with a 300 ms idle span, and a client connected to it that has sent
    /// one byte; the server's end of that connection.
    async fn spoken(idle_on_writes: bool) -> (Conn, tokio::net::TcpStream) {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bounds = Bounds {
            max_connections: 4,
            first_byte: Duration::from_secs(5),
            idle: Duration::from_millis(300),
            idle_on_writes,
            accept_backoff: Duration::from_millis(10),
        };
        let mut conns = Box::pin(incoming(listener, bounds, "test"));
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut server = conns.next().await.unwrap().unwrap();
        client.write_all(b"x").await.unwrap();
        let mut one = [0u8; 1];
        tokio::io::AsyncReadExt::read_exact(&mut server, &mut one)
            .await
            .unwrap();
        (server, client)
    }

    #[tokio::test]
    async fn a_stream_to_a_silent_client_is_idle_only_when_nothing_moves() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for idle_on_writes in [true, false] {
            let (mut server, mut client) = spoken(idle_on_writes).await;
            // The server writes every 100 ms for a second; the client reads and says nothing.
            let drain = tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while client.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
            let mut open_for = Duration::ZERO;
            for _ in 0..10 {
                if server.write_all(b"event\n").await.is_err() {
                    break;
                }
                let mut buf = [0u8; 1];
                let read = tokio::time::timeout(Duration::from_millis(100), server.read(&mut buf));
                if let Ok(Err(_)) = read.await {
                    break;
                }
                open_for += Duration::from_millis(100);
            }
            if idle_on_writes {
                assert_eq!(open_for, Duration::from_secs(1), "the stream was cut");
            } else {
                assert!(open_for < Duration::from_secs(1), "open for {open_for:?}");
            }
            drop(server);
            let _ = drain.await;
        }
    }

    #[test]
    fn a_flood_is_logged_in_a_handful_of_lines() {
        let s = slots(1);
        let logged = (0..1100).filter(|_| s.turned_away()).count();
        assert_eq!(logged, 11);
    }
}
