//! One faulty replica beside a healthy one, for every fault a model server's `/metrics` can show
//! (issue 15, point 3): what `serve` answers KEDA over real gRPC, each answer within KEDA's 3 s.
//! The faulty replica is unread: it does not vote and is never idle, so the value is what the
//! HPA's rule for pods without a metric asks for (README, "Failure semantics") and `IsActive` is
//! `true` even beside an idle replica. Adding a fault is one row of `FAULTS`.

mod common;

use common::faulty::{backlog_full, drip, not_http, resets, Raw};
use common::keda::{client, metrics_request, object};
use common::pods::{pod, vllm_running, Behaviour, Pod};
use common::scaler::{config, start};
use common::timed::{report, said, Timed};
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What llama.cpp's llama-server answers on /metrics when started without `--metrics`.
const LLAMA_501: &str = r#"{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `--metrics`","type":"not_supported_error"}}"#;

/// A faulty replica, kept alive for the test.
enum Peer {
    Pod(Pod),
    Raw(Raw),
}

impl Peer {
    fn url(&self) -> String {
        match self {
            Peer::Pod(p) => p.url(),
            Peer::Raw(r) => r.url(),
        }
    }
}

fn status(code: u16) -> Peer {
    Peer::Pod(pod("127.0.0.1:0", Behaviour::Status(code)))
}

/// How to start a replica with a fault.
type Start = fn() -> Peer;

/// Every fault: its name in the table, and how to start a replica that has it.
const FAULTS: &[(&str, Start)] = &[
    ("backlog full (never accepts)", || Peer::Raw(backlog_full())),
    ("accepts, never answers", || {
        Peer::Pod(pod("127.0.0.1:0", Behaviour::Hang))
    }),
    ("drips 1 byte / 100 ms", || Peer::Raw(drip(vllm_running(9)))),
    ("resets (SO_LINGER 0)", || Peer::Raw(resets())),
    ("HTTP 500", || status(500)),
    ("HTTP 501 (llama.cpp without --metrics)", || {
        Peer::Pod(pod("127.0.0.1:0", Behaviour::Reply(501, LLAMA_501)))
    }),
    ("100 MB page", || {
        Peer::Pod(pod("127.0.0.1:0", Behaviour::Huge(100 << 20)))
    }),
    ("garbage page (HTTP 200)", || {
        let junk = (0..8192u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        Peer::Pod(pod("127.0.0.1:0", Behaviour::Page(junk)))
    }),
    ("garbage (not HTTP)", || Peer::Raw(not_http())),
    ("SGLang page, vLLM expected", || {
        let page = std::fs::read(common::fixture("sglang.prom")).expect("fixture");
        Peer::Pod(pod("127.0.0.1:0", Behaviour::Page(page)))
    }),
];

/// The healthy replica beside the fault: 3 running, or idle.
const BUSY: u64 = 3;
/// The trigger's threshold.
const THRESHOLD: &str = "2";
/// Beside a busy replica: 3 at threshold 2 asks for 2 replicas up; the unread one counted at 0
/// (3 / (2 x 2) = 0.75) flips the direction, so the HPA keeps the current 2: 2 x 2 = 4.
const WITH_BUSY: f64 = 4.0;
/// Beside an idle replica: the reading asks to go down; the unread one counted at the target
/// (2 / (2 x 2) = 0.5 of 2) asks for 1: 1 x 2 = 2, never 0.
const WITH_IDLE: f64 = 2.0;

fn trigger(deployment: &str) -> Vec<(&'static str, String)> {
    vec![
        ("deployment", deployment.to_owned()),
        ("threshold", THRESHOLD.to_owned()),
        ("server", "vllm".to_owned()),
        ("scrapeIntervalSeconds", "0.5".to_owned()),
        ("scrapeTimeoutSeconds", "1".to_owned()),
    ]
}

/// Polls one fault's two targets as KEDA does until both have a value, then for 2 s more:
/// every answer within 3 s, never a zero, never idle. Returns the table line's middle column.
async fn check(t: &mut Timed, case: &str, busy: &str, idle: &str) -> String {
    let so_busy = object(busy, &trigger(busy));
    let so_idle = object(idle, &trigger(idle));
    let (req_busy, req_idle) = (
        metrics_request(&so_busy, &format!("infscale-queue-{busy}")),
        metrics_request(&so_idle, &format!("infscale-queue-{idle}")),
    );
    let warm_until = Instant::now() + Duration::from_secs(15);
    let mut settled: Option<Instant> = None;
    let mut last: (String, String, String, String);
    loop {
        let vb = t.metrics(&req_busy).await;
        let vi = t.metrics(&req_idle).await;
        let ab = t.active(&so_busy).await;
        let ai = t.active(&so_idle).await;
        for (what, v) in [("beside busy", &vb), ("beside idle", &vi)] {
            if let Ok(v) = v {
                assert!(*v > 0.0, "{case}: GetMetrics {what} answered {v}");
            } else if let Err(e) = v {
                // Before the first round only: nothing read yet.
                assert!(
                    settled.is_none() && e.code() == tonic::Code::Unavailable,
                    "{case}: GetMetrics {what}: {e:?}"
                );
            }
        }
        for (what, a) in [("beside busy", &ab), ("beside idle", &ai)] {
            assert!(
                !matches!(a, Ok(false)),
                "{case}: IsActive {what} said idle with a replica unread"
            );
        }
        last = (said(&vb), said(&vi), said(&ab), said(&ai));
        match settled {
            None if vb.is_ok() && vi.is_ok() => settled = Some(Instant::now()),
            None => assert!(Instant::now() < warm_until, "{case}: no value: {last:?}"),
            Some(at) => {
                assert_eq!(
                    (vb.ok(), vi.ok(), ab.ok(), ai.ok()),
                    (Some(WITH_BUSY), Some(WITH_IDLE), Some(true), Some(true)),
                    "{case}"
                );
                if at.elapsed() > Duration::from_secs(2) {
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (pushed, _stream) = t.stream_first(&so_idle).await;
    assert!(pushed, "{case}: StreamIsActive pushed idle");
    format!(
        "GetMetrics {} beside {BUSY} running, {} beside idle; IsActive {}/{}; StreamIsActive {pushed}",
        last.0, last.1, last.2, last.3
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_faulty_replica_beside_a_healthy_one_is_never_zero_and_never_idle() {
    let busy = pod("127.0.0.1:0", Behaviour::Page(vllm_running(BUSY)));
    let idle = pod("127.0.0.1:0", Behaviour::Page(vllm_running(0)));
    let peers: Vec<Peer> = FAULTS.iter().map(|(_, start)| start()).collect();
    let mut statics = HashMap::new();
    for (i, peer) in peers.iter().enumerate() {
        statics.insert(format!("busy-{i}"), vec![busy.url(), peer.url()]);
        statics.insert(format!("idle-{i}"), vec![idle.url(), peer.url()]);
    }
    let running = start(Config {
        statics,
        ..config()
    })
    .await;
    // Every fault at once, each with its own connection, as KEDA polls many ScaledObjects.
    let mut tasks = Vec::new();
    for (i, (case, _)) in FAULTS.iter().enumerate() {
        let c = client(running.grpc).await;
        tasks.push(tokio::spawn(async move {
            let mut t = Timed::new(c);
            let line = check(&mut t, case, &format!("busy-{i}"), &format!("idle-{i}")).await;
            (case, line, t.max)
        }));
    }
    for task in tasks {
        let (case, line, max) = task.await.expect("a case failed");
        report(&format!("pod: {case}"), &line, max);
    }
    drop(peers);
}
