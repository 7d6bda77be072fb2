//! The Deployment and ReplicaSet controllers and the kubelet, for the model Deployments a test
//! names: Deployment `APP` in `NS` runs `spec.replicas` pods (however it changes: the scale
//! subresource, a patch, [`Cluster::edit`]), each a model server ([`super::server`]) on a
//! loopback IP of its own from the caller's pool, at the container port (the Deployment's first
//! container's first `containerPort`, else 8000).
//!
//! A pod's life, as the cluster lives it: the Pod object is put at once (the template's labels
//! and annotations, `pod-template-hash`, `status.podIP`, `creationTimestamp`, Ready `False`);
//! after the cold start its server listens and the pod turns Ready (the condition's
//! `lastTransitionTime` then). On scale-down the ReplicaSet controller's choice is kept (not
//! Ready first, then the lower `controller.kubernetes.io/pod-deletion-cost`, then the more
//! recently Ready on a log scale, then the newer); the pod gets a `deletionTimestamp`, so the
//! EndpointSlice controller ([`super::endpoints`], run here) takes it out of the ready
//! endpoints at once; after the `drain` (a preStop pause) its server closes its listener and
//! finishes what it holds; then the Pod object goes. The Deployment's `status` (replicas, ready,
//! available, updated) follows its pods.

use super::endpoints::{self, Written};
use super::pool::Pool;
use super::server::{self, ModelServer, Seen};
use super::stamp::rfc3339;
use crate::common::kube::Cluster;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often the store is looked at for a change.
const FOLLOW: Duration = Duration::from_millis(5);
/// The annotation the ReplicaSet controller ranks pods by before it deletes them.
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// How the model Deployments' pods start, serve and stop.
#[derive(Clone, Debug)]
pub struct Options {
    /// Pod IPs: three octets of 127.0.0.0/8 and a dot (`"127.0.120."`).
    pub ip_pool: String,
    /// From the pod's creation to its server listening and the pod Ready.
    pub cold_start: Duration,
    /// From a pod's deletion to its server's stop (a preStop pause while endpoints update).
    pub drain: Duration,
    /// The server each pod runs.
    pub server: ModelServer,
    /// Write times with milliseconds (the API writes whole seconds; a time-scaled test may
    /// want finer cold starts).
    pub millisecond_times: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            ip_pool: "127.0.120.".into(),
            cold_start: Duration::from_millis(300),
            drain: Duration::from_millis(50),
            server: ModelServer::default(),
            millisecond_times: false,
        }
    }
}

/// Where a pod is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Created, its server not yet listening.
    Starting,
    Ready,
    /// Being deleted: out of the ready endpoints, draining, then gone.
    Terminating,
}

/// One pod of a model Deployment.
#[derive(Clone, Debug)]
pub struct PodView {
    pub namespace: String,
    pub app: String,
    pub name: String,
    pub ip: IpAddr,
    pub port: u16,
    pub phase: Phase,
}

impl PodView {
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }
}

struct Pod {
    view: PodView,
    /// The creation order, for the ties second-precision timestamps cannot break.
    created: u64,
    ready_at: Option<SystemTime>,
    terminate: Option<tokio::sync::oneshot::Sender<()>>,
}

type Key = (String, String);

struct Inner {
    cluster: Cluster,
    options: Options,
    managed: Mutex<BTreeSet<Key>>,
    pods: Mutex<BTreeMap<Key, Pod>>,
    ips: Mutex<Pool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    errors: Mutex<Vec<String>>,
    next: Mutex<u64>,
    stop: tokio::sync::watch::Sender<bool>,
    /// While true, a cold start does not end (see [`Models::hold_starts`]).
    starts_held: tokio::sync::watch::Sender<bool>,
}

