//! The installed whole, wired as the install guide wires it (docs/operate.md): the shipped
//! kustomizations `manifests/scaler` and `manifests/activator`, the vLLM example's Deployment,
//! Service and ScaledObject (or `infscale tune`'s ScaledObject as printed), applied into the
//! Kubernetes API stand-in; the real `serve` and the real activator, two pods each, started
//! from their Deployments' own arguments; KEDA and its HPA run from the ScaledObject; a
//! kube-proxy over every Service's slices and a client pod's DNS. Clients call the model's
//! Service by every name a Kubernetes client uses. What is asserted is what the clients get,
//! what the model's pods receive (and whether through the activator), what KEDA sets, and what
//! the API holds.

mod common;

use common::cluster::{eventually, http10_post_with, Dns, Keda, ModelServer, Options};
use common::install::{shipped, Flags, Install, Pools};
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

/// The first document of kind `kind` in a shipped file.
fn doc_of(rel: &str, kind: &str) -> Value {
    shipped(rel)
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
/// before is held (so their arrival order is known, and which activator pod holds each),
/// then all answered after the wake. Returns the activator pod each seq was held at.
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
    let mut docs = shipped("manifests/examples/vllm-deployment.yaml");
    let so = time_scaled(
        doc_of("manifests/examples/vllm-scaledobject.yaml", "ScaledObject"),
        SPEED,
    );
    docs.push(so.clone());
    // The cold start is long enough that every form's request arrives before a pod is Ready.
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
        while !(install.models.replicas("llm", "chat") == 0 && install.in_path("llm", "chat")) {
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
