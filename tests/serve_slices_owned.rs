//! Serve mode writes slices only where a model owns them (issue 37): installed as the install
//! guide installs it (the shipped kustomizations, two `serve` pods and two activator pods from
//! their Deployments' own args), KEDA run from each ScaledObject, and the Kubernetes API
//! stand-in logging every call. What is asserted is what the API was asked to write or delete
//! and what KEDA was told.

mod common;

use common::cluster::{Keda, ModelServer, Options};
use common::install::{example_in, Flags, Install, Pools};
use serde_yaml::Value;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

const SPEED: f64 = 20.0;

fn pools(n: u8) -> Pools {
    // Addresses of this file's own (other test binaries may run at the same time).
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    Pools {
        cluster_ips: leak(format!("127.37.{}.", n * 4)),
        models: leak(format!("127.37.{}.", n * 4 + 1)),
        activators: leak(format!("127.37.{}.", n * 4 + 2)),
        scalers: leak(format!("127.37.{}.", n * 4 + 3)),
    }
}

fn options() -> Options {
    Options {
        cold_start: Duration::from_millis(300),
        millisecond_times: true,
        server: ModelServer {
            service_time: Duration::from_millis(100),
            ..ModelServer::default()
        },
        ..Options::default()
    }
}

fn yaml(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

/// The example's ScaledObject, named `name` in `ns`, its trigger's keys `set` (a `None` value
/// removes the key), time-scaled.
fn scaled_object(ns: &str, name: &str, set: &[(&str, Option<&str>)]) -> Value {
    let mut so = example_in("manifests/examples/vllm-scaledobject.yaml", "llm")
        .into_iter()
        .find(|d| d["kind"] == "ScaledObject")
        .expect("the example's ScaledObject");
    so["metadata"]["name"] = Value::from(name);
    so["metadata"]["namespace"] = Value::from(ns);
    let m = &mut so["spec"]["triggers"][0]["metadata"];
    for (k, v) in set {
        match v {
            Some(v) => m[*k] = Value::from(*v),
            None => {
                if let Some(map) = m.as_mapping_mut() {
                    map.remove(*k);
                }
            }
        }
    }
    let mut keys: HashMap<String, String> = serde_yaml::from_value(m.clone()).unwrap();
    infscale::demo::time_scaled(&mut keys, SPEED);
    *m = serde_yaml::to_value(keys).unwrap();
    so
}

/// The writes (PATCH, DELETE, POST, PUT) of EndpointSlice `name` in `ns` so far.
fn writes_of(install: &Install, ns: &str, name: &str) -> Vec<(String, String)> {
    let path = format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices");
    install
        .kube
        .calls()
        .into_iter()
        .filter(|c| c.method != "GET")
        .filter(|c| {
            c.path == format!("{path}/{name}")
                || (c.path == path && c.body.contains(&format!("\"{name}\"")))
        })
        .map(|c| (c.method, c.body))
        .collect()
}

/// Waits up to `within` for an `IsActive` or `GetMetrics` error KEDA got that contains `needle`.
async fn told(keda: &Keda, needle: &str, within: Duration) -> Result<String, String> {
    let end = Instant::now() + within;
    loop {
        let said = keda
            .is_active()
            .into_iter()
            .filter_map(|(_, _, r)| r.err())
            .chain(
                keda.metrics()
                    .into_iter()
                    .filter_map(|(_, _, _, r)| r.err()),
            )
            .find(|e| e.contains(needle));
        if let Some(e) = said {
            return Ok(e);
        }
        if Instant::now() > end {
            return Err(keda.report(20));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_mode_writes_no_service_that_did_not_opt_in_and_no_activator_but_its_own() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("infscale=info")
        .with_test_writer()
        .try_init();
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    // A Service of the namespace that never opted in, a database behind a Service of its own,
    // and the API server's Service (labelled as if opted in: refused all the same).
    docs.extend(yaml(
        "apiVersion: v1\nkind: Service\nmetadata: {name: victim, namespace: llm}\nspec:\n  selector: {app: victim}\n  ports: [{name: http, port: 8000}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: llm}\nspec:\n  selector: {app: db}\n  ports: [{name: pg, port: 5432}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: db-abcde\n  namespace: llm\n  labels: {kubernetes.io/service-name: db, endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}\naddressType: IPv4\nendpoints: [{addresses: [10.9.0.5], conditions: {ready: true}}]\nports: [{name: pg, port: 5432}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default, labels: {infscale.io/serve-mode: \"true\"}}\nspec:\n  ports: [{name: https, port: 443}]\n",
    ));
    // A model in namespace `default` whose trigger names the API server's Service.
    let mut deployment = example_in("manifests/examples/vllm-deployment.yaml", "llm")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the example's Deployment");
    deployment["metadata"]["namespace"] = Value::from("default");
    docs.push(deployment);
    let install = Install::start(
        pools(1),
        &docs,
        &[("llm", "chat"), ("default", "chat")],
        options(),
        Flags::default(),
    )
    .await;
    let victim = scaled_object("llm", "victim", &[("service", Some("victim"))]);
    let database = scaled_object(
        "llm",
        "database",
        &[
            ("service", Some("chat")),
            ("activatorUrl", Some("http://db.llm.svc:5432")),
            ("activatorPort", Some("5432")),
        ],
    );
    let apiserver = scaled_object("default", "kubernetes", &[("service", Some("kubernetes"))]);
    // The shipped activator, at a port outside its model ports (5432: the database's).
    let port = scaled_object("llm", "port", &[("activatorPort", Some("5432"))]);
    let kedas: Vec<Keda> = [&victim, &database, &apiserver, &port]
        .iter()
        .map(|so| Keda::start(&install.cluster, so, install.scaler_address(), SPEED))
        .collect();
    // Each is told why, naming what to change.
    let said = told(&kedas[0], "infscale.io/serve-mode", Duration::from_secs(60)).await;
    assert!(said.is_ok(), "victim: {said:?}");
    let said = told(&kedas[1], "activatorUrl", Duration::from_secs(60)).await;
    assert!(said.is_ok(), "database: {said:?}");
    let said = told(&kedas[2], "is a system Service", Duration::from_secs(60)).await;
    assert!(said.is_ok(), "kubernetes: {said:?}");
    let said = told(&kedas[3], "activatorPort: 5432", Duration::from_secs(60)).await;
    assert!(said.is_ok(), "activatorPort: {said:?}");
    // Given time to write (a trigger writes within a second of its first call), none did.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(writes_of(&install, "llm", "victim-infscale"), []);
    assert_eq!(writes_of(&install, "default", "kubernetes-infscale"), []);
    // Nothing wrote chat's slice: the database trigger was refused, the port trigger too.
    assert_eq!(writes_of(&install, "llm", "chat-infscale"), []);
    let infscales = install
        .cluster
        .all("EndpointSlice")
        .into_iter()
        .filter(|s| {
            s["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-infscale"))
        });
    for s in infscales {
        let text = s.to_string();
        assert!(!text.contains("10.9.0.5") && !text.contains("5432"), "{s}");
    }
    for k in &kedas {
        assert!(
            k.scales().iter().all(|(_, _, _, to, _)| *to >= 1),
            "{}",
            k.report(20)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_foreign_slice_by_infscales_name_is_left_alone_and_forged_endpoints_never_written() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("infscale=info")
        .with_test_writer()
        .try_init();
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    // Someone's own `chat-infscale` in the model's namespace (not owned by the Service, not
    // infscale's), and in the activator's namespace a slice labelled as the controller's for the
    // activator's admin Service naming addresses no pod has, and 2,001 endpoints.
    docs.extend(yaml(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: chat-infscale\n  namespace: llm\n  labels: {kubernetes.io/service-name: chat, endpointslice.kubernetes.io/managed-by: team.example/mesh}\naddressType: IPv4\nendpoints: [{addresses: [10.1.2.3], conditions: {ready: true}}]\nports: [{name: http, port: 8000}]\n",
    ));
    let foreign_before = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "chat-infscale")
        .cloned()
        .unwrap();
    let install = Install::start(
        pools(2),
        &docs,
        &[("llm", "chat")],
        options(),
        Flags::default(),
    )
    .await;
    // A second model, opted in, whose slice serve may write: the forged endpoints stay out.
    let other = yaml(
        "apiVersion: v1\nkind: Service\nmetadata: {name: code, namespace: llm, labels: {infscale.io/serve-mode: \"true\"}}\nspec:\n  selector: {app: code}\n  ports: [{name: http, port: 8000, targetPort: http}]\n",
    );
    common::cluster::apply(&install.cluster, &other);
    let chat = scaled_object("llm", "chat", &[]);
    let chat_keda = Keda::start(&install.cluster, &chat, install.scaler_address(), SPEED);
    let said = told(&chat_keda, "chat-infscale", Duration::from_secs(60)).await;
    assert!(said.is_ok(), "the foreign slice: {said:?}");
    // Then the forged slice, and a trigger for `code`.
    let forged = [
        "0.0.0.0",
        "127.0.0.1",
        "169.254.169.254",
        "255.255.255.255",
        "224.0.0.1",
    ];
    let mut endpoints: Vec<serde_json::Value> = forged
        .iter()
        .map(|a| serde_json::json!({"addresses": [a], "conditions": {"ready": true}}))
        .collect();
    for i in 0..2001u32 {
        let a = format!("10.{}.{}.{}", 40 + i / 65536, (i / 256) % 256, i % 256);
        endpoints.push(serde_json::json!({"addresses": [a], "conditions": {"ready": true}}));
    }
    let slice = serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "infscale-activator-admin-forged", "namespace": "infscale",
            "labels": {"kubernetes.io/service-name": "infscale-activator-admin",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "admin", "port": 9092}],
    });
    install.cluster.put(slice);
    let code = scaled_object(
        "llm",
        "code",
        &[("service", Some("code")), ("deployment", Some("chat"))],
    );
    let code_keda = Keda::start(&install.cluster, &code, install.scaler_address(), SPEED);
    let end = Instant::now() + Duration::from_secs(60);
    while install
        .cluster
        .get("EndpointSlice", "llm", "code-infscale")
        .is_none()
    {
        assert!(
            Instant::now() < end,
            "code's slice never written\n{}",
            code_keda.report(20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nor does the scaler follow them: `code` reads idle (2,001 unread endpoints would keep
    // its held count unknown, never idle).
    let end = Instant::now() + Duration::from_secs(60);
    while !code_keda
        .is_active()
        .last()
        .is_some_and(|(_, _, r)| matches!(r, Ok(false)))
    {
        assert!(
            Instant::now() < end,
            "code never idle\n{}",
            code_keda.report(20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(writes_of(&install, "llm", "chat-infscale"), []);
    let kept = install
        .cluster
        .get("EndpointSlice", "llm", "chat-infscale")
        .expect("the foreign slice is still there");
    assert_eq!(
        kept["endpoints"],
        serde_json::to_value(&foreign_before["endpoints"]).unwrap()
    );
    let activators: BTreeSet<String> = install
        .activators
        .iter()
        .map(|a| a.ip.to_string())
        .collect();
    for (_, body) in writes_of(&install, "llm", "code-infscale") {
        let written: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let addresses: Vec<String> = written["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        assert!(
            addresses.len() <= 100,
            "{} endpoints written",
            addresses.len()
        );
        for a in &addresses {
            assert!(activators.contains(a), "{a} is no activator pod: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_scaled_objects_idle_on_one_service_without_leases_have_one_writer_and_no_delete() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("infscale=info")
        .with_test_writer()
        .try_init();
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    docs.extend(yaml(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: chat-b, namespace: llm}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: chat, track: canary}}\n  template:\n    metadata: {labels: {app: chat, track: canary}}\n    spec:\n      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.18.0\n          ports: [{name: http, containerPort: 8000}]\n",
    ));
    let install = Install::start(
        pools(3),
        &docs,
        &[("llm", "chat"), ("llm", "chat-b")],
        options(),
        Flags::default(),
    )
    .await;
    // An API without the Lease group: every trigger falls back to writing without a lease.
    install.cluster.no_leases(true);
    let a = scaled_object("llm", "chat", &[]);
    let b = scaled_object("llm", "chat-b", &[("deployment", Some("chat-b"))]);
    let kedas = [
        Keda::start(&install.cluster, &a, install.scaler_address(), SPEED),
        Keda::start(&install.cluster, &b, install.scaler_address(), SPEED),
    ];
    let idle = |k: &Keda| {
        k.is_active()
            .last()
            .is_some_and(|(_, _, r)| matches!(r, Ok(false)))
    };
    let end = Instant::now() + Duration::from_secs(90);
    while !(install.in_path("llm", "chat") && kedas.iter().all(idle)) {
        assert!(
            Instant::now() < end,
            "never both idle\n{}\n{}",
            kedas[0].report(20),
            kedas[1].report(20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = writes_of(&install, "llm", "chat-infscale").len();
    // Longer than a resync (30 s): each writer writes again within it.
    tokio::time::sleep(Duration::from_secs(35)).await;
    let all = writes_of(&install, "llm", "chat-infscale");
    let during = &all[before..];
    let deletes = all.iter().filter(|(m, _)| m == "DELETE").count();
    let writers: BTreeSet<String> = during
        .iter()
        .filter(|(m, _)| m == "PATCH")
        .filter_map(|(_, body)| {
            let v: serde_json::Value = serde_json::from_str(body).ok()?;
            v["metadata"]["annotations"]["infscale.io/scaled-object"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    eprintln!(
        "both idle for 35 s: {} writes ({} PATCH over the run), {deletes} DELETE, writers {writers:?}",
        during.len(),
        all.len() - deletes
    );
    assert_eq!(deletes, 0, "the slice was deleted while both idle");
    assert!(writers.len() <= 1, "two writers: {writers:?}");
    assert!(install.in_path("llm", "chat"));
}
