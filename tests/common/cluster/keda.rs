//! KEDA's operator and the HPA it creates, run from a ScaledObject document (as `infscale tune`
//! prints it, or as the manifests hold it) against an external scaler's gRPC address, with
//! every period divided by a time scale so a test runs minutes in seconds. What KEDA (2.17 and
//! its main branch) does is kept:
//!
//! - the first trigger of type `external` or `external-push`; its metadata forwarded exactly as
//!   written, every value a string (`scalerAddress` included), in a `ScaledObjectRef` named by
//!   the ScaledObject in its namespace;
//! - every `pollingInterval` (30 s), the scaler's state: the metric spec (kept once read, read
//!   again after an error), then for each metric `GetMetrics` and, if that answered,
//!   `IsActive`; an error is an error, neither active nor idle;
//! - the scale executor on that state: active at zero, scale to `minReplicaCount` or 1; active
//!   above zero, the last active time is now; idle, no error, above zero with
//!   `minReplicaCount` 0, scale to zero once `cooldownPeriod` (300 s) has passed since the last
//!   active time (or `initialCooldownPeriod`, 0, since the start when it was never active);
//!   idle below `minReplicaCount`, scale to it; errors never scale to zero;
//! - `external-push`: `StreamIsActive` held open, a `true` handled at once by the same executor
//!   (a `false` is ignored: scale-in is the poll's), the stream reopened after 2 s doubling to
//!   60 s when it fails, 2 s again after it ends cleanly;
//! - `fallback`: past `failureThreshold` failed `GetMetrics` in a row (poll and HPA alike), the
//!   metric reads as `target * replicas` (the behaviors `static`, `currentReplicas`,
//!   `currentReplicasIfHigher`, `currentReplicasIfLower`) and the trigger as active;
//! - the HPA ([`super::hpa`]) every 15 s: for each metric `GetMetrics` then `IsActive` (as
//!   KEDA's metrics server asks), its sync, the replica count written when it changes.
//!
//! Scaling writes the Deployment's `spec.replicas` in the store, as the scale subresource does.
//! Every answer and every decision is recorded with its time ([`Keda::report`] prints them for a
//! failing test's message). Not modelled: `idleReplicaCount`, pausing annotations, scaling
//! modifiers, TLS to the scaler, metric types other than `AverageValue`, `StreamMetricSpec`.

use super::hpa::Hpa;
use crate::common::kube::Cluster;
use infscale::serve::proto::external_scaler_client::ExternalScalerClient;
use infscale::serve::proto::{GetMetricsRequest, ScaledObjectRef};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// A gRPC call's longest wait.
const CALL: Duration = Duration::from_secs(10);

/// Which of KEDA's loops made a call or a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The operator's poll, every pollingInterval.
    Poll,
    /// The HPA's sync, through KEDA's metrics server.
    Hpa,
    /// A `StreamIsActive` message.
    Push,
}

/// What was asked or decided.
#[derive(Clone, Debug, PartialEq)]
pub enum What {
    IsActive(Result<bool, String>),
    Metric {
        name: String,
        value: Result<f64, String>,
    },
    /// GetMetricSpec's `(metric, target)`s.
    Spec(Result<Vec<(String, f64)>, String>),
    /// A scale of the Deployment from one count to another, and why.
    Scale {
        from: i64,
        to: i64,
        why: String,
    },
    /// The HPA computed nothing this sync, and why.
    NoChange(String),
}

/// One record.
#[derive(Clone, Debug)]
pub struct Record {
    pub at: Instant,
    pub by: By,
    pub what: What,
}

/// A fallback as KEDA reads `spec.fallback`.
#[derive(Clone, Debug)]
struct Fallback {
    failure_threshold: u32,
    replicas: i64,
    behavior: String,
}

struct State {
    records: Vec<Record>,
    /// The executor's last active time.
    last_active: Option<Instant>,
    /// Failed GetMetrics in a row, per metric.
    failures: HashMap<String, u32>,
    /// The metric spec, once read.
    specs: Option<Vec<(String, f64)>>,
    hpa: Hpa,
}

