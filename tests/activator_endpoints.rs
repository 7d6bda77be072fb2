//! A route that lists its replicas (`endpoints`, each probed on `healthPath`) sends to those that
//! answer, straight, by turns; one whose probe fails gets nothing more, and with none left
//! requests are held until one is back. What each replica served is the judge.

mod common;

use common::model::{limits, start, wait_held};
use infscale::activator::limits::Limits;
use infscale::activator::routes::RouteSpec;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A replica: `/health` 200 while `ready`, and every other path answered and counted.
struct Replica {
    addr: SocketAddr,
    ready: Arc<AtomicBool>,
    served: Arc<AtomicU32>,
}

async fn replica() -> Replica {
    let (ready, served) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (r, s) = (ready.clone(), served.clone());
    let app = axum::Router::new()
        .route(
            "/health",
            axum::routing::get(move || {
                let up = r.load(Ordering::SeqCst);
                async move {
                    if up {
                        axum::http::StatusCode::OK
                    } else {
                        axum::http::StatusCode::SERVICE_UNAVAILABLE
                    }
                }
            }),
        )
        .fallback(move || {
            s.fetch_add(1, Ordering::SeqCst);
            async { "ok" }
        });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Replica {
        addr,
        ready,
        served,
    }
}

async fn get(http: &reqwest::Client, proxy: SocketAddr) -> u16 {
    http.get(format!("http://{proxy}/v1/models"))
        .send()
        .await
        .expect("answered")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probed_endpoints_share_the_requests_and_a_failing_one_gets_none() {
    let (a, b) = (replica().await, replica().await);
    let (a_addr, b_addr) = (a.addr, b.addr);
    let spec = RouteSpec {
        health_path: Some("/health".into()),
        counts_host: Some("chat".into()),
        endpoints: vec![format!("http://{a_addr}"), format!("http://{b_addr}")],
        ..RouteSpec::to_upstream(&format!("http://{a_addr}"))
    };
    // Probes every 100 ms when nothing is held: a failing replica is out within a second.
    let act = start(
        spec,
        Limits {
            probe_idle: Duration::from_millis(100),
            ..limits()
        },
    )
    .await;
    let http = reqwest::Client::new();
    // Both answer their probes: the requests go to each by turns.
    for _ in 0..20 {
        assert_eq!(get(&http, act.proxy).await, 200);
    }
    let (sa, sb) = (
        a.served.load(Ordering::SeqCst),
        b.served.load(Ordering::SeqCst),
    );
    assert_eq!(sa + sb, 20);
    assert!(sa >= 5 && sb >= 5, "a served {sa}, b {sb}");
    // b's probe fails: after three failed probes, it gets nothing more.
    b.ready.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = b.served.load(Ordering::SeqCst);
    for _ in 0..10 {
        assert_eq!(get(&http, act.proxy).await, 200);
    }
    assert_eq!(b.served.load(Ordering::SeqCst), before);
    // Neither answers: a request is held, then served once b is back.
    a.ready.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = tokio::spawn({
        let (http, proxy) = (http.clone(), act.proxy);
        async move { get(&http, proxy).await }
    });
    wait_held(act.admin, 1).await;
    b.ready.store(true, Ordering::SeqCst);
    let status = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("released")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(b.served.load(Ordering::SeqCst), before + 1);
}
