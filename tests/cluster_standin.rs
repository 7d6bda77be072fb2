//! The cluster stand-ins of `common::cluster` on their own, everything on loopback: a Service
//! with two model pods gets a ClusterIP and is reached by every name a client in the cluster
//! uses (HTTP/1.1, HTTP/1.0 with no Host, h2 with prior knowledge); a Service added later is
//! served; a slice of infscale's own takes its share of new connections and none once deleted;
//! a Deployment scaled 0 -> 2 -> 0 starts and drains its pods and their slice, answering what it
//! held; the HPA stand-in's arithmetic; KEDA's loop against a scripted external scaler, and
//! against the real `serve` scaling the model pods by their queue; and the shipped manifests
//! applied to the store.

mod common;

use common::cluster::kustomize::load;
use common::cluster::{
    apply, apply_file, apply_in, eventually, http10_post, kustomize, Dns, Keda, ModelServer,
    Models, Net, Options, Phase,
};
use common::kube::objects::{MANAGED_BY, SERVICE_NAME};
use common::kube::Cluster;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// Deployment `app` in `ns`: `replicas`, labels app=APP, container `vllm` at port `http` 8000.
fn deployment(ns: &str, app: &str, replicas: u32) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.18.0",
                    "ports": [{"name": "http", "containerPort": 8000}]}]}}}
    })
}

/// Service `name` in `ns` selecting app=APP, port `http` 8000 to the pods' `http`.
fn service(ns: &str, name: &str, app: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"app": app},
            "ports": [{"name": "http", "port": 8000, "targetPort": "http"}]}
    })
}

fn options(pool: &str) -> Options {
    Options {
        ip_pool: pool.into(),
        cold_start: Duration::from_millis(100),
        drain: Duration::from_millis(30),
        server: ModelServer {
            service_time: Duration::from_millis(20),
            ..ModelServer::default()
        },
        ..Options::default()
    }
}

const PROMPT: &str = "{\"prompt\":\"hi\",\"max_tokens\":4}";

/// POSTs a completion to `url` with `x-seq: seq`; the status.
async fn complete(http: &reqwest::Client, url: &str, seq: u64) -> Result<u16, String> {
    http.post(url)
        .header("x-seq", seq)
        .header("content-type", "application/json")
        .body(PROMPT)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .map_err(|e| format!("{url}: {e:?}"))
}

