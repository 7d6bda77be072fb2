//! Issue 37: the activator's body budget shared fairly, and what an upstream may make it do.
//! Each test is a finding that held on the code before: 8 x 16 MiB bodies held at one route
//! made every POST on every route 503; a body one byte short held its share for the whole body
//! timeout; an upstream that never sent a head kept its client waiting forever; a POST the
//! upstream read and then dropped was sent to it again; an upstream's `x-infscale-activator`
//! reached the client; a route leading back to the activator looped hundreds of times. All on
//! loopback, the stand-ins started and stopped by each test.

mod common;

use common::http::read_head;
use common::loopback::accept;
use common::model::upstream;
use infscale::activator::limits::Limits;
use infscale::activator::routes::RouteSpec;
use infscale::activator::server::{bind, Config};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The activator with these routes and limits; its proxy address, and the stop that ends it.
async fn start(
    routes: Vec<RouteSpec>,
    limits: Limits,
    listen: SocketAddr,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let routes = routes
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.check(i, "default").unwrap())
        .collect();
    let bound = bind(Config {
        listen,
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        routes,
        reload: None,
        learn: None,
        namespace_cap: None,
        kube_api: None,
        limits,
    })
    .await
    .unwrap();
    let proxy = bound.proxy_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.run(async {
        let _ = stopped.await;
    }));
    (proxy, stop)
}

fn route(host: &str, upstream: &str, health: Option<&str>) -> RouteSpec {
    RouteSpec {
        host: Some(host.to_owned()),
        health_path: health.map(str::to_owned),
        counts_host: Some(host.to_owned()),
        hold_timeout_seconds: 60.0,
        ..RouteSpec::to_upstream(upstream)
    }
}

fn limits() -> Limits {
    Limits {
        drain: Duration::from_secs(2),
        ..Limits::default()
    }
}

