//! The scaler's own `/metrics`: what it scraped, how long it took, what failed, and what it told
//! KEDA, per trigger (namespace, ScaledObject, scale target, metric and threshold); plus how many
//! collectors run and the gRPC calls it answered. A trigger's series live as long as its
//! collector: [`TriggerSeries`] removes them when it stops.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

type Labels = Vec<(String, String)>;

fn scrape_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every series the scaler exports.
pub struct Telemetry {
    registry: Registry,
    pub scrape_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    pub scrape_errors: Family<Labels, Counter>,
    pub value: Family<Labels, Gauge<f64, AtomicU64>>,
    pub active: Family<Labels, Gauge>,
    pub cold_start: Family<Labels, Gauge<f64, AtomicU64>>,
    pub wake: Family<Labels, Gauge<f64, AtomicU64>>,
    pub activator_up: Family<Labels, Gauge>,
    pub activator_route: Family<Labels, Gauge>,
    pub config_errors: Family<Labels, Gauge>,
    pub deletion_cost_writes: Family<Labels, Counter>,
    pub path_write_failures: Family<Labels, Counter>,
    pub collectors: Gauge,
    pub grpc_calls: Family<Labels, Counter>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl Telemetry {
    pub fn new() -> Telemetry {
        let mut registry = Registry::with_prefix("infscale");
        let scrape_seconds: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(scrape_histogram);
        let scrape_errors = Family::<Labels, Counter>::default();
        let value = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let active = Family::<Labels, Gauge>::default();
        let cold_start = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let wake = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let activator_up = Family::<Labels, Gauge>::default();
        let activator_route = Family::<Labels, Gauge>::default();
        let config_errors = Family::<Labels, Gauge>::default();
        let deletion_cost_writes = Family::<Labels, Counter>::default();
        let path_write_failures = Family::<Labels, Counter>::default();
        let collectors = Gauge::default();
        let grpc_calls = Family::<Labels, Counter>::default();
        registry.register(
            "scrape_duration_seconds",
            "Time to fetch and read one pod's page, per target",
            scrape_seconds.clone(),
        );
        registry.register(
            "scrape_errors",
            "Pod scrapes that failed, per target and reason",
            scrape_errors.clone(),
        );
        registry.register(
            "target_value",
            "The metric value last computed for a target (what GetMetrics returns)",
            value.clone(),
        );
        registry.register(
            "target_active",
            "Whether a target is active (what IsActive returns)",
            active.clone(),
        );
        registry.register(
            "cold_start_seconds",
            "A target's learned cold start, pod creation to Ready (the median of recent starts; the horizon of lookaheadSeconds: auto)",
            cold_start.clone(),
        );
        registry.register(
            "wake_seconds",
            "A target's learned wake, a replica read asleep to read awake (the median of recent wakes, apart from the cold start)",
            wake.clone(),
        );
        registry.register(
            "activator_up",
            "Whether the trigger's activator counts are read (1) or failing (0)",
            activator_up.clone(),
        );
        registry.register(
            "activator_route",
            "Serve mode: whether an activator pod holds the trigger's model at the port its slice names (1), or none does (0: the target is never let go idle)",
            activator_route.clone(),
        );
        registry.register(
            "config_errors",
            "Trigger metadata that does not fit what the pods serve (key, and what was seen)",
            config_errors.clone(),
        );
        registry.register(
            "deletion_cost_writes",
            "Pod deletion-cost annotations written for a target (deletionCost: true), per result",
            deletion_cost_writes.clone(),
        );
        registry.register(
            "serve_path_write_failures",
            "Serve mode: writes of a trigger's Service path (its slice, through the Kubernetes API) that failed, per reason; each is retried after a pause that doubles to minutes",
            path_write_failures.clone(),
        );
        registry.register("collectors", "Collectors running", collectors.clone());
        registry.register(
            "grpc_calls",
            "External scaler calls answered, per method and status code",
            grpc_calls.clone(),
        );
        Telemetry {
            registry,
            scrape_seconds,
            scrape_errors,
            value,
            active,
            cold_start,
            wake,
            activator_up,
            activator_route,
            config_errors,
            deletion_cost_writes,
            path_write_failures,
            collectors,
            grpc_calls,
        }
    }

    pub fn call(&self, method: &str, code: tonic::Code) {
        let labels = vec![
            ("method".to_owned(), method.to_owned()),
            ("code".to_owned(), format!("{code:?}")),
        ];
        self.grpc_calls.get_or_create(&labels).inc();
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        crate::edge::exposition_http::exposition(&self.registry)
    }
}

/// One trigger's series, removed from every family when dropped (its collector stopped).
pub struct TriggerSeries {
    telemetry: Arc<Telemetry>,
    labels: Labels,
    /// Label sets created beyond `labels` (error reasons, configuration keys).
    extra: Mutex<Vec<Labels>>,
}

impl TriggerSeries {
    /// Counts a running collector until dropped.
    pub fn new(telemetry: &Arc<Telemetry>, labels: Labels) -> TriggerSeries {
        telemetry.collectors.inc();
        TriggerSeries {
            telemetry: telemetry.clone(),
            labels,
            extra: Mutex::new(Vec::new()),
        }
    }

