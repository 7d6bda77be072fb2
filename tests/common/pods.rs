//! Stand-in model servers: a `/metrics` page that a test can change, or a fault.

use super::http::{respond, serve, Server};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a stand-in pod does when scraped.
#[derive(Clone)]
pub enum Behaviour {
    Page(Vec<u8>),
    /// Accepts and never answers.
    Hang,
    Status(u16),
    /// Answers 200 with this many bytes.
    Huge(usize),
    /// Answers with this status and body.
    Reply(u16, &'static str),
}

pub struct Pod {
    pub server: Server,
    pub behaviour: Arc<Mutex<Behaviour>>,
    /// When each scrape arrived.
    pub hits: Arc<Mutex<Vec<std::time::Instant>>>,
}

impl Pod {
    pub fn set(&self, b: Behaviour) {
        *self.behaviour.lock().unwrap() = b;
    }

    pub fn url(&self) -> String {
        self.server.url("/metrics")
    }
}

pub fn pod(addr: &str, behaviour: Behaviour) -> Pod {
    let shared = Arc::new(Mutex::new(behaviour));
    let hits = Arc::new(Mutex::new(Vec::new()));
    let b = shared.clone();
    let h = hits.clone();
    let server = serve(
        addr,
        Duration::from_secs(120),
        move |mut stream, _head, stop| {
            h.lock().unwrap().push(std::time::Instant::now());
            let now = b.lock().unwrap().clone();
            match now {
                Behaviour::Page(page) => {
                    respond(&mut stream, 200, "text/plain; version=0.0.4", &page)
                }
                Behaviour::Status(code) => respond(&mut stream, code, "text/plain", b"failing\n"),
                Behaviour::Reply(code, body) => {
                    respond(&mut stream, code, "application/json", body.as_bytes())
                }
                Behaviour::Hang => {
                    for _ in 0..600 {
                        if stop.load(std::sync::atomic::Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                Behaviour::Huge(n) => {
                    use std::io::Write;
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {n}\r\nconnection: close\r\n\r\n");
                    let _ = stream.write_all(head.as_bytes());
                    let chunk = vec![b'#'; 64 * 1024];
                    let mut sent = 0;
                    while sent < n {
                        let k = chunk.len().min(n - sent);
                        if stream.write_all(&chunk[..k]).is_err() {
                            return;
                        }
                        sent += k;
                    }
                }
            }
        },
    );
    Pod {
        server,
        behaviour: shared,
        hits,
    }
}

/// A vLLM page with this many requests running and none waiting.
pub fn vllm_running(n: u64) -> Vec<u8> {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {n}\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 0\n"
    )
    .into_bytes()
}

/// Stand-in pods on 127.0.0.2, 127.0.0.3, ... sharing one port, as pods share a container port.
pub fn pods_on_one_port(behaviours: Vec<Behaviour>) -> (Vec<Pod>, u16) {
    for _ in 0..20 {
        let first = pod("127.0.0.2:0", behaviours[0].clone());
        let port = first.server.addr.port();
        let mut pods = vec![first];
        let all = behaviours[1..].iter().enumerate().all(|(i, b)| {
            let addr = format!("127.0.0.{}:{port}", i + 3);
            match std::net::TcpListener::bind(&addr) {
                Ok(probe) => {
                    drop(probe);
                    pods.push(pod(&addr, b.clone()));
                    true
                }
                Err(_) => false,
            }
        });
        if all {
            return (pods, port);
        }
    }
    panic!("no port free on every loopback address");
}
