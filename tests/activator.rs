//! `infscale activator` end to end on loopback, in front of a stand-in upstream that becomes
//! ready when the test says so.

mod common;

use axum::routing::get;
use common::model::{activator, chat_counts, held, upstream, wait_held};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_held_requests_are_released_in_arrival_order() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = activator(up, 1000, 30.0).await;
    let c = client();
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let c = c.clone();
        let url = format!("http://{}/seq", a.proxy);
        tasks.push(tokio::spawn(async move {
            let r = c
                .get(url)
                .header("x-seq", i.to_string())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let released: u64 = r.headers()["x-infscale-released"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            let held_ms: u64 = r.headers()["x-infscale-held-ms"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            (i, status, released, held_ms, r.text().await.unwrap())
        }));
        // Send the next only once this one is held, so arrival order is the loop's order.
        wait_held(a.admin, i + 1).await;
    }
    let counts = chat_counts(a.admin).await;
    assert_eq!(counts["Held"], 200);
    assert_eq!(counts["Concurrency"], 200);
    ready.store(true, Ordering::SeqCst);
    for t in tasks {
        let (i, status, released, held_ms, body) = t.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(released, i + 1, "request {i} was released {released}th");
        assert_eq!(body, i.to_string());
        assert!(held_ms > 0);
    }
    assert_eq!(held(a.admin).await, 0);
    let metrics = reqwest::get(format!("http://{}/metrics", a.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("infscale_activator_held_duration_seconds_count{route=\"chat\"} 200"),
        "{metrics}"
    );
    assert!(
        metrics.contains("infscale_activator_forwarded_total{route=\"chat\"} 200"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hold_timeout_answers_504_with_retry_after() {
    let up = upstream(Arc::new(AtomicBool::new(false))).await;
    let a = activator(up, 10, 0.5).await;
    let started = Instant::now();
    let r = client()
        .get(format!("http://{}/seq", a.proxy))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    // The hold timeout is what is tested: the 504 comes no sooner than its 0.5 s.
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(r.headers()["retry-after"], "1");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["status"], 504);
    assert_eq!(held(a.admin).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_held_new_requests_get_503_at_once() {
    let up = upstream(Arc::new(AtomicBool::new(false))).await;
    let a = activator(up, 2, 30.0).await;
    let c = client();
    let url = format!("http://{}/seq", a.proxy);
    let first = tokio::spawn(c.get(&url).send());
    let second = tokio::spawn(c.get(&url).send());
    wait_held(a.admin, 2).await;
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 503);
    // At once: answered while the two before it are still held (for up to 30 s).
    assert!(!first.is_finished() && !second.is_finished());
    assert_eq!(held(a.admin).await, 2);
    assert!(r.headers().contains_key("retry-after"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_leaves_the_queue_at_once() {
    use tokio::io::AsyncWriteExt;
    let up = upstream(Arc::new(AtomicBool::new(false))).await;
    let a = activator(up, 10, 30.0).await;
    let mut raw = tokio::net::TcpStream::connect(a.proxy).await.unwrap();
    raw.write_all(b"GET /seq HTTP/1.1\r\nhost: chat\r\n\r\n")
        .await
        .unwrap();
    wait_held(a.admin, 1).await;
    drop(raw);
    let gone = Instant::now();
    // It still counts as held for the route's abandon lease (0.5 s here), so a client that
    // retries finds the model waking; then it is gone, and counted as abandoned.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(chat_counts(a.admin).await["Held"], 1);
    wait_held(a.admin, 0).await;
    // The lease is what is tested: gone after its 0.5 s, bounded generously but far inside the
    // 30 s hold timeout that a request still counted as held would wait for.
    assert!(
        gone.elapsed() < Duration::from_secs(5),
        "left after {:?}",
        gone.elapsed()
    );
    let counts = chat_counts(a.admin).await;
    assert_eq!(counts["Concurrency"], 0);
    let metrics = reqwest::get(format!("http://{}/metrics", a.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("infscale_activator_abandoned_total{route=\"chat\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sent_events_stream_through_token_by_token() {
    let up = upstream(Arc::new(AtomicBool::new(true))).await;
    let a = activator(up, 10, 30.0).await;
    // Readiness is probed at start; give the first probe a moment.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut r = client()
        .get(format!("http://{}/stream", a.proxy))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let first = r.chunk().await.unwrap().unwrap();
    // The first token arrives before the upstream has sent the last (200 ms apart): the
    // stream is passed on token by token, not gathered.
    let first = String::from_utf8_lossy(&first).into_owned();
    assert!(first.contains("token0"), "{first:?}");
    assert!(!first.contains("token4"), "{first:?}");
    let mut rest = Vec::new();
    while let Some(chunk) = r.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert!(String::from_utf8_lossy(&rest).contains("token4"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_is_forwarded_byte_for_byte_over_http1_and_h2c() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = activator(up, 10, 30.0).await;
    let body: Vec<u8> = (0..(1 << 20))
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    // Held first, then released: the body still arrives whole.
    let c = client();
    let url = format!("http://{}/echo", a.proxy);
    let pending = tokio::spawn(c.post(&url).body(body.clone()).send());
    wait_held(a.admin, 1).await;
    ready.store(true, Ordering::SeqCst);
    let r = pending.await.unwrap().unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.bytes().await.unwrap() == body,
        "the body changed on the way"
    );
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let r = h2.post(&url).body(body.clone()).send().await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert!(r.bytes().await.unwrap() == body);
    // A declared length over the limit: 413 before any of the body is read or forwarded.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut raw = tokio::net::TcpStream::connect(a.proxy).await.unwrap();
    raw.write_all(b"POST /echo HTTP/1.1\r\nhost: chat\r\ncontent-length: 20000000\r\n\r\n")
        .await
        .unwrap();
    let mut head = vec![0u8; 64];
    let n = raw.read(&mut head).await.unwrap();
    assert!(
        String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 413"),
        "{:?}",
        String::from_utf8_lossy(&head[..n])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_held_requests() {
    let up = upstream(Arc::new(AtomicBool::new(false))).await;
    let mut a = activator(up, 10, 30.0).await;
    let pending = tokio::spawn(client().get(format!("http://{}/seq", a.proxy)).send());
    wait_held(a.admin, 1).await;
    let _ = a.stop.take().unwrap().send(());
    let r = pending.await.unwrap().unwrap();
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    tokio::time::timeout(Duration::from_secs(10), &mut a.done)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_endpoint_reports_a_held_request_at_once() {
    let up = upstream(Arc::new(AtomicBool::new(false))).await;
    let a = activator(up, 10, 30.0).await;
    let mut watch = client()
        .get(format!("http://{}/queue/watch", a.admin))
        .send()
        .await
        .unwrap();
    let first = watch.chunk().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("\"Held\":0"),
        "{first:?}"
    );
    let sent = Instant::now();
    let _pending = tokio::spawn(client().get(format!("http://{}/seq", a.proxy)).send());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let chunk = tokio::time::timeout_at(deadline.into(), watch.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if String::from_utf8_lossy(&chunk).contains("\"Held\":1") {
            break;
        }
    }
    // Promptness is what is tested: the watch reports the change as it happens, not on a
    // later tick; the bound stays tight for that reason.
    assert!(
        sent.elapsed() < Duration::from_millis(100),
        "{:?}",
        sent.elapsed()
    );
}

/// The watch stream as the scaler reads it: `text/event-stream`, the counts at once, decoded by
/// the scaler's own decoder, and a keep-alive comment once nothing changed for the interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_stream_decodes_and_keeps_alive() {
    use infscale_core::observe::counts::wire::{Decoder, KEEP_ALIVE};
    let up = upstream(Arc::new(AtomicBool::new(false))).await;
    let limits = infscale::activator::limits::Limits {
        watch_keep_alive: Duration::from_millis(200),
        ..common::model::limits()
    };
    let a = common::model::activator_with(up, 10, 30.0, limits).await;
    let mut watch = client()
        .get(format!("http://{}/queue/watch", a.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(watch.headers()["content-type"], "text/event-stream");
    assert_eq!(watch.headers()["cache-control"], "no-cache");
    let first = watch.chunk().await.unwrap().unwrap();
    let events: Vec<_> = Decoder::new(1 << 16).feed(&first).collect();
    assert_eq!(events.len(), 1, "{first:?}");
    assert_eq!(events[0].as_ref().unwrap()["chat"].held, Some(0));
    let quiet = Instant::now();
    let next = tokio::time::timeout(Duration::from_secs(5), watch.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(&next[..], KEEP_ALIVE);
    // The keep-alive interval (0.2 s) is what is tested; the bound is ten times it.
    assert!(
        quiet.elapsed() < Duration::from_secs(2),
        "{:?}",
        quiet.elapsed()
    );
}

/// An upstream that answers `/health` and `/seq` on `addr` until told to stop, then closes its
/// connections too (as a pod that went away).
async fn stoppable_upstream(
    addr: SocketAddr,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let app = axum::Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/seq", get(|| async { "served" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
    });
    (stop, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_upstream_refuses_is_held_until_it_is_back() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (stop, first) = stoppable_upstream(addr).await;
    let a = activator(addr, 10, 30.0).await;
    let url = format!("http://{}/seq", a.proxy);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !matches!(client().get(&url).send().await, Ok(r) if r.status() == 200) {
        assert!(Instant::now() < deadline, "the route never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The last replica goes away while the route still counts as ready.
    stop.send(()).unwrap();
    first.await.unwrap();
    let pending = tokio::spawn(async move { client().get(&url).send().await.unwrap() });
    wait_held(a.admin, 1).await;
    // It comes back on the same address: the held request goes through.
    let (_stop, _second) = stoppable_upstream(addr).await;
    let r = pending.await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("x-infscale-released"));
    assert_eq!(r.text().await.unwrap(), "served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn held_requests_reach_the_upstream_in_arrival_order() {
    let ready = Arc::new(AtomicBool::new(false));
    let (up, seen) = common::recording::recording_upstream(ready.clone());
    let a = activator(up.addr, 1000, 30.0).await;
    let c = client();
    let send = |i: u64| {
        let c = c.clone();
        let url = format!("http://{}/seq", a.proxy);
        tokio::spawn(async move {
            c.get(url)
                .header("x-seq", i.to_string())
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        tasks.push(send(i));
        // The next only once this one is held, so arrival order is the loop's order.
        wait_held(a.admin, i + 1).await;
    }
    ready.store(true, Ordering::SeqCst);
    // More requests while the release is still going: they come after every held one.
    while seen.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for i in 200..220u64 {
        tasks.push(send(i));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let seen: Vec<u64> = seen.into_iter().map(|(_, seq)| seq).collect();
    assert_eq!(seen.len(), 220);
    let held: Vec<u64> = seen.iter().copied().filter(|s| *s < 200).collect();
    assert_eq!(
        held,
        (0..200).collect::<Vec<_>>(),
        "held requests out of order"
    );
    let last_held = seen.iter().rposition(|s| *s < 200).unwrap();
    let late_before_last_held = seen[..last_held].iter().filter(|s| **s >= 200).count();
    assert_eq!(
        late_before_last_held, 0,
        "a request that arrived during the release overtook a held one: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_stream_is_kept_alive_then_spliced() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = common::model::activator_route(up, |r| r.keep_alive_seconds = Some(1.0)).await;
    // Not streaming: held, never answered early.
    let plain = tokio::spawn(
        client()
            .post(format!("http://{}/echo", a.proxy))
            .body(r#"{"stream":false}"#)
            .send(),
    );
    wait_held(a.admin, 1).await;
    let body = r#"{"model":"m","stream":true,"messages":[]}"#;
    let r = client()
        .post(format!("http://{}/v1/chat/completions", a.proxy))
        .body(body)
        .send()
        .await
        .unwrap();
    // Answered at once, while held: the upstream is made ready only below, after this answer.
    assert_eq!(r.status(), 200);
    assert!(!ready.load(Ordering::SeqCst));
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let flip = {
        let ready = ready.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            ready.store(true, Ordering::SeqCst);
        })
    };
    let text = r.text().await.unwrap();
    flip.await.unwrap();
    let comments = text.matches(": waiting for a replica").count();
    assert!(comments >= 2, "{comments} comments: {text:?}");
    let first_token = text.find("data: {\"token\":0}").expect("no token");
    assert!(text[..first_token].matches(": waiting").count() >= 2);
    assert!(text.ends_with("data: {\"token\":2}\n\n"), "{text:?}");
    let plain = plain.await.unwrap().unwrap();
    assert_eq!(plain.status(), 200);
    assert_eq!(plain.text().await.unwrap(), r#"{"stream":false}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstream_error_after_the_early_answer_is_one_error_event() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = common::model::activator_route(up, |r| r.keep_alive_seconds = Some(0.2)).await;
    let pending = tokio::spawn(
        client()
            .post(format!("http://{}/v1/fail", a.proxy))
            .body(r#"{"stream":true}"#)
            .send(),
    );
    wait_held(a.admin, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    ready.store(true, Ordering::SeqCst);
    let r = pending.await.unwrap().unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| e.starts_with("data:"))
        .collect();
    assert_eq!(events.len(), 1, "{text:?}");
    let error: serde_json::Value =
        serde_json::from_str(events[0].trim_start_matches("data: ")).unwrap();
    assert_eq!(error["error"]["message"], "model crashed");
    assert_eq!(error["error"]["code"], 500);
}
