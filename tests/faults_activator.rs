//! The activator's held count failing under `serve` (issue 15, point 3): the activator that
//! holds requests for a target at zero, behind a relay that hangs, resets, flaps up and down, or
//! answers its `/queue/watch` with a 500 or lines that are not counts. While requests are held,
//! `serve` never answers zero held or idle: the held count or an explicit error, within 3 s; and
//! it follows the activator again once it is back. One row per fault.

mod common;

use common::activator::activator;
use common::faulty::{relay, Mode, WatchFault};
use common::keda::{client, metrics_request, object};
use common::scaler::{config, refused_url, start};
use common::timed::{report, Timed};
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Requests held at the activator throughout the fault.
const HELD: u64 = 2;

fn status_500(mut s: TcpStream, _: &AtomicBool) {
    common::http::respond(&mut s, 500, "text/plain", b"upstream connect error\n");
}

fn not_counts(mut s: TcpStream, _: &AtomicBool) {
    let _ = s.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: {\"chat\": \"seven\"}\n\ndata: <html>\n\n",
    );
    std::thread::sleep(Duration::from_millis(200));
}

/// A fault: the relay's modes in turn (each for `every`, cycling for the fault's span), and what
/// the watch gets meanwhile.
struct Fault {
    modes: &'static [Mode],
    every: Duration,
    watch: Option<fn(TcpStream, &AtomicBool)>,
}

const FAULTS: &[(&str, Fault)] = &[
    (
        "hangs (accepts, never answers)",
        Fault {
            modes: &[Mode::Hang],
            every: Duration::from_secs(5),
            watch: None,
        },
    ),
    (
        "resets every connection",
        Fault {
            modes: &[Mode::Reset],
            every: Duration::from_secs(5),
            watch: None,
        },
    ),
    (
        "flaps down/up every 300 ms",
        Fault {
            modes: &[Mode::Gone, Mode::Pass],
            every: Duration::from_millis(300),
            watch: None,
        },
    ),
    (
        "flaps hang/reset/up every 700 ms",
        Fault {
            modes: &[Mode::Hang, Mode::Reset, Mode::Pass],
            every: Duration::from_millis(700),
            watch: None,
        },
    ),
    (
        "watch answers 500",
        Fault {
            modes: &[Mode::Pass],
            every: Duration::from_secs(5),
            watch: Some(status_500),
        },
    ),
    (
        "watch sends lines that are not counts",
        Fault {
            modes: &[Mode::Pass],
            every: Duration::from_secs(5),
            watch: Some(not_counts),
        },
    ),
];

/// How long each fault lasts.
const SPAN: Duration = Duration::from_secs(5);

