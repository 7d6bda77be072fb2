//! Security review (issue 25): the scaler's bound on the triggers it follows is per namespace, and
//! what a deleted ScaledObject leaves behind gives way, so one namespace cannot lock another out.
//! 1,000 ScaledObjects created and dropped in one namespace (KEDA asked each for its spec once)
//! used to fill `--max-targets`, and a new ScaledObject anywhere got RESOURCE_EXHAUSTED for the
//! 10 minutes until the idle reaper ran; a model at zero could not wake. Each test asserts what
//! KEDA receives over gRPC and what Prometheus reads on `/metrics`.

mod common;

use common::activator::activator;
use common::keda::{client, metrics_request, object_in, Client};
use common::scaler::{config, refused_url, start};
use infscale::serve::limits::Limits;
use infscale::serve::proto::ScaledObjectRef;
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn scaled_object(namespace: &str, name: &str, extra: &[(&str, String)]) -> ScaledObjectRef {
    let mut metadata = vec![
        ("deployment", name.to_owned()),
        ("threshold", "2".to_owned()),
        ("scrapeIntervalSeconds", "0.2".to_owned()),
    ];
    metadata.extend(extra.iter().cloned());
    object_in(namespace, name, &metadata)
}

/// A model at zero in `llm` ("chat": nothing listens at its pod's URL) with one request held at
/// its activator, and the scaler's configuration for it with these limits.
fn at_zero_with_a_held_request(
    limits: Limits,
) -> (common::activator::Activator, Config, ScaledObjectRef) {
    let act = activator("chat");
    act.set_held(1);
    let cfg = Config {
        statics: HashMap::from([("chat".to_owned(), vec![refused_url()])]),
        allowed_activators: vec![act.url()],
        limits,
        ..config()
    };
    let so = scaled_object("llm", "chat", &[("activatorUrl", act.url())]);
    (act, cfg, so)
}

/// The model wakes: its first IsActive is true and its first GetMetrics asks for a replica.
async fn wakes(c: &mut Client, so: &ScaledObjectRef) {
    let active = c.is_active(so.clone()).await;
    assert!(
        active.as_ref().is_ok_and(|r| r.get_ref().result),
        "{active:?}"
    );
    let value = c
        .get_metrics(metrics_request(so, "infscale-queue-chat"))
        .await
        .map(|r| r.into_inner().metric_values[0].metric_value_float);
    assert_eq!(value.as_ref().ok(), Some(&1.0), "{value:?}");
}

/// The `infscale_collectors` gauge on the scaler's `/metrics`.
async fn collectors(running: &common::scaler::Running) -> usize {
    let text = running.metrics_text().await;
    text.lines()
        .find_map(|l| l.strip_prefix("infscale_collectors "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no infscale_collectors in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_dropped_scaled_objects_do_not_lock_out_another_namespace() {
    let (_act, cfg, so) = at_zero_with_a_held_request(Limits::default());
    let running = start(cfg).await;
    let mut c = client(running.grpc).await;
    // KEDA reconciled 1,000 ScaledObjects in `flood` (one GetMetricSpec each), then they went.
    for i in 0..1000 {
        let gone = scaled_object("flood", &format!("gone-{i}"), &[]);
        c.get_metric_spec(gone)
            .await
            .expect("a spec always answers");
    }
    let followed = collectors(&running).await;
    assert!(followed <= 200, "{followed} collectors for one namespace");
    wakes(&mut c, &so).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_only_asked_for_a_spec_gives_way_to_a_model_that_must_wake() {
    // Every namespace within its own cap, the scaler's total full of spec-only collectors.
    let (_act, cfg, so) = at_zero_with_a_held_request(Limits {
        max_targets: 60,
        max_targets_per_namespace: 25,
        ..Limits::default()
    });
    let running = start(cfg).await;
    let mut c = client(running.grpc).await;
    for ns in ["a", "b", "c"] {
        for i in 0..20 {
            let gone = scaled_object(ns, &format!("gone-{i}"), &[]);
            c.get_metric_spec(gone)
                .await
                .expect("a spec always answers");
        }
    }
    assert_eq!(collectors(&running).await, 60);
    wakes(&mut c, &so).await;
    assert_eq!(collectors(&running).await, 60, "one gave way, none more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_at_its_cap_is_refused_alone_until_a_trigger_goes_quiet() {
    let (_act, cfg, so) = at_zero_with_a_held_request(Limits {
        max_targets: 10,
        max_targets_per_namespace: 4,
        evict_after: Duration::from_secs(2),
        // The busy triggers have no pods to read: their first calls would each wait a second.
        first_answer_wait: Duration::from_millis(100),
        ..Limits::default()
    });
    let running = start(cfg).await;
    let mut c = client(running.grpc).await;
    // Four ScaledObjects KEDA evaluates (IsActive) fill namespace `busy`.
    let busy: Vec<_> = (0..4)
        .map(|i| scaled_object("busy", &format!("m-{i}"), &[]))
        .collect();
    for so in &busy {
        let _ = c.is_active(so.clone()).await;
    }
    let fifth = scaled_object("busy", "m-4", &[]);
    let e = c.is_active(fifth.clone()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert!(
        e.message().contains("namespace busy")
            && e.message().contains("--max-targets-per-namespace"),
        "{e:?}"
    );
    // Its spec still answers (KEDA's fallback), and another namespace is not touched.
    c.get_metric_spec(fifth.clone()).await.expect("spec");
    wakes(&mut c, &so).await;
    // Once one of `busy`'s triggers has had no call for `evict_after`, the new one takes its
    // place; until then the others are kept answering.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for kept in &busy[1..] {
            let _ = c.is_active(kept.clone()).await;
        }
        let refused = c.is_active(fifth.clone()).await.err().map(|e| e.code());
        if refused != Some(tonic::Code::ResourceExhausted) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the quiet trigger never gave way"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(collectors(&running).await, 5, "four in busy, one in llm");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_only_a_spec_asked_for_stops_soon() {
    let running = start(Config {
        limits: Limits {
            spec_only_stop: Duration::from_secs(1),
            first_answer_wait: Duration::from_millis(100),
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let gone = scaled_object("flood", "gone", &[]);
    c.get_metric_spec(gone).await.expect("spec");
    let read = scaled_object("llm", "kept", &[]);
    let _ = c.is_active(read.clone()).await;
    assert_eq!(collectors(&running).await, 2);
    // The spec-only one stops within its second and a reap; the one KEDA reads stays (idle_stop
    // is 600 s) while it is asked.
    let deadline = Instant::now() + Duration::from_secs(6);
    while collectors(&running).await != 1 {
        let _ = c.is_active(read.clone()).await;
        assert!(
            Instant::now() < deadline,
            "the spec-only collector outlived 6 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
