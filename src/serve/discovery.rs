//! Which pods to scrape for a target: a watched store of the Kubernetes API's pods, or a static
//! list for local use.
//!
//! In a cluster, the pods are those of the target's Deployment (its selector, read once from the
//! API) or of a label selector, in the ScaledObject's own namespace only, kept current by a watch
//! (kube's reflector) rather than a list call per scrape. One watch per namespace serves every
//! target in it, each picking its pods with its own selector, so a thousand ScaledObjects cost
//! the API server one watch per namespace, not a thousand; the watch stops with the last target
//! that uses it. Only Ready pods with an IP, not being deleted, are scraped. If the API stops
//! answering, the last set is used for a bounded time, then the target reports an error rather
//! than a guess.

use super::metadata::{Pods, TargetSpec};
use super::selector::Selector;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
// tokio's clock: the staleness test runs on paused time.
use tokio::time::Instant;

/// How pod pages are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScrapeVia {
    /// `scheme://podIP:port/path` (in a cluster).
    Direct,
    /// The API server's pod proxy (out of a cluster, with a kubeconfig).
    Proxy,
}

impl ScrapeVia {
    /// The default: pod IPs from inside a cluster, the API server's pod proxy from outside.
    pub fn here() -> ScrapeVia {
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            ScrapeVia::Direct
        } else {
            ScrapeVia::Proxy
        }
    }
}

/// One pod to scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct PodEndpoint {
    pub name: String,
    pub address: Address,
    /// The pod's CPU request, for CPU as a percentage of it.
    pub cpu_request_cores: f64,
    /// Whether something vouches that a replica runs there (Kubernetes says the pod is Ready). A
    /// static URL is only a place: a refused connection there means no replica runs, so the
    /// target is at zero, not unread.
    pub vouched: bool,
    /// Its `controller.kubernetes.io/pod-deletion-cost` as the watch last saw it.
    pub deletion_cost: Option<i32>,
}

/// A target's pods at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listed {
    /// The Ready pods to scrape.
    pub endpoints: Vec<PodEndpoint>,
    /// Seconds since each pod not yet Ready (and not being deleted) was created: the replicas
    /// still starting, which `creditStarting` counts by their expected ready time.
    pub starting_ages: Vec<f64>,
    /// Each Ready pod's start (creation to Ready), for the learned cold start.
    pub starts: Vec<PodStart>,
}

/// When a Ready pod was created and when its Ready condition last turned True, wall-clock
/// seconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct PodStart {
    pub pod: String,
    pub created_s: f64,
    pub ready_s: f64,
}

fn seconds_of(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> f64 {
    t.0.as_millisecond() as f64 / 1000.0
}

/// The starts of the pods that are Ready (and not being deleted) with both times known.
pub fn pod_starts<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<PodStart> {
    pods.into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| {
            let ready = pod
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "Ready" && c.status == "True")?;
            Some(PodStart {
                pod: pod.metadata.name.clone()?,
                created_s: seconds_of(pod.metadata.creation_timestamp.as_ref()?),
                ready_s: seconds_of(ready.last_transition_time.as_ref()?),
            })
        })
        .collect()
}

/// Seconds since the Unix epoch, by the wall clock (pod creation times are wall-clock times).
pub fn wall_clock_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Whether the pod's Ready condition is True.
fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// How long ago (at `wall_now_s`) each pod that is neither Ready nor being deleted was created;
/// a pod without a creation time, or one from the future, counts as just created.
pub fn starting_ages<'a>(pods: impl IntoIterator<Item = &'a Pod>, wall_now_s: f64) -> Vec<f64> {
    pods.into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none() && !pod_ready(pod))
        .map(|pod| {
            let created = pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(wall_now_s, seconds_of);
            (wall_now_s - created).max(0.0)
        })
        .collect()
}

/// Where a pod's page is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Url(String),
    /// A path on the API server: `/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`.
    Proxy(String),
}

/// The source of a target's pods.
pub enum Discovery {
    Static(Vec<PodEndpoint>),
    Kube(KubeDiscovery),
}

/// Why a target's pods are not known.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("no --static-target {0} and no Kubernetes API to find its pods")]
    NoSource(String),
    #[error("reading deployment {0}: {1}")]
    Deployment(String, String),
    #[error("the Kubernetes API has not answered for {0:.0} s, past the staleness bound: {1}")]
    Stale(f64, String),
    #[error("waiting for the first pod list from the Kubernetes API")]
    NotSynced,
    #[error("the pod selector: {0}")]
    Selector(String),
}

