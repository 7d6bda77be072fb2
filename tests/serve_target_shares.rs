//! Issue 37: the scaler's `--max-targets` is shared fairly between namespaces. 1,000 live
//! ScaledObjects in 5 namespaces (each within its own 200) used to keep a sixth namespace at
//! RESOURCE_EXHAUSTED until one of them went quiet; now a namespace over its fair share gives
//! way its least recently asked collector. Scaled down here (10 in 5 namespaces); the 1,000 case
//! is the registry's unit test. Asserts what KEDA receives over gRPC.

mod common;

use common::activator::activator;
use common::keda::{client, metrics_request, object_in};
use common::scaler::{config, refused_url, start};
use infscale::serve::limits::Limits;
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sixth_namespace_wakes_its_model_when_five_hold_every_target() {
    let act = activator("chat");
    act.set_held(1);
    let cfg = Config {
        statics: HashMap::from([("chat".to_owned(), vec![refused_url()])]),
        allowed_activators: vec![act.url()],
        limits: Limits {
            max_targets: 10,
            max_targets_per_namespace: 4,
            // The busy triggers have no pods to read: their first calls would each wait.
            first_answer_wait: Duration::from_millis(100),
            ..Limits::default()
        },
        ..config()
    };
    let running = start(cfg).await;
    let mut c = client(running.grpc).await;
    let object = |ns: &str, name: &str, extra: &[(&str, String)]| {
        let mut metadata = vec![
            ("deployment", name.to_owned()),
            ("threshold", "2".to_owned()),
            ("scrapeIntervalSeconds", "0.2".to_owned()),
        ];
        metadata.extend(extra.iter().cloned());
        object_in(ns, name, &metadata)
    };
    // Five namespaces, two live ScaledObjects each (KEDA evaluates them): the scaler is full.
    for ns in ["a", "b", "c", "d", "e"] {
        for i in 0..2 {
            let _ = c.is_active(object(ns, &format!("m-{i}"), &[])).await;
        }
    }
    let so = object("llm", "chat", &[("activatorUrl", act.url())]);
    let active = c.is_active(so.clone()).await;
    assert!(
        active.as_ref().is_ok_and(|r| r.get_ref().result),
        "the sixth namespace's model is answered: {active:?}"
    );
    let value = c
        .get_metrics(metrics_request(&so, "infscale-queue-chat"))
        .await
        .map(|r| r.into_inner().metric_values[0].metric_value_float);
    assert_eq!(value.as_ref().ok(), Some(&1.0), "{value:?}");
    // Within its share (10 / 6 = 1), a namespace asking again for one more is refused.
    let more = c.is_active(object("llm", "other", &[])).await;
    assert_eq!(
        more.err().map(|e| e.code()),
        Some(tonic::Code::ResourceExhausted)
    );
}
