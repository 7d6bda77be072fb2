//! The activator's bounds against what a hostile client can promise or keep open, on loopback,
//! asserted as an ordinary client sees them: request heads that promise bodies they never send
//! reserve nothing, idle HTTP/2 connections are closed and do not fill the connection cap, and
//! one client address cannot take every connection.

mod common;

use common::model::{activator_with, upstream};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use infscale::activator::limits::Limits;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

fn limits() -> Limits {
    Limits {
        header_timeout: Duration::from_secs(1),
        ..common::model::limits()
    }
}

async fn echo(proxy: std::net::SocketAddr, body: &str) -> (u16, String) {
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .post(format!("http://{proxy}/echo"))
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Eight connections each send only a head declaring a 16 MiB body (the whole 128 MiB budget,
/// promised): an ordinary POST with a body is answered at once all the same. It was refused 503
/// for the body timeout (60 s) when a declared length was reserved up front.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heads_that_promise_the_whole_budget_reserve_nothing() {
    let up = upstream(Arc::new(AtomicBool::new(true))).await;
    let a = activator_with(up, 100, 30.0, common::model::limits()).await;
    let mut promises = Vec::new();
    for _ in 0..8 {
        let mut s = TcpStream::connect(a.proxy).await.unwrap();
        s.write_all(b"POST /echo HTTP/1.1\r\nhost: chat\r\ncontent-length: 16777216\r\n\r\n")
            .await
            .unwrap();
        promises.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(echo(a.proxy, "hello").await, (200, "hello".to_owned()));
    drop(promises);
}

/// Idle HTTP/2 connections (no stream open; their pings answered) fill the connection cap
/// unless closed: twenty of them against a cap of twenty are each shut down after the idle
/// limit (1 s here), and an ordinary request is then answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_http2_connections_are_closed_and_free_the_cap() {
    let up = upstream(Arc::new(AtomicBool::new(true))).await;
    let lim = Limits {
        max_connections: 20,
        ..limits()
    };
    let a = activator_with(up, 100, 30.0, lim).await;
    let mut drivers = Vec::new();
    for _ in 0..20 {
        let io = TokioIo::new(TcpStream::connect(a.proxy).await.unwrap());
        let (send, conn) = hyper::client::conn::http2::handshake::<_, _, Empty<bytes::Bytes>>(
            TokioExecutor::new(),
            io,
        )
        .await
        .unwrap();
        drivers.push((send, tokio::spawn(conn)));
    }
    // One request on the first shows the connections are served.
    let (send, _) = &mut drivers[0];
    let req = http::Request::get(format!("http://{}/seq", a.proxy))
        .header("x-seq", "1")
        .body(Empty::new())
        .unwrap();
    let r = send.send_request(req).await.unwrap();
    assert_eq!(r.into_body().collect().await.unwrap().to_bytes(), "1");
    let started = Instant::now();
    for (_, driver) in drivers {
        tokio::time::timeout(Duration::from_secs(10), driver)
            .await
            .expect("an idle HTTP/2 connection was not closed")
            .unwrap()
            .ok();
    }
    let took = started.elapsed();
    // The idle timeout is what is tested, bounded generously.
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(echo(a.proxy, "after").await, (200, "after".to_owned()));
    eprintln!("20 idle HTTP/2 connections closed within {took:?}");
}

/// One client address opening connections until refused gets at most its share; a client on
/// another address is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_client_address_cannot_take_every_connection() {
    let up = upstream(Arc::new(AtomicBool::new(true))).await;
    let lim = Limits {
        max_connections: 40,
        max_connections_per_client: 10,
        header_timeout: Duration::from_secs(30),
        ..limits()
    };
    let a = activator_with(up, 100, 30.0, lim).await;
    // Forty connections from 127.0.0.1, each with a head begun: ten are kept, thirty closed.
    let mut kept = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(a.proxy).await.unwrap();
        let _ = s.write_all(b"GET /seq HTTP/1.1\r\nhost: chat\r\n").await;
        kept.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut open = 0;
    for s in &kept {
        let mut b = [0u8; 1];
        match s.try_read(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => open += 1,
            _ => {}
        }
    }
    assert_eq!(open, 10, "connections kept from one address");
    // Another address is served.
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let stream = socket.connect(a.proxy).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<bytes::Bytes>>(TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("/seq")
        .header("host", "chat")
        .header("x-seq", "2")
        .body(Empty::new())
        .unwrap();
    let r = send.send_request(req).await.unwrap();
    assert_eq!(r.into_body().collect().await.unwrap().to_bytes(), "2");
}

/// A release slot frees when the answer's head arrives, not when the answer ends: with two
/// slots, two held one-second streams no longer keep five held quick requests waiting until
/// they end (a wake used to serve the first `releaseConcurrency` and make everyone else wait
/// 11.4 s behind 10 s streams).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_slot_frees_at_the_head_not_at_the_end() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = common::model::activator_route(up, |r| r.release_concurrency = 2).await;
    let c = reqwest::Client::new();
    let streams: Vec<_> = (0..2)
        .map(|_| {
            let r = c.get(format!("http://{}/stream", a.proxy)).send();
            tokio::spawn(async move {
                let text = r.await.unwrap().text().await.unwrap();
                assert_eq!(text.matches("data:").count(), 5);
                Instant::now()
            })
        })
        .collect();
    common::model::wait_held(a.admin, 2).await;
    let quick: Vec<_> = (0..5)
        .map(|i| {
            let r = c
                .get(format!("http://{}/seq", a.proxy))
                .header("x-seq", i.to_string())
                .send();
            tokio::spawn(async move {
                assert_eq!(r.await.unwrap().text().await.unwrap(), i.to_string());
                Instant::now()
            })
        })
        .collect();
    common::model::wait_held(a.admin, 7).await;
    ready.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut quick_done = Vec::new();
    for q in quick {
        quick_done.push(q.await.unwrap());
    }
    let mut streams_done = Vec::new();
    for s in streams {
        streams_done.push(s.await.unwrap());
    }
    let first_stream_end = streams_done.iter().min().copied().unwrap();
    let last_quick = quick_done.iter().max().copied().unwrap();
    assert!(
        last_quick < first_stream_end,
        "the quick requests waited for the streams to end"
    );
}

