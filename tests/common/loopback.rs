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
        stop_accepting(&self.stop, self.addr);
    }
}

/// Sets the stop flag and wakes an accept loop blocked in `accept` with a connection of its own.
fn stop_accepting(stop: &AtomicBool, addr: SocketAddr) {
    if !stop.swap(true, Ordering::SeqCst) {
        let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(200));
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
    // Blocking accepts: each connection is handed on the moment it arrives, never two together
    // after a poll's sleep (whose threads would then race to read first). A watchdog ends the
    // loop at `lifetime`; dropping the server ends it sooner.
    listener.set_nonblocking(false).expect("blocking");
    let addr = listener.local_addr().expect("addr");
    let stop = Arc::new(AtomicBool::new(false));
    let handler = Arc::new(handler);
    let flag = stop.clone();
    let watchdog = stop.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + lifetime;
        while !watchdog.load(Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                stop_accepting(&watchdog, addr);
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    });
    std::thread::spawn(move || {
        let mut n = 0;
        while !flag.load(Ordering::SeqCst) {
            let Ok((stream, _)) = listener.accept() else {
                continue;
            };
            if flag.load(Ordering::SeqCst) {
                return;
            }
            let _ = stream.set_nodelay(true);
            let (handler, flag) = (handler.clone(), flag.clone());
            std::thread::spawn(move || handler(stream, n, flag));
            n += 1;
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
