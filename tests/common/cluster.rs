//! Serve mode's stand-ins: a Kubernetes API that serves one model Service and EndpointSlices
//! (list by the service-name label, watch with events, server-side apply, delete), the
//! EndpointSlice controller's slice of the model's Ready pods, and a kube-proxy that routes each
//! connection to a ready endpoint of the Service's slices, infscale's own included.

use super::http::{json, kube_not_found, kube_version, serve, Server};
use super::kube_recorder::Call;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The activator's admin Service, as the manifests name it.
pub const ADMIN_SERVICE: &str = "infscale-activator-admin";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";

#[derive(Default)]
struct Store {
    rv: u64,
    items: BTreeMap<String, serde_json::Value>,
    /// Every change: its resource version, its type and the object.
    events: Vec<(u64, &'static str, serde_json::Value)>,
}

/// The EndpointSlices of one namespace.
#[derive(Clone, Default)]
pub struct Slices(
    Arc<(Mutex<Store>, Condvar)>,
    Arc<std::sync::atomic::AtomicBool>,
);

fn service_of(slice: &serde_json::Value) -> Option<&str> {
    slice["metadata"]["labels"][SERVICE_NAME].as_str()
}

impl Slices {
    /// From now on the API answers every write 500 (an API server that cannot write: etcd
    /// down), or again writes.
    pub fn refuse_writes(&self, refuse: bool) {
        self.1.store(refuse, Ordering::SeqCst);
    }

    /// Creates or replaces a slice (by its name).
    pub fn put(&self, mut slice: serde_json::Value) {
        let (lock, changed) = &*self.0;
        let mut s = lock.lock().unwrap();
        s.rv += 1;
        let rv = s.rv;
        let name = slice["metadata"]["name"].as_str().unwrap_or("").to_owned();
        slice["metadata"]["resourceVersion"] = serde_json::json!(rv.to_string());
        slice["metadata"]["uid"] = serde_json::json!(format!("uid-{name}"));
        let kind = if s.items.contains_key(&name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        s.items.insert(name, slice.clone());
        s.events.push((rv, kind, slice));
        changed.notify_all();
    }

    /// Deletes a slice; false when there was none.
    pub fn delete(&self, name: &str) -> bool {
        let (lock, changed) = &*self.0;
        let mut s = lock.lock().unwrap();
        let Some(mut gone) = s.items.remove(name) else {
            return false;
        };
        s.rv += 1;
        let rv = s.rv;
        gone["metadata"]["resourceVersion"] = serde_json::json!(rv.to_string());
        s.events.push((rv, "DELETED", gone));
        changed.notify_all();
        true
    }

    /// The slices labelled for `service`.
    pub fn of_service(&self, service: &str) -> Vec<serde_json::Value> {
        let s = self.0 .0.lock().unwrap();
        s.items
            .values()
            .filter(|v| service_of(v) == Some(service))
            .cloned()
            .collect()
    }

    /// Whether infscale's own slice for `service` is there.
    pub fn ours(&self, service: &str) -> bool {
        self.of_service(service)
            .iter()
            .any(|v| v["metadata"]["labels"][MANAGED_BY] == "infscale.io")
    }

    /// The EndpointSlice controller's slice of `service`: its Ready pods at port `http`.
    pub fn controller(&self, service: &str, pods: &[SocketAddr]) {
        self.controller_port(service, "http", pods);
    }

    /// The EndpointSlice controller's slice of `service`: its Ready pods at port `port_name`.
    pub fn controller_port(&self, service: &str, port_name: &str, pods: &[SocketAddr]) {
        let endpoints: Vec<serde_json::Value> = pods
            .iter()
            .map(|p| serde_json::json!({"addresses": [p.ip().to_string()], "conditions": {"ready": true}}))
            .collect();
        let port = pods.first().map_or(0, |p| p.port());
        self.put(
            serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{service}-ctrl"), "namespace": "llm",
                "labels": {SERVICE_NAME: service, MANAGED_BY: "endpointslice-controller.k8s.io"}},
            "addressType": "IPv4",
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
            "endpoints": endpoints}),
        );
    }

    /// Ready endpoints of `service` at its `http` port, as kube-proxy would route to them.
    pub fn routes(&self, service: &str) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        for slice in self.of_service(service) {
            let port = slice["ports"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["name"] == "http"))
                .and_then(|p| p["port"].as_u64());
            let Some(port) = port else { continue };
            for e in slice["endpoints"].as_array().into_iter().flatten() {
                if e["conditions"]["ready"] == false {
                    continue;
                }
                for a in e["addresses"].as_array().into_iter().flatten() {
                    if let Some(ip) = a.as_str().and_then(|a| a.parse().ok()) {
                        out.push(SocketAddr::new(ip, port as u16));
                    }
                }
            }
        }
        out
    }
}

/// The value of `key=` in a request target's query, percent-decoded as far as a label selector
/// needs.
fn query(target: &str, key: &str) -> Option<String> {
    let q = target.split_once('?')?.1;
    q.split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .map(|v| {
            v.replace("%2F", "/")
                .replace("%3D", "=")
                .replace("%2C", ",")
        })
}

/// The Service a list or watch selects by its service-name label, if it does.
fn selected(target: &str) -> Option<String> {
    query(target, "labelSelector")?.split(',').find_map(|s| {
        s.strip_prefix(&format!("{SERVICE_NAME}="))
            .map(str::to_owned)
    })
}

