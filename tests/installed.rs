//! The installed whole, wired as the install guide wires it (docs/operate.md): the release
//! manifest `deploy/infscale.yaml` (one `kubectl apply -f`), the vLLM example's Deployment,
//! Service and ScaledObject (or `infscale tune`'s ScaledObject as printed), applied into the
//! Kubernetes API stand-in; the real `serve` and the real activator, two pods each, started
//! from their Deployments' own arguments; KEDA and its HPA run from the ScaledObject; a
//! kube-proxy over every Service's slices and a client pod's DNS. Clients call the model's
//! Service by every name a Kubernetes client uses. What is asserted is what the clients get,
//! what the model's pods receive (and whether through the activator), what KEDA sets, and what
//! the API holds.

mod common;

use common::cluster::{eventually, http10_post_with, Dns, Keda, ModelServer, Options};
use common::install::{example_in, Flags, Install, Pools};
use serde_yaml::Value;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The model's Service as a client in namespace `llm` names it, one way each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Form {
    Short,
    NameNs,
    NameNsSvc,
    Fqdn,
    ClusterIp,
    Http10NoHost,
    H2,
}

const FORMS: [Form; 7] = [
    Form::Short,
    Form::NameNs,
    Form::NameNsSvc,
    Form::Fqdn,
    Form::ClusterIp,
    Form::Http10NoHost,
    Form::H2,
];

/// The clients of one namespace's pods.
#[derive(Clone)]
struct Clients {
    http1: reqwest::Client,
    h2: reqwest::Client,
    ip: IpAddr,
    service: String,
}

impl Clients {
    fn new(install: &Install, ns: &str, service: &str) -> Clients {
        let dns = Dns::new(&install.cluster, ns);
        let ip = install
            .net
            .cluster_ip(ns, service)
            .expect("the model's Service has a ClusterIP");
        Clients {
            http1: dns.client(Duration::from_secs(60)),
            h2: dns.h2_client(Duration::from_secs(60)),
            ip,
            service: service.to_owned(),
        }
    }

    /// One completion through the Service by `form`, with `x-seq: seq`: `Ok` for a 200.
    async fn send(&self, form: Form, seq: u64, ns: &str) -> Result<(), String> {
        let body = "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":4}";
        let svc = &self.service;
        let host = match form {
            Form::Short | Form::H2 => svc.clone(),
            Form::NameNs => format!("{svc}.{ns}"),
            Form::NameNsSvc => format!("{svc}.{ns}.svc"),
            Form::Fqdn => format!("{svc}.{ns}.svc.cluster.local"),
            Form::ClusterIp | Form::Http10NoHost => self.ip.to_string(),
        };
        if form == Form::Http10NoHost {
            let (status, text) = http10_post_with(
                std::net::SocketAddr::new(self.ip, 8000),
                "/v1/completions",
                body,
                &[("x-seq", seq.to_string())],
            )
            .await
            .map_err(|e| format!("{form:?} {seq}: {e}"))?;
            return match status {
                200 => Ok(()),
                s => Err(format!("{form:?} {seq}: status {s}: {text}")),
            };
        }
        let client = if form == Form::H2 {
            &self.h2
        } else {
            &self.http1
        };
        let r = client
            .post(format!("http://{host}:8000/v1/completions"))
            .header("x-seq", seq)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("{form:?} {seq}: {e}"))?;
        match r.status().as_u16() {
            200 => Ok(()),
            s => Err(format!(
                "{form:?} {seq}: status {s}: {}",
                r.text().await.unwrap_or_default()
            )),
        }
    }
}

/// The first document of kind `kind` in a shipped example, applied in namespace llm.
fn doc_of(rel: &str, kind: &str) -> Value {
    example_in(rel, "llm")
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("{rel}: no {kind}"))
}

