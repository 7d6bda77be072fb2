//! Security review: `serve` reads and scrapes only the ScaledObject's own namespace. A
//! Kubernetes API stand-in serves namespaces `llm` and `other` with the same Deployment name and
//! labels (and a cluster-wide pod list holding both); the stand-in pods record the scrapes they
//! receive, the API every request.

mod common;

use common::activator::activator_on;
use common::keda::{metrics_request, object};
use common::kube::Kube;
use common::pods::{pod, vllm_running, Behaviour, Pod};
use common::scaler::with_kube;
use std::time::{Duration, Instant};

/// Pods at 127.0.0.2 (`llm`) and 127.0.0.3 (`other`) on one port, as pods share a port.
fn two_pods() -> (Pod, Pod, u16) {
    for _ in 0..20 {
        let mine = pod("127.0.0.2:0", Behaviour::Page(vllm_running(7)));
        let port = mine.server.addr.port();
        if std::net::TcpListener::bind(("127.0.0.3", port)).is_ok() {
            let theirs = pod(
                &format!("127.0.0.3:{port}"),
                Behaviour::Page(vllm_running(50)),
            );
            return (mine, theirs, port);
        }
    }
    panic!("no port free on 127.0.0.2 and 127.0.0.3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_scaled_objects_namespace_is_read_and_scraped() {
    let (mine, theirs, port) = two_pods();
    let act = activator_on("chat", "127.0.0.2:0");
    act.set_held(3);
    let api = Kube::two_namespaces("127.0.0.2", "127.0.0.3", act.server.addr.port());
    let (running, mut c) = with_kube(api.server.url("")).await;
    let so = object(
        "chat",
        &[
            ("threshold", "24".into()),
            ("metricsPort", port.to_string()),
            ("scrapeIntervalSeconds", "0.2".into()),
            (
                "activatorUrl",
                "http://infscale-activator.llm.svc:9092".into(),
            ),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    // 7 running on llm's pod + 3 held at llm's activator; `other`'s pod runs 50.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = Vec::new();
    while Instant::now() < deadline && seen.len() < 20 {
        if let Ok(r) = c.get_metrics(req.clone()).await {
            let v = r.into_inner().metric_values[0].metric_value_float;
            if v == 10.0 || !seen.is_empty() {
                seen.push(v);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen, vec![10.0; 20], "GetMetrics over 2 s");
    assert!(
        !mine.hits.lock().unwrap().is_empty(),
        "llm's pod never scraped"
    );
    assert_eq!(
        theirs.hits.lock().unwrap().len(),
        0,
        "a pod of namespace other was scraped"
    );
    let calls = api.calls();
    let foreign: Vec<_> = calls
        .iter()
        .filter(|c| c.path != "/version" && !c.path.contains("/namespaces/llm/"))
        .collect();
    assert!(
        foreign.is_empty(),
        "requests outside namespace llm: {foreign:?}"
    );
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activator_service_in_another_namespace_is_refused() {
    let api = Kube::two_namespaces("127.0.0.2", "127.0.0.3", 9);
    let (running, mut c) = with_kube(api.server.url("")).await;
    let so = object(
        "chat",
        &[
            ("threshold", "24".into()),
            (
                "activatorUrl",
                "http://infscale-activator.other.svc:9092".into(),
            ),
        ],
    );
    let e = c
        .get_metric_spec(so.clone())
        .await
        .expect_err("an activator in another namespace");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    let e = c
        .get_metrics(metrics_request(&so, "infscale-queue-chat"))
        .await
        .expect_err("an activator in another namespace");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = api.calls();
    assert!(
        calls.iter().all(|c| !c.path.contains("/namespaces/other/")),
        "{calls:?}"
    );
    drop(running);
}
