//! A stand-in activator admin endpoint: `/queue` counts and the `/queue/watch` event stream,
//! with a held count the test sets.

use super::http::{respond, serve, Server};
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub struct Activator {
    pub server: Server,
    state: Arc<(Mutex<u64>, Condvar)>,
}

impl Activator {
    pub fn set_held(&self, held: u64) {
        let (lock, cvar) = &*self.state;
        *lock.lock().unwrap() = held;
        cvar.notify_all();
    }

    pub fn url(&self) -> String {
        self.server.url("")
    }
}

fn counts(host: &str, held: u64) -> String {
    serde_json::json!({host: {"Concurrency": held, "RequestCount": 100 + held, "Held": held}})
        .to_string()
}

pub fn activator(host: &'static str) -> Activator {
    activator_on(host, "127.0.0.1:0")
}

/// The stand-in on `addr` (port 0 picks one).
pub fn activator_on(host: &'static str, addr: &str) -> Activator {
    let state = Arc::new((Mutex::new(0u64), Condvar::new()));
    let shared = state.clone();
    let server = serve(
        addr,
        Duration::from_secs(120),
        move |mut stream, head, stop| {
            let (lock, cvar) = &*shared;
            if head.target == "/queue" {
                let held = *lock.lock().unwrap();
                respond(
                    &mut stream,
                    200,
                    "application/json",
                    counts(host, held).as_bytes(),
                );
            } else if head.target == "/queue/watch" {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
                let mut last = None;
                for _ in 0..1200 {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    let held = *lock.lock().unwrap();
                    if last != Some(held) {
                        let event = format!("data: {}\n\n", counts(host, held));
                        if stream.write_all(event.as_bytes()).is_err() {
                            return;
                        }
                        last = Some(held);
                    }
                    let guard = lock.lock().unwrap();
                    let _ = cvar.wait_timeout(guard, Duration::from_millis(100));
                }
            } else {
                respond(&mut stream, 404, "text/plain", b"not found\n");
            }
        },
    );
    Activator { server, state }
}
