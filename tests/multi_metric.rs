//! Several signals at once (issue 17, point 3): a trigger with `metric: queue,kv` gets one
//! MetricSpec per metric over gRPC, each with its own target, and GetMetrics answers each name
//! KEDA asks for; the decision on a combined policy (what `decide` prints and the simulator
//! applies) is the larger of the two single-metric decisions, as the HPA takes the largest
//! proposal. Stand-in vLLM pods on loopback where the queue asks for 1 replica and the KV cache
//! for 4.

mod common;

use common::keda::{client, metrics_request, object, value_when};
use common::pods::{pod, Behaviour};
use common::scaler::{config, start};
use infscale::serve::server::Config;
use infscale_core::control::decision::{decide, proposal, ScalerState};
use infscale_core::observe::metrics::{Counters, Replica, Server, Signals};
use infscale_core::policy::Policy;
use infscale_core::project::demand::Observation;
use std::collections::HashMap;

/// Per pod: 3 running, 1 waiting, KV cache 90% full.
const RUNNING: u64 = 3;
const WAITING: u64 = 1;
const KV: f64 = 0.9;

fn page() -> Vec<u8> {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {RUNNING}\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} {WAITING}\n\
         # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{model_name=\"m\"}} {KV}\n"
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_and_kv_give_two_specs_and_two_values() {
    let pods = [
        pod("127.0.0.2:0", Behaviour::Page(page())),
        pod("127.0.0.3:0", Behaviour::Page(page())),
    ];
    let mut statics = HashMap::new();
    statics.insert("chat".to_owned(), pods.iter().map(|p| p.url()).collect());
    let running = start(Config {
        statics,
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object(
        "chat",
        &[
            ("deployment", "chat".to_owned()),
            ("metric", "queue,kv".to_owned()),
            ("threshold", "8,0.5".to_owned()),
        ],
    );
    let specs = c.get_metric_spec(so.clone()).await.unwrap().into_inner();
    let specs: Vec<(String, f64)> = specs
        .metric_specs
        .iter()
        .map(|s| (s.metric_name.clone(), s.target_size_float))
        .collect();
    assert_eq!(
        specs,
        vec![
            ("infscale-queue-chat".to_owned(), 8.0),
            ("infscale-kv-chat".to_owned(), 0.5)
        ]
    );
    // KEDA asks one name at a time; each answer carries the name asked for.
    let queue = value_when(&mut c, &metrics_request(&so, "infscale-queue-chat"), None).await;
    let kv = value_when(&mut c, &metrics_request(&so, "infscale-kv-chat"), None).await;
    assert_eq!(queue, 2.0 * (RUNNING + WAITING) as f64);
    assert!((kv - 2.0 * KV).abs() < 1e-9, "kv {kv}");
    let r = c
        .get_metrics(metrics_request(&so, "infscale-kv-chat"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.metric_values.len(), 1);
    assert_eq!(r.metric_values[0].metric_name, "infscale-kv-chat");
    let unknown = c
        .get_metrics(metrics_request(&so, "infscale-cpu-chat"))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    // What KEDA's HPA makes of the two values at 2 replicas: 1 for the queue, 4 for the cache.
    let policy = Policy::parse("queue+kv:8,0.5").unwrap();
    assert_eq!(proposal(&policy.single(0), queue, 2), 1);
    assert_eq!(proposal(&policy.single(1), kv, 2), 4);

    // A one-metric trigger still gets exactly one spec.
    let one = object(
        "solo",
        &[
            ("deployment", "chat".to_owned()),
            ("threshold", "8".to_owned()),
        ],
    );
    let specs = c.get_metric_spec(one).await.unwrap().into_inner();
    assert_eq!(specs.metric_specs.len(), 1);
    assert_eq!(specs.metric_specs[0].metric_name, "infscale-queue-chat");
}

fn replicas(n: usize, running: f64, waiting: f64, kv: f64) -> Vec<Replica> {
    (0..n)
        .map(|i| {
            Replica::new(
                format!("chat-{i}"),
                Signals {
                    server: Server::Vllm,
                    running: Some(running),
                    waiting,
                    kv: Some(kv),
                    asleep: None,
                    counters: Counters::default(),
                },
                None,
            )
        })
        .collect()
}

fn observe(now: f64, current: u32, replicas: &[Replica]) -> Observation<'_> {
    Observation {
        now,
        current,
        status: None,
        replicas,
        missing: 0,
        held: Some(0.0),
        scraped_at: Some(now),
        asleep: &[],
        starting_since: &[],
    }
}

/// The decision `decide` prints and the simulator applies (`sim::run` calls `decide` on each
/// HPA sync): on the same inputs, for the combined policy it is the larger of the single-metric
/// decisions, whichever metric leads.
#[test]
fn combined_decision_is_the_larger_of_the_single_ones() {
    let combined = Policy::parse("queue+kv:8,0.5,max=20").unwrap();
    let queue = Policy::parse("queue:8,max=20").unwrap();
    let kv = Policy::parse("kv:0.5,max=20").unwrap();
    let mut led = [false; 2];
    // (current, running, waiting, kv) per pod.
    let cases = [
        (2, 3.0, 1.0, 0.9),
        (4, 3.0, 1.0, 0.95),
        (4, 4.0, 0.0, 0.6),
        (2, 10.0, 30.0, 0.3),
        (6, 12.0, 40.0, 0.35),
        (6, 2.0, 0.0, 0.99),
        (3, 1.0, 0.0, 0.1),
    ];
    for (current, r, w, c) in cases {
        let pods = replicas(current as usize, r, w, c);
        let obs = observe(100.0, current, &pods);
        let fresh = ScalerState::default;
        let d = decide(&combined, &obs, &mut fresh());
        let q = decide(&queue, &obs, &mut fresh()).desired;
        let v = decide(&kv, &obs, &mut fresh()).desired;
        assert_eq!(
            d.desired,
            q.max(v),
            "{current} pods at ({r}, {w}, {c}): queue {q}, kv {v}\n{:#?}",
            d.lines
        );
        if q != v {
            led[usize::from(q > v)] = true;
        }
    }
    assert_eq!(led, [true, true], "each metric leads in some case");
}

/// What `tune` and `kube` write into a ScaledObject's trigger (`metric: "queue,kv"`,
/// `threshold: "48,0.8"`) reads back through `serve`'s metadata parser as the same metrics, and
/// names one metric per entry.
#[test]
fn written_trigger_metadata_reads_back_with_every_metric() {
    use infscale::serve::metadata::{AllowedActivators, TargetSpec};
    use infscale_core::policy::scaled_object::trigger_metadata;
    let policy = Policy::parse("queue+kv:48,0.8,min=1").unwrap();
    let mut meta: HashMap<String, String> = trigger_metadata(&policy, 0.0)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert_eq!(meta.get("metric").map(String::as_str), Some("queue,kv"));
    assert_eq!(meta.get("threshold").map(String::as_str), Some("48,0.8"));
    meta.insert("deployment".into(), "chat".into());
    let spec =
        TargetSpec::from_metadata("chat", "llm", &meta, &AllowedActivators::default()).unwrap();
    assert_eq!(spec.policy.metrics(), policy.metrics());
    let names: Vec<String> = spec.metric_names().into_iter().map(|n| n.0).collect();
    assert_eq!(names, ["infscale-queue-chat", "infscale-kv-chat"]);
    // A list of thresholds that does not match the metrics is refused, naming the key.
    meta.insert("threshold".into(), "48".into());
    let e = TargetSpec::from_metadata("chat", "llm", &meta, &AllowedActivators::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("threshold") && e.contains("kv"), "{e}");
}
