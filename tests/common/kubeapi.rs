//! A stand-in Kubernetes API: the Deployment read and the pod list and watch that kube makes,
//! with pods whose IPs are loopback addresses.

use super::http::{respond, serve, Server};
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
}

fn pod_json(ns: &str, app: &str, p: &FakePod, version: u64) -> serde_json::Value {
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

/// Serves Deployment `app` in namespace `ns` (selector app=APP) and its pods.
pub fn kube_api(ns: &'static str, app: &'static str, pods: Vec<FakePod>) -> KubeApi {
    let pods = Arc::new(Mutex::new(pods));
    let shared = pods.clone();
    let server = serve(
        "127.0.0.1:0",
        Duration::from_secs(120),
        move |mut stream, head, stop| {
            let path = head.target.split('?').next().unwrap_or_default().to_owned();
            if path == "/version" {
                let v = serde_json::json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0",
                "gitCommit": "0", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"});
                respond(
                    &mut stream,
                    200,
                    "application/json",
                    v.to_string().as_bytes(),
                );
            } else if path == format!("/apis/apps/v1/namespaces/{ns}/deployments/{app}") {
                let d = serde_json::json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": app, "namespace": ns},
                    "spec": {"selector": {"matchLabels": {"app": app}},
                             "template": {"metadata": {"labels": {"app": app}},
                                          "spec": {"containers": [{"name": "vllm"}]}}}
                });
                respond(
                    &mut stream,
                    200,
                    "application/json",
                    d.to_string().as_bytes(),
                );
            } else if path == format!("/api/v1/namespaces/{ns}/pods")
                && head.target.contains("watch=true")
            {
                // Hold the watch open with no events, then end it; the watcher re-watches.
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
                for _ in 0..50 {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let _ = stream.write_all(b"0\r\n\r\n");
            } else if path == format!("/api/v1/namespaces/{ns}/pods") {
                let items: Vec<serde_json::Value> = shared
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|p| pod_json(ns, app, p, 1))
                    .collect();
                let list = serde_json::json!({
                    "apiVersion": "v1", "kind": "PodList",
                    "metadata": {"resourceVersion": "1"}, "items": items
                });
                respond(
                    &mut stream,
                    200,
                    "application/json",
                    list.to_string().as_bytes(),
                );
            } else {
                let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "reason": "NotFound", "code": 404, "message": format!("{path} not found")});
                respond(
                    &mut stream,
                    404,
                    "application/json",
                    status.to_string().as_bytes(),
                );
            }
        },
    );
    KubeApi { server, pods }
}