/// A client whose connections come from `from` (127.0.0.0/8 is all loopback).
fn client_from(from: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(from))
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bodies_held_at_one_route_leave_the_other_routes_their_share() {
    let asleep = upstream(Arc::new(AtomicBool::new(false))).await;
    let awake = upstream(Arc::new(AtomicBool::new(true))).await;
    let (proxy, _stop) = start(
        vec![
            route("a", &format!("http://{asleep}"), Some("/health")),
            route("b", &format!("http://{awake}"), Some("/health")),
        ],
        limits(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    // Eight 16 MiB bodies, from eight addresses, held at route a while its model is at zero:
    // the whole 128 MiB budget.
    let big: Vec<_> = (0..8u8)
        .map(|i| {
            let c = client_from([127, 0, 0, 20 + i]);
            let url = format!("http://{proxy}/echo");
            tokio::spawn(async move {
                c.post(url)
                    .header("host", "a")
                    .body(vec![b'x'; 16 << 20])
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
            })
        })
        .collect();
    // Time for them all to arrive (the held ones stay held for the 60 s hold timeout).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = client_from([127, 0, 0, 40])
        .post(format!("http://{proxy}/echo"))
        .header("host", "b")
        .body("to b")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        200,
        "a POST to route b while a's bodies are held"
    );
    assert_eq!(r.text().await.unwrap(), "to b");
    let refused = big.iter().filter(|t| t.is_finished()).count();
    assert!(
        refused >= 4,
        "route a kept to half the budget: {refused} of 8 refused"
    );
    for t in big {
        t.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_one_byte_short_gives_its_share_back_within_the_body_idle() {
    let awake = upstream(Arc::new(AtomicBool::new(true))).await;
    let (proxy, _stop) = start(
        vec![route("chat", &format!("http://{awake}"), Some("/health"))],
        Limits {
            body_budget: 2 << 20,
            body_idle: Duration::from_secs(1),
            body_timeout: Duration::from_secs(60),
            ..limits()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    // Two bodies one byte short, from two addresses, take the whole 2 MiB budget.
    let mut short = Vec::new();
    for i in 0..2u8 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::from(([127, 0, 0, 50 + i], 0)))
            .unwrap();
        let mut s = socket.connect(proxy).await.unwrap();
        let body = vec![b'x'; 1 << 20];
        let head = format!(
            "POST /echo HTTP/1.1\r\nhost: chat\r\ncontent-length: {}\r\n\r\n",
            body.len() + 1
        );
        tokio::io::AsyncWriteExt::write_all(&mut s, head.as_bytes())
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut s, &body)
            .await
            .unwrap();
        short.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = client_from([127, 0, 0, 60]);
    let send = || {
        c.post(format!("http://{proxy}/echo"))
            .header("host", "chat")
            .body(vec![b'y'; 64 << 10])
            .send()
    };
    let first = send().await.unwrap().status();
    assert_eq!(first, 503, "the short bodies hold the budget at first");
    // Within the body idle (1 s) and a generous margin, not the 60 s body timeout.
    let started = Instant::now();
    loop {
        let status = send().await.unwrap().status();
        if status == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "still {status} after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The stalled clients were told why.
    for mut s in short {
        let mut answer = vec![0u8; 256];
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut s, &mut answer),
        )
        .await
        .unwrap()
        .unwrap_or(0);
        let text = String::from_utf8_lossy(&answer[..n]);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    }
}

/// Answers a health probe (200, the connection closed) and says so, else leaves it.
fn health(s: &mut std::net::TcpStream, head: &common::http::RequestHead) -> bool {
    if head.target != "/health" {
        return false;
    }
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
    true
}

/// An upstream that reads each request and never answers.
fn silent_upstream() -> common::loopback::Server {
    accept("127.0.0.1:0", Duration::from_secs(60), |mut s, _, stop| {
        match read_head(&mut s) {
            Some(head) if health(&mut s, &head) => return,
            _ => {}
        }
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstream_that_never_sends_its_head_is_answered_504_in_time() {
    let up = silent_upstream();
    let (proxy, _stop) = start(
        vec![route("chat", &up.url(""), Some("/health"))],
        Limits {
            upstream_head_timeout: Duration::from_secs(1),
            ..limits()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let started = Instant::now();
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
        .post(format!("http://{proxy}/v1/completions"))
        .header("host", "chat")
        .body(r#"{"prompt":"hi"}"#)
        .send()
        .await
        .expect("answered before the client's own 20 s timeout");
    assert_eq!(r.status(), 504);
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_post_the_upstream_read_and_dropped_reaches_it_exactly_once() {
    // Each connection: its first request answered (keep-alive), the next read whole and the
    // connection dropped without a byte of answer.
    let seen = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        Vec<u8>,
        usize,
    >::new()));
    let counted = seen.clone();
    let up = accept(
        "127.0.0.1:0",
        Duration::from_secs(60),
        move |mut s, _, _| {
            let mut answered = false;
            while let Some(head) = read_head(&mut s) {
                if health(&mut s, &head) {
                    return;
                }
                *counted.lock().unwrap().entry(head.body).or_default() += 1;
                if answered {
                    return;
                }
                answered = true;
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            }
        },
    );
    let (proxy, _stop) = start(
        vec![route("chat", &up.url(""), Some("/health"))],
        limits(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let c = reqwest::Client::new();
    let mut statuses = Vec::new();
    for i in 0..6 {
        let r = c
            .post(format!("http://{proxy}/v1/completions"))
            .header("host", "chat")
            .body(format!("completion {i}"))
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = seen.lock().unwrap().clone();
    for i in 0..6 {
        let n = seen.get(format!("completion {i}").as_bytes()).copied();
        assert_eq!(
            n,
            Some(1),
            "completion {i} reached the upstream once: {statuses:?}"
        );
    }
    assert!(
        statuses.contains(&502),
        "a dropped completion is answered 502, not sent again: {statuses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstreams_activator_headers_never_reach_the_client() {
    let up = accept("127.0.0.1:0", Duration::from_secs(60), |mut s, _, _| {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        if !health(&mut s, &head) {
            let _ = s.write_all(
                b"HTTP/1.1 204 No Content\r\nx-infscale-activator: 1\r\nx-infscale-counts: chat\r\n\
                  x-infscale-model: default/chat\r\nx-other: kept\r\nconnection: close\r\n\r\n",
            );
        }
    });
    let (proxy, _stop) = start(
        vec![route("chat", &up.url(""), Some("/health"))],
        limits(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let r = reqwest::Client::new()
        .get(format!("http://{proxy}/"))
        .header("host", "chat")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    // (The activator's own x-infscale-held-ms and -released say the request was held.)
    let forged: Vec<_> = [
        "x-infscale-activator",
        "x-infscale-counts",
        "x-infscale-model",
    ]
    .into_iter()
    .filter(|k| r.headers().contains_key(*k))
    .collect();
    assert!(forged.is_empty(), "{forged:?}");
    assert_eq!(r.headers()["x-other"], "kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_route_back_to_the_activator_is_answered_508_after_a_few_hops() {
    // The activator's own address, taken before it binds it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen: SocketAddr = ([127, 0, 0, 1], port).into();
    // Every request to the activator goes back to it; only its health probe (which arrives
    // with the upstream's own host) goes on to a model that answers.
    let model = upstream(Arc::new(AtomicBool::new(true))).await;
    let probes = RouteSpec {
        path_prefix: Some("/health".into()),
        ..route(
            &format!("127.0.0.1:{port}"),
            &format!("http://{model}"),
            Some("/health"),
        )
    };
    let looping = RouteSpec {
        host: None,
        ..route("chat", &format!("http://127.0.0.1:{port}"), Some("/health"))
    };
    let (proxy, _stop) = start(vec![probes, looping], limits(), listen).await;
    assert_eq!(proxy, listen);
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
        .get(format!("http://{proxy}/v1/models"))
        .header("host", "chat")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 508);
    let _ = r.text().await;
    // A client that sends a forged count is refused at once.
    let r = reqwest::Client::new()
        .get(format!("http://{proxy}/v1/models"))
        .header("host", "chat")
        .header("x-infscale-hops", "9")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 508);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_written_to_an_upstream_that_never_answers_gives_its_share_back() {
    let silent = silent_upstream();
    let awake = upstream(Arc::new(AtomicBool::new(true))).await;
    let (proxy, _stop) = start(
        vec![
            route("a", &silent.url(""), Some("/health")),
            route("b", &format!("http://{awake}"), Some("/health")),
        ],
        Limits {
            body_budget: 1 << 20,
            ..limits()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    // 700 KiB sent to route a, whose upstream reads it and never answers (the head deadline is
    // 300 s): it used to keep its share of the 1 MiB budget for as long as it waited.
    let waiting = {
        let c = client_from([127, 0, 0, 70]);
        let url = format!("http://{proxy}/echo");
        tokio::spawn(async move {
            c.post(url)
                .header("host", "a")
                .body(vec![b'x'; 700 << 10])
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !waiting.is_finished(),
        "route a's upstream has not answered"
    );
    let r = client_from([127, 0, 0, 71])
        .post(format!("http://{proxy}/echo"))
        .header("host", "b")
        .body(vec![b'y'; 700 << 10])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the written body gave its share back");
    waiting.abort();
}
