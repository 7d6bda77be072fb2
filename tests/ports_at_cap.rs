//! Issue 37: a port at its connection cap still answers its probes and its owners. The old
//! listener let only a connection that never sent a byte give way at the cap, so connections
//! that had spoken kept every newcomer out for as long as their own timers allowed: keep-alive
//! requests, `/queue/watch` streams, h2 connections answering pings, a slow-loris a byte at a
//! time. Here each flood runs on loopback from other addresses (127.0.0.2 and up) against the
//! real servers, and a kubelet-like prober (a fresh connection per probe from 127.0.0.1) must be
//! answered 20 times out of 20 while it lasts. The floods are the issue's, at the default caps.

mod common;

use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// How long one probe may take: generous (the kubelet's default is 1 s) on a loaded machine.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection to `to` from 127.0.0.`from`.
async fn connect_from(from: u8, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::from([127, 0, 0, from]), 0))?;
    socket.connect(to).await
}

/// `GET path` on a fresh connection from 127.0.0.1 with `connection: close`: whether it was
/// answered 200 within [`PROBE_TIMEOUT`].
async fn probe_http(addr: SocketAddr, path: &str) -> bool {
    let probe = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let head = format!("GET {path} HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n");
        s.write_all(head.as_bytes()).await.ok()?;
        let mut all = Vec::new();
        s.read_to_end(&mut all).await.ok()?;
        Some(all.starts_with(b"HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, probe).await,
        Ok(Some(true))
    )
}

/// Twenty probes, 100 ms apart: how many were answered.
async fn twenty<F, Fut>(probe: F) -> usize
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut answered = 0;
    for _ in 0..20 {
        answered += usize::from(probe().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answered
}

/// The flood's tasks, stopped when dropped.
struct Flood {
    tasks: JoinSet<()>,
    stop: Arc<AtomicBool>,
}

impl Flood {
    fn new() -> Flood {
        Flood {
            tasks: JoinSet::new(),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tasks.abort_all();
    }
}

/// Reads from `s` until `end` has arrived (or the connection ends): false on an end or error.
async fn read_until(s: &mut TcpStream, end: &[u8]) -> bool {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
        if seen.windows(end.len()).any(|w| w == end) {
            return true;
        }
    }
}

/// `n` keep-alive clients from 127.0.0.2 asking `GET path` every 500 ms on one connection each
/// (a new one when theirs is closed), each answer ending in `end`.
fn keep_alive_flood(flood: &mut Flood, addr: SocketAddr, n: usize, path: &'static str) {
    for _ in 0..n {
        let stop = flood.stop.clone();
        flood.tasks.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut s) = connect_from(2, addr).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let head = format!("GET {path} HTTP/1.1\r\nhost: flood\r\n\r\n");
                while s.write_all(head.as_bytes()).await.is_ok()
                    && read_until(&mut s, b"ok\n").await
                {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
}

/// 64 keep-alive clients hold `serve`'s metrics port at its default cap (64): the
/// kubelet's `/healthz` failed 20/20 when every open connection had spoken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_clients_at_the_metrics_cap_leave_healthz_answered() {
    // At the default limits.
    let scaler = common::scaler::start(common::scaler::config()).await;
    let mut flood = Flood::new();
    keep_alive_flood(&mut flood, scaler.metrics, 64, "/healthz");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(flood.running());
    let answered = twenty(|| probe_http(scaler.metrics, "/healthz")).await;
    assert_eq!(
        answered, 20,
        "/healthz answered {answered}/20 under the flood"
    );
}

/// `n` `/queue/watch` streams from 127.0.0.2, every other one never read: the scaler's
/// follower stream, as many times over as the admin port's cap.
async fn watch_flood(flood: &mut Flood, admin: SocketAddr, n: usize) {
    for i in 0..n {
        let stop = flood.stop.clone();
        let Ok(mut s) = connect_from(2, admin).await else {
            continue;
        };
        flood.tasks.spawn(async move {
            let head =
                "GET /queue/watch HTTP/1.1\r\nhost: flood\r\naccept: text/event-stream\r\n\r\n";
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let mut buf = [0u8; 1024];
            while !stop.load(Ordering::Relaxed) {
                if i % 2 == 0 {
                    // Never read: the stream's bytes wait in the socket.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                } else if matches!(s.read(&mut buf).await, Ok(0) | Err(_)) {
                    return;
                }
            }
        });
    }
}

/// 1,100 `/queue/watch` streams (half read, half never) hold the activator's admin port past
/// its default cap (1,024): readiness failed 20/20 while they lasted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_at_the_admin_cap_leave_readiness_answered() {
    let up = common::model::upstream(Arc::new(AtomicBool::new(true))).await;
    // 2,200 descriptors in this process: the flood's ends and the activator's.
    let _ = infscale::edge::descriptors::raise_open_files();
    let a = common::model::activator_with(up, 100, 30.0, common::model::limits()).await;
    let mut flood = Flood::new();
    watch_flood(&mut flood, a.admin, 1100).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let answered = twenty(|| probe_http(a.admin, "/readyz")).await;
    assert_eq!(
        answered, 20,
        "/readyz answered {answered}/20 under the flood"
    );
}

/// A `/queue/watch` stream ends on its own after `--watch-max-seconds` (1 s here), whatever its
/// keep-alives: it no longer holds its connection for as long as its client likes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_stream_ends_at_its_age() {
    let up = common::model::upstream(Arc::new(AtomicBool::new(true))).await;
    let limits = infscale::activator::limits::Limits {
        watch_max_age: Duration::from_secs(1),
        watch_keep_alive: Duration::from_millis(200),
        ..common::model::limits()
    };
    let a = common::model::activator_with(up, 100, 30.0, limits).await;
    let mut s = TcpStream::connect(a.admin).await.unwrap();
    s.write_all(b"GET /queue/watch HTTP/1.1\r\nhost: scaler\r\n\r\n")
        .await
        .unwrap();
    // The chunked body's last chunk arrives within a generous bound.
    let ended = tokio::time::timeout(
        Duration::from_secs(15),
        read_until(&mut s, b"\r\n0\r\n\r\n"),
    )
    .await;
    assert_eq!(ended.ok(), Some(true), "the watch stream never ended");
}

