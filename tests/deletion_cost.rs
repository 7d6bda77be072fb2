//! Pod deletion cost end to end: a stand-in Kubernetes API serves three Ready pods (on
//! 127.0.0.2, .3 and .4, one port) whose vLLM pages show uneven load; `serve` with
//! `deletionCost: true` writes each pod's `controller.kubernetes.io/pod-deletion-cost` so the
//! costs order the pods as their in-flight requests do, keeps to the stated writes per minute
//! when the load keeps moving, and writes nothing at all without the opt-in.

mod common;

use common::fixture;
use common::keda::{metrics_request, object, value_when};
use common::kube::{ready_pods, Kube};
use common::pods::{pods_on_one_port, Behaviour, Pod};
use common::scaler::with_kube;
use std::time::{Duration, Instant};

const ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";
const RUNNING: &str =
    "vllm:num_requests_running{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.0";
const WAITING: &str =
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.0";

/// A vLLM page with `running` requests in the batch and `waiting` queued.
fn page(running: u32, waiting: u32) -> Behaviour {
    let idle = std::fs::read_to_string(fixture("vllm-idle.prom")).expect("fixture");
    assert!(idle.contains(RUNNING) && idle.contains(WAITING));
    Behaviour::Page(
        idle.replace(RUNNING, &RUNNING.replace(" 0.0", &format!(" {running}.0")))
            .replace(WAITING, &WAITING.replace(" 0.0", &format!(" {waiting}.0")))
            .into_bytes(),
    )
}

/// Three stand-in pods on one port (127.0.0.2, .3 and .4) with these loads, and an API that
/// lists them as `chat-0`, `chat-1` and `chat-2`.
fn three_pods(loads: [(u32, u32); 3]) -> (Vec<Pod>, Kube, u16) {
    let (pods, port) = pods_on_one_port(loads.iter().map(|l| page(l.0, l.1)).collect());
    (
        pods,
        Kube::model("llm", "chat", ready_pods("chat", 3)),
        port,
    )
}

fn trigger(
    name: &str,
    port: u16,
    extra: &[(&str, &str)],
) -> infscale::serve::proto::ScaledObjectRef {
    let mut metadata = vec![
        ("deployment", "chat".to_owned()),
        // 100 per replica: the pods' 51 requests want one replica, three are Ready, so a
        // scale-down is near.
        ("threshold", "100".to_owned()),
        ("metricsPort", port.to_string()),
        ("scrapeIntervalSeconds", "0.2".to_owned()),
    ];
    metadata.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    object(name, &metadata)
}