/// A held stream whose upstream answers an error with a body that never ends gets its one
/// error event: only the start of an error body is read (a 500 with a 1 GiB body took the
/// activator to 2,050 MB when it was read whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endless_error_body_is_not_read_whole() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = common::model::activator_route(up, |r| r.keep_alive_seconds = Some(0.2)).await;
    let pending = tokio::spawn(
        reqwest::Client::new()
            .post(format!("http://{}/v1/endless-error", a.proxy))
            .body(r#"{"stream":true}"#)
            .send(),
    );
    common::model::wait_held(a.admin, 1).await;
    ready.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = pending.await.unwrap().unwrap();
    let text = tokio::time::timeout(Duration::from_secs(20), r.text())
        .await
        .expect("the error event came")
        .unwrap();
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| e.starts_with("data:"))
        .collect();
    assert_eq!(events.len(), 1, "{}", &text[..text.len().min(300)]);
    let error: serde_json::Value =
        serde_json::from_str(events[0].trim_start_matches("data: ")).unwrap();
    assert_eq!(error["error"]["code"], 500);
}

/// Heads a proxy must not guess about: CONNECT is answered 405 (it was forwarded and the
/// client got no answer), two Host headers 400, and a Host that disagrees with the request's
/// authority 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connect_duplicate_hosts_and_disagreeing_authorities_are_refused() {
    let up = upstream(Arc::new(AtomicBool::new(true))).await;
    let a = activator_with(up, 100, 30.0, limits()).await;
    for (head, status) in [
        ("CONNECT chat:443 HTTP/1.1\r\nhost: chat:443\r\n\r\n", "405"),
        (
            "GET /seq HTTP/1.1\r\nhost: chat\r\nhost: other\r\n\r\n",
            "400",
        ),
        (
            "GET http://elsewhere/seq HTTP/1.1\r\nhost: chat\r\n\r\n",
            "400",
        ),
        ("GET /seq HTTP/1.1\r\nhost: chat\r\nx-seq: 3\r\n\r\n", "200"),
    ] {
        let mut s = TcpStream::connect(a.proxy).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let mut got = vec![0u8; 12];
        tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read_exact(&mut s, &mut got),
        )
        .await
        .expect("an answer")
        .unwrap();
        let got = String::from_utf8_lossy(&got).into_owned();
        assert_eq!(&got[9..12], status, "{head:?} answered {got:?}");
    }
}

