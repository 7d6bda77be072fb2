//! The activator's own `/metrics`: per route, requests held and in flight, forwarded, timed out
//! and rejected, upstream errors, and a histogram of the time each request spent held (the
//! cold-start latency users see).

use super::hold::RouteState;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::Arc;

type Labels = Vec<(String, String)>;

fn hold_histogram() -> Histogram {
    // 1 ms to about 9 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// A route's counters, ready to use.
#[derive(Clone)]
pub struct RouteTelemetry {
    pub forwarded: Counter,
    pub timed_out: Counter,
    pub upstream_errors: Counter,
    pub held_seconds: Histogram,
}

pub struct Telemetry {
    registry: Registry,
    held: Family<Labels, Gauge>,
    in_flight: Family<Labels, Gauge>,
    pub forwarded: Family<Labels, Counter>,
    pub timed_out: Family<Labels, Counter>,
    pub rejected: Family<Labels, Counter>,
    pub upstream_errors: Family<Labels, Counter>,
    pub held_seconds: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl Telemetry {
    pub fn new() -> Telemetry {
        let mut registry = Registry::with_prefix("infscale_activator");
        let t = Telemetry {
            held: Family::default(),
            in_flight: Family::default(),
            forwarded: Family::default(),
            timed_out: Family::default(),
            rejected: Family::default(),
            upstream_errors: Family::default(),
            held_seconds: Family::new_with_constructor(hold_histogram),
            registry: Registry::default(),
        };
        registry.register(
            "held",
            "Requests held waiting for a ready replica",
            t.held.clone(),
        );
        registry.register(
            "in_flight",
            "Requests held or forwarded and not finished",
            t.in_flight.clone(),
        );
        registry.register(
            "forwarded",
            "Requests forwarded to the upstream",
            t.forwarded.clone(),
        );
        registry.register(
            "timed_out",
            "Held requests answered 504 after the hold timeout",
            t.timed_out.clone(),
        );
        registry.register(
            "rejected",
            "Requests refused (route full, body too large, no route, shutting down)",
            t.rejected.clone(),
        );
        registry.register(
            "upstream_errors",
            "Forwarded requests the upstream failed",
            t.upstream_errors.clone(),
        );
        registry.register(
            "held_duration_seconds",
            "Time a request spent held before it was forwarded",
            t.held_seconds.clone(),
        );
        Telemetry { registry, ..t }
    }

    pub fn route(host: &str) -> Labels {
        vec![("route".to_owned(), host.to_owned())]
    }

    /// One route's series, looked up once so requests touch only atomics.
    pub fn for_route(&self, host: &str) -> RouteTelemetry {
        let l = Self::route(host);
        RouteTelemetry {
            forwarded: self.forwarded.get_or_create(&l).clone(),
            timed_out: self.timed_out.get_or_create(&l).clone(),
            upstream_errors: self.upstream_errors.get_or_create(&l).clone(),
            held_seconds: self.held_seconds.get_or_create(&l).clone(),
        }
    }

    pub fn reject(&self, host: &str, reason: &str) {
        let mut l = Self::route(host);
        l.push(("reason".to_owned(), reason.to_owned()));
        self.rejected.get_or_create(&l).inc();
    }

    /// The exposition text, with the gauges read from the routes now.
    pub fn render(&self, routes: &[Arc<RouteState>]) -> String {
        for r in routes {
            let c = r.counts();
            let l = Self::route(&r.route.counts_host);
            self.held.get_or_create(&l).set(c.held.unwrap_or(0) as i64);
            self.in_flight.get_or_create(&l).set(c.concurrency as i64);
        }
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
