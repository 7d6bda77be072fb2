//! The Kubernetes objects the tests put in the API stand-in, written as the API would serve
//! them: pods on loopback addresses, a Deployment, Services and EndpointSlices.

use std::net::SocketAddr;

/// The label EndpointSlices name their Service by.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming who manages an EndpointSlice.
pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The EndpointSlice controller's name in [`MANAGED_BY`].
pub const CONTROLLER: &str = "endpointslice-controller.k8s.io";
/// The activator's Service, as the manifests name it.
pub const ACTIVATOR_SERVICE: &str = "infscale-activator";
/// The activator's admin Service, as the manifests name it.
pub const ADMIN_SERVICE: &str = "infscale-activator-admin";

/// A pod as the test describes it.
#[derive(Clone)]
pub struct FakePod {
    pub name: String,
    pub ip: String,
    pub ready: bool,
}

/// `n` Ready pods `APP-0`, `APP-1`, ... at 127.0.0.2, 127.0.0.3, ... (as
/// [`crate::common::pods::pods_on_one_port`] places their servers).
pub fn ready_pods(app: &str, n: usize) -> Vec<FakePod> {
    (0..n)
        .map(|i| FakePod {
            name: format!("{app}-{i}"),
            ip: format!("127.0.0.{}", i + 2),
            ready: true,
        })
        .collect()
}

/// Pod `p` of app `app` (label app=APP) in `ns`, Running, with its Ready condition.
pub fn pod(ns: &str, app: &str, p: &FakePod) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": p.name, "namespace": ns, "labels": {"app": app}},
        "spec": {"containers": [{"name": "vllm", "resources": {"requests": {"cpu": "4"}}}]},
        "status": {"phase": "Running", "podIP": p.ip,
                   "conditions": [{"type": "Ready", "status": if p.ready { "True" } else { "False" }}]}
    })
}

/// Deployment `app` in `ns` (selector app=APP) with `replicas`.
pub fn deployment(ns: &str, app: &str, replicas: u32) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                 "template": {"metadata": {"labels": {"app": app}},
                              "spec": {"containers": [{"name": "vllm"}]}}},
        "status": {"replicas": replicas}
    })
}

/// Service `name` in `ns` with these `(name, port)` ports, each targeting the port of its name.
pub fn service(ns: &str, name: &str, ports: &[(&str, u16)]) -> serde_json::Value {
    let ports: Vec<serde_json::Value> = ports
        .iter()
        .map(|(n, p)| serde_json::json!({"name": n, "port": p, "targetPort": n}))
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns}, "spec": {"ports": ports}})
}

/// The EndpointSlice controller's slice `name` of `service` in `ns`: these ready IPv4
/// addresses, at these `(name, port)` ports.
pub fn controller_slice(
    ns: &str,
    name: &str,
    service: &str,
    ports: &[(&str, u16)],
    ips: &[String],
) -> serde_json::Value {
    let endpoints: Vec<serde_json::Value> = ips
        .iter()
        .map(|ip| serde_json::json!({"addresses": [ip], "conditions": {"ready": true}}))
        .collect();
    let ports: Vec<serde_json::Value> = ports
        .iter()
        .map(|(n, p)| serde_json::json!({"name": n, "port": p, "protocol": "TCP"}))
        .collect();
    serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": ns,
            "labels": {SERVICE_NAME: service, MANAGED_BY: CONTROLLER}},
        "addressType": "IPv4", "ports": ports, "endpoints": endpoints})
}

/// The activator Service's slice, as `infscale-activator-x`: `ips` ready, its `admin` port at
/// `admin_port` (and `http` at 8080).
pub fn activator_slice(ns: &str, ips: &[String], admin_port: u16) -> serde_json::Value {
    controller_slice(
        ns,
        "infscale-activator-x",
        ACTIVATOR_SERVICE,
        &[("http", 8080), ("admin", admin_port)],
        ips,
    )
}

/// The IPs of `pods`, as strings.
pub fn ips(pods: &[SocketAddr]) -> Vec<String> {
    pods.iter().map(|p| p.ip().to_string()).collect()
}
