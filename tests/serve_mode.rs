//! Serve mode end to end: clients call the model's Service (a kube-proxy stand-in routing by the
//! EndpointSlices of a Kubernetes API stand-in), the real scaler writes the activator into the
//! Service's path and out of it, the real activator sends to the pods its slices name, and a
//! KEDA stand-in takes the Deployment between zero and one on `IsActive`. What the pod records
//! is the judge: under steady load nothing reaches it through the activator; at zero requests
//! are held and reach it after the wake, in the order they arrived; across 20 cycles of
//! up / zero / up no request is lost or answered with a connection error.

mod common;

use common::keda::{client, object};
use common::kube::{kube_proxy, Cluster, Kube};
use common::scaler::{config, start};
use infscale::activator::routes::RouteSpec;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the pod saw: each completion's sequence number and whether it came through the
/// activator (which adds `x-forwarded-for`; kube-proxy forwards bytes), in arrival order.
#[derive(Default)]
struct Seen {
    order: Mutex<Vec<(u64, bool)>>,
    running: AtomicU64,
}

struct Pod {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// A model pod on `addr`, an event loop as vLLM's server is (one thread accepts and reads every
/// connection, on a runtime of its own): each completion takes 80 to 140 ms; its vLLM page
/// shows what runs.
async fn start_pod(addr: SocketAddr, seen: Arc<Seen>) -> Pod {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (bound_tx, bound) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(serve_pod(addr, seen, stopped, bound_tx));
    });
    let _ = bound.await;
    Pod { stop, task }
}

async fn serve_pod(
    addr: SocketAddr,
    seen: Arc<Seen>,
    stopped: tokio::sync::oneshot::Receiver<()>,
    bound: tokio::sync::oneshot::Sender<()>,
) {
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    let _ = bound.send(());
    let page = seen.clone();
    let app = axum::Router::new()
        .route(
            "/v1/completions",
            axum::routing::post(move |headers: axum::http::HeaderMap| {
                let seen = seen.clone();
                async move {
                    let seq = headers
                        .get("x-seq")
                        .and_then(|v| v.to_str().ok()?.parse().ok())
                        .unwrap_or(u64::MAX);
                    let via = headers.contains_key("x-forwarded-for");
                    seen.order.lock().unwrap().push((seq, via));
                    seen.running.fetch_add(1, Ordering::SeqCst);
                    // 80 to 140 ms, so clients sending back to back fall out of step.
                    tokio::time::sleep(Duration::from_millis(80 + 10 * (seq % 7))).await;
                    seen.running.fetch_sub(1, Ordering::SeqCst);
                    "{\"choices\":[{\"text\":\"ok\"}]}"
                }
            }),
        )
        .route(
            "/metrics",
            axum::routing::get(move || {
                let n = page.running.load(Ordering::SeqCst);
                async move { common::pods::vllm_running(n) }
            }),
        );
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .await;
}

