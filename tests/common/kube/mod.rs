//! The one Kubernetes API stand-in of the end-to-end tests, on loopback: a store of objects
//! (pods, Deployments, Services, EndpointSlices, Leases) served as the API serves them (list
//! and watch by label, get, create, replace with optimistic concurrency, server-side apply and
//! merge patches, delete, a Deployment's scale, the pod proxy), every request recorded, writes
//! refused on demand, and the Lease group missing on demand. Presets put what the tests need:
//! one model's Deployment and pods, or the same Deployment in two namespaces.

pub mod calls;
pub mod objects;
mod proxy;
pub mod rest;
pub mod slices;
pub mod store;
mod watch;

// Not every test uses every name.
#[allow(unused_imports)]
pub use calls::Call;
#[allow(unused_imports)]
pub use objects::{ready_pods, FakePod, ACTIVATOR_SERVICE, ADMIN_SERVICE};
#[allow(unused_imports)]
pub use slices::kube_proxy;
pub use store::Cluster;

use super::http::{serve, Server};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The API stand-in: its server, its objects and every request it received.
pub struct Kube {
    pub server: Server,
    pub cluster: Cluster,
    calls: Arc<Mutex<Vec<Call>>>,
}

fn header(head: &super::http::RequestHead, name: &str) -> Option<String> {
    head.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
}

impl Kube {
    /// Serves `cluster` (several stand-ins may share one, each keeping its own callers' calls)
    /// until dropped.
    pub fn serve(cluster: Cluster) -> Kube {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (log, store) = (calls.clone(), cluster.clone());
        let server = serve(
            "127.0.0.1:0",
            Duration::from_secs(600),
            move |stream, head, stop| {
                let (path, query) = head
                    .target
                    .split_once('?')
                    .unwrap_or((head.target.as_str(), ""));
                log.lock().unwrap().push(Call {
                    method: head.method.clone(),
                    path: path.to_owned(),
                    query: query.to_owned(),
                    authorization: header(&head, "authorization"),
                    content_type: header(&head, "content-type"),
                    body: String::from_utf8_lossy(&head.body).into_owned(),
                    at: std::time::Instant::now(),
                });
                rest::answer(&store, stream, head, &stop);
            },
        );
        Kube {
            server,
            cluster,
            calls,
        }
    }

    /// One model: Deployment `app` in `ns` (replicas: as many as `pods`), its pods, and the
    /// activator's Service (`http` 80, `admin` 9092) whose slice has no endpoints yet.
    pub fn model(ns: &str, app: &str, pods: Vec<FakePod>) -> Kube {
        let cluster = Cluster::default();
        cluster.put(objects::deployment(ns, app, pods.len() as u32));
        for p in &pods {
            cluster.put(objects::pod(ns, app, p));
        }
        cluster.put(objects::service(
            ns,
            ACTIVATOR_SERVICE,
            &[("http", 80), ("admin", 9092)],
        ));
        cluster.put(objects::activator_slice(ns, &[], 0));
        Kube::serve(cluster)
    }

    /// Namespaces `llm` and `other`, each with Deployment `chat` (selector app=chat) and one
    /// Ready pod: `llm`'s `chat-0` at `llm_ip`, `other`'s `chat-x` at `other_ip`; the
    /// activator's Service in `llm`, its one ready endpoint `llm_ip` at `admin_port`. A test can
    /// tell which namespace's pods the code read and scraped.
    pub fn two_namespaces(llm_ip: &str, other_ip: &str, admin_port: u16) -> Kube {
        let kube = Kube::model("llm", "chat", vec![fake("chat-0", llm_ip)]);
        let c = &kube.cluster;
        c.put(objects::deployment("other", "chat", 1));
        c.put(objects::pod("other", "chat", &fake("chat-x", other_ip)));
        kube.set_activators("llm", &[llm_ip.to_owned()], admin_port);
        kube
    }

    /// Serve mode's cluster: `cluster` with Service `chat` (`http` 80, opted in to serve mode)
    /// and the activator's admin Service (`admin` 9092) in `llm`.
    pub fn serve_mode(cluster: Cluster) -> Kube {
        let mut chat = objects::service("llm", "chat", &[("http", 80)]);
        // Opted in to serve mode, as a namespace admin labels it.
        chat["metadata"]["labels"] = serde_json::json!({"infscale.io/serve-mode": "true"});
        cluster.put(chat);
        cluster.put(objects::service("llm", ADMIN_SERVICE, &[("admin", 9092)]));
        Kube::serve(cluster)
    }

    pub fn url(&self) -> String {
        self.server.url("")
    }

    /// Every request so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// `(apiGroup, resource, verb)` of every call, as RBAC names them.
    pub fn rbac(&self) -> BTreeSet<(String, String, String)> {
        self.calls().iter().filter_map(Call::rbac).collect()
    }

    /// Every call under `/apis/coordination.k8s.io/` so far (the lease keepers' calls), in order.
    pub fn lease_calls(&self) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.starts_with("/apis/coordination.k8s.io/"))
            .collect()
    }

    /// Lists (not watches) of pods so far: each watcher's start lists first.
    pub fn pod_lists(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.method == "GET" && c.path.ends_with("/pods") && !c.is_watch())
            .count()
    }

    /// Every PATCH of a pod: its name, the body, and when it came.
    pub fn pod_patches(&self) -> Vec<(String, serde_json::Value, std::time::Instant)> {
        self.calls()
            .iter()
            .filter(|c| c.method == "PATCH")
            .filter_map(|c| {
                let (_, name) = c.path.rsplit_once("/pods/")?;
                Some((name.to_owned(), c.json(), c.at))
            })
            .collect()
    }

    /// Deployment `app`'s spec.replicas in `ns`.
    pub fn replicas(&self, ns: &str, app: &str) -> Option<u64> {
        self.cluster.get("Deployment", ns, app)?["spec"]["replicas"].as_u64()
    }

    /// Sets Deployment `app`'s spec.replicas in `ns`, as a scale would.
    pub fn set_replicas(&self, ns: &str, app: &str, n: u32) {
        self.cluster.edit("Deployment", ns, app, |d| {
            d["spec"]["replicas"] = serde_json::json!(n);
            d["status"]["replicas"] = serde_json::json!(n);
        });
    }

    /// The activator Service's ready endpoints in `ns`: these IPs, at `admin_port`.
    pub fn set_activators(&self, ns: &str, ips: &[String], admin_port: u16) {
        self.cluster
            .put(objects::activator_slice(ns, ips, admin_port));
    }

    /// Gives pod `name` in `ns` a `creationTimestamp` and a Ready `lastTransitionTime`
    /// (RFC 3339).
    pub fn set_start_times(&self, ns: &str, name: &str, created: &str, ready_at: &str) {
        self.cluster.edit("Pod", ns, name, |p| {
            p["metadata"]["creationTimestamp"] = serde_json::json!(created);
            p["status"]["conditions"][0]["lastTransitionTime"] = serde_json::json!(ready_at);
        });
    }
}

fn fake(name: &str, ip: &str) -> FakePod {
    FakePod {
        name: name.to_owned(),
        ip: ip.to_owned(),
        ready: true,
    }
}
