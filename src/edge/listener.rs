//! The one listener every port open to the cluster accepts through (`serve`'s gRPC and metrics
//! ports, the activator's proxy and admin ports, `emulate`'s server), bounded the same way: a
//! cap on connections, a pause after a failed accept, a first byte and a request head within
//! deadlines, a close after an idle span and after a write the client has not taken for a span.
//!
//! Every open connection costs a file descriptor whether or not it ever speaks. A port that
//! takes connections without bound lets idle ones exhaust the process's descriptors, and then
//! everything else the process does (scraping pods, reaching the API, answering KEDA) fails:
//! issue 25 saw 1,100 idle connections to `serve`'s metrics port stop every pod scrape. So:
//!
//! - at most `max_connections` are open at once ([`places`]). At the cap, a newcomer from an
//!   address holding fewer places than another takes the place of the least recently useful
//!   connection of the address holding the most (the server marks a connection useful when a
//!   request begins: [`Conn::useful`]); a newcomer from an address holding the most already may
//!   only replace one of its own that never spoke, or is closed as it is accepted. A flood from
//!   a few addresses, whatever it sends (keep-alive requests, pings, a dribbled preface),
//!   cannot keep another address out: the kubelet's probe, KEDA, a scrape. With
//!   `max_per_client`, one client address gets at most that many;
//! - a failed accept (out of descriptors, say) pauses the listener, longer while it keeps
//!   failing ([`accept`]), rather than spinning or ending it;
//! - a connection must send its first byte within `first_byte`, and an HTTP/1.1 request head
//!   must be whole within `head_timeout` (the same timer closes a keep-alive connection idle
//!   between requests; [`Bounds::http1`]);
//! - after its first byte, one with no byte from its client for `idle` is closed (or, with
//!   `idle_on_writes`, with no byte either way: a stream to a silent client stays open); no
//!   `idle` leaves that to the server (the activator holds requests for long);
//! - with `first_request`, a connection no request began on within it is closed, however many
//!   bytes it sent (gRPC: pings answered, a preface dribbled a byte per idle span);
//! - with `max_age`, an HTTP/1.1 connection ([`serve_http`]) past that age is closed with its
//!   next answer: a client asking every few seconds does not keep its place for ever;
//! - a write the client takes nothing of for `write_stall` fails, so a client that stops reading
//!   cannot pin a response's buffers ([`conn`]).

mod accept;
mod conn;
mod places;
#[cfg(test)]
mod tests;

pub use accept::{Accept, Backoff, BACKOFF_MAX};
pub use conn::{Conn, ConnInfo, Useful};

use conn::Clocks;
use futures::StreamExt;
use places::{Places, Refused};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_stream::Stream;

/// A listener's bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections from one client address at once; `None`: no cap of its own.
    pub max_per_client: Option<usize>,
    /// A new connection must send its first byte within this.
    pub first_byte: Duration,
    /// An HTTP/1.1 request head must be whole within this; it also closes a keep-alive
    /// connection idle between requests.
    pub head_timeout: Duration,
    /// After its first byte, a connection is closed after this long without one; `None`: never
    /// for that (the server decides when an open connection is idle).
    pub idle: Option<Duration>,
    /// Whether bytes the client takes also count against `idle`, for a port that streams to a
    /// client that sends nothing more (an admin port's `/queue/watch`). Off where the server
    /// pings and a live client answers (gRPC), or every answer is short (metrics).
    pub idle_on_writes: bool,
    /// A write the client has taken nothing of for this long fails; `None`: no limit.
    pub write_stall: Option<Duration>,
    /// A connection the server has not called useful ([`Conn::useful`]: no request began)
    /// within this of its accept is closed, whatever bytes it sent: for a protocol whose bytes
    /// can flow without a request (h2 pings, a preface a byte at a time). `None`: no limit.
    pub first_request: Option<Duration>,
    /// An HTTP/1.1 connection served by [`serve_http`] this old is closed with its next answer
    /// (`Connection: close`), however busy; `None`: no limit.
    pub max_age: Option<Duration>,
    /// The first pause after a failed `accept` (out of descriptors, say); it doubles while
    /// accepts keep failing, up to [`BACKOFF_MAX`].
    pub accept_backoff: Duration,
}

impl Bounds {
    /// An HTTP/1.1 server with the request-head timeout.
    pub fn http1(&self) -> hyper::server::conn::http1::Builder {
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(self.head_timeout);
        http1
    }
}

