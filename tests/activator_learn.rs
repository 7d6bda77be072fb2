//! The activator learns its models from the slices `serve` writes, and places every request on a
//! model's own port for that model whatever its host: the short name, `NAME.NS`, the FQDN, a
//! ClusterIP, HTTP/1.0 without a `Host`, h2's `:authority`. Held there at zero, each is
//! answered by the model's pod once one is ready, in arrival order. A request no route places is
//! answered 404 saying what the activator serves, and counted. The routes file, changed under a
//! running activator, drops no held request. What the test asserts is what the pod and the
//! clients see, and what the activator answers.

mod common;

use common::http::{read_head, respond};
use common::kube::objects::{controller_slice, service};
use common::kube::{Cluster, Kube};
use common::loopback::accept;
use infscale::activator::learn::{LearnConfig, Namespaces};
use infscale::activator::limits::Limits;
use infscale::activator::server::{bind, Config};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The model's port: one of this binary's range, 21000-21099 (nothing else here takes them).
const PORT: u16 = 21007;

/// The slice `serve` writes for Service `svc` in `ns`: the activator at `ip`, port `port` under
/// the name `http`, its endpoint ready or not.
fn infscale_slice(ns: &str, svc: &str, ip: &str, port: u16, ready: bool) -> serde_json::Value {
    serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{svc}-infscale"), "namespace": ns,
            "labels": {"kubernetes.io/service-name": svc,
                "endpointslice.kubernetes.io/managed-by": "infscale.io"},
            "annotations": {"infscale.io/max-held": "40"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": port}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}]})
}

fn learn(ports: std::ops::RangeInclusive<u16>) -> LearnConfig {
    LearnConfig {
        namespaces: Namespaces::All,
        domain: "cluster.local".into(),
        ports,
        shared_port: 0,
        max_models: 16,
        linger: Duration::from_secs(60),
        max_held: 1000,
        hold_timeout: Duration::from_secs(60),
        keep_alive: None,
    }
}

/// A pod that records each request's `x-seq` and `Host` as it reads it (one connection at a
/// time, in the order it accepts them).
type SeqHosts = Arc<Mutex<Vec<(u64, String)>>>;

fn recording_pod(addr: &str) -> (common::loopback::Server, SeqHosts) {
    let seen: SeqHosts = Arc::default();
    let record = seen.clone();
    let server = accept(addr, Duration::from_secs(120), move |mut stream, _, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let header = |name: &str| {
            head.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let seq = header("x-seq")
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX);
        record
            .lock()
            .unwrap()
            .push((seq, header("host").unwrap_or_default()));
        respond(&mut stream, 200, "application/json", b"{\"ok\":true}");
    });
    (server, seen)
}

/// One raw HTTP request to `to`, written as given: what kube-proxy would hand the activator.
async fn raw(to: SocketAddr, request: String) -> (u16, String) {
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(to).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, text)
    })
    .await
    .unwrap()
}

