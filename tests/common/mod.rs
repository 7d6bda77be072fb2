//! Helpers shared by the end-to-end tests: stand-in servers on loopback, bounded in requests and
//! time, and the path of a fixture.

#![allow(dead_code)]

pub mod activator;
pub mod churn;
pub mod cluster;
pub mod faulty;
pub mod http;
pub mod install;
pub mod keda;
pub mod kube;
pub mod loopback;
pub mod model;
pub mod pods;
pub mod promql;
pub mod rbac;
pub mod recording;
pub mod scaler;
pub mod shipped;
pub mod timed;
pub mod tls;
pub mod tune;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A stand-in `/metrics` server on 127.0.0.1 that answers at most `max_requests` requests with
/// `status` and `body`, and stops after `max_requests` or 20 seconds, whichever comes first.
pub struct StandIn {
    pub addr: SocketAddr,
    server: http::Server,
    served: Arc<AtomicUsize>,
    max_requests: usize,
    until: Instant,
}

impl StandIn {
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Waits for the server to stop; returns how many requests it answered.
    pub fn served(self) -> usize {
        while self.served.load(Ordering::SeqCst) < self.max_requests && Instant::now() < self.until
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(self.server);
        self.served.load(Ordering::SeqCst).min(self.max_requests)
    }
}

pub fn stand_in(status: u16, body: Vec<u8>, max_requests: usize) -> StandIn {
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    let lifetime = Duration::from_secs(20);
    let server = http::serve("127.0.0.1:0", lifetime, move |mut stream, _, stop| {
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= max_requests {
            // The last one: the listener closes, later connections are refused.
            stop.store(true, Ordering::SeqCst);
        }
        if n <= max_requests {
            http::respond(&mut stream, status, "text/plain; version=0.0.4", &body);
        }
    });
    StandIn {
        addr: server.addr,
        server,
        served,
        max_requests,
        until: Instant::now() + lifetime,
    }
}

/// Runs the `infscale` binary from the repository's root and waits for it.
pub fn infscale(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run infscale")
}

/// A run's stderr as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
