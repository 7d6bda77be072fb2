//! The activator's proxy sockets: the shared port, and one port per learned model.
//!
//! `serve` sends a model's Service to the activator at a port of that model's own (the port in
//! the slice it writes), so the port names the model whatever the client put in its `Host`
//! header, or whether it sent one. Every port accepts through the one bounded listener
//! ([`crate::edge::listener`]): [`Ports`] is its source of connections, polling the shared
//! socket and every model socket in turn, so the connection caps hold over all of them
//! together. [`PortSet`] binds and closes model sockets as the route table changes; a port that
//! cannot be bound is reported (the model is then not reachable there, and `serve`, which
//! checks each activator pod at that port before it sends the Service there, does not).

use crate::edge::listener::Accept;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tokio::net::{TcpListener, TcpStream};

/// The model sockets, shared by the acceptor and whoever changes the table.
pub struct PortSet {
    ip: IpAddr,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    open: BTreeMap<u16, TcpListener>,
    /// Ports that could not be bound, and why.
    failed: BTreeMap<u16, String>,
    /// The acceptor's waker, woken when a socket is added.
    waker: Option<Waker>,
    /// Where the next poll starts among the model sockets (no socket starves the others).
    next: usize,
}

impl PortSet {
    /// Model sockets on `ip` (the shared port's address).
    pub fn new(ip: IpAddr) -> Arc<PortSet> {
        Arc::new(PortSet {
            ip,
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Binds every port of `wanted` not open yet and closes those open but not wanted
    /// (connections already accepted on them go on). A port that cannot be bound is tried
    /// again at the next sync.
    pub fn sync(&self, wanted: &BTreeSet<u16>) {
        let mut inner = self.lock();
        inner.open.retain(|p, _| wanted.contains(p));
        inner.failed.retain(|p, _| wanted.contains(p));
        let mut added = false;
        for &port in wanted {
            if inner.open.contains_key(&port) {
                continue;
            }
            match bind(SocketAddr::new(self.ip, port)) {
                Ok(l) => {
                    if inner.failed.remove(&port).is_some() {
                        tracing::info!(port, "model port bound");
                    }
                    inner.open.insert(port, l);
                    added = true;
                }
                Err(e) => {
                    let why = e.to_string();
                    if inner.failed.get(&port) != Some(&why) {
                        tracing::error!(port, error = %why, "cannot listen on a model's port: the model is not reachable there");
                    }
                    inner.failed.insert(port, why);
                }
            }
        }
        if added {
            if let Some(w) = inner.waker.take() {
                w.wake();
            }
        }
    }

    /// The ports open now.
    pub fn open(&self) -> BTreeSet<u16> {
        self.lock().open.keys().copied().collect()
    }

    /// The ports that could not be bound, and why.
    pub fn failed(&self) -> BTreeMap<u16, String> {
        self.lock().failed.clone()
    }
}

/// A socket of `addr`, non-blocking, with `SO_REUSEADDR` (a port closed a moment ago, its
/// connections in TIME_WAIT, binds again).
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// The connections of the shared socket and of every model socket.
pub struct Ports {
    shared: TcpListener,
    models: Arc<PortSet>,
}

impl Ports {
    pub fn new(shared: TcpListener, models: Arc<PortSet>) -> Ports {
        Ports { shared, models }
    }
}

impl Accept for Ports {
    type Io = TcpStream;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        if let Poll::Ready(r) = Accept::poll_accept(&mut self.shared, cx) {
            return Poll::Ready(r);
        }
        let mut inner = self.models.lock();
        inner.waker = Some(cx.waker().clone());
        let n = inner.open.len();
        let start = inner.next % n.max(1);
        let ready = inner
            .open
            .values()
            .enumerate()
            .cycle()
            .skip(start)
            .take(n)
            .find_map(|(i, l)| match l.poll_accept(cx) {
                Poll::Ready(r) => Some((i, r)),
                Poll::Pending => None,
            });
        match ready {
            Some((i, r)) => {
                inner.next = i + 1;
                Poll::Ready(r.map(|(stream, peer)| {
                    let _ = stream.set_nodelay(true);
                    (stream, peer)
                }))
            }
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_model_port_bound_later_is_accepted_from_and_tells_its_port() {
        let shared = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let models = PortSet::new("127.0.0.1".parse().unwrap());
        let mut ports = Ports::new(shared, models.clone());
        let accepting = tokio::spawn(async move {
            let mut local = Vec::new();
            for _ in 0..2 {
                let (s, _) = std::future::poll_fn(|cx| ports.poll_accept(cx))
                    .await
                    .unwrap();
                local.push(s.local_addr().unwrap().port());
            }
            local
        });
        // A free port: bind one, let it go, ask the set for it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        models.sync(&BTreeSet::from([port]));
        assert_eq!(models.open(), BTreeSet::from([port]));
        let _a = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let _b = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        assert_eq!(accepting.await.unwrap(), vec![port, port]);
        models.sync(&BTreeSet::new());
        assert!(models.open().is_empty());
        assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
    }

    #[tokio::test]
    async fn a_port_taken_by_another_is_reported_and_tried_again() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let models = PortSet::new("127.0.0.1".parse().unwrap());
        models.sync(&BTreeSet::from([port]));
        assert!(models.open().is_empty());
        assert!(models.failed().contains_key(&port));
        drop(taken);
        models.sync(&BTreeSet::from([port]));
        assert_eq!(models.open(), BTreeSet::from([port]));
        assert!(models.failed().is_empty());
    }
}
