//! Memory of the activator holding 10,000 requests: the real `infscale activator` binary as a
//! separate process, in front of an upstream that is not ready, with 10,000 client connections
//! each sending a small completion request. RSS is read from /proc before and while they are
//! held; for comparison, the same 10,000 connections idle (no request sent), and the held run
//! again with glibc's `MALLOC_MMAP_THRESHOLD_=8192`. Run with `cargo bench --bench activator`
//! (or `scripts/bench-activator.sh`, which adds nginx as the anchor).

mod common;
use common::{free_port, rss_mb};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

const HELD: usize = 10_000;

async fn held(admin: u16) -> u64 {
    let Ok(r) = reqwest::get(format!("http://127.0.0.1:{admin}/queue")).await else {
        return 0;
    };
    let v: serde_json::Value = r.json().await.unwrap_or_default();
    v["bench"]["Held"].as_u64().unwrap_or(0)
}

/// RSS of a fresh activator idle, then with `HELD` connections (requests sent or not).
async fn measure(env: &[(&str, &str)], send: bool) -> (f64, f64) {
    let (listen, admin) = (free_port(), free_port());
    // Nothing listens on the upstream port: the route is never ready.
    let upstream = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args([
            "activator",
            "--upstream",
            &format!("http://127.0.0.1:{upstream}"),
            "--health-path",
            "/health",
            "--host",
            "bench",
            "--max-held",
            "20000",
            "--hold-timeout",
            "600",
            "--max-connections",
            "20000",
            // Every held request comes from 127.0.0.1: one client address.
            "--max-connections-per-client",
            "20000",
            "--listen",
            &format!("127.0.0.1:{listen}"),
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
        ])
        .env("RUST_LOG", "error")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start infscale activator");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while reqwest::get(format!("http://127.0.0.1:{admin}/healthz"))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the activator did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let idle = rss_mb(pid);
    let body = r#"{"model":"llama-3.1-8b","prompt":"Summarise the following support ticket in two sentences.","max_tokens":256}"#;
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut connections = Vec::with_capacity(HELD);
    for _ in 0..HELD {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", listen))
            .await
            .expect("connect");
        if send {
            s.write_all(request.as_bytes()).await.expect("send");
        }
        connections.push(s);
    }
    if send {
        let deadline = Instant::now() + Duration::from_secs(60);
        while held(admin).await < HELD as u64 {
            assert!(Instant::now() < deadline, "only {} held", held(admin).await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let full = rss_mb(pid);
    drop(connections);
    let _ = child.kill();
    let _ = child.wait();
    (idle, full)
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let per = |(idle, full): (f64, f64)| (full - idle) * 1024.0 / HELD as f64;
    let held = measure(&[], true).await;
    println!(
        "activator RSS: {:.1} MB idle, {:.1} MB with {HELD} requests held ({:.1} KB per held request)",
        held.0,
        held.1,
        per(held)
    );
    let connections = measure(&[], false).await;
    println!(
        "  the same {HELD} connections with no request sent: {:.1} MB ({:.1} KB each)",
        connections.1,
        per(connections)
    );
    let mmap = measure(&[("MALLOC_MMAP_THRESHOLD_", "8192")], true).await;
    println!(
        "  held, with MALLOC_MMAP_THRESHOLD_=8192: {:.1} MB ({:.1} KB per held request)",
        mmap.1,
        per(mmap)
    );
}
