//! Security review: the bounds on what a peer can make `serve` and the activator hold or wait
//! for. A pod's page past `max_page_bytes`, a pod's response head of thousands of headers, and a
//! pod that drips its page past the scrape timeout are each an unread replica (never zero, never
//! idle) and GetMetrics still answers within KEDA's 3 s; the activator answers a request head of
//! a megabyte and a body past `max_body` with an error status, not a forward, and closes a head
//! that never ends at its header timeout.

mod common;

use common::http::serve as http_serve;
use common::keda::{client, metrics_request, object};
use common::model::{activator_with, upstream};
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::{config, start};
use infscale::serve::limits::Limits;
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pod answering 200 with a head of `n` headers, then an idle page (read, it would say idle).
fn many_headers(n: usize) -> common::http::Server {
    http_serve(
        "127.0.0.1:0",
        Duration::from_secs(60),
        move |mut s, _, _| {
            let page = vllm_running(0);
            let mut head = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n");
            for i in 0..n {
                head.push_str(&format!("x-pad-{i}: {}\r\n", "a".repeat(64)));
            }
            head.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                page.len()
            ));
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&page);
        },
    )
}

/// A pod that sends an idle page one byte every 200 ms (read, it would say idle).
fn drip() -> common::http::Server {
    http_serve(
        "127.0.0.1:0",
        Duration::from_secs(60),
        move |mut s, _, stop| {
            let page = vllm_running(0);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                page.len()
            );
            let _ = s.write_all(head.as_bytes());
            for b in page {
                if stop.load(std::sync::atomic::Ordering::SeqCst) || s.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_pages_heads_and_drips_are_unread_and_keda_is_answered_in_time() {
    let good = pod("127.0.0.1:0", Behaviour::Page(vllm_running(0)));
    let huge = pod("127.0.0.1:0", Behaviour::Huge(4 << 20));
    let headers = many_headers(5000);
    let dripping = drip();
    let mut statics = HashMap::new();
    statics.insert("huge".to_owned(), vec![good.url(), huge.url()]);
    statics.insert(
        "headers".to_owned(),
        vec![good.url(), headers.url("/metrics")],
    );
    statics.insert(
        "drip".to_owned(),
        vec![good.url(), dripping.url("/metrics")],
    );
    let running = start(Config {
        statics,
        limits: Limits {
            max_page_bytes: 64 << 10,
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    for name in ["huge", "headers", "drip"] {
        let so = object(
            name,
            &[
                ("deployment", name.to_owned()),
                ("threshold", "4".to_owned()),
                ("scrapeIntervalSeconds", "0.5".to_owned()),
                ("scrapeTimeoutSeconds", "1".to_owned()),
            ],
        );
        let req = metrics_request(&so, &format!("infscale-queue-{name}"));
        // The first call starts the collector; after a few scrape rounds, every answer within
        // 3 s, never idle, never zero.
        let _ = c.get_metrics(req.clone()).await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        for _ in 0..5 {
            let asked = Instant::now();
            let value = c.get_metrics(req.clone()).await;
            let active = c.is_active(so.clone()).await;
            let took = asked.elapsed();
            // KEDA's 3 s deadline is what is tested.
            assert!(took < Duration::from_secs(3), "{name}: {took:?}");
            if let Ok(v) = value {
                let v = v.into_inner().metric_values[0].metric_value_float;
                assert!(v > 0.0, "{name}: the unread replica read as zero");
            }
            let active = active.expect("IsActive answers").into_inner().result;
            assert!(active, "{name}: idle with a replica unread");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    drop(running);
}

/// Sends `head` (and `body`) on a fresh connection; the status line's code, within 10 s.
fn status_of(addr: std::net::SocketAddr, head: &[u8], body: &[u8]) -> Option<u16> {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(10))).ok()?;
    let _ = s.write_all(head);
    let _ = s.write_all(body);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(2).any(|w| w == b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activator_refuses_a_megabyte_head_and_a_body_past_its_limit() {
    let ready = Arc::new(AtomicBool::new(true));
    let up = upstream(ready).await;
    let a = activator_with(
        up,
        100,
        30.0,
        infscale::activator::limits::Limits {
            max_body: 1 << 20,
            ..common::model::limits()
        },
    )
    .await;
    let addr = a.proxy;
    let answers = tokio::task::spawn_blocking(move || {
        let mut head = String::from("GET /seq HTTP/1.1\r\nhost: chat\r\n");
        for i in 0..16_000 {
            head.push_str(&format!("x-pad-{i}: {}\r\n", "a".repeat(48)));
        }
        head.push_str("\r\n");
        let big_head = status_of(addr, head.as_bytes(), b"");
        let body = vec![b'x'; 2 << 20];
        let post = format!(
            "POST /seq HTTP/1.1\r\nhost: chat\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let big_body = status_of(addr, post.as_bytes(), &body);
        let ok = status_of(addr, b"GET /seq HTTP/1.1\r\nhost: chat\r\nx-seq: 1\r\n\r\n", b"");
        (big_head, big_body, ok)
    })
    .await
    .expect("client thread");
    // A head of a megabyte: an error status, or the connection closed; never forwarded.
    assert!(
        answers.0.is_none_or(|c| c == 431 || c == 400),
        "megabyte head: {:?}",
        answers.0
    );
    assert_eq!(answers.1, Some(413), "a 2 MiB body past the 1 MiB limit");
    assert_eq!(answers.2, Some(200), "an ordinary request after them");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activator_closes_a_head_that_never_ends_after_its_header_timeout() {
    let ready = Arc::new(AtomicBool::new(true));
    let up = upstream(ready).await;
    let a = activator_with(
        up,
        100,
        30.0,
        infscale::activator::limits::Limits {
            header_timeout: Duration::from_secs(1),
            ..common::model::limits()
        },
    )
    .await;
    let addr = a.proxy;
    let closed_after = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(b"GET /seq HTTP/1.1\r\nhost: chat\r\nx-slow: ")
            .expect("write");
        s.set_read_timeout(Some(Duration::from_secs(15)))
            .expect("timeout");
        let began = Instant::now();
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return began.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("client thread");
    // Closed at the 1 s bound (generous above it for a busy machine), long before 15 s.
    assert!(
        closed_after >= Duration::from_millis(900) && closed_after < Duration::from_secs(5),
        "a never-ending head was closed after {closed_after:?}"
    );
}