/// Static targets from `--static-target NAME=URL[,URL...]`.
pub type StaticTargets = HashMap<String, Vec<String>>;

/// Everything discovery needs from the server.
#[derive(Clone)]
pub struct DiscoveryContext {
    pub statics: Arc<StaticTargets>,
    pub client: Option<Client>,
    pub via: ScrapeVia,
    /// How long the last pod list is trusted once the API stops answering.
    pub staleness: Duration,
    /// Whether the API server answers, probed in the background.
    pub api: Arc<ApiHealth>,
    /// The pod watch of each namespace, shared by its targets.
    pub watches: Arc<NamespaceWatches>,
}

/// One pod watch per namespace, alive while a target uses it.
#[derive(Default)]
pub struct NamespaceWatches(Mutex<HashMap<String, std::sync::Weak<NamespaceWatch>>>);

impl NamespaceWatches {
    /// The namespace's watch, started if no target holds it.
    fn get(&self, client: &Client, namespace: &str) -> Arc<NamespaceWatch> {
        let mut watches = self.0.lock().unwrap_or_else(|e| e.into_inner());
        watches.retain(|_, w| w.strong_count() > 0);
        if let Some(w) = watches.get(namespace).and_then(|w| w.upgrade()) {
            return w;
        }
        let w = Arc::new(NamespaceWatch::start(client.clone(), namespace));
        watches.insert(namespace.to_owned(), Arc::downgrade(&w));
        w
    }
}

/// A reflector over every pod of one namespace.
pub struct NamespaceWatch {
    store: Store<Pod>,
    /// Whether the first list has arrived.
    synced: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for NamespaceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl NamespaceWatch {
    fn start(client: Client, namespace: &str) -> NamespaceWatch {
        let api: Api<Pod> = Api::namespaced(client, namespace);
        let (store, writer) = reflector::store();
        let synced = Arc::new(AtomicBool::new(false));
        let flag = synced.clone();
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        let ns = namespace.to_owned();
        tracing::info!(namespace = %ns, "watching the namespace's pods");
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => flag.store(true, Ordering::Relaxed),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(namespace = %ns, error = %e, "pod watch failed; retrying")
                    }
                }
            }
        });
        NamespaceWatch {
            store,
            synced,
            task,
        }
    }
}

/// Whether the Kubernetes API answers. A quiet pod watch says nothing either way, so a
/// background probe asks the API server for its version every few seconds. Staleness is judged
/// from the last answer, not from the first failure, so a probe that stops reporting at all (a
/// hung call, a stopped task) reads as stale too.
#[derive(Debug)]
pub struct ApiHealth(Mutex<Health>);

#[derive(Debug, Clone)]
struct Health {
    /// The last answer (or when watching began).
    last_ok: Instant,
    error: String,
}

impl Default for ApiHealth {
    fn default() -> ApiHealth {
        ApiHealth(Mutex::new(Health {
            last_ok: Instant::now(),
            error: "no answer yet".to_owned(),
        }))
    }
}

impl ApiHealth {
    pub fn ok(&self) {
        if let Ok(mut h) = self.0.lock() {
            h.last_ok = Instant::now();
        }
    }

    pub fn failed(&self, error: String) {
        if let Ok(mut h) = self.0.lock() {
            h.error = error;
        }
    }

    /// An error once the API has not answered for longer than `staleness`.
    pub fn check(&self, staleness: Duration) -> Result<(), DiscoveryError> {
        let h = self.0.lock().map(|h| h.clone()).map_err(|_| {
            DiscoveryError::Stale(0.0, "the API health record is poisoned".to_owned())
        })?;
        let silent = h.last_ok.elapsed();
        if silent > staleness {
            return Err(DiscoveryError::Stale(silent.as_secs_f64(), h.error));
        }
        Ok(())
    }

    /// Probes the API every `every` until the task is aborted.
    pub fn probe(self: Arc<Self>, client: Client, every: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                match tokio::time::timeout(every, client.apiserver_version()).await {
                    Ok(Ok(_)) => self.ok(),
                    Ok(Err(e)) => self.failed(e.to_string()),
                    Err(_) => self.failed(format!("no answer within {every:?}")),
                }
            }
        })
    }
}

