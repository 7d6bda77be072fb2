//! The activator's own `/metrics`: per route, requests held and in flight, forwarded, timed out
//! and rejected, upstream errors, and a histogram of the time each request spent held (the
//! cold-start latency users see).

use super::hold::RouteState;
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
    pub resent: Counter,
    pub held_seconds: Histogram,
}

pub struct Telemetry {
    registry: Registry,
    held: Family<Labels, Gauge>,
    in_flight: Family<Labels, Gauge>,
    forwarded: Family<Labels, Counter>,
    timed_out: Family<Labels, Counter>,
    rejected: Family<Labels, Counter>,
    upstream_errors: Family<Labels, Counter>,
    resent: Family<Labels, Counter>,
    held_seconds: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl Telemetry {
    pub fn new() -> Telemetry {
        let mut registry = Registry::with_prefix("infscale_activator");
        let held = Family::<Labels, Gauge>::default();
        let in_flight = Family::<Labels, Gauge>::default();
        let forwarded = Family::<Labels, Counter>::default();
        let timed_out = Family::<Labels, Counter>::default();
        let rejected = Family::<Labels, Counter>::default();
        let upstream_errors = Family::<Labels, Counter>::default();
        let resent = Family::<Labels, Counter>::default();
        let held_seconds: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(hold_histogram);
        let gauges = [
            ("held", "Requests held waiting for a ready replica", &held),
            (
                "in_flight",
                "Requests held or forwarded and not finished",
                &in_flight,
            ),
        ];
        for (name, help, family) in gauges {
            registry.register(name, help, family.clone());
        }
        let counters = [
            (
                "forwarded",
                "Requests forwarded to the upstream",
                &forwarded,
            ),
            (
                "timed_out",
                "Held requests answered 504 after the hold timeout",
                &timed_out,
            ),
            (
                "rejected",
                "Requests refused (route full, body too large, no route, shutting down)",
                &rejected,
            ),
            (
                "upstream_errors",
                "Forwarded requests the upstream failed",
                &upstream_errors,
            ),
            (
                "resent",
                "Requests sent again on a new connection: the upstream had closed the pooled one \
                 before reading them",
                &resent,
            ),
        ];
        for (name, help, family) in counters {
            registry.register(name, help, family.clone());
        }
        registry.register(
            "held_duration_seconds",
            "Time a request spent held before it was forwarded",
            held_seconds.clone(),
        );
        Telemetry {
            registry,
            held,
            in_flight,
            forwarded,
            timed_out,
            rejected,
            upstream_errors,
            resent,
            held_seconds,
        }
    }

    fn route(host: &str) -> Labels {
        vec![("route".to_owned(), host.to_owned())]
    }

    /// One route's series, looked up once so requests touch only atomics.
    pub fn for_route(&self, host: &str) -> RouteTelemetry {
        let l = Self::route(host);
        RouteTelemetry {
            forwarded: self.forwarded.get_or_create(&l).clone(),
            timed_out: self.timed_out.get_or_create(&l).clone(),
            upstream_errors: self.upstream_errors.get_or_create(&l).clone(),
            resent: self.resent.get_or_create(&l).clone(),
            held_seconds: self.held_seconds.get_or_create(&l).clone(),
        }
    }

    pub fn reject(&self, host: &str, reason: &str) {
        let mut l = Self::route(host);
        l.push(("reason".to_owned(), reason.to_owned()));
        self.rejected.get_or_create(&l).inc();
    }

    /// Registers each route's abandoned-hold counter (kept by the route itself).
    pub fn with_routes(mut self, routes: &[Arc<RouteState>]) -> Telemetry {
        for r in routes {
            let sub = self
                .registry
                .sub_registry_with_label(("route".into(), r.route.counts_host.clone().into()));
            sub.register(
                "abandoned",
                "Held requests whose client went away before a replica was ready",
                r.abandoned.clone(),
            );
        }
        self
    }

    /// The exposition text, with the gauges read from the routes now.
    pub fn render(&self, routes: &[Arc<RouteState>]) -> String {
        for r in routes {
            let c = r.counts();
            let l = Self::route(&r.route.counts_host);
            self.held.get_or_create(&l).set(c.held.unwrap_or(0) as i64);
            self.in_flight.get_or_create(&l).set(c.concurrency as i64);
        }
        crate::edge::exposition_http::exposition(&self.registry)
    }
}
