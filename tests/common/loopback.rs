//! The one accept loop of the test stand-ins, on loopback: a thread per connection (as most
//! stand-ins and llama.cpp's server are) or a Tokio task per connection (as uvicorn is), each
//! bounded in time and stopped by its owner. Self-contained, so a bench can include it by path
//! beside `churn.rs`.

#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A listener served until dropped (or for at most its lifetime).
pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The flag set when the server stops; handlers still running read it to end early.
    pub fn stopped(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

/// Binds `addr` (a loopback address; port 0 picks one) and hands each connection, with its
/// number in accept order and the stop flag, to `handler` on a thread of its own, until the
/// returned [`Server`] is dropped or `lifetime` has passed.
pub fn accept<F>(addr: &str, lifetime: Duration, handler: F) -> Server
where
    F: Fn(TcpStream, usize, Arc<AtomicBool>) + Send + Sync + 'static,
{
    let listener = TcpListener::bind(addr).expect("bind loopback");
    accept_on(listener, lifetime, handler)
}

/// As [`accept`], on a listener already bound.
pub fn accept_on<F>(listener: TcpListener, lifetime: Duration, handler: F) -> Server
where
    F: Fn(TcpStream, usize, Arc<AtomicBool>) + Send + Sync + 'static,
{
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let stop = Arc::new(AtomicBool::new(false));
    let handler = Arc::new(handler);
    let flag = stop.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + lifetime;
        let mut n = 0;
        while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_nodelay(true);
                    let (handler, flag) = (handler.clone(), flag.clone());
                    std::thread::spawn(move || handler(stream, n, flag));
                    n += 1;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    Server { addr, stop }
}

/// Serves `listener` with a Tokio task per connection until the returned task is aborted
/// (which drops every connection at once, as a killed process would).
pub fn accept_tokio<F, Fut>(
    listener: tokio::net::TcpListener,
    handler: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        // Connections live in this set: aborting this task drops it, and with it every
        // connection.
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    if let Ok((s, _)) = accepted {
                        let _ = s.set_nodelay(true);
                        conns.spawn(handler(s));
                    }
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    })
}