/// Whether a connection to `addr` is refused, or reset (or closed) before it answers a byte.
async fn rejected(addr: SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return true;
    };
    let _ = s
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await;
    let mut buf = [0u8; 1];
    matches!(
        tokio::time::timeout(SECOND, s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// The ready endpoints of `service`'s controller slice in `ns`.
fn ready_in_slice(cluster: &Cluster, ns: &str, service: &str) -> usize {
    cluster
        .get("EndpointSlice", ns, &format!("{service}-ctrl"))
        .map_or(0, |s| {
            s["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["conditions"]["ready"] == true)
                .count()
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_with_two_pods_is_reached_by_every_name_a_client_uses() {
    let cluster = Cluster::default();
    cluster.put(deployment("llm", "chat", 2));
    cluster.put(service("llm", "chat", "chat"));
    let net = Net::start(&cluster, "127.0.100.");
    let models = Models::start(&cluster, options("127.0.120."), &[("llm", "chat")]);
    models.wait_replicas("llm", "chat", 2, 5 * SECOND).await;
    let ip = net.wait_cluster_ip("llm", "chat", SECOND).await;
    assert_eq!(ip, "127.0.100.1".parse::<IpAddr>().unwrap());
    let stored = cluster.get("Service", "llm", "chat").unwrap();
    assert_eq!(stored["spec"]["clusterIP"], "127.0.100.1");
    assert_eq!(stored["spec"]["clusterIPs"][0], "127.0.100.1");
    eventually("both pods in the slice", 2 * SECOND, || {
        ready_in_slice(&cluster, "llm", "chat") == 2
    })
    .await;

    // Every name form a client pod in `llm` uses, and the ClusterIP itself.
    let dns = Dns::new(&cluster, "llm");
    let forms = [
        "chat:8000".to_owned(),
        "chat.llm:8000".to_owned(),
        "chat.llm.svc:8000".to_owned(),
        "chat.llm.svc.cluster.local:8000".to_owned(),
        "chat.llm.svc.cluster.local.:8000".to_owned(),
        format!("{ip}:8000"),
    ];
    let http = dns.client(10 * SECOND);
    let mut seq = 0u64;
    for form in &forms {
        for _ in 0..4 {
            let url = format!("http://{form}/v1/completions");
            assert_eq!(complete(&http, &url, seq).await, Ok(200));
            seq += 1;
        }
    }
    let seen = models.completions();
    let mut per_form: BTreeMap<String, usize> = BTreeMap::new();
    for s in &seen {
        assert!(!s.via_activator, "kube-proxy added nothing: {s:?}");
        *per_form
            .entry(s.host.clone().unwrap_or_default())
            .or_default() += 1;
    }
    for form in &forms {
        assert_eq!(per_form.get(form), Some(&4), "{form}: {per_form:?}");
    }
    // By turns: both pods took half.
    let pods: Vec<String> = models
        .pods("llm", "chat")
        .into_iter()
        .map(|p| p.name)
        .collect();
    for pod in &pods {
        let n = seen.iter().filter(|s| &s.pod == pod).count();
        assert_eq!(n, 12, "{pod}: {n} of 24");
    }
    let by_endpoint = net.connections("llm", "chat");
    assert_eq!(by_endpoint.values().sum::<u64>(), 24, "{by_endpoint:?}");

    // A chat completion, and the names that do not resolve.
    let r = http
        .post("http://chat:8000/v1/chat/completions")
        .body("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    for bad in [
        "chat.other",
        "chat.llm.svc.cluster",
        "nope",
        "chat.llm.pod.cluster.local",
    ] {
        assert_eq!(dns.resolve(bad), None, "{bad}");
        let url = format!("http://{bad}:8000/v1/completions");
        assert!(complete(&http, &url, 0).await.is_err(), "{bad} resolved");
    }
    // From another namespace, the short name is not this Service; the namespaced one is.
    let other = Dns::new(&cluster, "other");
    assert_eq!(other.resolve("chat"), None);
    assert_eq!(other.resolve("chat.llm"), Some(ip));

    // HTTP/1.0 with no Host, straight to the ClusterIP.
    let before = models.completions().len();
    let (status, body) = http10_post(SocketAddr::new(ip, 8000), "/v1/completions", PROMPT)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("text_completion"), "{body}");
    let last = models.completions()[before].clone();
    assert_eq!((last.host, last.version.as_str()), (None, "HTTP/1.0"));

    // h2 with prior knowledge: `:authority` is the name used.
    let h2 = dns.h2_client(10 * SECOND);
    for (i, form) in ["chat:8000", "chat.llm.svc:8000"].iter().enumerate() {
        let url = format!("http://{form}/v1/completions");
        assert_eq!(complete(&h2, &url, 100 + i as u64).await, Ok(200));
        let last = models.completions().last().cloned().unwrap();
        assert_eq!(last.version, "HTTP/2.0");
        assert_eq!(last.name(), Some(*form), "{last:?}");
    }
    // The pods' pages, through the Service.
    let page = http
        .get("http://chat:8000/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("vllm:num_requests_running{"), "{page}");
    assert!(page.contains("vllm:num_requests_waiting{"), "{page}");
    assert!(net.errors().is_empty() && models.errors().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_added_later_gets_a_cluster_ip_and_listeners() {
    let cluster = Cluster::default();
    cluster.put(deployment("llm", "chat", 1));
    cluster.put(service("llm", "chat", "chat"));
    let net = Net::start(&cluster, "127.0.101.");
    let models = Models::start(&cluster, options("127.0.121."), &[("llm", "chat")]);
    models.wait_replicas("llm", "chat", 1, 5 * SECOND).await;
    let first = net.wait_cluster_ip("llm", "chat", SECOND).await;
    // A second Service, later, over the same pods, at another port.
    cluster.put(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "chat-b", "namespace": "llm"},
        "spec": {"selector": {"app": "chat"},
            "ports": [{"name": "web", "port": 9000, "targetPort": 8000}]}
    }));
    let second = net.wait_cluster_ip("llm", "chat-b", SECOND).await;
    assert_ne!(first, second);
    let dns = Dns::new(&cluster, "llm");
    let http = dns.client(5 * SECOND);
    let mut ok = false;
    for seq in 0..40 {
        if complete(&http, "http://chat-b:9000/v1/completions", seq).await == Ok(200) {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(ok, "chat-b:9000 never answered: {:?}", net.errors());
    let slice = cluster.get("EndpointSlice", "llm", "chat-b-ctrl").unwrap();
    assert_eq!(slice["ports"][0]["name"], "web");
    assert_eq!(slice["ports"][0]["port"], 8000);
    assert_eq!(slice["metadata"]["labels"][SERVICE_NAME], "chat-b");
    assert_eq!(
        slice["metadata"]["labels"][MANAGED_BY],
        "endpointslice-controller.k8s.io"
    );
    // A Service with no endpoints rejects.
    cluster.put(service("llm", "empty", "nobody"));
    let empty = net.wait_cluster_ip("llm", "empty", SECOND).await;
    assert!(rejected(SocketAddr::new(empty, 8000)).await);
    assert!(complete(&http, "http://empty:8000/v1/completions", 0)
        .await
        .is_err());
    // Deleted, it is gone: no ClusterIP, no name.
    cluster.delete("Service", "llm", "chat-b");
    eventually("chat-b forgotten", SECOND, || {
        net.cluster_ip("llm", "chat-b").is_none()
    })
    .await;
    assert_eq!(dns.resolve("chat-b"), None);
}

/// A stand-in activator on `addr`: answers every request 200 with `activator`, counting them.
async fn activator(addr: SocketAddr) -> (Arc<Mutex<u64>>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let served = Arc::new(Mutex::new(0u64));
    let count = served.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| {
                    *count.lock().unwrap() += 1;
                    async {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from_static(b"activator")),
                        ))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (served, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infscale_slice_shares_new_connections_until_it_is_deleted() {
    let cluster = Cluster::default();
    cluster.put(deployment("llm", "chat", 2));
    cluster.put(service("llm", "chat", "chat"));
    let net = Net::start(&cluster, "127.0.102.");
    let models = Models::start(&cluster, options("127.0.122."), &[("llm", "chat")]);
    models.wait_replicas("llm", "chat", 2, 5 * SECOND).await;
    net.wait_cluster_ip("llm", "chat", SECOND).await;
    // The activator's pod on 127.0.130.1, at a port of its own under the Service's port name.
    let act_ip: IpAddr = "127.0.130.1".parse().unwrap();
    let port = std::net::TcpListener::bind((act_ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (served, _task) = activator(SocketAddr::new(act_ip, port)).await;
    cluster.put(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "chat-infscale", "namespace": "llm",
            "labels": {SERVICE_NAME: "chat", MANAGED_BY: "infscale.io"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [act_ip.to_string()], "conditions": {"ready": true}}]
    }));
    // The choice is made from the store at accept time: the slices as they are now (both pods
    // in theirs, the activator in its own) share the connections by turns.
    eventually("both pods in the slice", 2 * SECOND, || {
        ready_in_slice(&cluster, "llm", "chat") == 2
    })
    .await;
    let http = Dns::new(&cluster, "llm").client(5 * SECOND);
    let url = "http://chat.llm.svc:8000/v1/completions";
    for seq in 0..12 {
        assert_eq!(complete(&http, url, seq).await, Ok(200));
    }
    assert_eq!(net.connections_to("llm", "chat", act_ip), 4);
    assert_eq!(*served.lock().unwrap(), 4);
    assert_eq!(models.completions().len(), 8);
    // Deleted: none of the new connections goes there.
    cluster.delete("EndpointSlice", "llm", "chat-infscale");
    for seq in 12..24 {
        assert_eq!(complete(&http, url, seq).await, Ok(200));
    }
    assert_eq!(net.connections_to("llm", "chat", act_ip), 4);
    assert_eq!(models.completions().len(), 20);
    let pods: u64 = models
        .pods("llm", "chat")
        .iter()
        .map(|p| net.connections_to("llm", "chat", p.ip))
        .sum();
    assert_eq!(pods, 20);
    assert_eq!(net.log().len(), 24);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_the_deployment_zero_two_zero_changes_the_pods_and_the_slice() {
    let cluster = Cluster::default();
    cluster.put(deployment("llm", "chat", 0));
    cluster.put(service("llm", "chat", "chat"));
    let net = Net::start(&cluster, "127.0.103.");
    let models = Models::start(
        &cluster,
        Options {
            server: ModelServer {
                service_time: Duration::from_millis(300),
                ..ModelServer::default()
            },
            ..options("127.0.123.")
        },
        &[("llm", "chat")],
    );
    let ip = net.wait_cluster_ip("llm", "chat", SECOND).await;
    let service = SocketAddr::new(ip, 8000);
    // At zero: no pod, an empty slice, the Service refuses.
    eventually("the empty slice", SECOND, || {
        cluster.get("EndpointSlice", "llm", "chat-ctrl").is_some()
    })
    .await;
    assert_eq!(ready_in_slice(&cluster, "llm", "chat"), 0);
    assert!(rejected(service).await);
    // 0 -> 2, as the scale subresource writes it.
    assert!(cluster.edit("Deployment", "llm", "chat", |d| {
        d["spec"]["replicas"] = serde_json::json!(2)
    }));
    eventually("two pods starting", SECOND, || {
        models.pods("llm", "chat").len() == 2
    })
    .await;
    let starting = cluster.all("Pod");
    assert_eq!(starting.len(), 2);
    for p in &starting {
        assert_eq!(p["metadata"]["labels"]["app"], "chat");
        assert!(p["metadata"]["labels"]["pod-template-hash"].is_string());
        assert_eq!(p["status"]["conditions"][0]["type"], "Ready");
        let created = p["metadata"]["creationTimestamp"].as_str().unwrap();
        assert!(created.len() == 20 && created.ends_with('Z'), "{created}");
        assert!(p["status"]["podIP"]
            .as_str()
            .unwrap()
            .starts_with("127.0.123."));
    }
    models.wait_replicas("llm", "chat", 2, 5 * SECOND).await;
    eventually("two ready endpoints", SECOND, || {
        ready_in_slice(&cluster, "llm", "chat") == 2
    })
    .await;
    eventually("the Deployment's status", SECOND, || {
        cluster.get("Deployment", "llm", "chat").unwrap()["status"]["readyReplicas"] == 2
    })
    .await;
    for p in cluster.all("Pod") {
        assert_eq!(p["status"]["conditions"][0]["status"], "True");
        let ready = p["status"]["conditions"][0]["lastTransitionTime"]
            .as_str()
            .unwrap();
        assert!(ready >= p["metadata"]["creationTimestamp"].as_str().unwrap());
    }
    // A request in flight while the Deployment goes to zero is answered: the pods leave the
    // slice, then finish what they hold.
    let http = Dns::new(&cluster, "llm").client(5 * SECOND);
    let inflight = {
        let http = http.clone();
        tokio::spawn(async move { complete(&http, "http://chat:8000/v1/completions", 1).await })
    };
    eventually("the request held", SECOND, || {
        models.completions().len() == 1
    })
    .await;
    assert!(cluster.edit("Deployment", "llm", "chat", |d| {
        d["spec"]["replicas"] = serde_json::json!(0)
    }));
    eventually("both pods terminating", SECOND, || {
        models
            .pods("llm", "chat")
            .iter()
            .all(|p| p.phase == Phase::Terminating)
    })
    .await;
    eventually("out of the slice", SECOND, || {
        ready_in_slice(&cluster, "llm", "chat") == 0
    })
    .await;
    assert_eq!(inflight.await.unwrap(), Ok(200));
    eventually("the pods gone", 5 * SECOND, || {
        models.pods("llm", "chat").is_empty() && cluster.all("Pod").is_empty()
    })
    .await;
    eventually("no endpoint left in the slice", SECOND, || {
        let slice = cluster.get("EndpointSlice", "llm", "chat-ctrl").unwrap();
        slice["endpoints"].as_array().map(Vec::len) == Some(0)
    })
    .await;
    assert!(rejected(service).await);
    assert_eq!(
        cluster.get("Deployment", "llm", "chat").unwrap()["status"]["replicas"],
        0
    );
}

#[test]
fn the_hpa_stand_in_computes_as_the_controller_does() {
    use common::cluster::hpa::Hpa;
    let so: serde_yaml::Value =
        serde_yaml::from_str("spec: {minReplicaCount: 0, maxReplicaCount: 8}").unwrap();
    // No behavior: the legacy rules, scale-down window 300 s.
    let mut hpa = Hpa::of(&so, 1.0);
    assert_eq!((hpa.min, hpa.max), (1, 8));
    // ceil(10 / 4) = 3 from 1; then 25 proposed, up to max(2 * 3, 4) = 6 at once.
    assert_eq!(hpa.sync(0.0, 1, 1, &[Ok((10.0, 4.0))]), Ok(3));
    assert_eq!(hpa.sync(15.0, 3, 3, &[Ok((100.0, 4.0))]), Ok(6));
    // The window keeps the highest recommendation of the last 300 s (25), in both directions:
    // up to the max, 8, and held there with the load gone.
    assert_eq!(hpa.sync(30.0, 6, 6, &[Ok((24.0, 4.0))]), Ok(8));
    assert_eq!(hpa.sync(45.0, 8, 8, &[Ok((4.0, 4.0))]), Ok(8));
    // Within the tolerance of the 6 it has (6 * 4 = 24, give or take 10%): no change; past it,
    // ceil(value / 4).
    let mut hpa = Hpa::of(&so, 1.0);
    assert_eq!(hpa.proposal(26.3, 4.0, 6), 6);
    assert_eq!(hpa.proposal(26.5, 4.0, 6), 7);
    assert_eq!(hpa.proposal(21.7, 4.0, 6), 6);
    assert_eq!(hpa.proposal(19.9, 4.0, 6), 5);
    assert_eq!(hpa.sync(0.0, 2, 2, &[Ok((8.0, 4.0))]), Ok(2));
    assert_eq!(hpa.sync(100.0, 2, 2, &[Ok((0.0, 4.0))]), Ok(2));
    assert_eq!(hpa.sync(301.0, 2, 2, &[Ok((0.0, 4.0))]), Ok(1));
    // Every metric failed, or one failed and the rest would scale down: no change.
    assert!(hpa.sync(400.0, 1, 1, &[Err("down".into())]).is_err());
    assert!(hpa
        .sync(400.0, 3, 3, &[Ok((0.0, 4.0)), Err("down".into())])
        .is_err());
    // Two metrics: the larger proposal.
    assert_eq!(
        hpa.sync(500.0, 1, 1, &[Ok((4.0, 4.0)), Ok((3.0, 1.0))]),
        Ok(3)
    );
    // At zero it does nothing.
    assert_eq!(hpa.sync(600.0, 0, 0, &[Ok((40.0, 4.0))]), Ok(0));
}

#[test]
fn the_hpa_stand_in_keeps_a_behavior_block() {
    use common::cluster::hpa::Hpa;
    // The example's behavior: up Pods 4 / Percent 100 per 15 s (Max), no up window; down
    // window 300 s, Percent 100 per 15 s; time scale 10 (so 1.5 s periods, a 30 s window).
    let so: serde_yaml::Value = serde_yaml::from_str(
        "spec:
  minReplicaCount: 0
  maxReplicaCount: 20
  advanced:
    horizontalPodAutoscalerConfig:
      behavior:
        scaleUp:
          stabilizationWindowSeconds: 0
          selectPolicy: Max
          policies:
            - {type: Pods, value: 4, periodSeconds: 15}
            - {type: Percent, value: 100, periodSeconds: 15}
        scaleDown:
          stabilizationWindowSeconds: 300
          policies:
            - {type: Percent, value: 50, periodSeconds: 15}
",
    )
    .unwrap();
    let mut hpa = Hpa::of(&so, 10.0);
    // From 1, up to max(1 + 4, 1 * 2) = 5 in one period.
    assert_eq!(hpa.sync(0.0, 1, 1, &[Ok((80.0, 4.0))]), Ok(5));
    // Within the same 1.5 s period, the period started at 1: no more than 5.
    assert_eq!(hpa.sync(1.0, 5, 5, &[Ok((80.0, 4.0))]), Ok(5));
    // The next period: max(5 + 4, 10) = 10.
    assert_eq!(hpa.sync(2.0, 5, 5, &[Ok((80.0, 4.0))]), Ok(10));
    // Down: held by the 30 s window.
    assert_eq!(hpa.sync(10.0, 10, 10, &[Ok((4.0, 4.0))]), Ok(10));
    // Past the window, half per period at most: 10 -> 5 -> 2 (down rounding truncates).
    assert_eq!(hpa.sync(33.0, 10, 10, &[Ok((4.0, 4.0))]), Ok(5));
    assert_eq!(hpa.sync(35.0, 5, 5, &[Ok((4.0, 4.0))]), Ok(2));
    assert_eq!(hpa.sync(37.0, 2, 2, &[Ok((4.0, 4.0))]), Ok(1));
}

/// A scripted external scaler: IsActive and the one metric's value as the test sets them; a
/// StreamIsActive that pushes `true` whenever `push` is sent.
mod scripted {
    use infscale::serve::proto::external_scaler_server::ExternalScaler;
    use infscale::serve::proto::{
        GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
        MetricValue, ScaledObjectRef,
    };
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use tonic::{Request, Response, Status};

    #[derive(Clone, Default)]
    pub struct Script {
        pub active: Arc<Mutex<bool>>,
        pub value: Arc<Mutex<f64>>,
        pub refs: Arc<Mutex<Vec<ScaledObjectRef>>>,
        pub push: Arc<tokio::sync::Notify>,
    }

    type Stream =
        Pin<Box<dyn futures::Stream<Item = Result<IsActiveResponse, Status>> + Send + 'static>>;

    #[tonic::async_trait]
    impl ExternalScaler for Script {
        async fn is_active(
            &self,
            r: Request<ScaledObjectRef>,
        ) -> Result<Response<IsActiveResponse>, Status> {
            self.refs.lock().unwrap().push(r.into_inner());
            Ok(Response::new(IsActiveResponse {
                result: *self.active.lock().unwrap(),
            }))
        }
        type StreamIsActiveStream = Stream;
        async fn stream_is_active(
            &self,
            _: Request<ScaledObjectRef>,
        ) -> Result<Response<Stream>, Status> {
            let push = self.push.clone();
            let s = futures::stream::unfold(push, |push| async move {
                push.notified().await;
                Some((Ok(IsActiveResponse { result: true }), push))
            });
            Ok(Response::new(Box::pin(s)))
        }
        async fn get_metric_spec(
            &self,
            _: Request<ScaledObjectRef>,
        ) -> Result<Response<GetMetricSpecResponse>, Status> {
            Ok(Response::new(GetMetricSpecResponse {
                metric_specs: vec![MetricSpec {
                    metric_name: "queue".into(),
                    target_size: 4,
                    target_size_float: 4.0,
                }],
            }))
        }
        async fn get_metrics(
            &self,
            _: Request<GetMetricsRequest>,
        ) -> Result<Response<GetMetricsResponse>, Status> {
            let v = *self.value.lock().unwrap();
            Ok(Response::new(GetMetricsResponse {
                metric_values: vec![MetricValue {
                    metric_name: "queue".into(),
                    metric_value: v as i64,
                    metric_value_float: v,
                }],
            }))
        }
        type StreamMetricSpecStream = Pin<
            Box<dyn futures::Stream<Item = Result<GetMetricSpecResponse, Status>> + Send + 'static>,
        >;
        async fn stream_metric_spec(
            &self,
            _: Request<ScaledObjectRef>,
        ) -> Result<Response<Self::StreamMetricSpecStream>, Status> {
            Err(Status::unimplemented("no"))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_activates_scales_and_cools_down_as_its_scaled_object_says() {
    use infscale::serve::proto::external_scaler_server::ExternalScalerServer;
    let script = scripted::Script::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tonic::transport::Server::builder()
        .add_service(ExternalScalerServer::new(script.clone()))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener));
    let _server = tokio::spawn(server);
    let cluster = Cluster::default();
    cluster.put(deployment("llm", "chat", 0));
    // Polling every 30 s, cooldown 300 s, at a time scale of 100: 0.3 s and 3 s. The HPA's
    // sync: 0.15 s.
    let so: serde_yaml::Value = serde_yaml::from_str(
        "apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat, namespace: llm}
spec:
  scaleTargetRef: {name: chat}
  pollingInterval: 30
  cooldownPeriod: 300
  minReplicaCount: 0
  maxReplicaCount: 4
  triggers:
    - type: external-push
      metadata:
        scalerAddress: infscale.infscale.svc:9090
        deployment: chat
        threshold: \"4\"
",
    )
    .unwrap();
    let keda = Keda::start(&cluster, &so, addr, 100.0);
    // Idle and never active: the first poll leaves it at zero.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(keda.scales().len(), 0, "{}", keda.report(20));
    let sent = script.refs.lock().unwrap().first().cloned().unwrap();
    assert_eq!(
        (sent.name.as_str(), sent.namespace.as_str()),
        ("chat", "llm")
    );
    assert_eq!(
        sent.scaler_metadata["scalerAddress"],
        "infscale.infscale.svc:9090"
    );
    assert_eq!(sent.scaler_metadata["threshold"], "4");
    assert_eq!(sent.scaler_metadata.len(), 3);
    // A push wakes it at once, before any poll could.
    *script.active.lock().unwrap() = true;
    script.push.notify_one();
    keda.wait_replicas(1, Duration::from_millis(250)).await;
    assert_eq!(keda.scales()[0].1, common::cluster::By::Push);
    // The HPA: ceil(10 / 4) = 3.
    *script.value.lock().unwrap() = 10.0;
    keda.wait_replicas(3, 2 * SECOND).await;
    // Load gone: the HPA's legacy 300 s (3 s) window holds 3, then 1; after the 3 s cooldown
    // from the last active poll, KEDA takes it to zero.
    *script.value.lock().unwrap() = 0.0;
    *script.active.lock().unwrap() = false;
    keda.wait_replicas(0, 10 * SECOND).await;
    let scales = keda.scales();
    let last = scales.last().unwrap();
    assert_eq!(
        (last.1, last.3),
        (common::cluster::By::Poll, 0),
        "{}",
        keda.report(40)
    );
    assert!(keda
        .is_active()
        .iter()
        .any(|(_, by, a)| *by == common::cluster::By::Poll && *a == Ok(false)));
}

#[test]
fn the_shipped_manifests_apply_to_the_store() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let cluster = Cluster::default();
    // The example names no namespace: `kubectl apply -n llm -f` puts it in the caller's.
    let example = load(&root.join("manifests/examples/vllm-deployment.yaml"));
    let skipped = apply_in(&cluster, "llm", &example);
    assert!(skipped.is_empty(), "{skipped:?}");
    let d = cluster.get("Deployment", "llm", "chat").unwrap();
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        8000
    );
    assert!(cluster.get("Service", "llm", "chat").is_some());
    // The activator's kustomization, rendered and applied (each document in the namespace the
    // rendering gives it, `default` if none, as `kubectl apply -k`): its Deployment and
    // Services in, the rest named.
    let docs = kustomize(&root.join("manifests/activator"));
    let ns = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .and_then(|d| d["metadata"]["namespace"].as_str())
        .unwrap_or("default")
        .to_owned();
    let skipped = apply(&cluster, &docs);
    assert!(cluster
        .get("Deployment", &ns, "infscale-activator")
        .is_some());
    assert!(cluster
        .get("Service", &ns, "infscale-activator-admin")
        .is_some());
    for kind in ["ConfigMap", "ServiceAccount"] {
        assert!(
            skipped
                .iter()
                .any(|s| s.starts_with(&format!("{kind}/{ns}/"))),
            "{kind}: {skipped:?}"
        );
    }
    // Without -n, `kubectl apply -f` puts what names no namespace in `default`.
    let other = Cluster::default();
    assert!(apply_file(&other, root.join("manifests/examples/vllm-deployment.yaml")).is_empty());
    assert!(other.get("Deployment", "default", "chat").is_some());
    // A second apply keeps what others wrote (a ClusterIP) and takes the manifest's replicas.
    cluster.update("Service", "llm", "chat", |s| {
        s["spec"]["clusterIP"] = serde_json::json!("127.0.104.1");
        true
    });
    cluster.edit("Deployment", "llm", "chat", |d| {
        d["spec"]["replicas"] = serde_json::json!(5)
    });
    apply_in(&cluster, "llm", &example);
    assert_eq!(
        cluster.get("Service", "llm", "chat").unwrap()["spec"]["clusterIP"],
        "127.0.104.1"
    );
    assert_eq!(
        cluster.get("Deployment", "llm", "chat").unwrap()["spec"]["replicas"],
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keda_and_the_real_serve_scale_the_model_pods_by_their_queue() {
    let cluster = Cluster::default();
    cluster.put(deployment("llm", "chat", 1));
    cluster.put(service("llm", "chat", "chat"));
    let api = common::kube::Kube::serve(cluster.clone());
    let _net = Net::start(&cluster, "127.0.105.");
    let models = Models::start(
        &cluster,
        Options {
            server: ModelServer {
                service_time: Duration::from_millis(200),
                max_num_seqs: 2,
                ..ModelServer::default()
            },
            ..options("127.0.125.")
        },
        &[("llm", "chat")],
    );
    models.wait_replicas("llm", "chat", 1, 5 * SECOND).await;
    let (scaler, _client) = common::scaler::with_kube(api.url()).await;
    let so: serde_yaml::Value = serde_yaml::from_str(
        "apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat, namespace: llm}
spec:
  scaleTargetRef: {name: chat}
  minReplicaCount: 1
  maxReplicaCount: 3
  triggers:
    - type: external
      metadata:
        scalerAddress: infscale.infscale.svc:9090
        deployment: chat
        threshold: \"2\"
        metricsPort: \"8000\"
        scrapeIntervalSeconds: \"0.1\"
",
    )
    .unwrap();
    let keda = Keda::start(&cluster, &so, scaler.grpc, 100.0);
    // Six clients back to back on two batch slots: running + waiting near 6, so 3 replicas.
    let http = Dns::new(&cluster, "llm").client(10 * SECOND);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..6u64)
        .map(|c| {
            let (http, stop) = (http.clone(), stop.clone());
            tokio::spawn(async move {
                let mut errors = Vec::new();
                for seq in 0..200 {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let url = "http://chat:8000/v1/completions";
                    if let Err(e) = complete(&http, url, c * 1000 + seq).await {
                        errors.push(e);
                    }
                }
                errors
            })
        })
        .collect();
    keda.wait_replicas(3, 10 * SECOND).await;
    models.wait_replicas("llm", "chat", 3, 5 * SECOND).await;
    // The new pods take their share of the new connections.
    eventually("requests on the new pods", 5 * SECOND, || {
        let served: std::collections::BTreeSet<String> =
            models.completions().into_iter().map(|s| s.pod).collect();
        served.len() == 3
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for c in clients {
        let errors = c.await.unwrap();
        assert!(errors.is_empty(), "{errors:?}");
    }
    assert!(
        keda.metrics()
            .iter()
            .any(|(_, _, _, v)| v.as_ref().is_ok_and(|v| *v >= 4.0)),
        "{}",
        keda.report(40)
    );
}
