//! HTTP/1.1 as the stand-ins speak it: a request read, an answer written (`connection: close`,
//! one request per connection), and [`serve`], the shared loopback accept loop with the
//! request read for the handler.

pub use super::loopback::Server;

use super::loopback::accept;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The request line's method and target, e.g. ("GET", "/metrics?x=1"), and the body.
pub struct RequestHead {
    pub method: String,
    pub target: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
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

/// Serves on `addr` (port 0 picks one), reading each connection's request and calling
/// `handler` on the connection's own thread.
pub fn serve<F>(addr: &str, lifetime: Duration, handler: F) -> Server
where
    F: Fn(TcpStream, RequestHead, Arc<AtomicBool>) + Send + Sync + 'static,
{
    accept(addr, lifetime, move |mut stream, _, stop| {
        if let Some(head) = read_head(&mut stream) {
            handler(stream, head, stop);
        }
    })
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