async fn case(name: &'static str, fault: &'static Fault) -> (String, Duration) {
    let act = activator("chat");
    act.set_held(HELD);
    let on_watch: Arc<Mutex<Option<WatchFault>>> = Arc::new(Mutex::new(None));
    let front = relay("127.0.0.1:0", act.server.addr, on_watch.clone());
    let running = start(Config {
        allowed_activators: vec![front.url()],
        statics: HashMap::from([("chat".to_owned(), vec![refused_url()])]),
        ..config()
    })
    .await;
    let mut t = Timed::new(client(running.grpc).await);
    let so = object(
        "chat",
        &[
            ("deployment", "chat".into()),
            ("threshold", "2".into()),
            ("scrapeIntervalSeconds", "0.2".into()),
            ("activatorUrl", front.url()),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    let held = HELD as f64;
    let deadline = Instant::now() + Duration::from_secs(15);
    while t.metrics(&req).await.ok() != Some(held) {
        assert!(
            Instant::now() < deadline,
            "{name}: never read the held count"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(w) = fault.watch {
        *on_watch.lock().unwrap() = Some(Arc::new(w));
        front.cut();
    }
    let started = Instant::now();
    let (mut values, mut errors, mut error) = (0, 0, String::new());
    let mut step = 0;
    while started.elapsed() < SPAN {
        let due = fault.every * step;
        if started.elapsed() >= due {
            front.set(fault.modes[step as usize % fault.modes.len()]);
            step += 1;
        }
        for r in [
            t.metrics(&req).await.map(|v| (v, "GetMetrics")),
            t.active(&so)
                .await
                .map(|a| (f64::from(u8::from(a)), "IsActive")),
        ] {
            match r {
                Ok((v, call)) => {
                    let want = if call == "IsActive" { 1.0 } else { held };
                    assert_eq!(v, want, "{name}: {call} with {HELD} held");
                    values += 1;
                }
                Err(e) => {
                    assert_eq!(e.code(), tonic::Code::Unavailable, "{name}: {e:?}");
                    errors += 1;
                    error = e.message().to_owned();
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        fault.modes == [Mode::Gone, Mode::Pass] || errors > 0,
        "{name}: the fault was never seen"
    );
    // Back for good: the held count again, then idle once nothing is held.
    front.set(Mode::Pass);
    *on_watch.lock().unwrap() = None;
    let back_at = Instant::now();
    while t.metrics(&req).await.ok() != Some(held) || t.active(&so).await.ok() != Some(true) {
        assert!(
            back_at.elapsed() < Duration::from_secs(15),
            "{name}: never recovered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recovered = back_at.elapsed();
    act.set_held(0);
    let released = Instant::now();
    while t.active(&so).await.ok() != Some(false) {
        assert!(
            released.elapsed() < Duration::from_secs(15),
            "{name}: never idle"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The innermost reason, the relay's address as ACT.
    let why = error
        .rsplit_once("cannot be read: ")
        .map_or(error.as_str(), |(_, w)| w.trim_end_matches(')'))
        .replace(&front.url(), "ACT");
    let answered = format!(
        "{values} answers {held} held / active, {errors} UNAVAILABLE{}; never 0 or idle; {held} again {:.1} s after, idle {:.1} s after the release",
        if errors > 0 { format!(" (\"{why}\")") } else { String::new() },
        recovered.as_secs_f64(),
        released.elapsed().as_secs_f64()
    );
    drop((act, front));
    (answered, t.max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_activator_is_never_read_as_zero_held() {
    let tasks: Vec<_> = FAULTS
        .iter()
        .map(|(name, fault)| tokio::spawn(case(name, fault)))
        .collect();
    for ((name, _), task) in FAULTS.iter().zip(tasks) {
        let (answered, max) = task.await.expect("a case failed");
        report(&format!("activator: {name}"), &answered, max);
    }
}

/// Regression: back-off doubles on failures in a row only. A watch that followed the activator
/// for longer than the longest back-off and is then reset (an activator restart) is followed
/// again within the first back-off, not the longest one earned while the activator was down at
/// start-up: a request held right after the restart wakes the target at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_reset_after_a_healthy_stretch_reconnects_at_once() {
    let act = activator("chat");
    let front = relay("127.0.0.1:0", act.server.addr, Arc::new(Mutex::new(None)));
    front.set(Mode::Gone);
    let longest = Duration::from_secs(2);
    let running = start(Config {
        allowed_activators: vec![front.url()],
        statics: HashMap::from([("chat".to_owned(), vec![refused_url()])]),
        limits: infscale::serve::limits::Limits {
            activator_backoff_max: longest,
            ..infscale::serve::limits::Limits::default()
        },
        ..config()
    })
    .await;
    let mut t = Timed::new(client(running.grpc).await);
    let so = object(
        "chat",
        &[
            ("deployment", "chat".into()),
            ("threshold", "2".into()),
            ("activatorUrl", front.url()),
        ],
    );
    // Down at start for long enough that the back-off reaches its longest (0.1 s doubling).
    let _ = t.active(&so).await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(t.active(&so).await.is_err(), "read a closed activator");
    front.set(Mode::Pass);
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.active(&so).await.ok() != Some(false) {
        assert!(Instant::now() < deadline, "never followed the activator");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Healthy for longer than the longest back-off, then the activator restarts.
    tokio::time::sleep(longest + Duration::from_millis(500)).await;
    front.cut();
    act.set_held(1);
    let restarted = Instant::now();
    while t.active(&so).await.ok() != Some(true) {
        assert!(restarted.elapsed() < Duration::from_secs(10), "never woke");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = restarted.elapsed();
    report(
        "activator: reset after a healthy stretch",
        &format!("IsActive true {} ms after the restart", took.as_millis()),
        t.max,
    );
    // The back-off is what is tested: reset, the restart is seen within a second, where the
    // back-off grown since start-up would take several.
    assert!(
        took < Duration::from_secs(1),
        "held request seen {took:?} after the restart: the back-off from start-up was kept"
    );
}

/// Regression: in Kubernetes `activatorUrl` names the activator Service, whose ports `serve`
/// reads from the API. An API that accepted that read and never answered must not leave the
/// held count unknown for good: once the API answers, a held request wakes the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_activator_service_read_that_hung_is_retried() {
    let act = common::activator::activator_on("chat", "127.0.0.2:0");
    let api = common::kube::Kube::model("llm", "chat", Vec::new());
    api.set_activators("llm", &["127.0.0.2".into()], act.server.addr.port());
    let front = relay("127.0.0.1:0", api.server.addr, Arc::new(Mutex::new(None)));
    front.set(Mode::Hang);
    let running = start(Config {
        kube_api: Some(front.url()),
        use_kube: true,
        limits: infscale::serve::limits::Limits {
            staleness: Duration::from_secs(2),
            ..infscale::serve::limits::Limits::default()
        },
        ..config()
    })
    .await;
    let mut t = Timed::new(client(running.grpc).await);
    let so = object(
        "chat",
        &[
            ("threshold", "2".into()),
            ("scrapeIntervalSeconds", "0.2".into()),
            (
                "activatorUrl",
                "http://infscale-activator.llm.svc:9092".to_owned(),
            ),
        ],
    );
    act.set_held(1);
    let hung = Instant::now();
    while hung.elapsed() < Duration::from_secs(2) {
        assert!(
            !matches!(t.active(&so).await, Ok(false)),
            "idle while unknown"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    front.set(Mode::Pass);
    let back = Instant::now();
    while t.active(&so).await.ok() != Some(true) {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the held request was not seen 10 s after the API answered again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    report(
        "activator: Service read hung, then the API answers",
        &format!(
            "IsActive true {:.1} s after the API answers",
            back.elapsed().as_secs_f64()
        ),
        t.max,
    );
    drop((act, api, front));
}