    fn with(&self, key: &str, value: &str) -> Labels {
        let mut l = self.labels.clone();
        l.push((key.to_owned(), value.to_owned()));
        l
    }

    fn remember(&self, labels: Labels) {
        if let Ok(mut extra) = self.extra.lock() {
            if !extra.contains(&labels) {
                extra.push(labels);
            }
        }
    }

    pub fn scraped(&self, seconds: f64) {
        let t = &self.telemetry;
        t.scrape_seconds
            .get_or_create(&self.labels)
            .observe(seconds);
    }

    pub fn scrape_failed(&self, reason: &str) {
        let l = self.with("reason", reason);
        self.telemetry.scrape_errors.get_or_create(&l).inc();
        self.remember(l);
    }

    /// A metadata key that does not fit what was seen (e.g. `server`).
    pub fn config_error(&self, key: &str, seen: &str) {
        let mut l = self.with("key", key);
        l.push(("seen".to_owned(), seen.to_owned()));
        self.telemetry.config_errors.get_or_create(&l).set(1);
        self.remember(l);
    }

    pub fn report(&self, value: Option<f64>, active: Option<bool>) {
        let t = &self.telemetry;
        match value {
            Some(v) => {
                t.value.get_or_create(&self.labels).set(v);
            }
            None => {
                t.value.remove(&self.labels);
            }
        }
        match active {
            Some(a) => {
                t.active.get_or_create(&self.labels).set(i64::from(a));
            }
            None => {
                t.active.remove(&self.labels);
            }
        }
    }

    /// The target's cold start: learned, or the prior `lookaheadSeconds: auto` uses until then.
    pub fn cold_start(&self, seconds: f64) {
        self.telemetry
            .cold_start
            .get_or_create(&self.labels)
            .set(seconds);
    }

    /// The target's learned wake from sleep.
    pub fn wake(&self, seconds: f64) {
        self.telemetry.wake.get_or_create(&self.labels).set(seconds);
    }

    /// The counter of deletion-cost writes that ended as `result` (ok, failed).
    pub fn write_counter(&self, result: &str) -> Counter {
        let l = self.with("result", result);
        let counter = self
            .telemetry
            .deletion_cost_writes
            .get_or_create(&l)
            .clone();
        self.remember(l);
        counter
    }

    pub fn activator_route(&self, routed: bool) {
        let t = &self.telemetry;
        t.activator_route
            .get_or_create(&self.labels)
            .set(i64::from(routed));
    }

    pub fn activator_up(&self, up: bool) {
        let t = &self.telemetry;
        t.activator_up
            .get_or_create(&self.labels)
            .set(i64::from(up));
    }
}

impl Drop for TriggerSeries {
    fn drop(&mut self) {
        let t = &self.telemetry;
        t.collectors.dec();
        t.scrape_seconds.remove(&self.labels);
        t.value.remove(&self.labels);
        t.active.remove(&self.labels);
        t.cold_start.remove(&self.labels);
        t.wake.remove(&self.labels);
        t.activator_up.remove(&self.labels);
        t.activator_route.remove(&self.labels);
        if let Ok(extra) = self.extra.lock() {
            for labels in extra.iter() {
                t.scrape_errors.remove(labels);
                t.config_errors.remove(labels);
                t.deletion_cost_writes.remove(labels);
            }
        }
    }
}

/// One serve-mode trigger's path series (its failed writes, per reason), removed when dropped
/// (the path task ended).
pub struct PathSeries {
    telemetry: Arc<Telemetry>,
    labels: Labels,
    reasons: Mutex<Vec<Labels>>,
}

impl PathSeries {
    /// The series of the trigger whose [`TriggerSeries`] has these `labels`.
    pub fn new(telemetry: &Arc<Telemetry>, labels: Labels) -> PathSeries {
        PathSeries {
            telemetry: telemetry.clone(),
            labels,
            reasons: Mutex::new(Vec::new()),
        }
    }

    /// One more write that failed for `reason`.
    pub fn write_failed(&self, reason: &str) {
        let mut l = self.labels.clone();
        l.push(("reason".to_owned(), reason.to_owned()));
        self.telemetry.path_write_failures.get_or_create(&l).inc();
        if let Ok(mut reasons) = self.reasons.lock() {
            if !reasons.contains(&l) {
                reasons.push(l);
            }
        }
    }
}

impl Drop for PathSeries {
    fn drop(&mut self) {
        if let Ok(reasons) = self.reasons.lock() {
            for l in reasons.iter() {
                self.telemetry.path_write_failures.remove(l);
            }
        }
    }
}
