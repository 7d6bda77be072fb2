//! A stand-in Kubernetes API: the Deployment read and the pod list and watch that kube makes,
//! with pods whose IPs are loopback addresses.

use super::http::{hold_watch, json, kube_not_found, kube_version, respond, serve, Server};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
pub struct FakePod {
    pub name: String,
    pub ip: String,
    pub ready: bool,
}

pub struct KubeApi {
    pub server: Server,
    pub pods: Arc<Mutex<Vec<FakePod>>>,
    /// The Deployment's spec.replicas, which a scale patch changes.
    pub replicas: Arc<Mutex<u32>>,
    /// Pod list requests (each watcher's start lists first).
    pub pod_lists: Arc<std::sync::atomic::AtomicUsize>,
    /// Service `infscale-activator` (port 9092, target port `admin`): its ready endpoints' IPs
    /// and the `admin` port they listen on.
    pub activators: Arc<Mutex<(Vec<String>, u16)>>,
    /// Further EndpointSlices listed beside the activator Service's own (a test writes them
    /// whole: any labels, address type and addresses).
    pub extra_slices: Arc<Mutex<Vec<serde_json::Value>>>,
    /// Per pod name: its `creationTimestamp` and its Ready condition's `lastTransitionTime`
    /// (RFC 3339); pods not named here have neither.
    pub start_times: Arc<Mutex<std::collections::HashMap<String, (String, String)>>>,
    /// Every pod PATCH: the pod's name, the body, and when it came. A merge patch's annotations
    /// are kept and served with the pod from then on.
    pub patches: Arc<Mutex<Vec<(String, serde_json::Value, std::time::Instant)>>>,
}

type Annotations = std::collections::HashMap<String, serde_json::Map<String, serde_json::Value>>;

/// `n` Ready pods `APP-0`, `APP-1`, ... at 127.0.0.2, 127.0.0.3, ... (as
/// [`super::pods::pods_on_one_port`] places their servers).
pub fn ready_pods(app: &str, n: usize) -> Vec<FakePod> {
    (0..n)
        .map(|i| FakePod {
            name: format!("{app}-{i}"),
            ip: format!("127.0.0.{}", i + 2),
            ready: true,
        })
        .collect()
}

/// A blocking GET of `http://addr/path`, for the pod proxy.
fn get(addr: &str, path: &str) -> Option<(u16, Vec<u8>)> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).ok()?;
    let end = all.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let status = String::from_utf8_lossy(&all[..end])
        .split(' ')
        .nth(1)?
        .parse()
        .ok()?;
    Some((status, all[end..].to_vec()))
}

fn pod_json(
    ns: &str,
    app: &str,
    p: &FakePod,
    version: u64,
    times: Option<&(String, String)>,
) -> serde_json::Value {
    let mut pod = pod_json_untimed(ns, app, p, version);
    if let Some((created, ready_at)) = times {
        pod["metadata"]["creationTimestamp"] = serde_json::json!(created);
        pod["status"]["conditions"][0]["lastTransitionTime"] = serde_json::json!(ready_at);
    }
    pod
}

fn pod_json_untimed(ns: &str, app: &str, p: &FakePod, version: u64) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": p.name, "namespace": ns, "uid": format!("uid-{}", p.name),
                     "resourceVersion": version.to_string(), "labels": {"app": app}},
        "spec": {"containers": [{"name": "vllm", "resources": {"requests": {"cpu": "4"}}}]},
        "status": {"phase": "Running", "podIP": p.ip,
                   "conditions": [{"type": "Ready", "status": if p.ready { "True" } else { "False" }}]}
    })
}

