//! `serve --state-dir` as KEDA sees it across a restart: a level `reserve=auto` learned before
//! the restart still holds the metric up after it, and a memory that cannot be read starts the
//! target fresh instead of stopping it.

mod common;

use common::keda::{client, metric_spec, metrics_request, object};
use common::pods::{pod, Behaviour};
use common::scaler::{config, start};
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MODEL: &str = r#"engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct""#;

/// A quiet vLLM replica: four running, nothing waiting, counters that do not grow.
fn quiet_page() -> Vec<u8> {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{MODEL}}} 4\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{MODEL}}} 0\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{MODEL}}} 1000\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{MODEL}}} 0\n\
         # TYPE vllm:time_to_first_token_seconds histogram\n\
         vllm:time_to_first_token_seconds_bucket{{{MODEL},le=\"+Inf\"}} 10\n\
         vllm:time_to_first_token_seconds_count{{{MODEL}}} 10\n"
    )
    .into_bytes()
}

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "infscale-serve-memory-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The one memory file in `dir`, once `serve` has written it.
async fn memory_file(dir: &Path) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        if let [one] = &files[..] {
            return one.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no memory file in {dir:?}: {files:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// GetMetrics for the trigger's metric until its value passes `ok`, for up to 10 s.
async fn value_until(
    c: &mut common::keda::Client,
    so: &infscale::serve::proto::ScaledObjectRef,
    wanted: &str,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    let (name, _) = metric_spec(c, so).await.unwrap();
    common::keda::value_until(c, &metrics_request(so, &name), wanted, ok).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_reserve_holds_the_metric_up_after_a_restart() {
    let dir = fresh_dir("restart");
    let replica = pod("127.0.0.1:0", Behaviour::Page(quiet_page()));
    let cfg = || Config {
        statics: HashMap::from([("chat".to_owned(), vec![replica.url()])]),
        state_dir: Some(dir.clone()),
        ..config()
    };
    let so = object(
        "chat",
        &[
            ("deployment", "chat".into()),
            ("metric", "work".into()),
            ("threshold", "1.0".into()),
            ("reserve", "auto".into()),
            ("scrapeIntervalSeconds", "0.2".into()),
        ],
    );
    // The first run: a quiet replica, under one replica's worth of work; its memory is saved.
    {
        let running = start(cfg()).await;
        let mut c = client(running.grpc).await;
        let v = value_until(&mut c, &so, "under 1", |v| v < 1.0).await;
        assert!(v < 1.0, "{v}");
    }
    let file = memory_file(&dir).await;
    // Between the runs, what a burst would have taught it: three replicas needed, seen when
    // the file was written.
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let at = saved["clock_s"].clone();
    saved["state"]["reserve"]["evidence"] = at.clone();
    saved["state"]["reserve"]["needs"] = serde_json::json!([{ "at": at, "value": 3.0 }]);
    std::fs::write(&file, saved.to_string()).unwrap();
    // The second run reads it: the same quiet replica now reads three replicas' worth, as the
    // held level says.
    {
        let running = start(cfg()).await;
        let mut c = client(running.grpc).await;
        let v = value_until(&mut c, &so, "3 or more", |v| v >= 3.0).await;
        assert_eq!(v, 3.0);
    }
    // A memory that cannot be read: the target starts fresh (and is answered), and the file is
    // written over with one that can.
    std::fs::write(&file, "{\"trigger\": ").unwrap();
    {
        let running = start(cfg()).await;
        let mut c = client(running.grpc).await;
        let v = value_until(&mut c, &so, "under 1", |v| v < 1.0).await;
        assert!(v < 1.0, "{v}");
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&text).is_ok(),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
