//! Faulty peers below HTTP, on loopback: a listener whose backlog is full, one that drips its
//! answer a byte at a time, one that resets the connection, one that answers bytes that are not
//! HTTP; and a relay that puts a fault between `serve` and a stand-in (the Kubernetes API, an
//! activator) and can be switched while it runs. What `common::pods` does at the HTTP level
//! (hang, 5xx, huge pages) stays there.

use super::http::{read_head, serve, Server};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A raw fault's listener; it stops when dropped (or after 120 s).
pub struct Raw {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// The accept loop serving it, if one does.
    _server: Option<Server>,
    /// Connections the test made itself to fill a backlog, kept open.
    _fillers: Vec<TcpStream>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Raw {
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }
}

/// Closes `stream` with SO_LINGER 0: the peer sees a reset, not an orderly end.
pub fn reset(stream: TcpStream) {
    let socket = tokio::net::TcpSocket::from_std_stream(stream);
    let _ = socket.set_zero_linger();
    drop(socket);
}

/// Sleeps `d` in 50 ms steps; false once `stop` is set.
fn wait(stop: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    !stop.load(Ordering::SeqCst)
}

/// A listener on 127.0.0.1 that calls `handler` on a thread per connection, after reading the
/// request head.
fn raw(handler: impl Fn(TcpStream, &AtomicBool) + Send + Sync + 'static) -> Raw {
    let server = serve(
        "127.0.0.1:0",
        Duration::from_secs(120),
        move |stream, _, stop| handler(stream, &stop),
    );
    Raw {
        addr: server.addr,
        stop: server.stopped(),
        _server: Some(server),
        _fillers: Vec::new(),
    }
}

/// A listener that never accepts, its backlog filled by the test's own connections: a new
/// connection's handshake is never answered (the kernel drops the SYN). Call it inside a Tokio
/// runtime.
pub fn backlog_full() -> Raw {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind loopback");
    let listener = socket.listen(0).expect("listen").into_std().expect("std");
    let addr = listener.local_addr().expect("addr");
    let mut fillers = Vec::new();
    // With a backlog of 0 Linux queues one or two handshakes; then SYNs are dropped.
    for _ in 0..16 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(s) => fillers.push(s),
            Err(_) => break,
        }
    }
    assert!(
        fillers.len() < 16,
        "the backlog never filled: connections still complete"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        // Held, never accepted, until dropped.
        let _listener = listener;
        wait(&flag, Duration::from_secs(120));
    });
    Raw {
        addr,
        stop,
        _server: None,
        _fillers: fillers,
    }
}

/// Answers `page` with status 200, one byte every 100 ms.
pub fn drip(page: Vec<u8>) -> Raw {
    raw(move |mut stream, stop| {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            page.len()
        );
        let _ = stream.set_nodelay(true);
        for b in head.as_bytes().iter().chain(page.iter()) {
            if stream.write_all(&[*b]).is_err() || !wait(stop, Duration::from_millis(100)) {
                return;
            }
        }
    })
}

/// Reads the request, then resets the connection.
pub fn resets() -> Raw {
    raw(|stream, _| reset(stream))
}

/// Answers bytes that are not HTTP at all, then closes.
pub fn not_http() -> Raw {
    raw(|mut stream, _| {
        let junk: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let _ = stream.write_all(b"\x00\xffSSH-2.0-not-a-web-server\r\n");
        let _ = stream.write_all(&junk);
    })
}

/// What a [`Relay`] does with the next connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Passes the request to the stand-in and its answer back.
    Pass = 0,
    /// The listener is closed: connections are refused.
    Gone = 1,
    /// Accepts, reads the request, never answers.
    Hang = 2,
    /// Reads the request, then resets.
    Reset = 3,
}

/// A relay on a fixed loopback address in front of a stand-in, with a switchable fault; a
/// request whose target contains `watch=true` (or ends with `/watch`) can be answered by
/// `on_watch` instead while it is set.
pub struct Relay {
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    /// Incremented on every switch, so open relayed streams end when the mode changes.
    epoch: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A handler for watch requests: the stream to answer on, and the stop flag.
pub type WatchFault = Arc<dyn Fn(TcpStream, &AtomicBool) + Send + Sync>;

impl Relay {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Cuts every stream relayed so far (the client sees a reset).
    pub fn cut(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Switches the fault; streams relayed so far are cut (a reset) unless the mode is `Pass`.
    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
        if mode != Mode::Pass {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn mode_of(v: u8) -> Mode {
    match v {
        1 => Mode::Gone,
        2 => Mode::Hang,
        3 => Mode::Reset,
        _ => Mode::Pass,
    }
}

/// Relays from `bind` (port 0 picks one) to `upstream`, answering watch requests with
/// `on_watch` while it holds a handler.
pub fn relay(
    bind: &str,
    upstream: SocketAddr,
    on_watch: Arc<std::sync::Mutex<Option<WatchFault>>>,
) -> Relay {
    let first = TcpListener::bind(bind).expect("bind loopback");
    let addr = first.local_addr().expect("addr");
    let mode = Arc::new(AtomicU8::new(Mode::Pass as u8));
    let epoch = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (m, e, flag) = (mode.clone(), epoch.clone(), stop.clone());
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut listener = Some(first);
        while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
            let now = mode_of(m.load(Ordering::SeqCst));
            if now == Mode::Gone {
                listener = None;
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            if listener.is_none() {
                match TcpListener::bind(addr) {
                    Ok(l) => listener = Some(l),
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                }
            }
            let Some(l) = &listener else { continue };
            let _ = l.set_nonblocking(true);
            match l.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let (flag, e, on_watch) = (flag.clone(), e.clone(), on_watch.clone());
                    std::thread::spawn(move || {
                        let born = e.load(Ordering::SeqCst);
                        let Some(head) = read_head(&mut stream) else {
                            return;
                        };
                        match now {
                            Mode::Hang => {
                                while e.load(Ordering::SeqCst) == born
                                    && wait(&flag, Duration::from_millis(50))
                                {
                                }
                                return;
                            }
                            Mode::Reset => return reset(stream),
                            Mode::Pass | Mode::Gone => {}
                        }
                        let watch =
                            head.target.contains("watch=true") || head.target.ends_with("/watch");
                        let fault = on_watch.lock().unwrap().clone();
                        if let (true, Some(fault)) = (watch, fault) {
                            return fault(stream, &flag);
                        }
                        pass(stream, &head, upstream, &flag, &e, born);
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    Relay {
        addr,
        mode,
        epoch,
        stop,
    }
}

/// Sends the request on to `upstream` and copies its answer back until either side ends, the
/// relay stops, or the fault is switched (then the client's side is reset).
fn pass(
    mut client: TcpStream,
    head: &super::http::RequestHead,
    upstream: SocketAddr,
    stop: &AtomicBool,
    epoch: &std::sync::atomic::AtomicU64,
    born: u64,
) {
    let Ok(mut up) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
        return reset(client);
    };
    let mut request = format!("{} {} HTTP/1.1\r\n", head.method, head.target);
    for (k, v) in &head.headers {
        if !k.eq_ignore_ascii_case("connection") {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    request.push_str("connection: close\r\n\r\n");
    if up.write_all(request.as_bytes()).is_err() || up.write_all(&head.body).is_err() {
        return reset(client);
    }
    let _ = up.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if stop.load(Ordering::SeqCst) || epoch.load(Ordering::SeqCst) != born {
            return reset(client);
        }
        match up.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if client.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return reset(client),
        }
    }
}
