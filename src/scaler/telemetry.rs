//! The scaler's own `/metrics`: what it scraped, how long it took, what failed, and what it told
//! KEDA, per target; plus how many collectors run and the gRPC calls it answered.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

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
            collectors,
            grpc_calls,
        }
    }

    pub fn target(label: &str) -> Labels {
        vec![("target".to_owned(), label.to_owned())]
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
        crate::exposition_http::exposition(&self.registry)
    }
}