/// Serves Deployment `app` in namespace `ns` (selector app=APP), its pods (list, watch, and the
/// pod proxy), its scale subresource, and `/version`.
pub fn kube_api(ns: &'static str, app: &'static str, pods: Vec<FakePod>) -> KubeApi {
    let replicas = Arc::new(Mutex::new(pods.len() as u32));
    let scale = replicas.clone();
    let pods = Arc::new(Mutex::new(pods));
    let shared = pods.clone();
    let deployment = format!("/apis/apps/v1/namespaces/{ns}/deployments/{app}");
    let pod_path = format!("/api/v1/namespaces/{ns}/pods");
    let pod_lists = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let lists = pod_lists.clone();
    let activators = Arc::new(Mutex::new((Vec::<String>::new(), 0u16)));
    let endpoints = activators.clone();
    let extra_slices = Arc::new(Mutex::new(Vec::<serde_json::Value>::new()));
    let extra = extra_slices.clone();
    let start_times = Arc::new(Mutex::new(std::collections::HashMap::new()));
    let times = start_times.clone();
    let patches = Arc::new(Mutex::new(Vec::new()));
    let patched = patches.clone();
    let annotations = Arc::new(Mutex::new(Annotations::new()));
    let service_path = format!("/api/v1/namespaces/{ns}/services/infscale-activator");
    let slices_path = format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices");
    let server = serve(
        "127.0.0.1:0",
        Duration::from_secs(120),
        move |mut stream, head, stop| {
            let path = head.target.split('?').next().unwrap_or_default().to_owned();
            let watch = head.target.contains("watch=true");
            if path == "/version" {
                kube_version(&mut stream);
            } else if path == deployment {
                let n = *scale.lock().unwrap();
                json(
                    &mut stream,
                    200,
                    serde_json::json!({
                        "apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": app, "namespace": ns},
                        "spec": {"replicas": n, "selector": {"matchLabels": {"app": app}},
                                 "template": {"metadata": {"labels": {"app": app}},
                                              "spec": {"containers": [{"name": "vllm"}]}}},
                        "status": {"replicas": n}
                    }),
                );
            } else if path == format!("{deployment}/scale") && head.method == "PATCH" {
                let patch: serde_json::Value =
                    serde_json::from_slice(&head.body).unwrap_or_default();
                let n = patch["spec"]["replicas"].as_u64().unwrap_or(0) as u32;
                *scale.lock().unwrap() = n;
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "autoscaling/v1",
                "kind": "Scale", "metadata": {"name": app, "namespace": ns},
                "spec": {"replicas": n}, "status": {"replicas": n, "selector": format!("app={app}")}}),
                );
            } else if path == service_path {
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": "infscale-activator", "namespace": ns},
                        "spec": {"ports": [
                            {"name": "http", "port": 80, "targetPort": "http"},
                            {"name": "admin", "port": 9092, "targetPort": "admin"}]}}),
                );
            } else if path == slices_path && !watch {
                let (ips, port) = endpoints.lock().unwrap().clone();
                let eps: Vec<serde_json::Value> = ips
                    .iter()
                    .map(|ip| serde_json::json!({"addresses": [ip], "conditions": {"ready": true}}))
                    .collect();
                let mut items = vec![
                    serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "infscale-activator-x", "namespace": ns,
                        "resourceVersion": "1",
                        "labels": {"kubernetes.io/service-name": "infscale-activator",
                            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
                    "addressType": "IPv4",
                    "ports": [{"name": "http", "port": 8080}, {"name": "admin", "port": port}],
                    "endpoints": eps}),
                ];
                items.extend(extra.lock().unwrap().iter().cloned());
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList",
                        "metadata": {"resourceVersion": "1"},
                        "items": items}),
                );
            } else if (path == pod_path || path == slices_path) && watch {
                hold_watch(&mut stream, &stop);
            } else if path == pod_path {
                lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let times = times.lock().unwrap().clone();
                let notes = annotations.lock().unwrap().clone();
                let items: Vec<serde_json::Value> = shared
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        let mut pod = pod_json(ns, app, p, 1, times.get(&p.name));
                        if let Some(a) = notes.get(&p.name) {
                            pod["metadata"]["annotations"] = serde_json::Value::Object(a.clone());
                        }
                        pod
                    })
                    .collect();
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "PodList",
                "metadata": {"resourceVersion": "1"}, "items": items}),
                );
            } else if let (Some(name), "PATCH") = (
                path.strip_prefix(&format!("{pod_path}/"))
                    .filter(|n| !n.contains('/')),
                head.method.as_str(),
            ) {
                let body: serde_json::Value =
                    serde_json::from_slice(&head.body).unwrap_or_default();
                patched.lock().unwrap().push((
                    name.to_owned(),
                    body.clone(),
                    std::time::Instant::now(),
                ));
                let known = shared
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|p| p.name == name)
                    .cloned();
                match (known, body["metadata"]["annotations"].as_object()) {
                    (Some(p), Some(new)) => {
                        let mut notes = annotations.lock().unwrap();
                        let entry = notes.entry(name.to_owned()).or_default();
                        entry.extend(new.clone());
                        let mut pod = pod_json(ns, app, &p, 2, None);
                        pod["metadata"]["annotations"] = serde_json::Value::Object(entry.clone());
                        json(&mut stream, 200, pod);
                    }
                    _ => json(
                        &mut stream,
                        422,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1",
                            "status": "Failure", "reason": "Invalid", "code": 422,
                            "message": format!("cannot patch pod {name}")}),
                    ),
                }
            } else if let Some(rest) = path.strip_prefix(&format!("{pod_path}/")) {
                // The pod proxy: /api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH
                let (who, tail) = rest.split_once("/proxy").unwrap_or((rest, "/"));
                let (name, port) = who.split_once(':').unwrap_or((who, "80"));
                let ip = shared
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|p| p.name == name)
                    .map(|p| p.ip.clone());
                match ip.and_then(|ip| get(&format!("{ip}:{port}"), tail)) {
                    Some((status, body)) => respond(&mut stream, status, "text/plain", &body),
                    None => respond(&mut stream, 503, "text/plain", b"pod unreachable\n"),
                }
            } else {
                kube_not_found(&mut stream, &path);
            }
        },
    );
    KubeApi {
        server,
        pods,
        replicas,
        pod_lists,
        activators,
        extra_slices,
        start_times,
        patches,
    }
}