fn chunk(stream: &mut std::net::TcpStream, v: &serde_json::Value) -> bool {
    let line = format!("{v}\n");
    stream
        .write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes())
        .is_ok()
}

/// An API stand-in's server and every call it received.
pub struct Api {
    pub server: Server,
    pub calls: Arc<Mutex<Vec<Call>>>,
}

impl Api {
    /// `(apiGroup, resource, verb)` of every call, as RBAC names them.
    pub fn rbac(&self) -> std::collections::BTreeSet<(String, String, String)> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter_map(Call::rbac)
            .collect()
    }
}

/// Serves the Services of namespace `llm` (any name: port `http` 80, and, for `ADMIN_SERVICE`,
/// port `admin` 9092) and the namespace's EndpointSlices (several stand-ins may share `slices`,
/// each keeping its own callers' calls).
pub fn api(slices: Slices) -> Api {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let log = calls.clone();
    let base = "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices";
    let services = "/api/v1/namespaces/llm/services/";
    let server = serve(
        "127.0.0.1:0",
        Duration::from_secs(600),
        move |mut stream, head, stop| {
            let path = head.target.split('?').next().unwrap_or_default().to_owned();
            log.lock().unwrap().push(Call {
                method: head.method.clone(),
                path: path.clone(),
                query: head.target.split_once('?').map_or("", |q| q.1).to_owned(),
                authorization: None,
            });
            let watch = head.target.contains("watch=true");
            let only = selected(&head.target);
            let wanted =
                |v: &serde_json::Value| only.as_deref().is_none_or(|s| service_of(v) == Some(s));
            if path == "/version" {
                kube_version(&mut stream);
            } else if let Some(name) = path.strip_prefix(services) {
                let port = if name == ADMIN_SERVICE {
                    serde_json::json!({"name": "admin", "port": 9092, "targetPort": "admin"})
                } else {
                    serde_json::json!({"name": "http", "port": 80, "targetPort": "http"})
                };
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": "llm", "uid": format!("uid-{name}")},
                    "spec": {"ports": [port]}}),
                );
            } else if path == base && watch {
                let from: u64 = query(&head.target, "resourceVersion")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
                let (lock, changed) = &*slices.0;
                let mut sent = from;
                let end = Instant::now() + Duration::from_secs(5);
                let mut s = lock.lock().unwrap();
                while Instant::now() < end && !stop.load(Ordering::SeqCst) {
                    let due: Vec<(u64, &'static str, serde_json::Value)> = s
                        .events
                        .iter()
                        .filter(|(rv, _, v)| *rv > sent && wanted(v))
                        .cloned()
                        .collect();
                    sent = s.rv.max(sent);
                    drop(s);
                    for (_, kind, object) in due {
                        if !chunk(
                            &mut stream,
                            &serde_json::json!({"type": kind, "object": object}),
                        ) {
                            return;
                        }
                    }
                    s = lock.lock().unwrap();
                    if s.rv <= sent {
                        s = changed
                            .wait_timeout(s, Duration::from_millis(100))
                            .unwrap()
                            .0;
                    }
                }
                drop(s);
                let _ = stream.write_all(b"0\r\n\r\n");
            } else if path == base {
                let (items, rv) = {
                    let s = slices.0 .0.lock().unwrap();
                    let items: Vec<serde_json::Value> =
                        s.items.values().filter(|v| wanted(v)).cloned().collect();
                    (items, s.rv)
                };
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSliceList", "metadata": {"resourceVersion": rv.to_string()},
                    "items": items}),
                );
            } else if let Some(name) = path.strip_prefix(&format!("{base}/")) {
                if slices.1.load(Ordering::SeqCst) {
                    json(
                        &mut stream,
                        500,
                        serde_json::json!({"kind": "Status",
                        "apiVersion": "v1", "status": "Failure", "reason": "InternalError",
                        "code": 500, "message": "etcdserver: request timed out"}),
                    );
                    return;
                }
                match head.method.as_str() {
                    "PATCH" => match serde_json::from_slice::<serde_json::Value>(&head.body) {
                        Ok(mut slice) if slice["metadata"]["name"] == name => {
                            slice["metadata"]["namespace"] = serde_json::json!("llm");
                            slices.put(slice.clone());
                            json(&mut stream, 200, slice);
                        }
                        _ => json(
                            &mut stream,
                            422,
                            serde_json::json!({"kind": "Status",
                            "apiVersion": "v1", "status": "Failure", "reason": "Invalid",
                            "code": 422, "message": "not this slice"}),
                        ),
                    },
                    "DELETE" if slices.delete(name) => json(
                        &mut stream,
                        200,
                        serde_json::json!({
                        "kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}),
                    ),
                    _ => kube_not_found(&mut stream, name),
                }
            } else {
                kube_not_found(&mut stream, &path);
            }
        },
    );
    Api { server, calls }
}

/// A kube-proxy for `service`: each connection goes to the next ready endpoint of the Service's
/// slices (by turns); with none, it is closed at once, as a Service without endpoints rejects.
pub async fn kube_proxy(slices: Slices, service: &'static str) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut turn = 0usize;
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let routes = slices.routes(service);
            if routes.is_empty() {
                continue;
            }
            let to = routes[turn % routes.len()];
            turn += 1;
            tokio::spawn(async move {
                if let Ok(mut upstream) = tokio::net::TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    addr
}
