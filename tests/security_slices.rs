//! Security review (issue 25): where `activatorUrl` names the activator Service, `serve` follows
//! only what the EndpointSlice controller says that Service's ready endpoints are: slices it
//! manages, with IP addresses, at most `activator_max_endpoints` of them; and what a peer answers
//! never reaches KEDA's error text whole. Before, every address of every slice labelled with
//! the Service's name was followed (2,000 were), a non-activator's answer was echoed into the
//! IsActive error, and 1,800 dead addresses made a 104 KB error. Each test asserts what KEDA
//! receives over gRPC.

mod common;

use common::activator::activator_on;
use common::http::{respond, serve};
use common::keda::{active_when, client, metrics_request, object, value_when};
use common::kube::Kube;
use common::scaler::{config, start};
use infscale::serve::server::Config;
use std::time::Duration;

fn slice(
    name: &str,
    labels: serde_json::Value,
    kind: &str,
    addresses: &[String],
    port: u16,
) -> serde_json::Value {
    let endpoints: Vec<serde_json::Value> = addresses
        .iter()
        .map(|a| serde_json::json!({"addresses": [a], "conditions": {"ready": true}}))
        .collect();
    serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "llm", "resourceVersion": "1", "labels": labels},
        "addressType": kind,
        "ports": [{"name": "admin", "port": port}],
        "endpoints": endpoints})
}

type Activator = common::activator::Activator;

/// Stand-in activators on 127.0.0.2, 127.0.0.3 and 127.0.0.1, one port (as pods share a port).
fn three_on_one_port() -> (Activator, Activator, Activator, u16) {
    for _ in 0..20 {
        let real = activator_on("chat", "127.0.0.2:0");
        let port = real.server.addr.port();
        let free = |ip: &str| std::net::TcpListener::bind((ip, port)).is_ok();
        if free("127.0.0.3") && free("127.0.0.1") {
            let hand_made = activator_on("chat", &format!("127.0.0.3:{port}"));
            let by_name = activator_on("chat", &format!("127.0.0.1:{port}"));
            return (real, hand_made, by_name, port);
        }
    }
    panic!("no port free on 127.0.0.1, 127.0.0.2 and 127.0.0.3");
}

const SERVICE: &str = "kubernetes.io/service-name";
const MANAGED: &str = "endpointslice.kubernetes.io/managed-by";
const CONTROLLER: &str = "endpointslice-controller.k8s.io";

fn trigger() -> Vec<(&'static str, String)> {
    vec![
        ("threshold", "2".to_owned()),
        ("scrapeIntervalSeconds", "0.2".to_owned()),
        (
            "activatorUrl",
            "http://infscale-activator.llm.svc:9092".to_owned(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_controller_managed_slices_with_ip_addresses_are_followed() {
    // The real activator holds 1; decoys on the same port hold 5 (a slice anyone could write
    // with the Service's name) and 7 (an FQDN slice, `localhost`).
    let (real, hand_made, by_name, port) = three_on_one_port();
    real.set_held(1);
    hand_made.set_held(5);
    by_name.set_held(7);
    let api = Kube::model("llm", "chat", Vec::new());
    api.set_activators("llm", &["127.0.0.2".into()], port);
    for extra in [
        slice(
            "hand-made",
            serde_json::json!({SERVICE: "infscale-activator"}),
            "IPv4",
            &["127.0.0.3".into()],
            port,
        ),
        slice(
            "other-manager",
            serde_json::json!({SERVICE: "infscale-activator", MANAGED: "someone-else"}),
            "IPv4",
            &["127.0.0.3".into()],
            port,
        ),
        slice(
            "by-name",
            serde_json::json!({SERVICE: "infscale-activator", MANAGED: CONTROLLER}),
            "FQDN",
            &["localhost".into()],
            port,
        ),
    ] {
        api.cluster.put(extra);
    }
    let running = start(Config {
        kube_api: Some(api.server.url("")),
        use_kube: true,
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object("chat", &trigger());
    let req = metrics_request(&so, "infscale-queue-chat");
    assert_eq!(value_when(&mut c, &req, Some(1.0)).await, 1.0);
    // It stays 1: the decoys are never added in.
    for _ in 0..10 {
        let v = c.get_metrics(req.clone()).await.unwrap().into_inner();
        assert_eq!(v.metric_values[0].metric_value_float, 1.0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_dead_endpoints_are_capped_and_summarised() {
    let api = Kube::model("llm", "chat", Vec::new());
    let dead_port = common::scaler::free_port();
    let dead: Vec<String> = (0..2000)
        .map(|i| format!("127.0.{}.{}", 10 + i / 250, 1 + i % 250))
        .collect();
    api.set_activators("llm", &dead, dead_port);
    let running = start(Config {
        kube_api: Some(api.server.url("")),
        use_kube: true,
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object("chat", &trigger());
    active_when(&mut c, &so, Err(()), Duration::from_secs(10)).await;
    // Every dead one read as failed, none as zero held: the answer is an error, and its text
    // is bounded and says how many there were.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let message = loop {
        let e = c.is_active(so.clone()).await.unwrap_err();
        if e.message().contains("2000 activator endpoints") {
            break e.message().to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "{}", e.message());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(message.len() <= 2048, "{} bytes: {message}", message.len());
    assert!(message.contains("followed"), "{message}");
    eprintln!("{} bytes: {message}", message.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_activators_answer_is_not_echoed_to_keda() {
    // Something that is not an activator: no watch endpoint, and a /queue whose JSON carries
    // what it should not (a token) where a count belongs, padded far past a sane error.
    let secret = format!("SECRET-TOKEN-{}", "x".repeat(50_000));
    let body = serde_json::json!({"chat": {"Concurrency": secret, "RequestCount": 1}}).to_string();
    let impostor = serve(
        "127.0.0.1:0",
        Duration::from_secs(60),
        move |mut s, head, _| {
            if head.target == "/queue" {
                respond(&mut s, 200, "application/json", body.as_bytes());
            } else {
                respond(&mut s, 404, "text/plain", b"no such thing\n");
            }
        },
    );
    let running = start(Config {
        allowed_activators: vec![impostor.url("")],
        statics: [("chat".to_owned(), vec![common::scaler::refused_url()])].into(),
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let mut meta = trigger();
    meta.retain(|(k, _)| *k != "activatorUrl");
    meta.push(("activatorUrl", impostor.url("")));
    let so = object("chat", &meta);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let message = loop {
        let e = c.is_active(so.clone()).await.unwrap_err();
        if e.message().contains("/queue") {
            break e.message().to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "{}", e.message());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        !message.contains("SECRET"),
        "echoed: {}",
        &message[..message.len().min(300)]
    );
    assert!(message.contains("not the /queue JSON"), "{message}");
    assert!(message.len() <= 2048, "{} bytes", message.len());
}