impl Discovery {
    /// Starts discovery for a target: a static list when one is named, else a watch.
    pub async fn start(
        ctx: &DiscoveryContext,
        spec: &TargetSpec,
    ) -> Result<Discovery, DiscoveryError> {
        if let Pods::Deployment(name) = &spec.pods {
            if let Some(urls) = ctx.statics.get(name) {
                return Ok(Discovery::Static(
                    urls.iter()
                        .map(|u| PodEndpoint {
                            name: u.clone(),
                            address: Address::Url(u.clone()),
                            cpu_request_cores:
                                infscale_core::observe::metrics::replica::DEFAULT_CPU_REQUEST_CORES,
                            vouched: false,
                            deletion_cost: None,
                        })
                        .collect(),
                ));
            }
        }
        let Some(client) = &ctx.client else {
            let name = match &spec.pods {
                Pods::Deployment(d) => d.clone(),
                Pods::Selector(s) => s.clone(),
            };
            return Err(DiscoveryError::NoSource(name));
        };
        let selector = match &spec.pods {
            Pods::Selector(s) => s.clone(),
            Pods::Deployment(name) => deployment_selector(client, &spec.namespace, name).await?,
        };
        Ok(Discovery::Kube(KubeDiscovery::start(
            ctx, client, spec, &selector,
        )?))
    }

    /// The Ready pods to scrape now, and how long ago each pod still starting was created.
    pub fn pods(&self, ctx: &DiscoveryContext) -> Result<Listed, DiscoveryError> {
        match self {
            Discovery::Static(pods) => Ok(Listed {
                endpoints: pods.clone(),
                starting_ages: Vec::new(),
                starts: Vec::new(),
            }),
            Discovery::Kube(k) => {
                ctx.api.check(ctx.staleness)?;
                k.pods()
            }
        }
    }
}

/// A Deployment's selector as a label selector string, read from the API.
pub async fn deployment_selector(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<String, DiscoveryError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let d = api
        .get(name)
        .await
        .map_err(|e| DiscoveryError::Deployment(name.to_owned(), e.to_string()))?;
    label_selector(&d).ok_or_else(|| {
        DiscoveryError::Deployment(name.to_owned(), "it has an empty selector".into())
    })
}

/// A Deployment's selector (match labels and expressions) as a label selector string.
pub fn label_selector(d: &Deployment) -> Option<String> {
    let selector = &d.spec.selector;
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

/// A target's pods: its selector over its namespace's shared watch.
pub struct KubeDiscovery {
    watch: Arc<NamespaceWatch>,
    selector: Selector,
    shape: EndpointShape,
}

impl KubeDiscovery {
    fn start(
        ctx: &DiscoveryContext,
        client: &Client,
        spec: &TargetSpec,
        selector: &str,
    ) -> Result<KubeDiscovery, DiscoveryError> {
        let selector = Selector::parse(selector).map_err(DiscoveryError::Selector)?;
        Ok(KubeDiscovery {
            watch: ctx.watches.get(client, &spec.namespace),
            selector,
            shape: EndpointShape::new(spec, ctx.via),
        })
    }

    fn pods(&self) -> Result<Listed, DiscoveryError> {
        if !self.watch.synced.load(Ordering::Relaxed) {
            return Err(DiscoveryError::NotSynced);
        }
        let empty = std::collections::BTreeMap::new();
        let state = self.watch.store.state();
        let matching: Vec<&Pod> = state
            .iter()
            .map(|pod| pod.as_ref())
            .filter(|pod| {
                self.selector
                    .matches(pod.metadata.labels.as_ref().unwrap_or(&empty))
            })
            .collect();
        Ok(Listed {
            endpoints: matching
                .iter()
                .filter_map(|pod| self.shape.endpoint(pod))
                .collect(),
            starts: pod_starts(matching.iter().copied()),
            starting_ages: starting_ages(matching, wall_clock_s()),
        })
    }
}

/// How a pod's page is addressed: namespace, port, path, scheme and route.
#[derive(Debug, Clone)]
pub struct EndpointShape {
    pub namespace: String,
    pub port: u16,
    pub path: String,
    pub scheme: String,
    pub via: ScrapeVia,
}

impl EndpointShape {
    pub fn new(spec: &TargetSpec, via: ScrapeVia) -> EndpointShape {
        EndpointShape {
            namespace: spec.namespace.clone(),
            port: spec.metrics_port,
            path: spec.metrics_path.clone(),
            scheme: spec.metrics_scheme.clone(),
            via,
        }
    }

    /// Where to scrape `pod`, if it is Ready, has an IP and is not being deleted.
    pub fn endpoint(&self, pod: &Pod) -> Option<PodEndpoint> {
        if pod.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let name = pod.metadata.name.clone()?;
        if !pod_ready(pod) {
            return None;
        }
        let ip = pod
            .status
            .as_ref()?
            .pod_ip
            .clone()
            .filter(|ip| !ip.is_empty())?;
        let address = match self.via {
            ScrapeVia::Direct => {
                let host = if ip.contains(':') {
                    format!("[{ip}]")
                } else {
                    ip
                };
                Address::Url(format!(
                    "{}://{host}:{}{}",
                    self.scheme, self.port, self.path
                ))
            }
            ScrapeVia::Proxy => Address::Proxy(format!(
                "/api/v1/namespaces/{}/pods/{}{name}:{}/proxy{}",
                self.namespace,
                if self.scheme == "https" { "https:" } else { "" },
                self.port,
                self.path
            )),
        };
        Some(PodEndpoint {
            name,
            address,
            cpu_request_cores: cpu_request(pod),
            vouched: true,
            deletion_cost: pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(infscale_core::control::deletion_cost::ANNOTATION))
                .and_then(|v| infscale_core::control::deletion_cost::parse(v)),
        })
    }
}