struct Inner {
    cluster: Cluster,
    so: ScaledObjectRef,
    namespace: String,
    deployment: String,
    min: i64,
    cooldown: Duration,
    initial_cooldown: Duration,
    fallback: Option<Fallback>,
    started: Instant,
    state: Mutex<State>,
    /// The scale executor runs one decision at a time (KEDA's scaling mutex).
    executor: tokio::sync::Mutex<()>,
}

/// KEDA and its HPA for one ScaledObject, until dropped.
pub struct Keda {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Keda {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn seconds(v: &serde_yaml::Value, default: f64, scale: f64) -> Duration {
    Duration::from_secs_f64(v.as_f64().unwrap_or(default).max(0.0) / scale)
}

/// The trigger's metadata as KEDA forwards it: every value must be a string (KEDA's CRD
/// rejects any other).
fn metadata(trigger: &serde_yaml::Value) -> BTreeMap<String, String> {
    let Some(m) = trigger["metadata"].as_mapping() else {
        return BTreeMap::new();
    };
    m.iter()
        .map(|(k, v)| {
            let k = k.as_str().expect("a metadata key is a string").to_owned();
            let v = v.as_str().unwrap_or_else(|| {
                panic!("trigger metadata {k}: {v:?} is not a string; KEDA's CRD refuses it")
            });
            (k, v.to_owned())
        })
        .collect()
}

impl Keda {
    /// Runs KEDA for `scaled_object` (a `keda.sh/v1alpha1` ScaledObject document), calling the
    /// external scaler at `scaler` instead of the trigger's `scalerAddress`, on a runtime of its
    /// own; `pollingInterval`, `cooldownPeriod`, `initialCooldownPeriod`, the HPA's 15 s sync,
    /// its windows and periods and the push stream's back-off all divided by `time_scale`.
    pub fn start(
        cluster: &Cluster,
        scaled_object: &serde_yaml::Value,
        scaler: SocketAddr,
        time_scale: f64,
    ) -> Keda {
        assert!(time_scale > 0.0, "a time scale above zero");
        let so = scaled_object;
        let spec = &so["spec"];
        let trigger = spec["triggers"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|t| matches!(t["type"].as_str(), Some("external" | "external-push")))
            .expect("the ScaledObject has an external or external-push trigger")
            .clone();
        let metric_type = trigger["metricType"].as_str().unwrap_or("AverageValue");
        assert_eq!(
            metric_type, "AverageValue",
            "only AverageValue metrics are modelled"
        );
        let push = trigger["type"] == "external-push";
        let namespace = so["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        let name = so["metadata"]["name"]
            .as_str()
            .expect("the ScaledObject's name")
            .to_owned();
        let fallback = (!spec["fallback"].is_null()).then(|| Fallback {
            failure_threshold: spec["fallback"]["failureThreshold"].as_u64().unwrap_or(3) as u32,
            replicas: spec["fallback"]["replicas"].as_i64().unwrap_or(0),
            behavior: spec["fallback"]["behavior"]
                .as_str()
                .unwrap_or("static")
                .to_owned(),
        });
        let polling = seconds(&spec["pollingInterval"], 30.0, time_scale);
        let sync = Duration::from_secs_f64(15.0 / time_scale);
        let inner = Arc::new(Inner {
            cluster: cluster.clone(),
            so: ScaledObjectRef {
                name,
                namespace: namespace.clone(),
                scaler_metadata: metadata(&trigger).into_iter().collect(),
            },
            namespace,
            deployment: spec["scaleTargetRef"]["name"]
                .as_str()
                .expect("spec.scaleTargetRef.name")
                .to_owned(),
            min: spec["minReplicaCount"].as_i64().unwrap_or(0),
            cooldown: seconds(&spec["cooldownPeriod"], 300.0, time_scale),
            initial_cooldown: seconds(&spec["initialCooldownPeriod"], 0.0, time_scale),
            fallback,
            started: Instant::now(),
            state: Mutex::new(State {
                records: Vec::new(),
                last_active: None,
                failures: HashMap::new(),
                specs: None,
                hpa: Hpa::of(so, time_scale),
            }),
            executor: tokio::sync::Mutex::new(()),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("keda")
            .enable_all()
            .build()
            .expect("KEDA's runtime");
        let channel = {
            let _entered = runtime.enter();
            Channel::from_shared(format!("http://{scaler}"))
                .expect("a scaler address")
                .connect_timeout(Duration::from_secs(2))
                .timeout(CALL)
                .connect_lazy()
        };
        let client = ExternalScalerClient::new(channel);
        let (i, c) = (inner.clone(), client.clone());
        runtime.spawn(async move {
            loop {
                let next = tokio::time::Instant::now() + polling;
                poll(&i, &mut c.clone()).await;
                tokio::time::sleep_until(next).await;
            }
        });
        let (i, c) = (inner.clone(), client.clone());
        runtime.spawn(async move {
            loop {
                let next = tokio::time::Instant::now() + sync;
                hpa_sync(&i, &mut c.clone()).await;
                tokio::time::sleep_until(next).await;
            }
        });
        if push {
            let (i, c) = (inner.clone(), client);
            let (first, most) = (2.0 / time_scale, 60.0 / time_scale);
            runtime.spawn(async move {
                let mut retry = first;
                loop {
                    if stream(&i, &mut c.clone()).await {
                        retry = first;
                    }
                    tokio::time::sleep(Duration::from_secs_f64(retry)).await;
                    retry = (retry * 2.0).min(most);
                }
            });
        }
        Keda {
            inner,
            runtime: Some(runtime),
        }
    }

    /// The `ScaledObjectRef` every call carries.
    pub fn object(&self) -> ScaledObjectRef {
        self.inner.so.clone()
    }

    /// Everything asked and decided so far, in order.
    pub fn records(&self) -> Vec<Record> {
        self.inner.state.lock().unwrap().records.clone()
    }

    /// Every scale so far: when, by which loop, from, to, why.
    pub fn scales(&self) -> Vec<(Instant, By, i64, i64, String)> {
        self.records()
            .into_iter()
            .filter_map(|r| match r.what {
                What::Scale { from, to, why } => Some((r.at, r.by, from, to, why)),
                _ => None,
            })
            .collect()
    }

    /// Every IsActive answer (polled, asked by the HPA path, or pushed).
    pub fn is_active(&self) -> Vec<(Instant, By, Result<bool, String>)> {
        self.records()
            .into_iter()
            .filter_map(|r| match r.what {
                What::IsActive(a) => Some((r.at, r.by, a)),
                _ => None,
            })
            .collect()
    }

    /// Every GetMetrics answer: when, by which loop, the metric, the value.
    pub fn metrics(&self) -> Vec<(Instant, By, String, Result<f64, String>)> {
        self.records()
            .into_iter()
            .filter_map(|r| match r.what {
                What::Metric { name, value } => Some((r.at, r.by, name, value)),
                _ => None,
            })
            .collect()
    }

    /// The records as lines, times in seconds since the start, for a failing test's message
    /// (the last `last` of them).
    pub fn report(&self, last: usize) -> String {
        let records = self.records();
        let mut out = String::new();
        for r in records.iter().skip(records.len().saturating_sub(last)) {
            let t = r.at.duration_since(self.inner.started).as_secs_f64();
            let _ = writeln!(out, "{t:8.3}s {:?} {:?}", r.by, r.what);
        }
        out
    }

    /// Waits up to `within` for the Deployment's `spec.replicas` to be `n`; the report in the
    /// message if not.
    pub async fn wait_replicas(&self, n: i64, within: Duration) {
        let end = Instant::now() + within;
        loop {
            if replicas(&self.inner) == Some(n) {
                return;
            }
            assert!(
                Instant::now() < end,
                "{}/{} not at {n} replicas within {within:?} (at {:?}):\n{}",
                self.inner.namespace,
                self.inner.deployment,
                replicas(&self.inner),
                self.report(60)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// At most this many records are kept.
const RECORDS_CAP: usize = 1_000_000;

fn record(inner: &Inner, by: By, what: What) {
    let records = &mut inner.state.lock().unwrap().records;
    if records.len() < RECORDS_CAP {
        records.push(Record {
            at: Instant::now(),
            by,
            what,
        });
    }
}

/// The Deployment's `spec.replicas` (the scale subresource's), `None` when it is not there.
fn replicas(inner: &Inner) -> Option<i64> {
    let d = inner
        .cluster
        .get("Deployment", &inner.namespace, &inner.deployment)?;
    Some(d["spec"]["replicas"].as_i64().unwrap_or(1))
}

/// Its status replicas.
fn status_replicas(inner: &Inner) -> i64 {
    inner
        .cluster
        .get("Deployment", &inner.namespace, &inner.deployment)
        .and_then(|d| d["status"]["replicas"].as_i64())
        .unwrap_or(0)
}

/// Writes `spec.replicas = to` if it is still `from` (the scale subresource's update carries
/// the resourceVersion it read: a change between is a conflict, and nothing is written),
/// recording the scale.
fn scale(inner: &Inner, by: By, from: i64, to: i64, why: &str) {
    let written = inner
        .cluster
        .update("Deployment", &inner.namespace, &inner.deployment, |d| {
            if d["spec"]["replicas"].as_i64().unwrap_or(1) != from {
                return false;
            }
            d["spec"]["replicas"] = serde_json::json!(to);
            true
        });
    let why = if written {
        why.to_owned()
    } else {
        format!("{why} (not written: a conflict, or no Deployment)")
    };
    record(inner, by, What::Scale { from, to, why });
}

fn status(e: tonic::Status) -> String {
    format!("{:?}: {}", e.code(), e.message())
}

/// The metric spec, kept once read.
async fn specs(
    inner: &Inner,
    c: &mut ExternalScalerClient<Channel>,
    by: By,
) -> Result<Vec<(String, f64)>, String> {
    if let Some(s) = inner.state.lock().unwrap().specs.clone() {
        return Ok(s);
    }
    let answer = c
        .get_metric_spec(inner.so.clone())
        .await
        .map_err(status)
        .and_then(|r| {
            let specs: Vec<(String, f64)> = r
                .into_inner()
                .metric_specs
                .into_iter()
                .map(|s| {
                    let target = if s.target_size_float > 0.0 {
                        s.target_size_float
                    } else {
                        s.target_size as f64
                    };
                    (s.metric_name, target)
                })
                .collect();
            if specs.is_empty() {
                Err("an empty metric spec".to_owned())
            } else {
                Ok(specs)
            }
        });
    record(inner, by, What::Spec(answer.clone()));
    if let Ok(s) = &answer {
        inner.state.lock().unwrap().specs = Some(s.clone());
    }
    answer
}

/// One metric's value as the HPA gets it through KEDA: GetMetrics (the values summed), then
/// IsActive; past the fallback's threshold of failures, the fallback value. `Ok((value,
/// active))`, active `None` when IsActive failed.
async fn metric(
    inner: &Inner,
    c: &mut ExternalScalerClient<Channel>,
    by: By,
    name: &str,
    target: f64,
) -> Result<(f64, Option<bool>), String> {
    let request = GetMetricsRequest {
        scaled_object_ref: Some(inner.so.clone()),
        metric_name: name.to_owned(),
    };
    let value = c.get_metrics(request).await.map_err(status).map(|r| {
        r.into_inner()
            .metric_values
            .iter()
            .map(|v| {
                if v.metric_value_float > 0.0 {
                    v.metric_value_float
                } else {
                    v.metric_value as f64
                }
            })
            .sum::<f64>()
    });
    record(
        inner,
        by,
        What::Metric {
            name: name.to_owned(),
            value: value.clone(),
        },
    );
    match value {
        Ok(v) => {
            inner
                .state
                .lock()
                .unwrap()
                .failures
                .insert(name.to_owned(), 0);
            let active = c
                .is_active(inner.so.clone())
                .await
                .map(|r| r.into_inner().result)
                .map_err(status);
            record(inner, by, What::IsActive(active.clone()));
            if active.is_err() {
                inner.state.lock().unwrap().specs = None;
            }
            Ok((v, active.ok()))
        }
        Err(e) => {
            let failures = {
                let mut s = inner.state.lock().unwrap();
                s.specs = None;
                let f = s.failures.entry(name.to_owned()).or_default();
                *f += 1;
                *f
            };
            let Some(fb) = &inner.fallback else {
                return Err(e);
            };
            if failures <= fb.failure_threshold {
                return Err(e);
            }
            let current = replicas(inner).unwrap_or(0);
            let n = match fb.behavior.as_str() {
                "currentReplicas" => current,
                "currentReplicasIfHigher" => current.max(fb.replicas),
                "currentReplicasIfLower" => current.min(fb.replicas),
                _ => fb.replicas,
            };
            Ok((target * n as f64, Some(true)))
        }
    }
}

/// The operator's poll: the scaler's state, then the executor.
async fn poll(inner: &Inner, c: &mut ExternalScalerClient<Channel>) {
    let (mut active, mut error) = (false, false);
    match specs(inner, c, By::Poll).await {
        Err(_) => error = true,
        Ok(specs) => {
            for (name, target) in specs {
                match metric(inner, c, By::Poll, &name, target).await {
                    Ok((_, Some(a))) => active = a,
                    _ => error = true,
                }
            }
        }
    }
    let _one = inner.executor.lock().await;
    execute(inner, By::Poll, active, error);
}

/// KEDA's scale executor on one state.
fn execute(inner: &Inner, by: By, active: bool, error: bool) {
    let Some(current) = replicas(inner) else {
        return;
    };
    let now = Instant::now();
    if active {
        if current == 0 {
            let to = inner.min.max(1);
            scale(inner, by, current, to, "active at zero");
            inner.state.lock().unwrap().last_active = Some(now);
        } else if !error {
            inner.state.lock().unwrap().last_active = Some(now);
        }
        return;
    }
    let fallback_holds = inner.fallback.as_ref().is_some_and(|f| f.replicas != 0);
    if error && (fallback_holds || inner.fallback.is_none()) {
        return;
    }
    if current > 0 && inner.min == 0 {
        let last = inner.state.lock().unwrap().last_active;
        let due = match last {
            None => now.duration_since(inner.started) > inner.initial_cooldown,
            Some(t) => now.duration_since(t) > inner.cooldown,
        };
        if due {
            scale(inner, by, current, 0, "idle for the cooldown period");
        }
    } else if current < inner.min {
        scale(inner, by, current, inner.min, "below minReplicaCount");
    }
}

/// One HPA sync.
async fn hpa_sync(inner: &Inner, c: &mut ExternalScalerClient<Channel>) {
    let Some(current) = replicas(inner) else {
        return;
    };
    if current == 0 {
        return;
    }
    let mut values = Vec::new();
    match specs(inner, c, By::Hpa).await {
        Err(e) => values.push(Err(e)),
        Ok(specs) => {
            for (name, target) in specs {
                values.push(
                    metric(inner, c, By::Hpa, &name, target)
                        .await
                        .map(|(v, _)| (v, target)),
                );
            }
        }
    }
    let now = inner.started.elapsed().as_secs_f64();
    let status = status_replicas(inner);
    let desired = inner
        .state
        .lock()
        .unwrap()
        .hpa
        .sync(now, current, status, &values);
    match desired {
        Ok(d) if d != current => scale(inner, By::Hpa, current, d, "the HPA's sync"),
        Ok(_) => {}
        Err(e) => record(inner, By::Hpa, What::NoChange(e)),
    }
}

/// One `StreamIsActive` stream, until it ends; true when it ended cleanly.
async fn stream(inner: &Inner, c: &mut ExternalScalerClient<Channel>) -> bool {
    let mut s = match c.stream_is_active(inner.so.clone()).await {
        Ok(s) => s.into_inner(),
        Err(e) => {
            record(inner, By::Push, What::IsActive(Err(status(e))));
            return false;
        }
    };
    loop {
        match s.message().await {
            Ok(Some(m)) => {
                record(inner, By::Push, What::IsActive(Ok(m.result)));
                if m.result {
                    let _one = inner.executor.lock().await;
                    execute(inner, By::Push, true, false);
                }
            }
            Ok(None) => return true,
            Err(e) => {
                record(inner, By::Push, What::IsActive(Err(status(e))));
                return false;
            }
        }
    }
}