/// Each pod's cost as last written (absent: never written).
fn costs(api: &Kube) -> [Option<i64>; 3] {
    let mut out = [None; 3];
    for (pod, body, _) in api.pod_patches().iter() {
        let i: usize = pod.trim_start_matches("chat-").parse().expect("a pod name");
        let v = body["metadata"]["annotations"][ANNOTATION]
            .as_str()
            .expect("the annotation, as a string");
        out[i] = Some(v.parse().expect("an integer"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn costs_order_the_pods_by_their_in_flight_requests() {
    // In flight: 12 + 28 = 40, 0 + 2 = 2, 6 + 3 = 9.
    let (_pods, api, port) = three_pods([(12, 28), (0, 2), (6, 3)]);
    let (running, mut c) = with_kube(api.server.url("")).await;
    let so = trigger("chat", port, &[("deletionCost", "true")]);
    let value = value_when(
        &mut c,
        &metrics_request(&so, "infscale-queue-chat"),
        Some(51.0),
    )
    .await;
    assert_eq!(value, 51.0);
    let deadline = Instant::now() + Duration::from_secs(15);
    let written = loop {
        let now = costs(&api);
        if now.iter().all(Option::is_some) {
            break now;
        }
        assert!(Instant::now() < deadline, "costs written so far: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(written, [Some(40), Some(2), Some(9)]);
    // The ReplicaSet deletes the lowest cost first: the order is the pods' load order.
    let mut order: Vec<usize> = (0..3).collect();
    order.sort_by_key(|&i| written[i]);
    assert_eq!(order, [1, 2, 0]);
    // A steady load is written once: the next rounds change nothing.
    let writes = api.pod_patches().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(api.pod_patches().len(), writes, "rewrote a steady load");
    let text = running.metrics_text().await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("infscale_deletion_cost_writes_total{")
                && l.contains("result=\"ok\"")
                && l.ends_with(&format!(" {writes}"))),
        "{text}"
    );
}

/// Moves pod 0's load between 2 and 40 requests every 300 ms for `for_s` seconds.
async fn churn(pods: &[Pod], for_s: u64) {
    let began = Instant::now();
    let mut high = false;
    while began.elapsed() < Duration::from_secs(for_s) {
        high = !high;
        pods[0].set(if high { page(30, 10) } else { page(2, 0) });
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moving_load_is_written_no_more_often_than_the_budget() {
    let (pods, api, port) = three_pods([(2, 0), (5, 0), (9, 0)]);
    let (running, mut c) = with_kube(api.server.url("")).await;
    let so = trigger(
        "chat",
        port,
        &[
            ("deletionCost", "true"),
            ("deletionCostWritesPerMinute", "4"),
        ],
    );
    value_when(&mut c, &metrics_request(&so, "infscale-queue-chat"), None).await;
    let began = Instant::now();
    churn(&pods, 8).await;
    let patches = api.pod_patches();
    // Each of ~25 flips of pod 0 is a meaningful move: unbounded, that is dozens of writes.
    assert!(!patches.is_empty(), "nothing written");
    let in_first_minute = patches
        .iter()
        .filter(|p| p.2.duration_since(began) < Duration::from_secs(60))
        .count();
    // The first round writes all three, the first flip pod 0 again; then the budget is spent.
    assert_eq!(
        in_first_minute, 4,
        "writes in under a minute with deletionCostWritesPerMinute 4"
    );
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_is_written_without_the_opt_in() {
    let (pods, api, port) = three_pods([(12, 28), (0, 2), (6, 3)]);
    let (running, mut c) = with_kube(api.server.url("")).await;
    let plain = trigger("plain", port, &[]);
    let off = trigger("off", port, &[("deletionCost", "false")]);
    value_when(
        &mut c,
        &metrics_request(&plain, "infscale-queue-chat"),
        Some(51.0),
    )
    .await;
    value_when(
        &mut c,
        &metrics_request(&off, "infscale-queue-chat"),
        Some(51.0),
    )
    .await;
    churn(&pods, 3).await;
    assert!(
        api.pod_patches().is_empty(),
        "wrote without the opt-in: {:?}",
        api.pod_patches()
    );
    drop(running);
}

/// `infscale kube` with these extra arguments against the stand-in; its standard output.
async fn kube_once(api: &Kube, port: u16, extra: &[&str]) -> String {
    let mut args: Vec<String> = [
        "kube",
        "-n",
        "llm",
        "--deployment",
        "chat",
        "--kube-api",
        &api.server.url(""),
        "--metrics-port",
        &port.to_string(),
        "--scrape-via",
        "direct",
        "--target",
        "100",
        // No scale-down window: the one-shot run steps down at once (51 requests want 1).
        "--down-window",
        "0",
        "--apply",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args(&args)
            .output()
            .expect("infscale runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .expect("the run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn standalone_kube_writes_the_costs_before_it_scales_down() {
    let (_pods, api, port) = three_pods([(12, 28), (0, 2), (6, 3)]);
    // Without the opt-in: the scale-down alone.
    let plain = kube_once(&api, port, &[]).await;
    assert!(plain.contains("scaled deployment/chat to 1"), "{plain}");
    assert!(api.pod_patches().is_empty(), "{plain}");
    // With it: every pod's cost first, then the same scale-down.
    api.set_replicas("llm", "chat", 3);
    let text = kube_once(&api, port, &["--deletion-cost"]).await;
    assert!(text.contains("deletion cost of pod chat-0: 40"), "{text}");
    assert!(text.contains("scaled deployment/chat to 1"), "{text}");
    assert_eq!(costs(&api), [Some(40), Some(2), Some(9)]);
    assert_eq!(api.replicas("llm", "chat").unwrap(), 1);
}
