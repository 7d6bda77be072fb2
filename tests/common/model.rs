//! A model server stand-in and the real activator in front of it, on loopback.

use axum::body::Bytes;
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use infscale::activator::limits::Limits;
use infscale::activator::routes::RouteSpec;
use infscale::activator::server::{bind, Config};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A model server stand-in: `/health` 503 until ready; `/echo` returns the body; `/seq`
/// returns the `x-seq` header; `/stream` sends five events 200 ms apart; `/v1/fail` answers
/// 500, `/v1/endless-error` 500 with a body that never ends.
pub async fn upstream(ready: Arc<AtomicBool>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route(
            "/health",
            get(move || {
                let ready = ready.clone();
                async move {
                    if ready.load(Ordering::SeqCst) {
                        (axum::http::StatusCode::OK, "ok")
                    } else {
                        (axum::http::StatusCode::SERVICE_UNAVAILABLE, "loading")
                    }
                }
            }),
        )
        .route(
            "/echo",
            post(|body: Bytes| async move { body })
                .layer(axum::extract::DefaultBodyLimit::max(32 << 20)),
        )
        .route(
            "/seq",
            get(|headers: axum::http::HeaderMap| async move {
                headers
                    .get("x-seq")
                    .map(|v| v.to_str().unwrap_or("").to_owned())
                    .unwrap_or_default()
            }),
        )
        .route(
            "/v1/chat/completions",
            post(|| async {
                let events = futures::stream::iter((0..3).map(|i| {
                    Ok::<_, std::convert::Infallible>(
                        Event::default().data(format!("{{\"token\":{i}}}")),
                    )
                }));
                Sse::new(events)
            }),
        )
        .route(
            "/v1/fail",
            post(|| async {
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    r#"{"error":{"message":"model crashed"}}"#,
                )
            }),
        )
        .route(
            "/v1/endless-error",
            post(|| async {
                // An error page that never ends: whoever reads it whole never finishes.
                let chunks = futures::stream::repeat_with(|| {
                    Ok::<_, std::convert::Infallible>(Bytes::from(vec![b'x'; 64 << 10]))
                });
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    axum::body::Body::from_stream(chunks),
                )
            }),
        )
        .route(
            "/stream",
            get(|| async {
                let events = futures::stream::unfold(0, |i| async move {
                    if i == 5 {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Some((
                        Ok::<_, std::convert::Infallible>(
                            Event::default().data(format!("token{i}")),
                        ),
                        i + 1,
                    ))
                });
                Sse::new(events)
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

pub struct Running {
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub done: tokio::task::JoinHandle<anyhow::Result<()>>,
}

pub async fn activator(upstream: SocketAddr, max_held: usize, hold_timeout: f64) -> Running {
    activator_with(upstream, max_held, hold_timeout, limits()).await
}

/// The activator with one route whose settings `adjust` changes.
pub async fn activator_route(upstream: SocketAddr, adjust: impl FnOnce(&mut RouteSpec)) -> Running {
    let mut spec = route_spec(upstream, 100, 30.0);
    adjust(&mut spec);
    start(spec, limits()).await
}

fn route_spec(upstream: SocketAddr, max_held: usize, hold_timeout: f64) -> RouteSpec {
    RouteSpec {
        health_path: Some("/health".into()),
        max_held,
        hold_timeout_seconds: hold_timeout,
        counts_host: Some("chat".into()),
        abandon_lease_seconds: 0.5,
        ..RouteSpec::to_upstream(&format!("http://{upstream}"))
    }
}

/// The activator with these client limits (and a 16 MiB body cap).
pub async fn activator_with(
    upstream: SocketAddr,
    max_held: usize,
    hold_timeout: f64,
    limits: Limits,
) -> Running {
    start(route_spec(upstream, max_held, hold_timeout), limits).await
}

/// The activator's default limits, with a 5 s drain so a test's shutdown ends soon.
pub fn limits() -> Limits {
    Limits {
        drain: Duration::from_secs(5),
        ..Limits::default()
    }
}

/// The activator with one route as `spec` says, and `limits`.
pub async fn start(spec: RouteSpec, limits: Limits) -> Running {
    let route = spec.check(0, "default").unwrap();
    let bound = bind(Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        routes: vec![route],
        reload: None,
        learn: None,
        namespace_cap: None,
        kube_api: None,
        limits,
    })
    .await
    .unwrap();
    let proxy = bound.proxy_addr().unwrap();
    let admin = bound.admin_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(bound.run(async {
        let _ = stopped.await;
    }));
    Running {
        proxy,
        admin,
        stop: Some(stop),
        done,
    }
}

/// The `chat` route's counts from the admin `/queue` endpoint.
pub async fn chat_counts(admin: SocketAddr) -> serde_json::Value {
    let v: serde_json::Value = reqwest::get(format!("http://{admin}/queue"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["chat"].clone()
}

pub async fn held(admin: SocketAddr) -> u64 {
    chat_counts(admin).await["Held"].as_u64().unwrap_or(0)
}

pub async fn wait_held(admin: SocketAddr, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while held(admin).await != n {
        assert!(Instant::now() < deadline, "held never reached {n}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
