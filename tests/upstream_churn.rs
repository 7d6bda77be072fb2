//! Upstreams that come and go under the activator and the scaler, on loopback:
//!
//! - a thousand requests through the real `infscale activator` in front of an upstream killed
//!   and restarted on the same address several times: each is answered by the upstream exactly
//!   once and 200 to its client (one the upstream died with just after it arrived is sent
//!   again), or answered with an explicit error; none lost, none duplicated, none wrong
//!   (the short version of benches/soak_activator.rs);
//! - pooled connections and an upstream's 5 s keep-alive: neither the activator nor the scaler
//!   may reuse a connection the upstream is closing at that moment.

mod common;

use common::churn::{drive, flap, send, start_activator, Outcome, Upstream, UpstreamOpts, Verdict};
use common::keda::{client, metrics_request, object, value_when};
use common::scaler::{config, start};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_infscale");

/// The two tests that drive hundreds of requests take turns: side by side on a 2-core machine
/// each starves the other's activator and upstream of CPU.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_requests_through_a_flapping_upstream_are_each_forwarded_once_or_refused() {
    let _turn = HEAVY.lock().await;
    let up = Upstream::start("127.0.0.1", UpstreamOpts::default()).await;
    let a = start_activator(
        EXE,
        up.addr,
        &["--hold-timeout", "30", "--max-held", "2000"],
    )
    .await;
    let started = Instant::now();
    let flapping = flap(
        up.clone(),
        &[600, 300, 900, 450],
        &[300, 150, 500, 80],
        started + Duration::from_secs(5),
    );
    let outcomes = drive(a.proxy, 1000, 200.0).await;
    flapping.await.unwrap();
    let v = Verdict::of(&outcomes, &up);
    eprintln!(
        "{} in {:.1?} over {} downs of the upstream",
        v.summary(),
        started.elapsed(),
        up.downs.load(std::sync::atomic::Ordering::SeqCst)
    );
    assert!(v.clean(), "{}", v.summary());
    assert!(up.downs.load(std::sync::atomic::Ordering::SeqCst) >= 3);
    assert!(v.forwarded_once >= 500, "{}", v.summary());
    // A bound on the run (1,000 requests at a set pace), not a claim about the activator.
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// The upstream closes a connection idle for 5 s (uvicorn's and llama.cpp's default), and a
/// request that reaches it in the last 200 ms of that crossed the close on the way (dropped
/// unanswered). A pool that keeps connections for 90 s reuses one at 4.9 s and its client gets
/// a 502 for a request the upstream never served; a pool idle timeout under 5 s does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_activator_does_not_reuse_a_connection_the_upstream_is_closing() {
    let opts = UpstreamOpts {
        crossing: Duration::from_millis(200),
        ..UpstreamOpts::default()
    };
    let up = Upstream::start("127.0.0.1", opts).await;
    let a = start_activator(EXE, up.addr, &[]).await;
    let c = common::churn::client();
    let mut outcomes = Vec::new();
    for round in 0..2u64 {
        let sends: Vec<_> = (0..4)
            .map(|i| {
                let c = c.clone();
                let proxy = a.proxy;
                tokio::spawn(async move { send(&c, proxy, round * 4 + i).await })
            })
            .collect();
        for s in sends {
            outcomes.push(s.await.unwrap());
        }
        if round == 0 {
            // Idle in the pool for 4.9 s: inside the upstream's crossing window.
            tokio::time::sleep(Duration::from_millis(4900)).await;
        }
    }
    let v = Verdict::of(&outcomes, &up);
    assert!(v.clean(), "{}", v.summary());
    for (id, o) in outcomes.iter().enumerate() {
        assert!(
            matches!(o, Outcome::Answer(200, _)),
            "request {id}: {o:?} ({})",
            v.summary()
        );
    }
    assert_eq!(up.seen.crossed.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// The same for the scaler: a pod scraped every 4.9 s with a 5 s keep-alive. Every GetMetrics
/// answers the page's value, and no scrape reaches the pod on a connection it is closing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_scaler_does_not_reuse_a_connection_the_pod_is_closing() {
    let opts = UpstreamOpts {
        crossing: Duration::from_millis(200),
        ..UpstreamOpts::default()
    };
    let pod = Upstream::start("127.0.0.1", opts).await;
    let running = start(infscale::serve::server::Config {
        statics: HashMap::from([(
            "chat".to_owned(),
            vec![format!("http://{}/metrics", pod.addr)],
        )]),
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object(
        "chat",
        &[
            ("deployment", "chat".to_owned()),
            ("threshold", "4".to_owned()),
            ("scrapeIntervalSeconds", "4.9".to_owned()),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    assert_eq!(value_when(&mut c, &req, Some(3.0)).await, 3.0);
    // Three more scrapes, each 4.9 s after the last.
    let until = Instant::now() + Duration::from_millis(3 * 4900 + 300);
    while Instant::now() < until {
        let r = c.get_metrics(req.clone()).await;
        let v = r.map(|r| r.into_inner().metric_values[0].metric_value_float);
        assert!(matches!(v, Ok(3.0)), "GetMetrics answered {v:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        pod.seen.crossed.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

/// An upstream that closes each connection 2 ms after answering on it while advertising
/// keep-alive (llama-server does so after every streamed response): the activator reuses the
/// pooled connection within that window, the upstream never reads the request, and the client
/// used to get a 502 for it (3 of 748 streams at 1 client, 24 of 768 at 4, against a real
/// llama-server). Every request is answered 200 and reaches the upstream exactly once, at 1 and
/// at 4 clients, and the window was really crossed (up to three rounds each, for a loaded machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_on_a_connection_the_upstream_closed_unread_is_sent_again() {
    let _turn = HEAVY.lock().await;
    for clients in [1u64, 4] {
        // A loaded machine can pace the requests past the 2 ms window: a round that never
        // crossed it proves nothing, so up to three are run.
        let mut crossed = 0;
        for _round in 0..3 {
            let opts = UpstreamOpts {
                close_after: Some(Duration::from_millis(2)),
                work_ms: 1,
                ..UpstreamOpts::default()
            };
            let up = Upstream::start("127.0.0.1", opts).await;
            let a = start_activator(EXE, up.addr, &[]).await;
            let per_client = 150;
            let sends: Vec<_> = (0..clients)
                .map(|k| {
                    let c = common::churn::client();
                    let proxy = a.proxy;
                    tokio::spawn(async move {
                        let mut out = Vec::new();
                        for id in k * per_client..(k + 1) * per_client {
                            out.push((id, send(&c, proxy, id).await));
                        }
                        out
                    })
                })
                .collect();
            let mut outcomes: Vec<(u64, Outcome)> = Vec::new();
            for s in sends {
                outcomes.extend(s.await.unwrap());
            }
            outcomes.sort_by_key(|(id, _)| *id);
            let outcomes: Vec<Outcome> = outcomes.into_iter().map(|(_, o)| o).collect();
            let v = Verdict::of(&outcomes, &up);
            crossed = up.seen.crossed.load(std::sync::atomic::Ordering::SeqCst);
            eprintln!(
                "{clients} client(s): {}; {crossed} sent on a closing connection",
                v.summary()
            );
            assert!(v.clean(), "{}", v.summary());
            for (id, o) in outcomes.iter().enumerate() {
                assert!(
                    matches!(o, Outcome::Answer(200, _)),
                    "{clients} client(s), request {id}: {o:?}"
                );
                assert_eq!(
                    up.count(id as u64),
                    1,
                    "request {id} reached the upstream once"
                );
            }
            if crossed > 0 {
                break;
            }
        }
        assert!(
            crossed > 0,
            "the upstream's close was never crossed: the test proves nothing"
        );
    }
}