/// KEDA and the Deployment: on `IsActive` true at zero, a pod Ready 300 ms later (a cold start)
/// and in the controller's slice; on false for 300 ms (the cooldown) at one, the pod out of the
/// slice, then stopped once what it holds is answered.
#[allow(clippy::too_many_arguments)]
async fn keda(
    scaler: SocketAddr,
    so: infscale::serve::proto::ScaledObjectRef,
    slices: Cluster,
    pod_addr: SocketAddr,
    seen: Arc<Seen>,
    replicas: Arc<AtomicU32>,
    zeros: Arc<AtomicU32>,
    until: Instant,
) {
    let mut c = client(scaler).await;
    let mut pod = Some(start_pod(pod_addr, seen.clone()).await);
    slices.controller("chat", &[pod_addr]);
    replicas.store(1, Ordering::SeqCst);
    let mut idle_since: Option<Instant> = None;
    while Instant::now() < until {
        let active = c.is_active(so.clone()).await.map(|r| r.into_inner().result);
        match (active, pod.is_some()) {
            (Ok(true), false) => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                pod = Some(start_pod(pod_addr, seen.clone()).await);
                slices.controller("chat", &[pod_addr]);
                replicas.store(1, Ordering::SeqCst);
            }
            (Ok(false), true) => {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= Duration::from_millis(300) {
                    slices.controller("chat", &[]);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if let Some(p) = pod.take() {
                        let _ = p.stop.send(());
                        let _ = p.task.await;
                    }
                    replicas.store(0, Ordering::SeqCst);
                    zeros.fetch_add(1, Ordering::SeqCst);
                    idle_since = None;
                }
            }
            _ => idle_since = None,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client request through the Service: `Ok` for a 200, else what went wrong.
async fn send(http: &reqwest::Client, service: SocketAddr, seq: u64) -> Result<(), String> {
    let r = http
        .post(format!("http://{service}/v1/completions"))
        .header("x-seq", seq)
        .body("{\"prompt\":\"hi\",\"max_tokens\":4}")
        .send()
        .await
        .map_err(|e| format!("request {seq}: {e}"))?;
    match r.status().as_u16() {
        200 => Ok(()),
        s => Err(format!("request {seq}: status {s}")),
    }
}

/// The activator's `infscale_activator_forwarded_total` for route `chat`, from its `/metrics`.
async fn forwarded(http: &reqwest::Client, admin: SocketAddr) -> f64 {
    let page = http
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .expect("the activator's /metrics")
        .text()
        .await
        .expect("a page");
    page.lines()
        .find(|l| l.starts_with("infscale_activator_forwarded_total{") && l.contains("\"chat\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

async fn wait_for(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < end, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_mode_keeps_the_activator_out_of_the_path_and_loses_nothing_across_twenty_cycles() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("infscale::serve=info")
        .with_test_writer()
        .try_init();
    let slices = Cluster::default();
    let kube = Kube::serve_mode(slices.clone());
    let service = kube_proxy(slices.clone(), "chat").await;
    // The Service's ClusterIP and port are the kube-proxy stand-in's: `serviceUrl` names them.
    slices.put(serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "chat", "namespace": "llm",
            "labels": {"infscale.io/serve-mode": "true"}},
        "spec": {"clusterIP": service.ip().to_string(),
            "ports": [{"name": "http", "port": service.port(), "targetPort": "http"}]}}));
    let pod_addr = {
        let l = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
        l.local_addr().unwrap()
    };
    // The activator, watching the chat Service's slices and sending to the pods they name.
    let route = RouteSpec {
        service: Some("chat".into()),
        direct: true,
        port_name: Some("http".into()),
        max_held: 1000,
        hold_timeout_seconds: 30.0,
        counts_host: Some("chat".into()),
        ..RouteSpec::to_upstream("http://chat.llm.svc:80")
    }
    .check(0, "llm")
    .unwrap();
    let act = infscale::activator::server::bind(infscale::activator::server::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        routes: vec![route],
        reload: None,
        learn: None,
        namespace_cap: None,
        kube_api: Some(kube.server.url("")),
        limits: infscale::activator::limits::Limits::default(),
    })
    .await
    .unwrap();
    let (proxy, admin) = (act.proxy_addr().unwrap(), act.admin_addr().unwrap());
    tokio::spawn(act.run(std::future::pending()));
    let scaler = start(infscale::serve::server::Config {
        statics: HashMap::from([(
            "chat".to_owned(),
            vec![format!("http://{pod_addr}/metrics")],
        )]),
        allowed_activators: vec![format!("http://{admin}")],
        kube_api: Some(kube.server.url("")),
        use_kube: true,
        // The activator on loopback, its proxy port (`activatorPort`) wherever it was bound.
        serve_mode: infscale::serve::path_kube::ServeModeSettings {
            ports: 1..=u16::MAX,
            loopback_pods: true,
            ..Default::default()
        },
        ..config()
    })
    .await;
    let so = object(
        "chat",
        &[
            ("deployment", "chat".to_owned()),
            ("threshold", "4".to_owned()),
            ("scrapeIntervalSeconds", "0.1".to_owned()),
            ("scrapeTimeoutSeconds", "0.1".to_owned()),
            ("activatorUrl", format!("http://{admin}")),
            ("activatorHost", "chat".to_owned()),
            ("serveMode", "true".to_owned()),
            ("service", "chat".to_owned()),
            ("serviceUrl", format!("http://{service}")),
            ("activatorPort", proxy.port().to_string()),
            ("serveModeSettleSeconds", "0.3".to_owned()),
        ],
    );
    let seen = Arc::new(Seen::default());
    let replicas = Arc::new(AtomicU32::new(0));
    let zeros = Arc::new(AtomicU32::new(0));
    let deadline = Instant::now() + Duration::from_secs(240);
    tokio::spawn(keda(
        scaler.grpc,
        so,
        slices.clone(),
        pod_addr,
        seen.clone(),
        replicas.clone(),
        zeros.clone(),
        deadline,
    ));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut failures = Vec::new();
    let mut seq = 0u64;
    let mut held_served = 0;
    for cycle in 0..20 {
        // Idle: the activator joins the Service, then KEDA takes the last pod.
        wait_for(
            &format!("cycle {cycle}: at zero with the activator in the path"),
            Duration::from_secs(20),
            || replicas.load(Ordering::SeqCst) == 0 && slices.ours("chat"),
        )
        .await;
        // Ten requests at zero, each sent once the one before is held (so their arrival order is
        // known): held, then served after the wake, in that order.
        let first = seq;
        let mut sends = Vec::new();
        for i in 0..10u64 {
            let (http, n) = (http.clone(), first + i);
            sends.push(tokio::spawn(async move { send(&http, service, n).await }));
            common::model::wait_held(admin, i + 1).await;
        }
        seq += 10;
        for s in sends {
            if let Err(e) = s.await.unwrap() {
                failures.push(format!("cycle {cycle}: {e}"));
            }
        }
        let woken: Vec<(u64, bool)> = seen
            .order
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| (first..first + 10).contains(n))
            .copied()
            .collect();
        let order: Vec<u64> = woken.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            order,
            (first..first + 10).collect::<Vec<_>>(),
            "cycle {cycle}: the held requests reached the pod out of their arrival order"
        );
        assert!(
            woken.iter().all(|(_, via)| *via),
            "cycle {cycle}: {woken:?}"
        );
        held_served += woken.len();
        // Steady load, four clients back to back: the activator leaves the path, and from
        // then on nothing reaches the pod through it.
        let stop_load = Arc::new(AtomicU32::new(0));
        let next = Arc::new(AtomicU64::new(seq));
        let workers: Vec<_> = (0..4u64)
            .map(|w| {
                let (http, stop_load, next) = (http.clone(), stop_load.clone(), next.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(25 * w)).await;
                    let mut errors = Vec::new();
                    while stop_load.load(Ordering::SeqCst) == 0 {
                        let n = next.fetch_add(1, Ordering::SeqCst);
                        if let Err(e) = send(&http, service, n).await {
                            errors.push(e);
                        }
                    }
                    errors
                })
            })
            .collect();
        wait_for(
            &format!("cycle {cycle}: the activator out of the path under load"),
            Duration::from_secs(10),
            || !slices.ours("chat"),
        )
        .await;
        let steady_from = next.load(Ordering::SeqCst) + 4;
        // The activator's own count of forwarded requests, from the first steady request on.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let forwarded_before = forwarded(&http, admin).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let forwarded_after = forwarded(&http, admin).await;
        stop_load.store(1, Ordering::SeqCst);
        for w in workers {
            for e in w.await.unwrap() {
                failures.push(format!("cycle {cycle}: {e}"));
            }
        }
        seq = next.load(Ordering::SeqCst);
        let steady: Vec<(u64, bool)> = seen
            .order
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| *n >= steady_from && *n < seq)
            .copied()
            .collect();
        assert!(
            steady.len() >= 8,
            "cycle {cycle}: only {} steady requests",
            steady.len()
        );
        assert_eq!(
            forwarded_before, forwarded_after,
            "cycle {cycle}: the activator forwarded under steady load"
        );
        assert!(
            steady.iter().all(|(_, via)| !via),
            "cycle {cycle}: under steady load requests went through the activator: {steady:?}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}",
        failures.len()
    );
    assert_eq!(held_served, 200);
    eprintln!("{seq} requests through the Service, none lost; 200 of them held at zero");
    assert!(zeros.load(Ordering::SeqCst) >= 20);
}
