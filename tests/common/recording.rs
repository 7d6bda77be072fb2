//! A thread-per-connection upstream that records the order requests arrive in (as llama.cpp's
//! server handles them: one thread accepts, in arrival order, and hands each connection to a
//! thread of its own), for the tests of the order the activator releases held requests in.

use super::http::{read_head, respond};
use super::loopback::{accept, Server};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (connection number, `x-seq`) for every request a recording upstream recorded, in the order
/// each connection's thread read its request.
pub type Arrivals = Arc<Mutex<Vec<(usize, u64)>>>;

/// The upstream, until dropped (`connection: close`, so every request comes on a new
/// connection). `/health` says `ready`; any other request is recorded by its `x-seq` header
/// with the number of its connection, when its thread reads it.
pub fn recording_upstream(ready: Arc<AtomicBool>) -> (Server, Arrivals) {
    recording_upstream_on("127.0.0.1:0", ready)
}

/// [`recording_upstream`] on `addr`.
pub fn recording_upstream_on(addr: &str, ready: Arc<AtomicBool>) -> (Server, Arrivals) {
    let seen: Arrivals = Arc::default();
    let record = seen.clone();
    let server = accept(addr, Duration::from_secs(300), move |mut stream, n, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        if head.target == "/health" {
            let status = if ready.load(Ordering::SeqCst) {
                200
            } else {
                503
            };
            respond(&mut stream, status, "text/plain", b"health\n");
            return;
        }
        let seq = head
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("x-seq"))
            .and_then(|(_, v)| v.parse().ok());
        if let Some(seq) = seq {
            record.lock().unwrap().push((n, seq));
        }
        respond(&mut stream, 200, "text/plain", b"ok\n");
    });
    (server, seen)
}
