//! A minimal threaded HTTP/1.1 server for stand-ins: one thread per connection, one request per
//! connection (`connection: close`), bounded by a deadline and stopped when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The request line's method and target, e.g. ("GET", "/metrics?x=1"), and the body.
pub struct RequestHead {
    pub method: String,
    pub target: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Runs `handler` for each connection until dropped (or for at most `lifetime`).
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

    pub fn stopped(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

/// Reads a request head (request line and headers) from the stream.
pub fn read_head(stream: &mut TcpStream) -> Option<RequestHead> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        if request.len() > 64 * 1024 {
            return None;
        }
    }
    let end = request.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = String::from_utf8_lossy(&request[..end]).into_owned();
    let length: usize = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
        .min(1 << 20);
    let mut body = request[end..].to_vec();
    while body.len() < length {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
        }
    }
    let headers = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut first = text.lines().next()?.split(' ');
    Some(RequestHead {
        method: first.next()?.to_owned(),
        target: first.next()?.to_owned(),
        headers,
        body,
    })
}

pub fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

/// Answers with `v` as JSON.
pub fn json(stream: &mut TcpStream, status: u16, v: serde_json::Value) {
    respond(stream, status, "application/json", v.to_string().as_bytes());
}

/// A Kubernetes watch with no events: held open for 5 s (or until the server stops), then
/// ended, so the watcher watches again.
pub fn hold_watch(stream: &mut TcpStream, stop: &AtomicBool) {
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    for _ in 0..50 {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

/// Serves on `addr` (port 0 picks one), calling `handler` on a thread per connection.
pub fn serve<F>(addr: &str, lifetime: Duration, handler: F) -> Server
where
    F: Fn(TcpStream, RequestHead, Arc<AtomicBool>) + Send + Sync + 'static,
{
    let listener = TcpListener::bind(addr).expect("bind loopback");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let stop = Arc::new(AtomicBool::new(false));
    let handler = Arc::new(handler);
    let flag = stop.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + lifetime;
        while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_nodelay(true);
                    let handler = handler.clone();
                    let flag = flag.clone();
                    std::thread::spawn(move || {
                        if let Some(head) = read_head(&mut stream) {
                            handler(stream, head, flag);
                        }
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    Server { addr, stop }
}

/// (connection number, `x-seq`) for every request a recording upstream recorded, in the order
/// each connection's thread read its request.
pub type Arrivals = Arc<std::sync::Mutex<Vec<(usize, u64)>>>;

/// A thread-per-connection upstream (as llama.cpp's server is): one thread accepts connections
/// in the order they arrive and hands each to a thread of its own (`connection: close`, so every
/// request comes on a new connection). `/health` says `ready`; any other request is recorded by
/// its `x-seq` header with the number of its connection, when its thread reads it.
pub fn recording_upstream(ready: Arc<AtomicBool>) -> (SocketAddr, Arrivals) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    let seen: Arrivals = Arc::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        // Bounded: the tests send a few hundred requests and some probes.
        for (n, stream) in listener.incoming().take(5000).enumerate() {
            let Ok(mut stream) = stream else { continue };
            let (ready, record) = (ready.clone(), record.clone());
            std::thread::spawn(move || {
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
        }
    });
    (addr, seen)
}

/// A Kubernetes API stand-in's `/version` answer.
pub fn kube_version(stream: &mut TcpStream) {
    json(
        stream,
        200,
        serde_json::json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0",
            "gitCommit": "0", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}),
    );
}

/// A Kubernetes API stand-in's 404 Status for `what`.
pub fn kube_not_found(stream: &mut TcpStream, what: &str) {
    json(
        stream,
        404,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": format!("{what} not found")}),
    );
}