/// Connections from `source` within bounds; `port` names it in logs.
pub struct Listener<A: Accept = TcpListener> {
    source: A,
    places: Arc<Places>,
    clocks: Clocks,
    backoff: Backoff,
    port: &'static str,
}

/// What a listener has open, outliving it: a drain at shutdown waits on it.
#[derive(Clone)]
pub struct OpenConnections(Arc<Places>);

impl OpenConnections {
    /// Connections open now.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// Resolves once every connection has closed.
    pub async fn drained(&self) {
        self.0.drained().await
    }
}

impl<A: Accept> Listener<A> {
    pub fn new(source: A, bounds: Bounds, port: &'static str) -> Listener<A> {
        Listener {
            source,
            places: Arc::new(Places::new(bounds.max_connections, bounds.max_per_client)),
            clocks: Clocks {
                first_byte: bounds.first_byte,
                idle: bounds.idle,
                idle_on_writes: bounds.idle_on_writes,
                write_stall: bounds.write_stall,
                first_request: bounds.first_request,
            },
            backoff: Backoff::new(bounds.accept_backoff),
            port,
        }
    }

    /// A handle on the connections this listener has open; it outlives the listener.
    pub fn open_connections(&self) -> OpenConnections {
        OpenConnections(self.places.clone())
    }

    /// The next connection given a place. Failed accepts are waited out, and connections
    /// without a place closed, so this returns only a connection to serve.
    pub async fn accept(&mut self) -> Conn<A::Io> {
        let port = self.port;
        loop {
            let (io, peer) = match std::future::poll_fn(|cx| self.source.poll_accept(cx)).await {
                Ok(accepted) => {
                    self.backoff.succeeded();
                    accepted
                }
                Err(e) => {
                    let pause = self.backoff.failed();
                    tracing::warn!(port, error = %e, pause_ms = pause.as_millis() as u64, "accept failed");
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            let full = self.places.len() >= self.places.max();
            let taken = self.places.take(peer.ip());
            if (full || taken.is_err()) && self.places.turned_away() {
                let why = match taken {
                    Err(Refused::PerClient) => "this client has as many connections as one may",
                    Err(Refused::Full) => {
                        "the connection cap is reached, this address holds as many as any, and every one of its own has spoken"
                    }
                    Ok(_) => "the connection cap is reached: the least recently useful connection of the address holding the most gave way",
                };
                tracing::warn!(
                    port, %peer, max = self.places.max(),
                    turned_away = self.places.turned_away_count(),
                    "connection turned away: {why}"
                );
            }
            let Ok(slot) = taken else {
                drop(io);
                continue;
            };
            return Conn::new(io, peer, slot, self.places.clone(), self.clocks);
        }
    }
}

/// The listener's connections within `bounds`, as a stream (for tonic); `port` names it in
/// logs. Never yields an error: failed accepts are waited out.
pub fn incoming(
    listener: TcpListener,
    bounds: Bounds,
    port: &'static str,
) -> impl Stream<Item = io::Result<Conn>> {
    futures::stream::unfold(Listener::new(listener, bounds, port), |mut l| async move {
        let conn = l.accept().await;
        Some((Ok(conn), l))
    })
}

/// Serves `app` over HTTP/1.1 on `listener` within `bounds`. Runs until the task is dropped.
pub async fn serve_http(
    listener: TcpListener,
    bounds: Bounds,
    app: axum::Router,
    port: &'static str,
) {
    let http1 = bounds.http1();
    let mut conns = std::pin::pin!(incoming(listener, bounds, port));
    while let Some(conn) = conns.next().await {
        let Ok(conn) = conn else { continue };
        // Every request the router is called for marks its connection useful, and tells an old
        // connection that a request is open (to close it with that answer).
        let useful = conn.useful();
        let asked = Arc::new(tokio::sync::Notify::new());
        let asking = asked.clone();
        let app = app.clone();
        let service = hyper::service::service_fn(move |req| {
            useful.now();
            asking.notify_waiters();
            let mut app = app.clone();
            tower_service::Service::call(&mut app, req)
        });
        let http1 = http1.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(conn);
            let conn = http1.serve_connection(io, service);
            let mut conn = std::pin::pin!(conn);
            let Some(age) = bounds.max_age else {
                let _ = conn.await;
                return;
            };
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = tokio::time::sleep(age) => {}
            }
            // Old: closed with its next answer, never while idle under a request being sent
            // (hyper's head timeout closes it if none comes).
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = asked.notified() => {}
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        });
    }
}