/// The controllers of the model Deployments a test names, and their pods, until dropped (every
/// pod's server stops, its Pod object stays).
pub struct Models {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Models {
    fn drop(&mut self) {
        let _ = self.inner.stop.send(true);
        // Each pod's server stops when its handle, held by its task, is dropped.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Models {
    /// Runs the pods of Deployment `(ns, app)` for each of `deployments` (more with
    /// [`Models::manage`]), and the EndpointSlice controller for every Service of the store.
    pub fn start(cluster: &Cluster, options: Options, deployments: &[(&str, &str)]) -> Models {
        let (stop, _) = tokio::sync::watch::channel(false);
        let (starts_held, _) = tokio::sync::watch::channel(false);
        let inner = Arc::new(Inner {
            cluster: cluster.clone(),
            ips: Mutex::new(Pool::new(&options.ip_pool)),
            options,
            managed: Mutex::new(
                deployments
                    .iter()
                    .map(|(ns, app)| (ns.to_string(), app.to_string()))
                    .collect(),
            ),
            pods: Mutex::new(BTreeMap::new()),
            seen: Arc::new(Mutex::new(Vec::new())),
            errors: Mutex::new(Vec::new()),
            next: Mutex::new(0),
            stop,
            starts_held,
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("controllers")
            .enable_all()
            .build()
            .expect("the controllers' runtime");
        let follower = inner.clone();
        runtime.spawn(async move {
            let mut stopped = follower.stop.subscribe();
            let written = Written::default();
            let mut seen = u64::MAX;
            loop {
                let now = follower.cluster.version();
                if now != seen {
                    reconcile(&follower);
                    endpoints::reconcile(&follower.cluster, &written);
                    seen = now;
                }
                tokio::select! {
                    _ = tokio::time::sleep(FOLLOW) => {}
                    _ = stopped.changed() => return,
                }
            }
        });
        Models {
            inner,
            runtime: Some(runtime),
        }
    }

    /// Runs Deployment `app`'s pods in `ns` from now on too.
    pub fn manage(&self, ns: &str, app: &str) {
        self.inner
            .managed
            .lock()
            .unwrap()
            .insert((ns.to_owned(), app.to_owned()));
        // A change of version wakes the controller; this one changes nothing else.
        self.inner.cluster.update("Deployment", ns, app, |_| true);
    }

    /// While `held`, every pod's cold start lasts until it is released: a test that sends a
    /// burst at zero knows the burst arrives before any pod is Ready, however slow the machine.
    pub fn hold_starts(&self, held: bool) {
        self.inner.starts_held.send_replace(held);
    }

    /// Every request every pod received, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// The completions among [`Models::seen`].
    pub fn completions(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(Seen::is_completion)
            .collect()
    }

    /// Deployment `app`'s pods in `ns` that are Ready and not being deleted.
    pub fn replicas(&self, ns: &str, app: &str) -> usize {
        self.pods(ns, app)
            .iter()
            .filter(|p| p.phase == Phase::Ready)
            .count()
    }

    /// Deployment `app`'s pods in `ns`, by name, whatever their phase.
    pub fn pods(&self, ns: &str, app: &str) -> Vec<PodView> {
        self.inner
            .pods
            .lock()
            .unwrap()
            .values()
            .filter(|p| p.view.namespace == ns && p.view.app == app)
            .map(|p| p.view.clone())
            .collect()
    }

    /// Waits up to `within` for Deployment `app` in `ns` to have `n` pods, all Ready (none
    /// starting or terminating).
    pub async fn wait_replicas(&self, ns: &str, app: &str, n: usize, within: Duration) {
        let end = Instant::now() + within;
        loop {
            let pods = self.pods(ns, app);
            if pods.len() == n && pods.iter().all(|p| p.phase == Phase::Ready) {
                return;
            }
            assert!(
                Instant::now() < end,
                "{ns}/{app}: not {n} Ready pods within {within:?}: {pods:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// What went wrong (a pod whose server could not bind), each once.
    pub fn errors(&self) -> Vec<String> {
        self.inner.errors.lock().unwrap().clone()
    }
}

/// FNV-1a, for a template's `pod-template-hash`.
fn template_hash(template: &serde_json::Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in template.to_string().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..10)
        .map(|i| ALPHABET[((h >> (i * 6)) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

/// A pod name's random-looking suffix, from a counter.
fn suffix(mut n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    for _ in 0..5 {
        out.push(ALPHABET[(n % ALPHABET.len() as u64) as usize] as char);
        n /= ALPHABET.len() as u64;
    }
    out
}

/// The container port pods listen on: the first container's first `containerPort`, else 8000.
fn container_port(d: &serde_json::Value) -> u16 {
    d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(8000)
}

fn pod_ready_condition(pod: &serde_json::Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The ReplicaSet controller's order of deletion (first deleted first): not Ready before Ready,
/// a lower deletion cost first, the more recently Ready first (compared on a log2 scale of how
/// long they have been Ready, then by uid), the newer first.
fn deletion_order(pods: &mut [(serde_json::Value, Option<SystemTime>, u64)], now: SystemTime) {
    let cost = |p: &serde_json::Value| {
        p["metadata"]["annotations"][DELETION_COST]
            .as_str()
            .and_then(|c| c.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let rank = |t: SystemTime| {
        now.duration_since(t)
            .map_or(-1, |d| (d.as_nanos().max(1) as f64).log2() as i64)
    };
    pods.sort_by(|(a, ra, na), (b, rb, nb)| {
        let (ready_a, ready_b) = (pod_ready_condition(a), pod_ready_condition(b));
        ready_a
            .cmp(&ready_b)
            .then(cost(a).cmp(&cost(b)))
            .then_with(|| match (ready_a && ready_b, ra, rb) {
                (true, Some(x), Some(y)) if x != y => rank(*x).cmp(&rank(*y)).then_with(|| {
                    a["metadata"]["uid"]
                        .as_str()
                        .cmp(&b["metadata"]["uid"].as_str())
                }),
                _ => std::cmp::Ordering::Equal,
            })
            .then(nb.cmp(na))
    });
}

/// Brings every managed Deployment's pods in line with its `spec.replicas`, once.
fn reconcile(inner: &Arc<Inner>) {
    let managed: Vec<Key> = inner.managed.lock().unwrap().iter().cloned().collect();
    for (ns, app) in managed {
        let deployment = inner.cluster.get("Deployment", &ns, &app);
        let desired = deployment
            .as_ref()
            .map_or(0, |d| d["spec"]["replicas"].as_u64().unwrap_or(1) as usize);
        let live: Vec<(String, Option<SystemTime>, u64)> = {
            let pods = inner.pods.lock().unwrap();
            pods.values()
                .filter(|p| p.view.namespace == ns && p.view.app == app)
                .filter(|p| p.view.phase != Phase::Terminating)
                .map(|p| (p.view.name.clone(), p.ready_at, p.created))
                .collect()
        };
        // A Pod object deleted through the API: its pod goes as any deleted pod does (and is
        // replaced below, next time round).
        let mut alive = Vec::new();
        for (name, ready_at, created) in live {
            match inner.cluster.get("Pod", &ns, &name) {
                Some(object) => alive.push((object, ready_at, created)),
                None => terminate(inner, &ns, &name),
            }
        }
        if alive.len() < desired {
            if let Some(d) = &deployment {
                for _ in alive.len()..desired {
                    create(inner, &ns, &app, d);
                }
            }
        } else if alive.len() > desired {
            let excess = alive.len() - desired;
            deletion_order(&mut alive, SystemTime::now());
            for (object, _, _) in alive.iter().take(excess) {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                terminate(inner, &ns, name);
            }
        }
        write_status(inner, &ns, &app);
    }
}

/// The Deployment's status from its pods, written when it differs.
fn write_status(inner: &Inner, ns: &str, app: &str) {
    let (replicas, ready) = {
        let pods = inner.pods.lock().unwrap();
        let live: Vec<&Pod> = pods
            .values()
            .filter(|p| p.view.namespace == ns && p.view.app == app)
            .filter(|p| p.view.phase != Phase::Terminating)
            .collect();
        let ready = live.iter().filter(|p| p.view.phase == Phase::Ready).count();
        (live.len(), ready)
    };
    inner.cluster.update("Deployment", ns, app, |d| {
        let s = &d["status"];
        let now = serde_json::json!({"replicas": replicas, "readyReplicas": ready,
            "availableReplicas": ready, "updatedReplicas": replicas});
        let same = [
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "updatedReplicas",
        ]
        .iter()
        .all(|k| s[*k] == now[*k]);
        if same {
            return false;
        }
        for (k, v) in now.as_object().expect("an object") {
            d["status"][k.as_str()] = v.clone();
        }
        true
    });
}

fn error(inner: &Inner, e: String) {
    let mut errors = inner.errors.lock().unwrap();
    if !errors.contains(&e) {
        errors.push(e);
    }
}

/// Creates one pod of Deployment `d` and starts its life.
fn create(inner: &Arc<Inner>, ns: &str, app: &str, d: &serde_json::Value) {
    let Some(ip) = inner.ips.lock().unwrap().take() else {
        error(inner, format!("{ns}/{app}: the pod IP pool is spent"));
        return;
    };
    let n = {
        let mut next = inner.next.lock().unwrap();
        *next += 1;
        *next
    };
    let template = &d["spec"]["template"];
    let hash = template_hash(template);
    let name = format!("{app}-{hash}-{}", suffix(n));
    let port = container_port(d);
    let created = SystemTime::now();
    let stamp = rfc3339(created, inner.options.millisecond_times);
    let mut labels = template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert("pod-template-hash".into(), serde_json::json!(hash));
    let annotations = template["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut spec = template["spec"].clone();
    spec["nodeName"] = serde_json::json!("loopback");
    let containers: Vec<serde_json::Value> = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            serde_json::json!({"name": c["name"], "ready": false, "started": true,
            "restartCount": 0, "image": c["image"]})
        })
        .collect();
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
            "annotations": annotations, "creationTimestamp": stamp,
            "uid": format!("uid-{name}"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("{app}-{hash}"), "uid": format!("uid-{app}-{hash}"),
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
        "status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
            "hostIP": "127.0.0.1", "startTime": stamp, "qosClass": "Burstable",
            "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": stamp,
                 "reason": "ContainersNotReady"},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": stamp},
                {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp}],
            "containerStatuses": containers}
    });
    inner.cluster.put(pod);
    let (terminate, terminated) = tokio::sync::oneshot::channel();
    let view = PodView {
        namespace: ns.to_owned(),
        app: app.to_owned(),
        name: name.clone(),
        ip: IpAddr::V4(ip),
        port,
        phase: Phase::Starting,
    };
    inner.pods.lock().unwrap().insert(
        (ns.to_owned(), name.clone()),
        Pod {
            view,
            created: n,
            ready_at: None,
            terminate: Some(terminate),
        },
    );
    tokio::spawn(live(
        inner.clone(),
        (ns.to_owned(), name),
        SocketAddr::new(IpAddr::V4(ip), port),
        terminated,
    ));
}

/// Marks pod `name` deleted and tells its life to end.
fn terminate(inner: &Inner, ns: &str, name: &str) {
    let key = (ns.to_owned(), name.to_owned());
    let signal = {
        let mut pods = inner.pods.lock().unwrap();
        let Some(p) = pods.get_mut(&key) else { return };
        p.view.phase = Phase::Terminating;
        p.terminate.take()
    };
    let stamp = rfc3339(SystemTime::now(), inner.options.millisecond_times);
    inner.cluster.update("Pod", ns, name, |p| {
        p["metadata"]["deletionTimestamp"] = serde_json::json!(stamp);
        p["metadata"]["deletionGracePeriodSeconds"] = serde_json::json!(30);
        true
    });
    if let Some(s) = signal {
        let _ = s.send(());
    }
}

fn set_phase(inner: &Inner, key: &Key, phase: Phase, ready_at: Option<SystemTime>) {
    if let Some(p) = inner.pods.lock().unwrap().get_mut(key) {
        // A pod being deleted stays so.
        if p.view.phase != Phase::Terminating {
            p.view.phase = phase;
        }
        if ready_at.is_some() {
            p.ready_at = ready_at;
        }
    }
}

/// Pod `key`'s life: the cold start, its server, Ready; on termination the drain, the stop,
/// the Pod object deleted and its IP given back.
async fn live(
    inner: Arc<Inner>,
    key: Key,
    addr: SocketAddr,
    mut terminated: tokio::sync::oneshot::Receiver<()>,
) {
    let mut stopped = inner.stop.subscribe();
    let mut held = inner.starts_held.subscribe();
    let cold_start = async {
        tokio::time::sleep(inner.options.cold_start).await;
        let _ = held.wait_for(|h| !h).await;
    };
    let started = tokio::select! {
        _ = cold_start => true,
        _ = &mut terminated => false,
        _ = stopped.changed() => return,
    };
    let mut running = None;
    if started {
        match server::start(
            addr,
            &key.1,
            inner.options.server.clone(),
            inner.seen.clone(),
        )
        .await
        {
            Ok(r) => {
                running = Some(r);
                let ready_at = SystemTime::now();
                let stamp = rfc3339(ready_at, inner.options.millisecond_times);
                inner.cluster.update("Pod", &key.0, &key.1, |p| {
                    for c in p["status"]["conditions"]
                        .as_array_mut()
                        .into_iter()
                        .flatten()
                    {
                        if c["type"] == "Ready" || c["type"] == "ContainersReady" {
                            c["status"] = serde_json::json!("True");
                            c["lastTransitionTime"] = serde_json::json!(stamp);
                            if let Some(o) = c.as_object_mut() {
                                o.remove("reason");
                            }
                        }
                    }
                    for c in p["status"]["containerStatuses"]
                        .as_array_mut()
                        .into_iter()
                        .flatten()
                    {
                        c["ready"] = serde_json::json!(true);
                    }
                    true
                });
                set_phase(&inner, &key, Phase::Ready, Some(ready_at));
                let app = inner
                    .pods
                    .lock()
                    .unwrap()
                    .get(&key)
                    .map(|p| p.view.app.clone());
                if let Some(app) = app {
                    write_status(&inner, &key.0, &app);
                }
                tokio::select! {
                    _ = &mut terminated => {}
                    _ = stopped.changed() => return,
                }
            }
            Err(e) => error(
                &inner,
                format!("pod {}/{}: listening on {addr}: {e}", key.0, key.1),
            ),
        }
    }
    if let Some(r) = running {
        // The preStop pause: the endpoint is out of the ready ones already; connections kube-
        // proxy made before are still answered.
        tokio::time::sleep(inner.options.drain).await;
        r.stop().await;
    }
    inner.cluster.delete("Pod", &key.0, &key.1);
    let gone = inner.pods.lock().unwrap().remove(&key);
    if let IpAddr::V4(ip) = addr.ip() {
        inner.ips.lock().unwrap().release(ip);
    }
    if let Some(g) = gone {
        write_status(&inner, &key.0, &g.view.app);
    }
}
