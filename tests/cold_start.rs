//! The learned cold start end to end: a stand-in Kubernetes API serves two Ready pods that took
//! 40 s and 60 s from creation to Ready; `serve` exports the horizon it learned in `/metrics`,
//! and a trigger with `lookaheadSeconds: auto` is answered as the same trigger with that number.

mod common;

use common::fixture;
use common::keda::{client, metrics_request, object, value_when};
use common::kube::{FakePod, Kube};
use common::pods::{pod, Behaviour};
use common::scaler::{config, start, with_kube};
use infscale::serve::server::Config;
use std::time::{Duration, Instant};

const WAITING: &str =
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.0";

/// A vLLM page with `waiting` requests waiting.
fn page(waiting: f64) -> Vec<u8> {
    let idle = std::fs::read_to_string(fixture("vllm-idle.prom")).expect("fixture");
    assert!(idle.contains(WAITING), "the fixture's waiting line");
    idle.replace(WAITING, &WAITING.replace(" 0.0", &format!(" {waiting:.1}")))
        .into_bytes()
}

/// The value of `name` for ScaledObject `so` in the exposition text.
fn series(text: &str, name: &str, so: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| l.contains(&format!("scaledobject=\"{so}\"")))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_learned_cold_start_is_exported_and_used_by_lookahead_auto() {
    // One stand-in model server; both pods' IPs point at it. Its queue rises 2 per second.
    let server = pod("127.0.0.1:0", Behaviour::Page(page(10.0)));
    let port = server.server.addr.port();
    let began = Instant::now();
    let behaviour = server.behaviour.clone();
    let ramp = tokio::spawn(async move {
        while began.elapsed() < Duration::from_secs(60) {
            let t = began.elapsed().as_secs_f64();
            *behaviour.lock().unwrap() =
                Behaviour::Page(page(10.0 + (2.0 * t * 10.0).floor() / 10.0));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let api = Kube::model(
        "llm",
        "chat",
        ["chat-a", "chat-b"]
            .iter()
            .map(|name| FakePod {
                name: name.to_string(),
                ip: "127.0.0.1".into(),
                ready: true,
            })
            .collect(),
    );
    api.set_start_times(
        "llm",
        "chat-a",
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:40Z",
    );
    api.set_start_times(
        "llm",
        "chat-b",
        "2026-01-01T00:10:00Z",
        "2026-01-01T00:11:00Z",
    );
    let (running, mut c) = with_kube(api.server.url("")).await;
    let trigger = |name: &str, lookahead: String| {
        object(
            name,
            &[
                ("deployment", "chat".into()),
                ("threshold", "24".into()),
                ("metricsPort", port.to_string()),
                ("scrapeIntervalSeconds", "0.2".into()),
                ("trendSeconds", "5".into()),
                ("coldStartSeconds", "120".into()),
                ("lookaheadSeconds", lookahead),
            ],
        )
    };
    let auto = metrics_request(&trigger("auto", "auto".into()), "infscale-queue-chat");
    value_when(&mut c, &auto, None).await;

    // The learned value in /metrics: between the two starts (the median, 50 s), not the prior.
    let deadline = Instant::now() + Duration::from_secs(20);
    let learned = loop {
        let text = running.metrics_text().await;
        if let Some(v) = series(&text, "infscale_cold_start_seconds", "auto") {
            if v != 120.0 {
                break v;
            }
        }
        assert!(Instant::now() < deadline, "no learned cold start:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!((40.0..=60.0).contains(&learned), "learned {learned}");
    assert_eq!(learned, 50.0, "the median of 40 s and 60 s");

    // The same trigger with that number, and with no lookahead.
    let fixed = metrics_request(
        &trigger("fixed", learned.to_string()),
        "infscale-queue-chat",
    );
    let none = metrics_request(&trigger("none", "0".into()), "infscale-queue-chat");
    value_when(&mut c, &fixed, None).await;
    value_when(&mut c, &none, None).await;

    // Once the trends are established (two pods rising 2/s each: 4/s, 50 s ahead is +200), the
    // auto trigger answers as the fixed one, far from the prior's +480 or no lookahead's +0.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (a, f, n) = loop {
        let a = value_when(&mut c, &auto, None).await;
        let f = value_when(&mut c, &fixed, None).await;
        let n = value_when(&mut c, &none, None).await;
        let settled = (f - n - 200.0).abs() < 20.0;
        if settled && (a - f).abs() < 15.0 {
            break (a, f, n);
        }
        assert!(
            Instant::now() < deadline,
            "auto {a}, fixed {f}, none {n}: auto never answered as lookaheadSeconds {learned}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!("auto {a}, lookaheadSeconds {learned}: {f}, none: {n}");
    assert!(a - n > 150.0, "auto projects ahead: {a} vs {n}");
    assert!(
        a - n < 300.0,
        "auto uses the learned 50 s, not the 120 s prior: {a} vs {n}"
    );
    ramp.abort();
}

/// The simulator learns as `serve` does: with `lookahead=auto`, before any replica it ordered
/// is Ready the horizon is the prior (0 here: no lookahead); after, the cold start its replicas
/// took. Seen in the timeline's reasons (what `simulate --timeline` prints).
#[test]
fn the_simulator_learns_its_own_cold_start_for_lookahead_auto() {
    use infscale_core::policy::Policy;
    use infscale_core::project::cold_start::BOUNDS;
    use infscale_core::sim::gpu::GpuModel;
    use infscale_core::sim::replica::Hardware;
    use infscale_core::sim::run::{run, Settings, TimelineEntry};
    use infscale_core::sim::trace::Scenario;

    let trace = Scenario::default_day().generate().expect("the default day");
    let hw = Hardware::new(GpuModel::default());
    let cold = hw.gpu.cold_start_s().clamp(BOUNDS.0, BOUNDS.1);
    let policy = Policy::parse_with_max("queue:24,lookahead=auto", 8).expect("policy");
    // The horizon each decision projected over, in seconds.
    let horizons = |spread: f64| -> Vec<f64> {
        let settings = Settings {
            record_timeline: true,
            cold_start_spread: spread,
            ..Settings::default()
        };
        let r = run(&trace, &hw, &policy, &settings);
        r.timeline
            .iter()
            .flat_map(|e: &TimelineEntry| e.lines.iter())
            .filter(|l| l.starts_with("lookahead: trend"))
            .filter_map(|l| {
                let (before, _) = l.split_once(" s ahead")?;
                before.rsplit(' ').next()?.parse().ok()
            })
            .collect()
    };
    // Equal starts: the replica running at time 0 already tells the horizon, as the pod watch
    // tells `serve` of the pods already Ready; every decision uses it.
    let fixed = horizons(0.0);
    assert!(!fixed.is_empty(), "no lookahead line");
    assert!(fixed.iter().all(|&h| h == cold), "{fixed:?} against {cold}");
    // Starts drawn around it: the horizon follows the median of the starts seen.
    let spread = horizons(0.5);
    let distinct: std::collections::BTreeSet<u64> = spread.iter().map(|h| h.to_bits()).collect();
    assert!(distinct.len() > 1, "the horizon never moved: {spread:?}");
    assert!(
        spread
            .iter()
            .all(|&h| (cold / 3.0..=cold * 3.0).contains(&h)),
        "{spread:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wake_from_zero_is_learned_from_the_activators_hold() {
    // The target is at zero: nothing listens at its one address. Two requests are held.
    let port = common::scaler::free_port();
    let act = common::activator::activator("chat");
    act.set_held(2);
    let running = start(Config {
        statics: std::collections::HashMap::from([(
            "chat".to_owned(),
            vec![format!("http://127.0.0.1:{port}/metrics")],
        )]),
        allowed_activators: vec![act.url()],
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object(
        "wake",
        &[
            ("deployment", "chat".into()),
            ("threshold", "24".into()),
            ("scrapeIntervalSeconds", "0.2".into()),
            ("coldStartSeconds", "120".into()),
            ("lookaheadSeconds", "auto".into()),
            ("activatorUrl", act.url()),
        ],
    );
    common::keda::active_when(&mut c, &so, Ok(true), Duration::from_secs(10)).await;
    let held_from = Instant::now();
    // Six seconds later a replica is Ready: the wake took about six seconds.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let _replica = pod(&format!("127.0.0.1:{port}"), Behaviour::Page(page(2.0)));
    let deadline = Instant::now() + Duration::from_secs(10);
    let learned = loop {
        let text = running.metrics_text().await;
        if let Some(v) = series(&text, "infscale_cold_start_seconds", "wake") {
            if v != 120.0 {
                break v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "nothing learned from the wake:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = held_from.elapsed().as_secs_f64();
    assert!(
        (5.5..=took + 1.0).contains(&learned),
        "learned {learned} s for a wake of about 6 s (at most {took:.1} s)"
    );
}
