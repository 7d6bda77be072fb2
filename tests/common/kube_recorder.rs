//! A Kubernetes API stand-in that records every request it receives (method, path, query) and
//! serves two namespaces with the same Deployment name and labels, so a test can tell which
//! namespace's pods the code read and scraped, and which verbs on which resources it used (to
//! hold the manifests' RBAC to exactly that).

use super::http::{hold_watch, json, kube_not_found, kube_version, serve, Server};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the API saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    /// The Authorization header, if one came.
    pub authorization: Option<String>,
}

impl Call {
    /// `(apiGroup, resource, verb)` as RBAC names it; `None` for non-resource paths.
    pub fn rbac(&self) -> Option<(String, String, String)> {
        let parts: Vec<&str> = self.path.trim_start_matches('/').split('/').collect();
        let (group, rest) = match parts.as_slice() {
            ["api", "v1", rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (resource, name, sub) = match rest {
            ["namespaces", _, resource] => (*resource, None, None),
            ["namespaces", _, resource, name] => (*resource, Some(*name), None),
            ["namespaces", _, resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
            [resource] => (*resource, None, None),
            _ => return None,
        };
        let verb = match (self.method.as_str(), name) {
            ("GET", None) if self.query.contains("watch=true") => "watch",
            ("GET", None) => "list",
            ("GET", Some(_)) => "get",
            ("PATCH", _) => "patch",
            (m, _) => return Some((group.into(), resource.into(), m.to_lowercase())),
        };
        let resource = match sub {
            Some(sub) => format!("{resource}/{}", sub),
            None => resource.to_owned(),
        };
        Some((group.to_owned(), resource, verb.to_owned()))
    }
}

pub struct Recorder {
    pub server: Server,
    pub calls: Arc<Mutex<Vec<Call>>>,
}

impl Recorder {
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

fn pod(ns: &str, name: &str, ip: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
                     "resourceVersion": "1", "labels": {"app": "chat"}},
        "spec": {"containers": [{"name": "vllm"}]},
        "status": {"phase": "Running", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// Namespaces `llm` and `other`, each with Deployment `chat` (selector app=chat) and one Ready
/// pod: `llm`'s at `llm_ip`, `other`'s at `other_ip`. The cluster-wide pod list holds both.
/// Service `infscale-activator` in `llm` with an EndpointSlice whose one ready endpoint is
/// `llm_ip` on port `admin_port`.
pub fn recorder(llm_ip: &'static str, other_ip: &'static str, admin_port: u16) -> Recorder {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let log = calls.clone();
    let server = serve(
        "127.0.0.1:0",
        Duration::from_secs(120),
        move |mut stream, head, stop| {
            let (path, query) = head
                .target
                .split_once('?')
                .unwrap_or((head.target.as_str(), ""));
            log.lock().unwrap().push(Call {
                method: head.method.clone(),
                path: path.to_owned(),
                query: query.to_owned(),
                authorization: head
                    .headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                    .map(|(_, v)| v.clone()),
            });
            let watch = query.contains("watch=true");
            let ns_of = |p: &str| p.split('/').nth(4).unwrap_or_default().to_owned();
            let pods_of = |ns: &str| match ns {
                "llm" => vec![pod("llm", "chat-0", llm_ip)],
                "other" => vec![pod("other", "chat-x", other_ip)],
                _ => Vec::new(),
            };
            if watch {
                hold_watch(&mut stream, &stop);
            } else if path == "/version" {
                kube_version(&mut stream);
            } else if path == "/api/v1/pods" {
                let mut items = pods_of("llm");
                items.extend(pods_of("other"));
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "PodList",
                        "metadata": {"resourceVersion": "1"}, "items": items}),
                );
            } else if path.ends_with("/deployments/chat") {
                let ns = ns_of(path);
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "chat", "namespace": ns},
                        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "chat"}},
                                 "template": {"metadata": {"labels": {"app": "chat"}},
                                              "spec": {"containers": [{"name": "vllm"}]}}},
                        "status": {"replicas": 1}}),
                );
            } else if path.starts_with("/api/v1/namespaces/") && path.ends_with("/pods") {
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "PodList",
                        "metadata": {"resourceVersion": "1"}, "items": pods_of(&ns_of(path))}),
                );
            } else if path == "/api/v1/namespaces/llm/services/infscale-activator" {
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": "infscale-activator", "namespace": "llm"},
                        "spec": {"ports": [
                            {"name": "http", "port": 80, "targetPort": "http"},
                            {"name": "admin", "port": 9092, "targetPort": "admin"}]}}),
                );
            } else if path == "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices" {
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"apiVersion": "discovery.k8s.io/v1",
                        "kind": "EndpointSliceList", "metadata": {"resourceVersion": "1"},
                        "items": [{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                            "metadata": {"name": "infscale-activator-x", "namespace": "llm",
                                "resourceVersion": "1",
                                "labels": {"kubernetes.io/service-name": "infscale-activator",
                                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
                            "addressType": "IPv4",
                            "ports": [{"name": "http", "port": 8080},
                                      {"name": "admin", "port": admin_port}],
                            "endpoints": [{"addresses": [llm_ip],
                                           "conditions": {"ready": true}}]}]}),
                );
            } else {
                kube_not_found(&mut stream, path);
            }
        },
    );
    Recorder { server, calls }
}
