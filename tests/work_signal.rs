//! A prefill-bound replica reads as saturated, from vLLM's own metric names, in `decide` and in
//! `serve`: the count KEDA's HPA would set from the `work` value is above one, where the queue
//! signal (a handful of requests running and waiting against a target of 192) asks for nothing.

mod common;

use common::fixture;
use common::http::{respond, serve};
use common::keda::{client, metrics_request, object, value_when};
use common::scaler::{config, start};
use infscale::serve::server::Config;
use infscale_core::control::hpa::replicas::{external_per_pod, to_milli};
use infscale_core::policy::behavior::Tolerances;
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

const MODEL: &str = r#"engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct""#;

/// A vLLM page with 6 running and 28 waiting, and counters that grow as a replica saturated by
/// prefill grows them: 2,000-token prompts admitted at 12 a second (24,000 prompt tokens/s, a
/// 24,750 tokens/s replica), 15 output tokens each.
fn prefill_bound_page(elapsed_s: f64) -> String {
    let admitted = 500.0 + 12.0 * elapsed_s;
    let prompt = 4_000_000.0 + 24_000.0 * elapsed_s;
    let output = 62_000.0 + 180.0 * elapsed_s;
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{MODEL}}} 6\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{MODEL}}} 28\n\
         # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{MODEL}}} 0.09\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{MODEL}}} {prompt}\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{MODEL}}} {output}\n\
         # TYPE vllm:time_to_first_token_seconds histogram\n\
         vllm:time_to_first_token_seconds_bucket{{{MODEL},le=\"0.5\"}} 100\n\
         vllm:time_to_first_token_seconds_bucket{{{MODEL},le=\"2.5\"}} 300\n\
         vllm:time_to_first_token_seconds_bucket{{{MODEL},le=\"+Inf\"}} {admitted}\n\
         vllm:time_to_first_token_seconds_count{{{MODEL}}} {admitted}\n"
    )
}

/// The replicas KEDA's HPA asks for from `value` against `target` with `current` replicas.
fn hpa_count(value: f64, target: f64, current: u32) -> u32 {
    external_per_pod(
        to_milli(value),
        to_milli(target),
        current,
        Tolerances::uniform(0.1),
    )
    .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_reads_a_prefill_bound_replica_as_saturated() {
    let started = Instant::now();
    let pod = serve(
        "127.0.0.1:0",
        Duration::from_secs(60),
        move |mut s, _, _| {
            let page = prefill_bound_page(started.elapsed().as_secs_f64());
            respond(&mut s, 200, "text/plain; version=0.0.4", page.as_bytes());
        },
    );
    let running = start(Config {
        statics: HashMap::from([("coder".to_owned(), vec![pod.url("/metrics")])]),
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let trigger = |metric: &str, threshold: &str| {
        object(
            &format!("coder-{metric}"),
            &[
                ("deployment", "coder".to_owned()),
                ("metric", metric.to_owned()),
                ("threshold", threshold.to_owned()),
                ("scrapeIntervalSeconds", "0.5".to_owned()),
            ],
        )
    };
    let work = trigger("work", "0.7");
    let queue = trigger("queue", "192");
    // Rates need two scrapes: wait for a value, then one more interval for a settled one.
    value_when(&mut c, &metrics_request(&work, "infscale-work-coder"), None).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let v = value_when(&mut c, &metrics_request(&work, "infscale-work-coder"), None).await;
    // 24,000 prompt tokens/s of a 24,750 replica, the 28 waiting prompts of 2,000 tokens over
    // 30 s, and 180 output tokens/s of 12,114: about 1.06 replicas of work.
    assert!((1.0..1.15).contains(&v), "work {v}");
    assert_eq!(
        hpa_count(v, 0.7, 1),
        2,
        "work {v} should ask for 2 replicas"
    );
    let q = value_when(
        &mut c,
        &metrics_request(&queue, "infscale-queue-coder"),
        None,
    )
    .await;
    assert_eq!(q, 34.0);
    assert_eq!(hpa_count(q, 192.0, 1), 1, "the queue signal sees nothing");
}

#[test]
fn decide_reads_a_prefill_bound_replica_as_saturated() {
    let dir = std::env::temp_dir().join(format!("infscale-work-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("coder-0.prom");
    let state = dir.join("state.json");
    let _ = std::fs::remove_file(&state);
    let (page_s, state_s) = (
        page.to_string_lossy().into_owned(),
        state.to_string_lossy().into_owned(),
    );
    let decide = |now: &str, policy: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args([
                "decide", &page_s, "--policy", policy, "--state", &state_s, "--now", now, "--json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // Two scrapes 5 s apart of the same replica, as the state file carries the counters.
    std::fs::copy(fixture("pairs/vllm-prefill-bound-0.prom"), &page).unwrap();
    decide("1000", "work:0.7");
    std::fs::copy(fixture("pairs/vllm-prefill-bound-1.prom"), &page).unwrap();
    let d = decide("1005", "work:0.7");
    let value = d["value"].as_f64().unwrap();
    assert!((1.0..1.15).contains(&value), "{d}");
    assert_eq!(d["desired"], 2, "{d}");
    let text = d["reasons"].to_string();
    assert!(text.contains("work"), "{text}");
    let _ = std::fs::remove_file(&state);
    let q = decide("1010", "queue:192");
    assert_eq!(q["desired"], 1, "{q}");
    std::fs::remove_dir_all(&dir).unwrap();
}
