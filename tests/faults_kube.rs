//! The Kubernetes API failing under `serve` (issue 15, point 3): the API stand-in behind a relay
//! that closes its listener, accepts and never answers, or answers the pod watch with ERROR
//! events, 410 Gone, or lines that are not JSON. `serve` keeps answering KEDA within 3 s with
//! the last pods it knew, or an explicit error once the API has been silent past the staleness
//! bound, never a zero; and reads the pods again when the API is back. One row per fault.

mod common;

use common::faulty::{relay, Mode, WatchFault};
use common::keda::{client, metrics_request, object};
use common::kube::{FakePod, Kube};
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::{config, start};
use common::timed::{report, said, Timed};
use infscale::serve::limits::Limits;
use infscale::serve::server::Config;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The one pod's running requests, and the value `serve` answers for it at threshold 2.
const RUNNING: u64 = 3;
/// How long the last pod list is trusted once the API is silent.
const STALENESS: Duration = Duration::from_secs(2);

/// Answers a watch with HTTP 200 and these lines (chunked), then ends it.
fn watch_lines(mut s: TcpStream, stop: &AtomicBool, lines: &[&str]) {
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    for line in lines {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let data = format!("{line}\n");
        let _ = s.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = s.write_all(b"0\r\n\r\n");
}

fn error_events(s: TcpStream, stop: &AtomicBool) {
    let expired = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (7)","reason":"Expired","code":410}}"#;
    let internal = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: request timed out","reason":"InternalError","code":500}}"#;
    watch_lines(s, stop, &[internal, expired]);
}

fn gone(mut s: TcpStream, _: &AtomicBool) {
    common::http::respond(
        &mut s,
        410,
        "application/json",
        br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Gone","code":410}"#,
    );
}

fn garbage(s: TcpStream, stop: &AtomicBool) {
    watch_lines(
        s,
        stop,
        &[
            "<html>502 Bad Gateway</html>",
            "\u{0}\u{1}\u{2}not json",
            r#"{"type":"ADDED","object":"#,
            r#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":7}}}"#,
        ],
    );
}

/// A fault: the relay's mode, and what the pod watch gets meanwhile.
struct Fault {
    mode: Mode,
    watch: Option<fn(TcpStream, &AtomicBool)>,
    /// Whether the API goes silent (then an explicit error past the staleness bound is right).
    silent: bool,
}

const FAULTS: &[(&str, Fault)] = &[
    (
        "API gone (listener closed)",
        Fault {
            mode: Mode::Gone,
            watch: None,
            silent: true,
        },
    ),
    (
        "API times out (accepts, never answers)",
        Fault {
            mode: Mode::Hang,
            watch: None,
            silent: true,
        },
    ),
    (
        "API resets every connection",
        Fault {
            mode: Mode::Reset,
            watch: None,
            silent: true,
        },
    ),
    (
        "watch ERROR events (500, 410 Expired)",
        Fault {
            mode: Mode::Pass,
            watch: Some(error_events),
            silent: false,
        },
    ),
    (
        "watch answers 410 Gone",
        Fault {
            mode: Mode::Pass,
            watch: Some(gone),
            silent: false,
        },
    ),
    (
        "watch sends garbage lines",
        Fault {
            mode: Mode::Pass,
            watch: Some(garbage),
            silent: false,
        },
    ),
];

async fn case(name: &'static str, fault: &'static Fault) -> (String, Duration) {
    let replica = pod("127.0.0.2:0", Behaviour::Page(vllm_running(RUNNING)));
    let port = replica.server.addr.port();
    let api = Kube::model(
        "llm",
        "chat",
        vec![FakePod {
            name: "chat-0".into(),
            ip: "127.0.0.2".into(),
            ready: true,
        }],
    );
    let on_watch: Arc<Mutex<Option<WatchFault>>> = Arc::new(Mutex::new(None));
    let front = relay("127.0.0.1:0", api.server.addr, on_watch.clone());
    let running = start(Config {
        kube_api: Some(front.url()),
        use_kube: true,
        limits: Limits {
            staleness: STALENESS,
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let mut t = Timed::new(client(running.grpc).await);
    let so = object(
        "chat",
        &[
            ("threshold", "2".into()),
            ("metricsPort", port.to_string()),
            ("scrapeIntervalSeconds", "0.2".into()),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    let healthy = RUNNING as f64;
    // Until the pods are known.
    let deadline = Instant::now() + Duration::from_secs(15);
    while t.metrics(&req).await.ok() != Some(healthy) {
        assert!(Instant::now() < deadline, "{name}: never read the pod");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The fault, for twice the staleness bound and a little more.
    front.set(fault.mode);
    let faulted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    if let Some(w) = fault.watch {
        let count = faulted.clone();
        *on_watch.lock().unwrap() = Some(Arc::new(move |s, stop: &AtomicBool| {
            count.fetch_add(1, Ordering::SeqCst);
            w(s, stop)
        }));
        // The watch open now ends, so the next one meets the fault.
        front.cut();
    }
    let fault_at = Instant::now();
    let (mut values, mut errors, mut first_error) = (0, 0, None);
    let mut last_error = String::new();
    while fault_at.elapsed() < STALENESS * 2 + Duration::from_millis(1500) {
        let v = t.metrics(&req).await;
        let a = t.active(&so).await;
        assert!(
            !matches!(a, Ok(false)),
            "{name}: IsActive idle at 3 running"
        );
        match v {
            Ok(v) => {
                assert_eq!(v, healthy, "{name}: GetMetrics under the fault");
                assert!(
                    errors == 0,
                    "{name}: a value after the staleness error, before the API came back"
                );
                values += 1;
            }
            Err(e) => {
                assert!(
                    fault.silent,
                    "{name}: an error with the API answering: {e:?}"
                );
                assert_eq!(e.code(), tonic::Code::Unavailable, "{name}: {e:?}");
                assert!(e.message().contains("staleness bound"), "{name}: {e:?}");
                first_error.get_or_insert(fault_at.elapsed());
                errors += 1;
                last_error = said::<f64>(&Err(e));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if fault.silent {
        let at = first_error.unwrap_or_else(|| panic!("{name}: never said the API is stale"));
        assert!(at >= STALENESS / 2, "{name}: stale after only {at:?}");
    }
    let faulted = faulted.load(Ordering::SeqCst);
    assert!(
        fault.watch.is_none() || faulted > 0,
        "{name}: no watch met the fault"
    );
    // The API is back: the pod is read again.
    front.set(Mode::Pass);
    *on_watch.lock().unwrap() = None;
    let back_at = Instant::now();
    while t.metrics(&req).await.ok() != Some(healthy) {
        assert!(
            back_at.elapsed() < Duration::from_secs(15),
            "{name}: never recovered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let recovered = back_at.elapsed();
    let answered = match first_error {
        Some(at) => format!(
            "GetMetrics {healthy} for {:.1} s, then {last_error} (past the {} s staleness bound) x{errors}; IsActive never false; {healthy} again {:.1} s after the API is back",
            at.as_secs_f64(),
            STALENESS.as_secs(),
            recovered.as_secs_f64()
        ),
        None => format!(
            "{faulted} watches faulted; GetMetrics {healthy} throughout (x{values}); IsActive never false; {healthy} {:.1} s after the fault ends",
            recovered.as_secs_f64()
        ),
    };
    drop((replica, api, front));
    (answered, t.max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_kubernetes_api_failing_is_never_read_as_zero() {
    let tasks: Vec<_> = FAULTS
        .iter()
        .map(|(name, fault)| tokio::spawn(case(name, fault)))
        .collect();
    for ((name, _), task) in FAULTS.iter().zip(tasks) {
        let (answered, max) = task.await.expect("a case failed");
        report(&format!("kube: {name}"), &answered, max);
    }
}

/// Regression: the API hangs from `serve`'s first call (it accepts and never answers) and then
/// answers again. The calls that hung must not hold the target: KEDA gets an explicit error
/// within 3 s meanwhile, and the pod is read soon after the API answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_api_hung_from_the_first_call_is_read_once_it_answers() {
    let replica = pod("127.0.0.2:0", Behaviour::Page(vllm_running(RUNNING)));
    let port = replica.server.addr.port();
    let api = Kube::model(
        "llm",
        "chat",
        vec![FakePod {
            name: "chat-0".into(),
            ip: "127.0.0.2".into(),
            ready: true,
        }],
    );
    let front = relay("127.0.0.1:0", api.server.addr, Arc::new(Mutex::new(None)));
    front.set(Mode::Hang);
    let running = start(Config {
        kube_api: Some(front.url()),
        use_kube: true,
        limits: Limits {
            staleness: STALENESS,
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let mut t = Timed::new(client(running.grpc).await);
    let so = object(
        "chat",
        &[
            ("threshold", "2".into()),
            ("metricsPort", port.to_string()),
            ("scrapeIntervalSeconds", "0.2".into()),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    let hung = Instant::now();
    let mut errors = 0;
    while hung.elapsed() < Duration::from_secs(3) {
        let e = t.metrics(&req).await.expect_err("a value from a hung API");
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
        assert!(
            !matches!(t.active(&so).await, Ok(false)),
            "idle while unknown"
        );
        errors += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The API answers again; the calls that hung stay hung, as on a server that lost them.
    front.set(Mode::Pass);
    let back = Instant::now();
    while t.metrics(&req).await.ok() != Some(RUNNING as f64) {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the pod was not read 10 s after the API answered again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    report(
        "kube: API hung from the first call, then answers",
        &format!(
            "UNAVAILABLE x{errors} while hung; {RUNNING} {:.1} s after it answers",
            back.elapsed().as_secs_f64()
        ),
        t.max,
    );
    drop((replica, api, front));
}
