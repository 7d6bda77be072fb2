//! Helpers shared by the end-to-end tests: stand-in servers on loopback, bounded in requests and
//! time, and the path of a fixture.

#![allow(dead_code)]

pub mod activator;
pub mod churn;
pub mod cluster;
pub mod faulty;
pub mod http;
pub mod kube_recorder;
pub mod kubeapi;
pub mod model;
pub mod pods;
pub mod promql;
pub mod rbac;
pub mod scaler;
pub mod timed;
pub mod tls;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A stand-in `/metrics` server on 127.0.0.1 that answers at most `max_requests` requests with
/// `status` and `body`, and stops after `max_requests` or 20 seconds, whichever comes first.
pub struct StandIn {
    pub addr: SocketAddr,
    handle: Option<JoinHandle<usize>>,
}

impl StandIn {
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Waits for the server to stop; returns how many requests it answered.
    pub fn served(mut self) -> usize {
        self.handle.take().map_or(0, |h| h.join().unwrap_or(0))
    }
}

pub fn stand_in(status: u16, body: Vec<u8>, max_requests: usize) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let handle = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut served = 0;
        while served < max_requests && Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(&body);
                    served += 1;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        served
    });
    StandIn {
        addr,
        handle: Some(handle),
    }
}
