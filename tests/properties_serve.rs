//! Properties of `serve` against the library, over random pages served by stand-in pods on
//! loopback: the value KEDA gets from GetMetrics is the library's evaluation of the same pages,
//! `ceil(value / target)` (the HPA's arithmetic, outside its 0.1 tolerance) is the count `decide`
//! prints for them, and a
//! reading with an unreadable replica is never idle (IsActive true, value above zero).
//!
//! The cases are drawn by proptest's deterministic runner (no shrinking: each case is a round
//! trip through a running `serve`), a bounded number of them.

mod common;

use common::keda::{client, metrics_request, object};
use common::pods::{pod, Behaviour, Pod};
use common::scaler::{config, start};
use infscale::serve::server::Config;
use infscale_core::control::decision::{decide, evaluate, ScalerState};
use infscale_core::control::hpa::replicas;
use infscale_core::observe::metrics::{read_page, Replica, ServerChoice};
use infscale_core::policy::Policy;
use infscale_core::project::demand::Observation;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use std::collections::HashMap;

const TARGET: f64 = 7.0;
const CASES: usize = 32;

fn vllm(running: u32, waiting: u32) -> Vec<u8> {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {running}\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} {waiting}\n"
    )
    .into_bytes()
}

/// The library's view of the same pages: the observation `serve` makes (every endpoint ready,
/// the unreadable ones missing, nothing held).
fn library(pages: &[Vec<u8>], missing: u32, spec: &str) -> (Option<f64>, u32) {
    let replicas: Vec<Replica> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let signals = read_page(p, ServerChoice::Auto)
                .signals
                .expect("page reads");
            Replica::new(format!("pod-{i}"), signals, None)
        })
        .collect();
    let obs = Observation {
        now: 0.0,
        current: replicas.len() as u32 + missing,
        status: None,
        replicas: &replicas,
        missing,
        held: Some(0.0),
        scraped_at: Some(0.0),
        asleep: &[],
        starting_since: &[],
    };
    let policy = Policy::parse(spec).expect("policy parses");
    let value = evaluate(&policy, &obs, &mut ScalerState::default()).value;
    let desired = decide(&policy, &obs, &mut ScalerState::default()).desired;
    (value, desired)
}

/// KEDA's HPA on `v` from `current` pods asks for what `decide` printed: `ceil(v / target)`
/// outside the 0.1 tolerance, the current count inside it.
fn hpa_agrees(v: f64, current: u32, desired: u32, case: &str) {
    let ratio = replicas::to_milli(v) as f64 / replicas::to_milli(TARGET) as f64;
    let within = (ratio / f64::from(current) - 1.0).abs() <= 0.1;
    let hpa = if within {
        current
    } else {
        replicas::ceil_replicas(ratio).clamp(1, 1000)
    };
    assert_eq!(hpa, desired, "{case}: value {v} from {current}");
}

/// GetMetrics until it answers `expected`, for up to 10 s; panics with the last answer.
async fn value_of(
    c: &mut common::keda::Client,
    req: &infscale::serve::proto::GetMetricsRequest,
    expected: f64,
    case: &str,
) -> f64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut last = None;
    while std::time::Instant::now() < deadline {
        match common::keda::metric_value(c, req).await {
            Ok(v) => {
                if v == expected {
                    return v;
                }
                last = Some(Ok(v));
            }
            Err(e) => last = Some(Err(e.message().to_owned())),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{case}: GetMetrics never answered {expected}, last {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_value_over_the_target_is_decides_count_and_unreadable_is_never_idle() {
    let pods: Vec<Pod> = (0..4)
        .map(|_| pod("127.0.0.1:0", Behaviour::Page(vllm(0, 0))))
        .collect();
    let failing = pod("127.0.0.1:0", Behaviour::Status(500));
    let urls: Vec<String> = pods.iter().map(Pod::url).collect();
    let mut statics = HashMap::new();
    statics.insert("good".to_owned(), urls.clone());
    let mut with_failing = urls;
    with_failing.push(failing.url());
    statics.insert("faulty".to_owned(), with_failing);
    let running = start(Config {
        statics,
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let meta = |d: &str| {
        vec![
            ("deployment", d.to_owned()),
            ("threshold", TARGET.to_string()),
            ("scrapeIntervalSeconds", "0.2".to_owned()),
            ("scrapeTimeoutSeconds", "2".to_owned()),
        ]
    };
    let good = object("good", &meta("good"));
    let faulty = object("faulty", &meta("faulty"));
    let good_req = metrics_request(&good, "infscale-queue-good");
    let faulty_req = metrics_request(&faulty, "infscale-queue-faulty");
    // serve's policy (the trigger's threshold; the controller's 0.1 tolerance), with no window
    // or rate limit between the value and the count.
    let spec = "queue:7,downwindow=0,uppods=1000,max=1000";

    let loads = proptest::collection::vec(
        (
            proptest::prop_oneof![2 => 0u32..4, 1 => 0u32..60],
            proptest::prop_oneof![2 => proptest::strategy::Just(0u32), 1 => 0u32..30],
        ),
        4,
    );
    let mut runner = TestRunner::deterministic();
    for case in 0..CASES {
        let l = loads.new_tree(&mut runner).expect("draw").current();
        let pages: Vec<Vec<u8>> = l.iter().map(|&(r, w)| vllm(r, w)).collect();
        for (p, page) in pods.iter().zip(&pages) {
            p.set(Behaviour::Page(page.clone()));
        }
        let (expected, desired) = library(&pages, 0, spec);
        let expected = expected.expect("four readable pages give a value");
        let v = value_of(&mut c, &good_req, expected, &format!("{case} {l:?}")).await;
        hpa_agrees(v, 4, desired, &format!("case {case}: {l:?}"));

        // The same pages beside a replica that answers 500: what decide makes of them, and
        // never idle, never zero.
        let (expected, desired) = library(&pages, 1, spec);
        let expected = expected.expect("a value while some replica reads");
        let v = value_of(
            &mut c,
            &faulty_req,
            expected,
            &format!("{case} {l:?} + 500"),
        )
        .await;
        assert!(v > 0.0, "case {case}: {l:?} with one unreadable read {v}");
        hpa_agrees(v, 5, desired, &format!("case {case}: {l:?} + 500"));
        let active = c
            .is_active(faulty.clone())
            .await
            .expect("IsActive")
            .into_inner();
        assert!(
            active.result,
            "case {case}: {l:?} with one unreadable: idle"
        );
    }
    drop(running);
}