/// `n` HTTP/2 connections from 127.0.0.2 that open no stream and answer the server's pings
/// (hyper's client does), kept until the flood stops.
async fn h2_flood(flood: &mut Flood, addr: SocketAddr, n: usize) {
    for _ in 0..n {
        let Ok(s) = connect_from(2, addr).await else {
            continue;
        };
        let Ok((sender, conn)) = hyper::client::conn::http2::handshake::<
            _,
            _,
            http_body_util::Empty<bytes::Bytes>,
        >(TokioExecutor::new(), TokioIo::new(s))
        .await
        else {
            continue;
        };
        flood.tasks.spawn(async move {
            let _sender = sender;
            let _ = conn.await;
        });
    }
}

/// 600 h2 connections answering pings hold the activator's proxy port, its caps fitted to
/// 1,024 descriptors (512): new clients were closed as they connected (1/20 served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_connections_answering_pings_at_the_proxy_cap_leave_requests_served() {
    let up = common::model::upstream(Arc::new(AtomicBool::new(true))).await;
    // The activator as started with 1,024 descriptors: its caps fitted to them.
    let limits = common::model::limits().within_descriptors(1024);
    let a = common::model::activator_with(up, 100, 30.0, limits).await;
    let mut flood = Flood::new();
    h2_flood(&mut flood, a.proxy, 600).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let proxy = a.proxy;
    let answered = twenty(|| async move {
        let client = reqwest::Client::builder()
            .timeout(PROBE_TIMEOUT)
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let r = client
            .get(format!("http://{proxy}/seq"))
            .header("x-seq", "7")
            .send()
            .await;
        match r {
            Ok(r) => r.text().await.ok().as_deref() == Some("7"),
            Err(_) => false,
        }
    })
    .await;
    assert_eq!(
        answered, 20,
        "the proxy served {answered}/20 under the flood"
    );
}

/// A gRPC health check on a new channel from 127.0.0.1, as a new KEDA channel or a gRPC probe.
async fn grpc_health(addr: SocketAddr) -> bool {
    let check = async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .ok()?
            .connect()
            .await
            .ok()?;
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
        let r = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: String::new(),
            })
            .await
            .ok()?;
        Some(
            r.into_inner().status
                == tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
        )
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, check).await,
        Ok(Some(true))
    )
}

/// 600 h2 connections answering pings hold `serve`'s gRPC port past its default cap (512):
/// 0/20 new channels were served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_connections_answering_pings_at_the_grpc_cap_leave_new_channels_served() {
    // At the default limits.
    let scaler = common::scaler::start(common::scaler::config()).await;
    let mut flood = Flood::new();
    h2_flood(&mut flood, scaler.grpc, 600).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answered = twenty(|| grpc_health(scaler.grpc)).await;
    assert_eq!(
        answered, 20,
        "new channels served {answered}/20 under the flood"
    );
}

/// `per` connections from each of 127.0.0.2..=6 that send one byte of a request head, then
/// another every second: a slow-loris from five addresses.
async fn slowloris(flood: &mut Flood, addr: SocketAddr, per: usize) {
    let mut held = Vec::new();
    for from in 2..=6u8 {
        for _ in 0..per {
            if let Ok(mut s) = connect_from(from, addr).await {
                if s.write_all(b"G").await.is_ok() {
                    held.push(s);
                }
            }
        }
    }
    let stop = flood.stop.clone();
    flood.tasks.spawn(async move {
        let head = b"ET /queue HTTP/1.1\r\nhost: x\r\n";
        let mut at = 0;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let byte = [head[at % head.len()]];
            at += 1;
            for s in &mut held {
                let _ = s.write_all(&byte).await;
            }
        }
    });
}

