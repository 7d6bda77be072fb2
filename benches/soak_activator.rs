//! Soak of the activator: the real `infscale activator` binary (release) in front of an
//! upstream that flaps ready/down/ready (its listener and every connection killed, then bound
//! again on the same loopback address), with `INFSCALE_SOAK_REQUESTS` requests sent at 200 a
//! second, each carrying a unique id. Asserts and reports that every request was forwarded
//! exactly once and answered 200 with its own body, or answered with an explicit error; none
//! lost, none duplicated at the upstream, none wrong; and the activator's RSS at the start, its
//! peak and the end.
//!
//! Without `INFSCALE_SOAK_REQUESTS` it does nothing, so `cargo bench` stays short; run it with
//! `scripts/soak-activator.sh [REQUESTS]` (10,000 by default). tests/upstream_churn.rs runs the
//! same with 1,000 requests in `cargo test`.

#[path = "../tests/common/churn.rs"]
mod churn;
#[allow(dead_code)]
mod common;
#[path = "../tests/common/loopback.rs"]
mod loopback;

use churn::{drive, flap, start_activator, Upstream, UpstreamOpts, Verdict};
use common::rss_mb;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PER_SECOND: f64 = 200.0;
/// How long the upstream stays up, then down, in turn (ms).
const UP: &[u64] = &[1500, 700, 2500, 400, 1200, 3000];
const DOWN: &[u64] = &[1000, 300, 2000, 150, 600, 50];

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(requests) = std::env::var("INFSCALE_SOAK_REQUESTS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        println!(
            "soak_activator: skipped (set INFSCALE_SOAK_REQUESTS, or run scripts/soak-activator.sh)"
        );
        return;
    };
    let up = Upstream::start("127.0.0.1", UpstreamOpts::default()).await;
    let a = start_activator(
        env!("CARGO_BIN_EXE_infscale"),
        up.addr,
        &["--hold-timeout", "60", "--max-held", "5000"],
    )
    .await;
    let pid = a.child.id();
    let rss_start = rss_mb(pid);
    let peak = Arc::new(Mutex::new(rss_start));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::SeqCst) {
                let now = rss_mb(pid);
                {
                    let mut p = peak.lock().unwrap();
                    *p = p.max(now);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    println!(
        "soak_activator: {requests} requests at {PER_SECOND}/s through the activator; upstream up {UP:?} ms / down {DOWN:?} ms in turn, killed and restarted on {}",
        up.addr
    );
    let t0 = Instant::now();
    let send_for = Duration::from_secs_f64(requests as f64 / PER_SECOND);
    let flapping = flap(up.clone(), UP, DOWN, t0 + send_for);
    let outcomes = drive(a.proxy, requests, PER_SECOND).await;
    let took = t0.elapsed();
    flapping.await.unwrap();
    // Idle connections close (the client's pool lets them go at 5 s), then look again.
    tokio::time::sleep(Duration::from_secs(8)).await;
    sampling.store(false, Ordering::SeqCst);
    let _ = sampler.await;
    let rss_end = rss_mb(pid);
    let v = Verdict::of(&outcomes, &up);
    println!(
        "all answered after {took:.1?}; the upstream went down {} times",
        up.downs.load(Ordering::SeqCst)
    );
    println!("{}", v.summary());
    println!(
        "activator RSS: start {rss_start:.1} MB, peak {:.1} MB, end {rss_end:.1} MB (8 s after the last answer)",
        *peak.lock().unwrap()
    );
    assert!(v.clean(), "NOT CLEAN: {}", v.summary());
    println!("verdict: clean (none lost, none duplicated, none wrong)");
}