/// The sum of the pod's containers' CPU requests, in cores (1 core when none is set).
fn cpu_request(pod: &Pod) -> f64 {
    let total: f64 = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
        .filter_map(|q| parse_cpu(&q.0))
        .sum();
    if total > 0.0 {
        total
    } else {
        infscale_core::observe::metrics::replica::DEFAULT_CPU_REQUEST_CORES
    }
}

/// A CPU quantity: `2`, `1.5`, `500m`.
pub fn parse_cpu(q: &str) -> Option<f64> {
    let q = q.trim();
    let v = match q.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().ok()? / 1000.0,
        None => q.parse::<f64>().ok()?,
    };
    (v.is_finite() && v >= 0.0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_api_that_stops_answering_goes_stale_without_a_failure() {
        let health = ApiHealth::default();
        health.ok();
        assert!(health.check(Duration::from_secs(60)).is_ok());
        tokio::time::advance(Duration::from_millis(20)).await;
        assert!(
            health.check(Duration::from_millis(20)).is_ok(),
            "not past it yet"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        // No probe reported anything since: stale, as if it had failed.
        assert!(health.check(Duration::from_millis(20)).is_err());
        health.ok();
        assert!(health.check(Duration::from_millis(20)).is_ok());
    }

    #[test]
    fn cpu_quantities() {
        assert_eq!(parse_cpu("2"), Some(2.0));
        assert_eq!(parse_cpu("500m"), Some(0.5));
        assert_eq!(parse_cpu("1.5"), Some(1.5));
        assert_eq!(parse_cpu("lots"), None);
    }

    fn pod(created_s: Option<i64>, ready: bool, deleting: bool) -> Pod {
        let at = |s: i64| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(s).unwrap(),
            )
        };
        let mut p = Pod::default();
        p.metadata.creation_timestamp = created_s.map(at);
        p.metadata.deletion_timestamp = deleting.then(|| at(0));
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    #[test]
    fn starting_pods_are_the_unready_ones_not_being_deleted() {
        let pods = [
            pod(Some(1_000), false, false), // starting for 60 s
            pod(Some(1_030), false, false), // starting for 30 s
            pod(Some(900), true, false),    // ready: not starting
            pod(Some(1_000), false, true),  // being deleted
            pod(None, false, false),        // no creation time: just created
            pod(Some(2_000), false, false), // clock skew: not in the future
        ];
        assert_eq!(starting_ages(&pods, 1_060.0), vec![60.0, 30.0, 0.0, 0.0]);
    }

    #[test]
    fn a_ready_pod_gives_its_start() {
        let mut ready = pod(Some(1_000), true, false);
        ready.metadata.name = Some("a".into());
        if let Some(c) = ready
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            c.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(1_045).unwrap(),
            ));
        }
        let mut starting = pod(Some(1_000), false, false);
        starting.metadata.name = Some("b".into());
        let starts = pod_starts(&[ready, starting]);
        assert_eq!(
            starts,
            vec![PodStart {
                pod: "a".into(),
                created_s: 1_000.0,
                ready_s: 1_045.0
            }]
        );
    }
}