/// A client that leaves while its streamed request is held (answered early, keep-alive on) is
/// not forwarded at the wake: 20 such clients gone, none reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn held_streams_whose_clients_left_are_not_forwarded() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = common::model::activator_route(up, |r| r.keep_alive_seconds = Some(30.0)).await;
    let mut gone = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(a.proxy).await.unwrap();
        let body = r#"{"stream":true}"#;
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: chat\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        gone.push(s);
    }
    common::model::wait_held(a.admin, 20).await;
    drop(gone);
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::model::held(a.admin).await > 0 {
        assert!(Instant::now() < deadline, "holds of clients gone are kept");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// HTTP/2 streams whose flow-control window stays at zero take nothing of their answers and
/// keep nothing busy: with a 1 s client stall, 16 such streams (on one connection, answers
/// streaming from the upstream) stop counting as in flight within seconds, and an ordinary
/// request is answered meanwhile. They used to escape both the client stall and the upstream
/// idle limit, holding their upstream connections and their places for as long as they liked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zero_window_streams_are_given_up_after_the_client_stall() {
    let up = upstream(Arc::new(AtomicBool::new(true))).await;
    let lim = Limits {
        client_stall: Duration::from_secs(1),
        ..limits()
    };
    let a = activator_with(up, 100, 30.0, lim).await;
    let io = TokioIo::new(TcpStream::connect(a.proxy).await.unwrap());
    let (mut send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(0)
        .initial_connection_window_size(65_535)
        .handshake::<_, Empty<bytes::Bytes>>(io)
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut heads = Vec::new();
    for _ in 0..16 {
        let req = http::Request::get(format!("http://{}/stream", a.proxy))
            .body(Empty::new())
            .unwrap();
        let r = send.send_request(req).await.unwrap();
        assert_eq!(r.status(), 200);
        heads.push(r); // held, never read
    }
    let busy = common::model::chat_counts(a.admin).await["Concurrency"]
        .as_u64()
        .unwrap();
    assert!(busy >= 16, "the streams are in flight: {busy}");
    assert_eq!(
        echo(a.proxy, "meanwhile").await,
        (200, "meanwhile".to_owned())
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = common::model::chat_counts(a.admin).await["Concurrency"]
            .as_u64()
            .unwrap();
        if c == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{c} zero-window streams still in flight"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(heads);
}

/// Clients that connect and leave while the model is at zero leave a lease on the held count
/// (the scaler still sees their demand for `abandonLeaseSeconds`), but not a place: with
/// `maxHeld` 5, five abandoned holds do not get the next real client a 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn abandoned_holds_do_not_take_real_clients_places() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = common::model::activator_route(up, |r| {
        r.max_held = 5;
        r.abandon_lease_seconds = 60.0;
    })
    .await;
    for i in 0..5 {
        let mut s = TcpStream::connect(a.proxy).await.unwrap();
        s.write_all(b"GET /seq HTTP/1.1\r\nhost: chat\r\nx-seq: 0\r\n\r\n")
            .await
            .unwrap();
        common::model::wait_held(a.admin, i + 1).await;
        drop(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = common::model::held(a.admin).await;
    assert_eq!(held, 5, "the leases keep the count the scaler sees");
    let real = tokio::spawn(
        reqwest::Client::new()
            .get(format!("http://{}/seq", a.proxy))
            .header("x-seq", "9")
            .send(),
    );
    common::model::wait_held(a.admin, 6).await;
    ready.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = real.await.unwrap().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "9");
}