fn post(host: Option<&str>, seq: u64, version: &str) -> String {
    let body = "{\"prompt\":\"hi\"}";
    let host = host.map(|h| format!("host: {h}\r\n")).unwrap_or_default();
    format!(
        "POST /v1/completions {version}\r\n{host}x-seq: {seq}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn held(admin: SocketAddr, host: &str) -> u64 {
    let doc: serde_json::Value = reqwest::get(format!("http://{admin}/queue"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    doc[host]["Held"].as_u64().unwrap_or(0)
}

async fn wait(what: &str, within: Duration, mut ok: impl AsyncFnMut() -> bool) {
    let end = Instant::now() + within;
    while !ok().await {
        assert!(Instant::now() < end, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_learned_models_port_holds_every_name_and_no_name_and_releases_in_order() {
    let cluster = Cluster::default();
    let kube = Kube::serve(cluster.clone());
    cluster.put(service("llm", "chat", &[("http", 8000)]));
    // The activator "pod" on 127.0.71.1; the model's pod will be 127.0.71.2.
    let act = bind(Config {
        listen: "127.0.71.1:0".parse().unwrap(),
        admin_listen: "127.0.71.1:0".parse().unwrap(),
        routes: Vec::new(),
        reload: None,
        learn: Some(learn(21000..=21099)),
        namespace_cap: Some(100),
        kube_api: Some(kube.url()),
        limits: Limits::default(),
    })
    .await
    .unwrap();
    let (shared, admin) = (act.proxy_addr().unwrap(), act.admin_addr().unwrap());
    tokio::spawn(act.run(std::future::pending()));
    let model_port = SocketAddr::new(shared.ip(), PORT);
    // Nothing there before serve's slice names the model.
    assert!(std::net::TcpStream::connect(model_port).is_err());
    // Serve's first write: the activator listed not ready; it learns the model and its port.
    cluster.put(infscale_slice("llm", "chat", "127.0.71.1", PORT, false));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let probe = |to: SocketAddr, model: &'static str| {
        let http = http.clone();
        async move {
            http.get(format!("http://{to}/"))
                .header("x-infscale-probe", "1")
                .header("x-infscale-model", model)
                .send()
                .await
                .ok()
                .map(|r| {
                    let owner = r
                        .headers()
                        .get("x-infscale-model")
                        .map(|v| v.to_str().unwrap_or("").to_owned());
                    (r.status().as_u16(), owner)
                })
        }
    };
    wait(
        "the model's port answers",
        Duration::from_secs(10),
        async || probe(model_port, "llm/chat").await.is_some(),
    )
    .await;
    assert_eq!(
        probe(model_port, "llm/chat").await,
        Some((204, Some("llm/chat".into())))
    );
    assert_eq!(
        probe(model_port, "other/embed").await,
        Some((409, Some("llm/chat".into()))),
        "the port is llm/chat's: another model asking for it is told so"
    );
    assert_eq!(probe(shared, "llm/chat").await.map(|p| p.0), Some(204));
    assert_eq!(probe(shared, "llm/nothing").await.map(|p| p.0), Some(404));
    // At zero: every form a client may reach the Service by arrives at the model's port.
    let forms: Vec<(Option<&str>, &str)> = vec![
        (Some("chat:8000"), "HTTP/1.1"),
        (Some("chat.llm:8000"), "HTTP/1.1"),
        (Some("chat.llm.svc"), "HTTP/1.1"),
        (Some("chat.llm.svc.cluster.local:8000"), "HTTP/1.1"),
        (Some("10.96.12.34:8000"), "HTTP/1.1"),
        (Some("anything-at-all"), "HTTP/1.1"),
        (None, "HTTP/1.0"),
    ];
    let mut clients = Vec::new();
    for (i, (host, version)) in forms.iter().enumerate() {
        clients.push(tokio::spawn(raw(
            model_port,
            post(*host, i as u64, version),
        )));
        let want = i as u64 + 1;
        wait("held", Duration::from_secs(10), async || {
            held(admin, "chat.llm.svc").await == want
        })
        .await;
    }
    // And h2 with prior knowledge, its :authority the FQDN.
    let fqdn = "chat.llm.svc.cluster.local";
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .resolve(fqdn, model_port)
        .build()
        .unwrap();
    let h2_seq = forms.len() as u64;
    let h2_client = tokio::spawn(async move {
        h2.post(format!("http://{fqdn}:{PORT}/v1/completions"))
            .header("x-seq", h2_seq)
            .body("{\"prompt\":\"hi\"}")
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    wait("the h2 request held", Duration::from_secs(10), async || {
        held(admin, "chat.llm.svc").await == h2_seq + 1
    })
    .await;
    // A request with a host the activator serves nothing under, on the shared port: 404, with
    // what it does serve, and counted.
    let (status, text) = raw(shared, post(Some("nope.example"), 99, "HTTP/1.1")).await;
    assert_eq!(status, 404, "{text}");
    assert!(
        text.contains("chat.llm.svc") || text.contains("\"chat\""),
        "{text}"
    );
    assert!(text.contains("unknown_host"), "{text}");
    let (status, text) = raw(shared, post(None, 98, "HTTP/1.0")).await;
    assert_eq!(status, 404, "{text}");
    assert!(text.contains("no_host"), "{text}");
    let page = http
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for reason in ["unknown_host", "no_host"] {
        assert!(
            page.lines()
                .any(|l| l.starts_with("infscale_activator_unrouted_total")
                    && l.contains(reason)
                    && l.ends_with(" 1")),
            "{reason} in\n{page}"
        );
    }
    // The model wakes: its pod is ready in its Service's own slice.
    let (pod, seen) = recording_pod("127.0.71.2:0");
    cluster.put(controller_slice(
        "llm",
        "chat-ctrl",
        "chat",
        &[("http", pod.addr.port())],
        &["127.0.71.2".to_owned()],
    ));
    for c in clients {
        let (status, text) = c.await.unwrap();
        assert_eq!(status, 200, "{text}");
    }
    assert_eq!(h2_client.await.unwrap().ok(), Some(200));
    let order: Vec<u64> = seen.lock().unwrap().iter().map(|(s, _)| *s).collect();
    assert_eq!(
        order,
        (0..=h2_seq).collect::<Vec<_>>(),
        "the pod got them in arrival order"
    );
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|(_, host)| host == "chat.llm.svc"),
        "forwarded as the Service's own host: {:?}",
        seen.lock().unwrap()
    );
    // The slice goes (the model is busy): the port lingers; /routes says so.
    cluster.delete("EndpointSlice", "llm", "chat-infscale");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let routes: serde_json::Value = http
        .get(format!("http://{admin}/routes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let learned = &routes["routes"][0];
    assert_eq!(learned["model"], "llm/chat", "{routes}");
    assert_eq!(learned["port"], PORT, "{routes}");
    assert_eq!(
        learned["maxHeld"], 40,
        "the trigger's bound, from the slice: {routes}"
    );
    assert_eq!(probe(model_port, "llm/chat").await.map(|p| p.0), Some(204));
    drop(pod);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_routes_file_changed_under_held_requests_drops_none_of_them() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let ready = Arc::new(AtomicBool::new(false));
    let (up, order) = common::recording::recording_upstream_on("127.0.72.2:0", ready.clone());
    let dir = std::env::temp_dir().join(format!("infscale-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("routes.yaml");
    let route = |max_held: usize, extra: &str| {
        format!(
            "routes:\n  - host: chat.llm.svc\n    upstream: http://{}\n    healthPath: /health\n    maxHeld: {max_held}\n    holdTimeoutSeconds: 60\n{extra}",
            up.addr
        )
    };
    let first = route(10, "");
    std::fs::write(&file, &first).unwrap();
    let ctx = infscale::activator::routes::Context::new("llm");
    let routes = infscale::activator::routes::parse_in("routes.yaml", &first, &ctx).unwrap();
    let limits = Limits {
        probe_held: Duration::from_millis(50),
        probe_idle: Duration::from_millis(50),
        ..Limits::default()
    };
    let act = bind(Config {
        listen: "127.0.72.1:0".parse().unwrap(),
        admin_listen: "127.0.72.1:0".parse().unwrap(),
        routes,
        reload: Some((
            infscale::activator::reload::Reload {
                path: file.clone(),
                ctx,
                every: Duration::from_millis(100),
            },
            first,
        )),
        learn: None,
        namespace_cap: None,
        kube_api: None,
        limits,
    })
    .await
    .unwrap();
    let (shared, admin) = (act.proxy_addr().unwrap(), act.admin_addr().unwrap());
    tokio::spawn(act.run(std::future::pending()));
    let mut clients = Vec::new();
    for i in 0..3u64 {
        clients.push(tokio::spawn(raw(
            shared,
            post(Some("chat.llm.svc"), i, "HTTP/1.1"),
        )));
        let want = i + 1;
        wait("held", Duration::from_secs(10), async || {
            held(admin, "chat.llm.svc").await == want
        })
        .await;
    }
    // A file that no longer parses changes nothing.
    std::fs::write(&file, "routes: [ {").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(held(admin, "chat.llm.svc").await, 3);
    // The route changes (its bound) and a second one comes: the three stay held, by the
    // retired route, while new requests take the new one.
    let embed =
        "  - host: embed.llm.svc\n    upstream: http://127.0.72.3:9\n    healthPath: /health\n";
    std::fs::write(&file, route(20, embed)).unwrap();
    wait("the second route", Duration::from_secs(10), async || {
        let doc: serde_json::Value = reqwest::get(format!("http://{admin}/queue"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        doc.get("embed.llm.svc").is_some()
    })
    .await;
    clients.push(tokio::spawn(raw(
        shared,
        post(Some("chat.llm.svc"), 3, "HTTP/1.1"),
    )));
    wait("four held", Duration::from_secs(10), async || {
        held(admin, "chat.llm.svc").await == 4
    })
    .await;
    let routes: serde_json::Value = reqwest::get(format!("http://{admin}/routes"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(routes["routes"][0]["maxHeld"], 20, "{routes}");
    let page = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for result in ["ok", "error"] {
        assert!(
            page.lines()
                .any(|l| l.starts_with("infscale_activator_routes_reloads_total")
                    && l.contains(result)),
            "{result} in\n{page}"
        );
    }
    // The upstream comes up: all four are answered, none dropped.
    ready.store(true, Ordering::SeqCst);
    for c in clients {
        let (status, text) = c.await.unwrap();
        assert_eq!(status, 200, "{text}");
    }
    let mut got: Vec<u64> = order.lock().unwrap().iter().map(|(_, s)| *s).collect();
    got.sort();
    assert_eq!(got, [0, 1, 2, 3]);
    let _ = std::fs::remove_dir_all(&dir);
}
