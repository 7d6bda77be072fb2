//! The activator against slow and hostile clients, on loopback: slow heads and bodies time out,
//! a thousand slow connections do not keep an ordinary request waiting, bodies share one memory
//! budget without harming the requests already held, and the drain refuses new work at once.

mod common;

use common::model::{activator_with, held, upstream, wait_held};
use infscale::activator::limits::Limits;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One test at a time: the slow heads' thousand connections and the large bodies would share
/// this process's sockets and the machine's cores, and the large bodies' budget test read how
/// many the other's load let through.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn limits() -> Limits {
    Limits {
        // Long enough that a thousand connects and an ordinary request fit inside it on a busy
        // machine: the test asks whether that request is answered while the slow heads are open.
        header_timeout: Duration::from_secs(3),
        body_timeout: Duration::from_secs(1),
        ..common::model::limits()
    }
}

/// Reads until the peer closes or `within` passes; returns what arrived and whether it closed.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> (String, bool) {
    s.set_read_timeout(Some(within)).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&all).into_owned(), true),
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&all).into_owned(), true)
            }
            Err(_) => return (String::from_utf8_lossy(&all).into_owned(), false),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_heads_and_bodies_time_out_and_ordinary_requests_go_on() {
    let _one = SERIAL.lock().await;
    let ready = Arc::new(AtomicBool::new(true));
    let up = upstream(ready).await;
    let a = activator_with(up, 100, 30.0, limits()).await;
    // A thousand slowloris connections: a head begun and never finished.
    let mut slow = Vec::new();
    for _ in 0..1000 {
        let mut s = TcpStream::connect(a.proxy).unwrap();
        s.write_all(b"GET /seq HTTP/1.1\r\nhost: chat\r\nx-slow: ")
            .unwrap();
        slow.push(s);
    }
    // An ordinary request is answered all the same, while the slow heads are still open
    // (before their header timeout ends them).
    let r = reqwest::Client::new()
        .get(format!("http://{}/seq", a.proxy))
        .header("x-seq", "7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "7");
    let last = slow.last_mut().unwrap();
    last.set_nonblocking(true).unwrap();
    let still_open =
        matches!(last.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    last.set_nonblocking(false).unwrap();
    assert!(
        still_open,
        "the slow heads were closed before the ordinary request was answered"
    );
    // Every slow head is closed after the header timeout.
    let started = Instant::now();
    let slow = tokio::task::spawn_blocking(move || {
        slow.iter_mut()
            .map(|s| read_until_closed(s, Duration::from_secs(8)).1)
            .filter(|closed| *closed)
            .count()
    })
    .await
    .unwrap();
    assert_eq!(slow, 1000, "slow heads still open");
    // The header timeout is what is tested: every slow head ends within 8 s (3 s, with room).
    assert!(started.elapsed() < Duration::from_secs(8));

    // A body that stops halfway is answered 408.
    let mut s = TcpStream::connect(a.proxy).unwrap();
    s.write_all(b"POST /echo HTTP/1.1\r\nhost: chat\r\ncontent-length: 100\r\n\r\n0123456789")
        .unwrap();
    let (text, _) =
        tokio::task::spawn_blocking(move || read_until_closed(&mut s, Duration::from_secs(5)))
            .await
            .unwrap();
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    eprintln!("1000 slow heads: an ordinary request was answered while they were open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_bodies_share_a_budget_and_the_held_requests_are_all_served() {
    let _one = SERIAL.lock().await;
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = activator_with(up, 1000, 60.0, common::model::limits()).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    // Ten ordinary requests held while the model is at zero.
    let small: Vec<_> = (0..10)
        .map(|i| {
            let c = client.clone();
            let url = format!("http://{}/echo", a.proxy);
            tokio::spawn(async move { c.post(url).body(format!("small {i}")).send().await })
        })
        .collect();
    wait_held(a.admin, 10).await;
    // Thirty 15 MiB bodies, 20 ms apart: those the budget (128 MiB, a quarter of it for one
    // address) takes are held, the rest refused 503 before their bodies are read. Started in
    // the same instant on a loaded machine, all thirty can stream at once, each holding about
    // 1 MiB when the address's share fills, and every one is refused (a fresh CI run saw it).
    let big: Vec<_> = (0..30_u64)
        .map(|i| {
            let c = client.clone();
            let url = format!("http://{}/echo", a.proxy);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20 * i)).await;
                c.post(url).body(vec![b'x'; 15 << 20]).send().await
            })
        })
        .collect();
    // The model stays at zero until each large body is held or was refused (a refused one has
    // its answer), so what the budget took is what is served.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let refused = big.iter().filter(|r| r.is_finished()).count() as u64;
        let held_big = held(a.admin).await.saturating_sub(10);
        if held_big + refused >= 30 || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ready.store(true, Ordering::SeqCst);
    for (i, r) in small.into_iter().enumerate() {
        let r = r.await.unwrap().unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), format!("small {i}"));
    }
    let (mut served, mut refused) = (0, 0);
    let mut outcomes: Vec<String> = Vec::new();
    for r in big {
        match r.await.unwrap() {
            Ok(r) if r.status() == 200 => {
                assert_eq!(r.bytes().await.unwrap().len(), 15 << 20);
                served += 1;
            }
            Ok(r) if r.status() == 503 => {
                outcomes.push("503".to_owned());
                refused += 1
            }
            // Refused before the body was read: the client may see the connection end first.
            Err(e) => {
                outcomes.push(format!("{e:?}"));
                refused += 1
            }
            Ok(r) => panic!("a large body answered {}", r.status()),
        }
    }
    assert_eq!(served + refused, 30);
    // On a failure, the activator's own count of what it refused and why.
    let mut said = String::new();
    if !(1..=8).contains(&served) {
        let page = match client
            .get(format!("http://{}/metrics", a.admin))
            .send()
            .await
        {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => e.to_string(),
        };
        let lines: Vec<&str> = page
            .lines()
            .filter(|l| l.contains("rejected") && !l.starts_with('#'))
            .collect();
        said = lines.join("; ");
    }
    assert!(
        (1..=8).contains(&served),
        "{served} served, {refused} refused: {outcomes:?}; the activator: {said}"
    );
    eprintln!("thirty 15 MiB bodies: {served} held and served, {refused} refused 503");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_during_the_drain_is_refused_at_once() {
    let _one = SERIAL.lock().await;
    let ready = Arc::new(AtomicBool::new(true));
    let up = upstream(ready).await;
    let mut a = activator_with(up, 100, 30.0, common::model::limits()).await;
    // A keep-alive connection, used once before the drain.
    let mut kept = TcpStream::connect(a.proxy).unwrap();
    kept.write_all(b"GET /seq HTTP/1.1\r\nhost: chat\r\nx-seq: 1\r\n\r\n")
        .unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The whole answer: its head and its body may come in separate reads.
    let mut buf = [0u8; 1024];
    let mut first = String::new();
    while !first.ends_with("\r\n\r\n1") {
        let n = kept.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {first:?}");
        first.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    // A slow stream keeps the drain going.
    let stream = tokio::spawn({
        let url = format!("http://{}/stream", a.proxy);
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = a.stop.take().unwrap().send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    // A new connection is refused at once (the listener is closed).
    let fresh = TcpStream::connect(a.proxy);
    assert!(
        fresh.is_err(),
        "a new connection was accepted during the drain"
    );
    // A new request on the open connection is answered 503 with Connection: close, at once.
    kept.write_all(b"GET /seq HTTP/1.1\r\nhost: chat\r\n\r\n")
        .unwrap();
    let (text, closed) = read_until_closed(&mut kept, Duration::from_secs(2));
    let took = asked.elapsed();
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 503"),
        "{text}"
    );
    if !text.is_empty() {
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    }
    assert!(closed && took < Duration::from_secs(1), "took {took:?}");
    // The stream in flight still finishes.
    assert!(stream.await.unwrap().contains("token4"));
}
