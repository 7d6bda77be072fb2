//! Held requests reach the upstream in the order they arrived, as the upstream itself records
//! them when its handler runs, at the two kinds of server LLMs run on: an event loop (one thread
//! accepting and reading every connection, as vLLM's asyncio server does) that already holds
//! pooled keep-alive connections from the activator, and a thread per connection (as
//! llama.cpp's server does).

mod common;

use common::model::{limits, start, wait_held};
use infscale::activator::limits::Limits;
use infscale::activator::routes::RouteSpec;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// (connection number, sequence number) in the order the upstream's handler saw them.
type Record = common::recording::Arrivals;

fn seq_of(headers: &http::HeaderMap) -> Option<u64> {
    headers.get("x-seq")?.to_str().ok()?.parse().ok()
}

/// An event loop: one current-thread runtime on its own thread serves every connection, with
/// keep-alive; `/health` 200 while `ready`.
fn event_loop_upstream(ready: Arc<AtomicBool>) -> (SocketAddr, Record) {
    let record: Record = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let seen = record.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new()
                .route(
                    "/health",
                    axum::routing::get(move || {
                        let up = ready.load(Ordering::SeqCst);
                        async move {
                            if up {
                                axum::http::StatusCode::OK
                            } else {
                                axum::http::StatusCode::SERVICE_UNAVAILABLE
                            }
                        }
                    }),
                )
                .fallback(move |headers: http::HeaderMap| {
                    if let Some(n) = seq_of(&headers) {
                        seen.lock().unwrap().push((0, n));
                    }
                    async { "ok" }
                });
            let _ = axum::serve(listener, app).await;
        });
    });
    (rx.recv().unwrap(), record)
}

/// Warms the activator's pool with `warm` requests while ready, makes the upstream not ready,
/// holds `held` requests one after another, readies it, and returns the held ones' order as the
/// upstream recorded them.
async fn release_order(
    up: SocketAddr,
    ready: Arc<AtomicBool>,
    record: Record,
    held: u64,
) -> Vec<u64> {
    let spec = RouteSpec {
        health_path: Some("/health".into()),
        counts_host: Some("chat".into()),
        max_held: 1000,
        hold_timeout_seconds: 30.0,
        ..RouteSpec::to_upstream(&format!("http://{up}"))
    };
    // Probes every 50 ms when nothing is held: the upstream's readiness is seen soon.
    let act = start(
        spec,
        Limits {
            probe_idle: Duration::from_millis(50),
            ..limits()
        },
    )
    .await;
    let http = reqwest::Client::new();
    let send = |n: u64| {
        let (http, url) = (http.clone(), format!("http://{}/v1/completions", act.proxy));
        tokio::spawn(async move {
            http.post(url)
                .header("x-seq", n)
                .body("{}")
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    // Pooled connections from the activator, which an event loop reads a turn before new ones.
    let warm: Vec<_> = (1000..1016).map(send).collect();
    for w in warm {
        assert_eq!(w.await.unwrap().unwrap(), 200);
    }
    ready.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut tasks = Vec::new();
    for n in 0..held {
        tasks.push(send(n));
        wait_held(act.admin, n + 1).await;
    }
    ready.store(true, Ordering::SeqCst);
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 200);
    }
    let order: Vec<u64> = record
        .lock()
        .unwrap()
        .iter()
        .map(|(_, n)| *n)
        .filter(|n| *n < held)
        .collect();
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_loop_server_reads_the_held_requests_in_arrival_order() {
    let ready = Arc::new(AtomicBool::new(true));
    let (up, record) = event_loop_upstream(ready.clone());
    let order = release_order(up, ready, record, 60).await;
    assert_eq!(order, (0..60).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thread_per_connection_server_reads_the_held_requests_in_arrival_order() {
    let ready = Arc::new(AtomicBool::new(true));
    let (up, record) = common::recording::recording_upstream(ready.clone());
    let order = release_order(up.addr, ready, record, 60).await;
    assert_eq!(order, (0..60).collect::<Vec<_>>());
}