/// The admin port (`/queue`, what the scaler follows) had no timeout and no cap: under a
/// 1,024-descriptor limit, 1,100 idle connections made `/queue` and the proxy port unreachable
/// alike. The real binary under `ulimit -n 256`, 1,100 idle connections at its admin port:
/// `/queue` still answers, and so does the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eleven_hundred_idle_admin_connections_leave_queue_and_proxy_answering() {
    let limit = infscale::edge::descriptors::raise_open_files().unwrap_or_default();
    let flood = if limit.to.is_none_or(|n| n >= 1_400) {
        1_100
    } else {
        limit.to.map_or(0, |n| n.saturating_sub(300) as usize)
    };
    let up = upstream(Arc::new(AtomicBool::new(true))).await;
    let port = |_: ()| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (proxy, admin) = (port(()), port(()));
    let mut child = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_infscale"))
        .args(["activator", "--upstream", &format!("http://{up}")])
        .args(["--health-path", "/health", "--host", "chat"])
        .args([
            "--listen",
            &proxy.to_string(),
            "--admin-listen",
            &admin.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let queue = |admin: std::net::SocketAddr| async move {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap()
            .get(format!("http://{admin}/queue"))
            .send()
            .await
            .ok()
            .map(|r| r.status().as_u16())
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while queue(admin).await != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the activator never answered /queue"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut idle = Vec::new();
    let mut refused = 0;
    while idle.len() + refused < flood && refused < 20 {
        match tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(admin)).await {
            Ok(Ok(s)) => idle.push(s),
            _ => refused += 1,
        }
    }
    let queue_status = queue(admin).await;
    let proxied = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
        .get(format!("http://{proxy}/seq"))
        .header("x-seq", "5")
        .send()
        .await;
    let proxied = match proxied {
        Ok(r) => r.text().await.ok(),
        Err(_) => None,
    };
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "{} idle admin connections opened, {refused} refused",
        idle.len()
    );
    assert_eq!(queue_status, Some(200), "/queue under the flood");
    assert_eq!(proxied.as_deref(), Some("5"), "the proxy under the flood");
}

/// A streamed request that would be refused (the route is full) gets its 503 with
/// `Retry-After`, not the early `200 text/event-stream` a held stream gets and then an error
/// event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_stream_gets_its_status_not_an_early_200() {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = common::model::activator_route(up, |r| {
        r.max_held = 1;
        r.keep_alive_seconds = Some(0.2);
    })
    .await;
    let c = reqwest::Client::new();
    let url = format!("http://{}/v1/chat/completions", a.proxy);
    let first = c
        .post(&url)
        .body(r#"{"stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200, "the first is held, answered early");
    common::model::wait_held(a.admin, 1).await;
    let second = c
        .post(&url)
        .body(r#"{"stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 503);
    assert!(second.headers().contains_key("retry-after"));
    drop(first);
}

/// The pool closes an idle upstream connection after 4 s on its own timer (it used to be
/// checked only when the connection was next wanted, so idle connections stayed open 30 s and
/// more, holding a thread-per-connection server's threads): an upstream that would keep it a
/// minute sees it closed within 6 s of its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_pooled_upstream_connection_is_closed_on_time() {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let closed_tx = closed_tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut answered_at = None;
                loop {
                    match tokio::time::timeout(Duration::from_secs(60), s.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => {
                            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                            let health = head.starts_with("GET /health");
                            let _ = s
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                                .await;
                            if !health {
                                answered_at = Some(Instant::now());
                            }
                        }
                        _ => break,
                    }
                }
                if let Some(at) = answered_at {
                    let _ = closed_tx.send(at.elapsed());
                }
            });
        }
    });
    let a = common::model::activator_route(addr, |_| {}).await;
    let r = reqwest::get(format!("http://{}/anything", a.proxy))
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "ok");
    let idle_for = tokio::time::timeout(Duration::from_secs(10), closed_rx.recv())
        .await
        .expect("the pooled connection was not closed within 10 s")
        .unwrap();
    assert!(
        idle_for < Duration::from_secs(6),
        "closed after {idle_for:?}"
    );
}