/// The ScaledObject with every time and rate of its trigger compressed `speed` times, as the
/// demo runs a day (its other keys as written).
fn time_scaled(mut so: Value, speed: f64) -> Value {
    let trigger = &mut so["spec"]["triggers"][0]["metadata"];
    let mut m: HashMap<String, String> = serde_yaml::from_value(trigger.clone()).unwrap();
    infscale::demo::time_scaled(&mut m, speed);
    *trigger = serde_yaml::to_value(m).unwrap();
    so
}

/// Held requests for `key` at each activator pod.
async fn held_each(install: &Install, key: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for a in &install.activators {
        let doc: serde_json::Value = match reqwest::get(format!("http://{}/queue", a.second)).await
        {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        out.push(doc[key]["Held"].as_u64().unwrap_or(0));
    }
    out
}

/// At zero with the activator in the path: one request by each form, each sent once the one
/// before is held (so their arrival order is known, and which activator pod holds each), no
/// pod Ready until the last is held, then all answered after the wake. Returns the activator
/// pod each seq was held at.
async fn wake_by_every_name(
    install: &Install,
    clients: &Clients,
    ns: &str,
    key: &str,
    first: u64,
    failures: &mut Vec<String>,
) -> BTreeMap<u64, usize> {
    let mut sends = Vec::new();
    let mut held_at = BTreeMap::new();
    let mut before = held_each(install, key).await;
    // No pod is Ready before the last form is held, however slow the machine.
    install.models.hold_starts(true);
    for (i, form) in FORMS.iter().enumerate() {
        let seq = first + i as u64;
        let c = clients.clone();
        let (form, ns2) = (*form, ns.to_owned());
        sends.push(tokio::spawn(async move { c.send(form, seq, &ns2).await }));
        let end = Instant::now() + Duration::from_secs(20);
        let now = loop {
            let now = held_each(install, key).await;
            if now.iter().sum::<u64>() > before.iter().sum::<u64>() {
                break now;
            }
            assert!(
                Instant::now() < end,
                "{form:?} ({seq}) was never held at an activator: {now:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let at = now
            .iter()
            .zip(&before)
            .position(|(n, b)| n > b)
            .unwrap_or(0);
        held_at.insert(seq, at);
        before = now;
    }
    install.models.hold_starts(false);
    for s in sends {
        if let Err(e) = s.await.unwrap() {
            failures.push(e);
        }
    }
    held_at
}

/// The pods' record of the completions whose seq is in `range`, in the order received.
fn received(install: &Install, range: std::ops::Range<u64>) -> Vec<(u64, bool)> {
    install
        .models
        .completions()
        .into_iter()
        .filter_map(|s| {
            s.seq
                .filter(|q| range.contains(q))
                .map(|q| (q, s.via_activator))
        })
        .collect()
}

const SPEED: f64 = 20.0;

/// KEDA has taken Deployment `app` to zero, no pod of it is left, and the activator is in its
/// Service's path.
fn at_zero(install: &Install, ns: &str, app: &str) -> bool {
    install.kube.replicas(ns, app) == Some(0)
        && install.models.pods(ns, app).is_empty()
        && install.in_path(ns, app)
}

fn pools(n: u8) -> Pools {
    // Each test its own loopback addresses.
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    Pools {
        cluster_ips: leak(format!("127.0.{}.", 100 + n * 10)),
        models: leak(format!("127.0.{}.", 101 + n * 10)),
        activators: leak(format!("127.0.{}.", 102 + n * 10)),
        scalers: leak(format!("127.0.{}.", 103 + n * 10)),
    }
}

fn model_options(cold_start: Duration) -> Options {
    Options {
        cold_start,
        millisecond_times: true,
        server: ModelServer {
            service_time: Duration::from_millis(150),
            ..ModelServer::default()
        },
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_installed_whole_holds_every_name_through_zero_n_zero_cycles() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("infscale=info")
        .with_test_writer()
        .try_init();
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    let so = time_scaled(
        doc_of("manifests/examples/vllm-scaledobject.yaml", "ScaledObject"),
        SPEED,
    );
    docs.push(so.clone());
    // A 2 s cold start, and no pod Ready before every form is held (see `wake_by_every_name`).
    let install = Install::start(
        pools(0),
        &docs,
        &[("llm", "chat")],
        model_options(Duration::from_secs(2)),
        Flags::default(),
    )
    .await;
    let keda = Keda::start(&install.cluster, &so, install.scaler_address(), SPEED);
    let clients = Clients::new(&install, "llm", "chat");
    let key = "chat.llm.svc";
    let mut failures: Vec<String> = Vec::new();
    let mut seq = 0u64;
    let mut cycles = 0;
    let mut peak = 0;
    for cycle in 0..2 {
        // Idle: the activator joins the Service, then KEDA takes the last replica.
        let end = Instant::now() + Duration::from_secs(90);
        while !at_zero(&install, "llm", "chat") {
            assert!(
                Instant::now() < end,
                "cycle {cycle}: never at zero with the activator in the path\n{}",
                keda.report(30)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Every name, held at zero, answered after the wake, each activator pod's in order.
        let first = seq;
        let held_at =
            wake_by_every_name(&install, &clients, "llm", key, first, &mut failures).await;
        seq += FORMS.len() as u64;
        let got = received(&install, first..seq);
        assert_eq!(got.len(), FORMS.len(), "cycle {cycle}: {got:?}");
        assert!(
            got.iter().all(|(_, via)| *via),
            "cycle {cycle}: a held request reached the pod around the activator: {got:?}"
        );
        for pod in 0..install.activators.len() {
            let order: Vec<u64> = got
                .iter()
                .map(|(q, _)| *q)
                .filter(|q| held_at.get(q) == Some(&pod))
                .collect();
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(
                order, sorted,
                "cycle {cycle}: activator pod {pod} released out of arrival order"
            );
        }
        // Load: 1 -> N replicas; the activator leaves the path, and from then on nothing
        // reaches a pod through it.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(seq));
        let mut workers = Vec::new();
        for w in 0..120u64 {
            let (stop, next) = (stop.clone(), next.clone());
            let c = clients.clone();
            workers.push(tokio::spawn(async move {
                let mut errors = Vec::new();
                let mut sent = 0;
                // Bounded: at most 400 requests a client.
                while !stop.load(std::sync::atomic::Ordering::SeqCst) && sent < 400 {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let form = FORMS[((w + n) % FORMS.len() as u64) as usize];
                    if let Err(e) = c.send(form, n, "llm").await {
                        errors.push(e);
                    }
                    sent += 1;
                }
                errors
            }));
        }
        eventually(
            &format!("cycle {cycle}: more replicas under load"),
            Duration::from_secs(60),
            || install.models.replicas("llm", "chat") >= 2,
        )
        .await;
        eventually(
            &format!("cycle {cycle}: the activator out of the path under load"),
            Duration::from_secs(60),
            || {
                install
                    .cluster
                    .get("EndpointSlice", "llm", "chat-infscale")
                    .is_none()
            },
        )
        .await;
        // kube-proxy takes a moment to stop choosing it; then a window of steady requests.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let steady_from = next.load(std::sync::atomic::Ordering::SeqCst) + 120;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let steady_to = next.load(std::sync::atomic::Ordering::SeqCst);
        peak = peak.max(install.models.replicas("llm", "chat"));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for w in workers {
            failures.extend(w.await.unwrap());
        }
        seq = next.load(std::sync::atomic::Ordering::SeqCst);
        let steady = received(&install, steady_from..steady_to);
        assert!(
            steady.len() >= 100,
            "cycle {cycle}: only {} steady requests",
            steady.len()
        );
        assert!(
            steady.iter().all(|(_, via)| !via),
            "cycle {cycle}: under steady load {} of {} went through the activator",
            steady.iter().filter(|(_, via)| *via).count(),
            steady.len()
        );
        cycles += 1;
    }
    assert!(
        failures.is_empty(),
        "{} requests failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    eprintln!(
        "{seq} requests by seven names through {cycles} cycles of 0 -> {peak} -> 0; none lost or refused"
    );
}

/// What `infscale tune` prints for the model `chat` in `llm`, scaling to zero: its
/// ScaledObject, as printed.
fn tuned_scaled_object() -> Value {
    let (_, yaml) = common::tune::tune("48", "45", "300", "default", "60", "");
    let so: Value = serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(so["spec"]["minReplicaCount"], 0, "{yaml}");
    so
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tunes_scaled_object_applied_as_printed_wakes_the_model() {
    let so = tuned_scaled_object();
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    docs.push(so.clone());
    let install = Install::start(
        pools(1),
        &docs,
        &[("llm", "chat")],
        model_options(Duration::from_millis(500)),
        Flags::default(),
    )
    .await;
    // Only KEDA's own periods are compressed; the trigger is as tune printed it.
    let keda = Keda::start(&install.cluster, &so, install.scaler_address(), SPEED);
    let clients = Clients::new(&install, "llm", "chat");
    let end = Instant::now() + Duration::from_secs(90);
    while !at_zero(&install, "llm", "chat") {
        assert!(
            Instant::now() < end,
            "never at zero with the activator in the path\n{}",
            keda.report(30)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut failures = Vec::new();
    let held_at =
        wake_by_every_name(&install, &clients, "llm", "chat.llm.svc", 0, &mut failures).await;
    assert!(failures.is_empty(), "{failures:?}\n{}", keda.report(30));
    assert_eq!(held_at.len(), FORMS.len());
    let got = received(&install, 0..FORMS.len() as u64);
    assert_eq!(got.len(), FORMS.len(), "{got:?}");
    assert!(got.iter().all(|(_, via)| *via), "{got:?}");
    assert!(
        keda.scales()
            .iter()
            .any(|(_, _, from, to, _)| *from == 0 && *to >= 1),
        "KEDA woke it\n{}",
        keda.report(30)
    );
}

/// Installs the example with `so` and `flags`, and waits for KEDA to be told, by an
/// `IsActive` error, what `needle` says; the target idle all along and never taken to zero.
async fn reported(n: u8, so: Value, flags: Flags, needle: &str) -> String {
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    docs.push(so.clone());
    let install = Install::start(
        pools(n),
        &docs,
        &[("llm", "chat")],
        model_options(Duration::from_millis(200)),
        flags,
    )
    .await;
    let keda = Keda::start(&install.cluster, &so, install.scaler_address(), SPEED);
    let end = Instant::now() + Duration::from_secs(60);
    let error = loop {
        let said = keda
            .is_active()
            .into_iter()
            .find_map(|(_, _, r)| r.err().filter(|e| e.contains(needle)));
        if let Some(e) = said {
            break e;
        }
        assert!(Instant::now() < end, "never reported\n{}", keda.report(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        keda.scales().iter().all(|(_, _, _, to, _)| *to >= 1),
        "{}",
        keda.report(30)
    );
    assert_eq!(install.kube.replicas("llm", "chat"), Some(1));
    // serve's series say so, where an operator's alert reads them.
    let mut routed = Vec::new();
    for s in &install.scalers {
        let page = reqwest::get(format!("http://{}/metrics", s.second))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        routed.extend(
            page.lines()
                .filter(|l| l.starts_with("infscale_activator_route{"))
                .map(str::to_owned),
        );
    }
    assert!(
        !routed.is_empty() && routed.iter().all(|l| l.ends_with(" 0")),
        "{routed:?}"
    );
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_model_the_activator_does_not_serve_is_reported_to_keda_and_never_read_idle() {
    let so = time_scaled(
        doc_of("manifests/examples/vllm-scaledobject.yaml", "ScaledObject"),
        SPEED,
    );
    // The activator serves another namespace only: it never takes llm/chat.
    let flags = Flags {
        activator: vec![("--namespaces", "team-x".to_owned())],
        ..Flags::default()
    };
    let error = reported(2, so, flags, "no activator pod holds llm/chat").await;
    assert!(error.contains("namespace llm"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trigger_reading_another_key_than_the_activator_counts_under_is_reported() {
    // What tune printed before serve mode learned its models: activatorHost the Deployment.
    let mut so = doc_of("manifests/examples/vllm-scaledobject.yaml", "ScaledObject");
    so["spec"]["triggers"][0]["metadata"]["activatorHost"] = Value::from("chat");
    let so = time_scaled(so, SPEED);
    let error = reported(5, so, Flags::default(), "activatorHost").await;
    assert!(error.contains("chat.llm.svc"), "{error}");
}

/// Deployment `app` in `ns` (pods labelled `labels`) and, when `service`, its Service `app`
/// selecting `selector`: a model as its team writes it.
fn model_docs(ns: &str, app: &str, labels: &str, selector: &str, service: bool) -> Vec<Value> {
    let mut yaml = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {app}, namespace: {ns}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {labels}}}\n  template:\n    metadata: {{labels: {labels}}}\n    spec:\n      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.18.0\n          ports: [{{name: http, containerPort: 8000}}]\n"
    );
    if service {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {app}, namespace: {ns}, labels: {{infscale.io/serve-mode: \"true\"}}}}\nspec:\n  selector: {selector}\n  ports: [{{name: http, port: 8000, targetPort: http}}]\n"
        ));
    }
    serde_yaml::Deserializer::from_str(&yaml)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

/// The example's ScaledObject for Deployment `app` in `ns`, its serve mode naming Service
/// `service`, time-scaled.
fn scaled_object_for(ns: &str, app: &str, service: &str) -> Value {
    let mut so = doc_of("manifests/examples/vllm-scaledobject.yaml", "ScaledObject");
    so["metadata"]["name"] = Value::from(app);
    so["metadata"]["namespace"] = Value::from(ns);
    so["spec"]["scaleTargetRef"]["name"] = Value::from(app);
    let m = &mut so["spec"]["triggers"][0]["metadata"];
    m["deployment"] = Value::from(app);
    m["service"] = Value::from(service);
    time_scaled(so, SPEED)
}

use serde::Deserialize;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_and_a_third_model_in_two_namespaces_are_one_scaled_object_each() {
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    let chat = time_scaled(
        doc_of("manifests/examples/vllm-scaledobject.yaml", "ScaledObject"),
        SPEED,
    );
    docs.push(chat.clone());
    let install = Install::start(
        pools(3),
        &docs,
        &[("llm", "chat")],
        model_options(Duration::from_secs(1)),
        Flags::default(),
    )
    .await;
    let mut kedas = vec![Keda::start(
        &install.cluster,
        &chat,
        install.scaler_address(),
        SPEED,
    )];
    // Two more models, in two more namespaces: each team applies its model and its
    // ScaledObject. Nothing of infscale's is edited or restarted.
    for (ns, app) in [("team-b", "embed"), ("team-c", "code")] {
        let labels = format!("{{app: {app}}}");
        common::cluster::apply(
            &install.cluster,
            &model_docs(ns, app, &labels, &labels, true),
        );
        install.models.manage(ns, app);
        let so = scaled_object_for(ns, app, app);
        kedas.push(Keda::start(
            &install.cluster,
            &so,
            install.scaler_address(),
            SPEED,
        ));
    }
    let mut failures = Vec::new();
    for (i, (ns, app)) in [("llm", "chat"), ("team-b", "embed"), ("team-c", "code")]
        .into_iter()
        .enumerate()
    {
        let end = Instant::now() + Duration::from_secs(90);
        while !at_zero(&install, ns, app) {
            assert!(
                Instant::now() < end,
                "{ns}/{app} never at zero with the activator in the path\n{}",
                kedas[i].report(20)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let clients = Clients::new(&install, ns, app);
        let key = format!("{app}.{ns}.svc");
        let first = 100 * i as u64;
        wake_by_every_name(&install, &clients, ns, &key, first, &mut failures).await;
        let got = received(&install, first..first + FORMS.len() as u64);
        assert_eq!(got.len(), FORMS.len(), "{ns}/{app}: {got:?}");
        assert!(got.iter().all(|(_, via)| *via), "{ns}/{app}: {got:?}");
    }
    assert!(failures.is_empty(), "{failures:?}");
    // The same two activator pods throughout, each holding the three models.
    assert_eq!(install.activators.len(), 2);
    for a in &install.activators {
        let routes: serde_json::Value = reqwest::get(format!("http://{}/routes", a.second))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        // llm/chat has the shipped routes file's route, which takes its learned port.
        let mut learned: Vec<String> = routes["routes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| !r["port"].is_null())
            .filter_map(|r| r["model"].as_str().map(str::to_owned))
            .collect();
        learned.sort();
        assert_eq!(
            learned,
            ["llm/chat", "team-b/embed", "team-c/code"],
            "{routes}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_scalers_and_two_scaled_objects_share_one_slice_without_flapping_through_a_failover() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("infscale=info")
        .with_test_writer()
        .try_init();
    // One Service, `chat`, in front of two Deployments (stable and canary), each with its own
    // ScaledObject naming the Service; two serve pods with a 2 s lease.
    let mut docs = model_docs(
        "llm",
        "chat",
        "{app: chat, track: stable}",
        "{app: chat}",
        true,
    );
    docs.extend(model_docs(
        "llm",
        "chat-b",
        "{app: chat, track: canary}",
        "",
        false,
    ));
    let (a, b) = (
        scaled_object_for("llm", "chat", "chat"),
        scaled_object_for("llm", "chat-b", "chat"),
    );
    let flags = Flags {
        scaler: vec![("--lease-seconds", "2".to_owned())],
        ..Flags::default()
    };
    let mut install = Install::start(
        pools(4),
        &docs,
        &[("llm", "chat"), ("llm", "chat-b")],
        model_options(Duration::from_millis(1500)),
        flags,
    )
    .await;
    let kedas = [
        Keda::start(&install.cluster, &a, install.scaler_address(), SPEED),
        Keda::start(&install.cluster, &b, install.scaler_address(), SPEED),
    ];
    let both_zero = |install: &Install| {
        at_zero(install, "llm", "chat") && install.kube.replicas("llm", "chat-b") == Some(0)
    };
    let wait_zero = async |install: &Install, what: &str| {
        let end = Instant::now() + Duration::from_secs(90);
        while !both_zero(install) {
            assert!(
                Instant::now() < end,
                "{what}: never both at zero\n{}\n{}",
                kedas[0].report(20),
                kedas[1].report(20)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    wait_zero(&install, "at first").await;
    // Both targets idle at zero: the slice stays, written by one trigger, never deleted.
    let deletes = |install: &Install| {
        install
            .kube
            .calls()
            .iter()
            .filter(|c| c.method == "DELETE" && c.path.ends_with("/endpointslices/chat-infscale"))
            .count()
    };
    let writes = |install: &Install| {
        install
            .kube
            .calls()
            .iter()
            .filter(|c| c.method == "PATCH" && c.path.ends_with("/endpointslices/chat-infscale"))
            .count()
    };
    let (before, patched) = (deletes(&install), writes(&install));
    let end = Instant::now() + Duration::from_secs(6);
    let mut samples = 0;
    while Instant::now() < end {
        assert!(
            install.in_path("llm", "chat"),
            "the slice went while both targets idle"
        );
        // Four polls and more, past the fallback's three failures: every metric reads (work
        // too, with no replica and nothing held), so KEDA's fallback, which acts at zero since
        // v2.19, never wakes either target.
        assert!(
            both_zero(&install),
            "a target woke while idle at zero\n{}\n{}",
            kedas[0].report(20),
            kedas[1].report(20)
        );
        samples += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        deletes(&install),
        before,
        "the slice was deleted while both idle"
    );
    assert!(samples > 100);
    eprintln!(
        "both idle at zero for 6 s: at zero and the slice present in {samples} of {samples} samples; {} PATCH, 0 DELETE",
        writes(&install) - patched
    );
    let lease = install
        .cluster
        .get("Lease", "infscale", "infscale-path.llm.chat")
        .expect("the Service's lease");
    let holder = lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(holder.starts_with("infscale-"), "{lease}");
    // Requests at zero are held and answered (both targets wake on the Service's held count).
    let clients = Clients::new(&install, "llm", "chat");
    let mut failures = Vec::new();
    wake_by_every_name(&install, &clients, "llm", "chat.llm.svc", 0, &mut failures).await;
    // The writer's pod crashes: the other takes the lease over, and a cycle later requests at
    // zero are held and answered again.
    let writer = install
        .scalers
        .iter()
        .position(|s| holder.starts_with(&format!("{}/", s.name)))
        .expect("the writer is a scaler pod");
    install.remove_scaler(writer, true).await;
    let survivor = install.scalers[1 - writer].name.clone();
    eventually("the lease taken over", Duration::from_secs(30), || {
        install
            .cluster
            .get("Lease", "infscale", "infscale-path.llm.chat")
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
            .is_some_and(|h| h.starts_with(&format!("{survivor}/")))
    })
    .await;
    wait_zero(&install, "after the failover").await;
    wake_by_every_name(
        &install,
        &clients,
        "llm",
        "chat.llm.svc",
        100,
        &mut failures,
    )
    .await;
    assert!(failures.is_empty(), "{failures:?}");
    let got = received(&install, 0..200);
    assert_eq!(got.len(), 2 * FORMS.len(), "{got:?}");
    assert!(got.iter().all(|(_, via)| *via), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_activator_pod_replaced_at_zero_is_replaced_in_the_path_at_once() {
    let mut docs = example_in("manifests/examples/vllm-deployment.yaml", "llm");
    let so = time_scaled(
        doc_of("manifests/examples/vllm-scaledobject.yaml", "ScaledObject"),
        SPEED,
    );
    docs.push(so.clone());
    let mut install = Install::start(
        pools(6),
        &docs,
        &[("llm", "chat")],
        model_options(Duration::from_secs(1)),
        Flags::default(),
    )
    .await;
    let keda = Keda::start(&install.cluster, &so, install.scaler_address(), SPEED);
    let end = Instant::now() + Duration::from_secs(90);
    while !at_zero(&install, "llm", "chat") {
        assert!(Instant::now() < end, "never at zero\n{}", keda.report(30));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let listed = |install: &Install| -> Vec<(String, bool)> {
        install
            .cluster
            .get("EndpointSlice", "llm", "chat-infscale")
            .map(|s| {
                s["endpoints"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| {
                        (
                            e["addresses"][0].as_str().unwrap_or_default().to_owned(),
                            e["conditions"]["ready"] != false,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    // Activator pod 1 is replaced (a rolling update, a node lost): its Pod goes, a new one
    // comes on another address. The model's slice follows at once, not at its next resync.
    let (gone, deployment) = (
        install.activators[0].ip.to_string(),
        install.deployments.0.clone(),
    );
    install
        .cluster
        .delete("Pod", "infscale", &install.activators[0].name);
    install.activators[0].kill();
    let pools = pools(6);
    install.start_activator(&deployment, &pools, 9, &[]).await;
    let new = install.activators.last().unwrap().ip.to_string();
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let l = listed(&install);
        if l.iter().any(|(a, ready)| *a == new && *ready) && l.iter().all(|(a, _)| *a != gone) {
            break;
        }
        assert!(
            Instant::now() < end,
            "the slice names the new activator pod ready, and not the old: {l:?} (new {new}, gone {gone}); the admin Service's: {:?}",
            install.cluster.of_service("infscale-activator-admin")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Clients are held at zero, by every name, and answered.
    let clients = Clients::new(&install, "llm", "chat");
    let mut failures = Vec::new();
    wake_by_every_name(&install, &clients, "llm", "chat.llm.svc", 0, &mut failures).await;
    assert!(failures.is_empty(), "{failures:?}");
}
