//! The EndpointSlice controller: for every Service with a selector, the slice `SERVICE-ctrl`
//! (labelled with the Service's name and managed by `endpointslice-controller.k8s.io`, owned by
//! the Service, its labels copied) listing the pods the selector matches in the Service's
//! namespace that have an IP: `ready` when the pod is Ready and not being deleted; a pod being
//! deleted stays with `ready: false`, `terminating: true` and `serving` its readiness (as the
//! controller has since Kubernetes 1.22). Each Service port's name, and the target port
//! resolved against the pod's container ports (a named `targetPort` by name, a number as is, none
//! as the Service port). A Service with no such pod has a slice with no endpoints and no ports.
//!
//! What is simpler than the controller: one slice per Service, its ports those of the first pod
//! listed (the controller groups pods whose named ports resolve differently into slices of their
//! own); and only slices this controller wrote are ever deleted.

use crate::common::kube::objects::{CONTROLLER, MANAGED_BY, SERVICE_NAME};
use crate::common::kube::Cluster;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The slices this controller wrote: `(namespace, name)`.
#[derive(Clone, Default)]
pub struct Written(Arc<Mutex<BTreeSet<(String, String)>>>);

fn ready_condition(pod: &serde_json::Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Whether `labels` hold every `selector` pair.
pub fn selects(selector: &serde_json::Value, labels: &serde_json::Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels[k.as_str()] == *v))
}

/// A Service port's target port on `pod`.
fn target_port(port: &serde_json::Value, pod: &serde_json::Value) -> Option<u64> {
    match &port["targetPort"] {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(name) => {
            if let Ok(n) = name.parse() {
                return Some(n);
            }
            pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| c["ports"].as_array().into_iter().flatten())
                .find(|p| p["name"] == name.as_str())
                .and_then(|p| p["containerPort"].as_u64())
        }
        _ => port["port"].as_u64(),
    }
}

/// The controller's slice for `service`, from `pods` (every pod in the store).
fn slice_for(service: &serde_json::Value, pods: &[serde_json::Value]) -> serde_json::Value {
    let ns = service["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let name = service["metadata"]["name"].as_str().unwrap_or_default();
    let selector = &service["spec"]["selector"];
    let mut matched: Vec<&serde_json::Value> = pods
        .iter()
        .filter(|p| p["metadata"]["namespace"] == ns)
        .filter(|p| selects(selector, &p["metadata"]["labels"]))
        .filter(|p| {
            p["status"]["podIP"]
                .as_str()
                .is_some_and(|ip| !ip.is_empty())
        })
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .collect();
    matched.sort_by_key(|p| {
        p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    let ports: Vec<serde_json::Value> = match matched.first() {
        None => Vec::new(),
        Some(first) => service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let mut port = serde_json::json!({
                    "port": target_port(p, first)?,
                    "protocol": p["protocol"].as_str().unwrap_or("TCP"),
                });
                if let Some(n) = p["name"].as_str().filter(|n| !n.is_empty()) {
                    port["name"] = serde_json::json!(n);
                }
                Some(port)
            })
            .collect(),
    };
    let endpoints: Vec<serde_json::Value> = matched
        .iter()
        .map(|p| {
            let serving = ready_condition(p);
            let terminating = !p["metadata"]["deletionTimestamp"].is_null();
            serde_json::json!({
                "addresses": [p["status"]["podIP"]],
                "conditions": {"ready": serving && !terminating, "serving": serving,
                               "terminating": terminating},
                "targetRef": {"kind": "Pod", "namespace": ns, "name": p["metadata"]["name"],
                              "uid": p["metadata"]["uid"]},
                "nodeName": p["spec"]["nodeName"],
            })
        })
        .collect();
    let mut labels = service["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(SERVICE_NAME.into(), serde_json::json!(name));
    labels.insert(MANAGED_BY.into(), serde_json::json!(CONTROLLER));
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-ctrl"), "namespace": ns, "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                "uid": service["metadata"]["uid"], "controller": true,
                "blockOwnerDeletion": true}]},
        "addressType": "IPv4", "ports": ports, "endpoints": endpoints,
    })
}

/// Whether the stored slice already says what `desired` says.
fn same(stored: &serde_json::Value, desired: &serde_json::Value) -> bool {
    stored["ports"] == desired["ports"]
        && stored["endpoints"] == desired["endpoints"]
        && stored["metadata"]["labels"] == desired["metadata"]["labels"]
        && stored["metadata"]["ownerReferences"] == desired["metadata"]["ownerReferences"]
}

/// Brings every Service's controller slice in line with the pods, once.
pub fn reconcile(cluster: &Cluster, written: &Written) {
    let pods = cluster.all("Pod");
    let mut wanted = BTreeSet::new();
    for service in cluster.all("Service") {
        if service["spec"]["selector"]
            .as_object()
            .is_none_or(|s| s.is_empty())
        {
            continue;
        }
        let desired = slice_for(&service, &pods);
        let ns = desired["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let name = desired["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        wanted.insert((ns.clone(), name.clone()));
        let stored = cluster.get("EndpointSlice", &ns, &name);
        if !stored.is_some_and(|s| same(&s, &desired)) {
            cluster.put(desired);
            written.0.lock().unwrap().insert((ns, name));
        }
    }
    let gone: Vec<(String, String)> = written
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|k| !wanted.contains(*k))
        .cloned()
        .collect();
    for (ns, name) in gone {
        cluster.delete("EndpointSlice", &ns, &name);
        written.0.lock().unwrap().remove(&(ns, name));
    }
}

/// The EndpointSlice controller on a thread of its own, following every change to the store,
/// until dropped. [`super::Models`] runs one; start this for pods a test puts itself (an
/// activator's, say) when no `Models` runs.
pub struct Slices {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Slices {
    pub fn start(cluster: &Cluster) -> Slices {
        let stop = Arc::new(AtomicBool::new(false));
        let (cluster, flag) = (cluster.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("endpointslice-controller".into())
            .spawn(move || {
                let written = Written::default();
                let mut seen = u64::MAX;
                while !flag.load(Ordering::SeqCst) {
                    let now = cluster.version();
                    if now != seen {
                        reconcile(&cluster, &written);
                        seen = now;
                    }
                    cluster.wait_version(seen, Duration::from_millis(50));
                }
            })
            .expect("the EndpointSlice controller's thread");
        Slices {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Slices {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