/// At the admin port's default cap (1,024), 5 addresses x 250 slow-loris connections (more
/// than the cap): readiness left 2/17 answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_from_five_addresses_at_the_default_cap_leaves_readiness_answered() {
    let _ = infscale::edge::descriptors::raise_open_files();
    let up = common::model::upstream(Arc::new(AtomicBool::new(true))).await;
    let a = common::model::activator_with(up, 100, 30.0, common::model::limits()).await;
    let mut flood = Flood::new();
    slowloris(&mut flood, a.admin, 250).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answered = twenty(|| probe_http(a.admin, "/readyz")).await;
    assert_eq!(
        answered, 20,
        "/readyz answered {answered}/20 under the slow-loris"
    );
}

/// An HTTP/2 preface dribbled to `serve`'s gRPC port a byte a second: each byte renewed the idle
/// span (2 s here), so it held its place for as long as it liked. A connection must now begin
/// a call within that span of its accept, whatever bytes it sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dribbled_preface_on_the_grpc_port_is_closed_without_a_call() {
    let scaler = common::scaler::start(infscale::serve::server::Config {
        limits: infscale::serve::limits::Limits {
            connection_idle: Duration::from_secs(2),
            ..Default::default()
        },
        ..common::scaler::config()
    })
    .await;
    let mut s = connect_from(2, scaler.grpc).await.unwrap();
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let started = std::time::Instant::now();
    let mut closed = false;
    for byte in preface.iter().cycle().take(20) {
        if s.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 64];
        match tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            _ => {}
        }
    }
    assert!(
        closed,
        "still open after {:?} of dribbling",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    // A real client is served meanwhile.
    assert!(grpc_health(scaler.grpc).await);
}

/// The scaler follows an activator whose `/queue/watch` ends every second (its age, 1 s here):
/// the follower reconnects each time and keeps its reading meanwhile, so a held request reads
/// as held and active throughout, never UNAVAILABLE or zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_ending_at_its_age_leaves_the_scalers_reading_whole() {
    use common::keda::{client, metrics_request, object};
    // Never ready: the request is held.
    let up = common::model::upstream(Arc::new(AtomicBool::new(false))).await;
    let limits = infscale::activator::limits::Limits {
        watch_max_age: Duration::from_secs(1),
        ..common::model::limits()
    };
    let a = common::model::activator_with(up, 100, 60.0, limits).await;
    let admin = format!("http://{}", a.admin);
    let scaler = common::scaler::start(infscale::serve::server::Config {
        allowed_activators: vec![admin.clone()],
        statics: std::collections::HashMap::from([(
            "chat".to_owned(),
            vec![common::scaler::refused_url()],
        )]),
        ..common::scaler::config()
    })
    .await;
    let mut t = common::timed::Timed::new(client(scaler.grpc).await);
    let so = object(
        "chat",
        &[
            ("deployment", "chat".into()),
            ("threshold", "2".into()),
            ("scrapeIntervalSeconds", "0.2".into()),
            ("activatorUrl", admin),
        ],
    );
    let proxy = a.proxy;
    let held = tokio::spawn(async move {
        reqwest::Client::new()
            .get(format!("http://{proxy}/seq"))
            .header("x-seq", "1")
            .send()
            .await
    });
    let req = metrics_request(&so, "infscale-queue-chat");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while t.metrics(&req).await.ok() != Some(1.0) {
        assert!(
            std::time::Instant::now() < deadline,
            "never read the held request"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Over four of the watch's ages: every answer says one held, active.
    let mut answers = Vec::new();
    for _ in 0..20 {
        answers.push((t.metrics(&req).await.ok(), t.active(&so).await.ok()));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    held.abort();
    let wrong: Vec<_> = answers
        .iter()
        .filter(|a| **a != (Some(1.0), Some(true)))
        .collect();
    assert!(
        wrong.is_empty(),
        "answers while the watch renewed: {wrong:?}"
    );
}

/// A keep-alive client asking `/healthz` every 200 ms on one connection to `serve`'s metrics
/// port kept its place for ever (each request renewed every timer). At its age (1 s here) the
/// connection is closed after the answer in progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_keep_alive_connection_is_closed_at_its_age() {
    let scaler = common::scaler::start(infscale::serve::server::Config {
        limits: infscale::serve::limits::Limits {
            connection_max_age: Duration::from_secs(1),
            ..Default::default()
        },
        ..common::scaler::config()
    })
    .await;
    let mut s = connect_from(2, scaler.metrics).await.unwrap();
    let started = std::time::Instant::now();
    let mut answered = 0;
    while started.elapsed() < Duration::from_secs(15) {
        let head = b"GET /healthz HTTP/1.1\r\nhost: flood\r\n\r\n";
        let asked = s.write_all(head).await.is_ok();
        let read = tokio::time::timeout(PROBE_TIMEOUT, read_until(&mut s, b"ok\n")).await;
        if !asked || read != Ok(true) {
            break;
        }
        answered += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(answered >= 1, "never answered");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "still open after {:?} and {answered} answers",
        started.elapsed()
    );
}
