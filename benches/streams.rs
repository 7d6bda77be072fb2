//! Token streams through a proxy: 1,000 concurrent server-sent-event streams of 50 events 20 ms
//! apart, read directly from a stand-in model server, through the real `infscale activator`
//! binary, and through nginx as a reverse proxy (when `NGINX_STREAM_PORT` names one in front of
//! `STREAM_UPSTREAM_PORT`, as `scripts/bench-activator.sh` sets up), one setup after another on the same
//! machine. Each event carries the time it was sent; the client records when it arrived. Prints
//! the events delivered, the p50/p99 delay and the proxy's CPU time per event per setup (the
//! proxy's pid: the activator's own, nginx's from `NGINX_STREAM_PID`). `cargo bench --bench streams`.

mod common;
use common::{cpu_seconds, free_port};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const STREAMS: usize = 1000;
const EVENTS: usize = 50;
const GAP: Duration = Duration::from_millis(20);
const ROUNDS: usize = 3;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The model stand-in: `/health` 200; any other request gets an event stream, each event's data
/// the microsecond it was written.
async fn upstream(port: u16) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let _ = s.set_nodelay(true);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.starts_with(b"GET /health") {
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n";
                    if s.write_all(ok).await.is_err() {
                        return;
                    }
                    continue;
                }
                // The stream ends the connection, and says so: a proxy must not reuse it.
                let start = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                if s.write_all(start).await.is_err() {
                    return;
                }
                for _ in 0..EVENTS {
                    tokio::time::sleep(GAP).await;
                    let event = format!("data: {}\n\n", now_us());
                    let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                    if s.write_all(chunk.as_bytes()).await.is_err() {
                        return;
                    }
                }
                let _ = s.write_all(b"0\r\n\r\n").await;
                return;
            }
        });
    }
}

/// One stream read through `port`: each event's delay (µs) is pushed to `delays`.
async fn read_stream(port: u16, delays: Arc<Mutex<Vec<u64>>>, delivered: Arc<AtomicU64>) {
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return;
    };
    let _ = s.set_nodelay(true);
    let req = "GET /v1/completions HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n";
    if s.write_all(req.as_bytes()).await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 8192];
    let mut pending = Vec::new();
    let mut mine = Vec::with_capacity(EVENTS);
    loop {
        let n = match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => break,
        };
        let arrived = now_us();
        pending.extend_from_slice(&buf[..n]);
        while let Some(at) = pending.windows(6).position(|w| w == b"data: ") {
            let rest = &pending[at + 6..];
            let Some(end) = rest.iter().position(|b| *b == b'\n') else {
                break;
            };
            if let Some(sent) = std::str::from_utf8(&rest[..end])
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
            {
                mine.push(arrived.saturating_sub(sent));
                delivered.fetch_add(1, Ordering::Relaxed);
            }
            pending.drain(..at + 6 + end);
        }
    }
    delays.lock().unwrap().extend(mine);
}

/// Runs every stream through `port`; returns (events delivered, p50 µs, p99 µs).
async fn measure(port: u16) -> (u64, u64, u64) {
    let delays = Arc::new(Mutex::new(Vec::new()));
    let delivered = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..STREAMS)
        .map(|_| tokio::spawn(read_stream(port, delays.clone(), delivered.clone())))
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let mut d = delays.lock().unwrap().clone();
    d.sort_unstable();
    let at = |q: f64| {
        d.get(((d.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    (delivered.load(Ordering::Relaxed), at(0.5), at(0.99))
}

fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let up = std::env::var("STREAM_UPSTREAM_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(free_port);
    tokio::spawn(upstream(up));
    wait_for(up);
    let (listen, admin) = (free_port(), free_port());
    let mut activator = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args([
            "activator",
            "--upstream",
            &format!("http://127.0.0.1:{up}"),
            "--health-path",
            "/health",
            "--listen",
            &format!("127.0.0.1:{listen}"),
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
        ])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start infscale activator");
    wait_for(listen);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // (name, port, the proxy's pid whose CPU time is counted)
    let mut setups = vec![
        ("direct", up, None),
        ("activator", listen, Some(activator.id())),
    ];
    // nginx as the anchor, when the caller started one on this port (scripts/bench-activator.sh).
    if let Some(port) = std::env::var("NGINX_STREAM_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
    {
        let pid = std::env::var("NGINX_STREAM_PID")
            .ok()
            .and_then(|p| p.parse().ok());
        setups.push(("nginx-proxy", port, pid));
    }
    println!(
        "{STREAMS} streams x {EVENTS} events {} ms apart; {ROUNDS} interleaved rounds, medians",
        GAP.as_millis()
    );
    println!(
        "{:12} {:>10} {:>10} {:>10} {:>14}",
        "setup", "delivered", "p50 delay", "p99 delay", "proxy CPU/event"
    );
    let mut results: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); setups.len()];
    let mut cpu = vec![0.0; setups.len()];
    for _ in 0..ROUNDS {
        for (i, (_, port, pid)) in setups.iter().enumerate() {
            let before = pid.map(cpu_seconds);
            results[i].push(measure(*port).await);
            if let (Some(pid), Some(before)) = (pid, before) {
                cpu[i] += cpu_seconds(*pid) - before;
            }
        }
    }
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    for (((name, _, pid), runs), cpu) in setups.iter().zip(results).zip(cpu) {
        let delivered: u64 = runs.iter().map(|r| r.0).sum();
        let p50 = median(runs.iter().map(|r| r.1).collect());
        let p99 = median(runs.iter().map(|r| r.2).collect());
        let per_event = match pid {
            Some(_) if delivered > 0 => format!("{:.1}us", cpu * 1e6 / delivered as f64),
            _ => "-".to_string(),
        };
        println!(
            "{name:12} {:>9.1}% {:>8}us {:>8}us {per_event:>14}",
            delivered as f64 * 100.0 / (ROUNDS * STREAMS * EVENTS) as f64,
            p50,
            p99
        );
    }
    let _ = activator.kill();
    let _ = activator.wait();
}
