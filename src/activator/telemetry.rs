//! The activator's own `/metrics`: per route, requests held and in flight, forwarded, timed out
//! and rejected, upstream errors, and a histogram of the time each request spent held (the
//! cold-start latency users see); requests no route could place, by reason; the routes in use
//! by source, reloads of the routes file, and models the activator would not take, by reason.
//! Every label is bounded: routes are bounded by `--max-models` and the file, reasons are a
//! fixed set.

use infscale_core::observe::counts::QueueCounts;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn hold_histogram() -> Histogram {
    // 1 ms to about 9 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// A route's counters, ready to use (unregistered ones by default, for a route no `/metrics`
/// shows).
#[derive(Clone)]
pub struct RouteTelemetry {
    pub forwarded: Counter,
    pub timed_out: Counter,
    pub upstream_errors: Counter,
    pub resent: Counter,
    pub held_seconds: Histogram,
    /// Held requests whose clients went away before the release.
    pub abandoned: Counter,
}

impl Default for RouteTelemetry {
    fn default() -> Self {
        RouteTelemetry {
            forwarded: Counter::default(),
            timed_out: Counter::default(),
            upstream_errors: Counter::default(),
            resent: Counter::default(),
            held_seconds: hold_histogram(),
            abandoned: Counter::default(),
        }
    }
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
    abandoned: Family<Labels, Counter>,
    unrouted: Family<Labels, Counter>,
    routes: Family<Labels, Gauge>,
    reloads: Family<Labels, Counter>,
    refused_models: Family<Labels, Counter>,
    /// The hosts the gauges show now.
    shown: std::sync::Mutex<std::collections::BTreeSet<String>>,
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
        let abandoned = Family::<Labels, Counter>::default();
        let unrouted = Family::<Labels, Counter>::default();
        let routes = Family::<Labels, Gauge>::default();
        let reloads = Family::<Labels, Counter>::default();
        let refused_models = Family::<Labels, Counter>::default();
        let held_seconds: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(hold_histogram);
        let gauges = [
            ("held", "Requests held waiting for a ready replica", &held),
            (
                "in_flight",
                "Requests held or forwarded and not finished",
                &in_flight,
            ),
            (
                "routes",
                "Routes placing requests now, by source (file or learned from serve's slices)",
                &routes,
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
            (
                "abandoned",
                "Held requests whose client went away before a replica was ready",
                &abandoned,
            ),
            (
                "unrouted",
                "Requests no route could place, by reason (no_host, unknown_host, no_path), \
                 answered 404 with the hosts the activator serves",
                &unrouted,
            ),
            (
                "routes_reloads",
                "Reloads of the routes file, by result (ok, error: the routes in use stay)",
                &reloads,
            ),
            (
                "models_refused",
                "Models named by serve's slices the activator does not take, by reason",
                &refused_models,
            ),
        ];
        for (name, help, family) in counters {
            registry.register(name, help, family.clone());
        }
        // Counters of a fixed set of reasons exist at zero from the start: a rate over them
        // reads 0, not nothing, before the first one.
        for reason in ["no_host", "unknown_host", "no_path"] {
            let l = vec![("reason".to_owned(), reason.to_owned())];
            let _ = unrouted.get_or_create(&l);
        }
        for result in ["ok", "error"] {
            let l = vec![("result".to_owned(), result.to_owned())];
            let _ = reloads.get_or_create(&l);
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
            abandoned,
            unrouted,
            routes,
            reloads,
            refused_models,
            shown: Default::default(),
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
            abandoned: self.abandoned.get_or_create(&l).clone(),
        }
    }

    /// A request no route placed, for `reason` (one of a fixed few).
    pub fn unrouted(&self, reason: &'static str) {
        let l = vec![("reason".to_owned(), reason.to_owned())];
        self.unrouted.get_or_create(&l).inc();
    }

    /// The routes placing requests now: `file` from the routes file, `learned` from the slices.
    pub fn routes_in_use(&self, file: usize, learned: usize) {
        for (source, n) in [("file", file), ("learned", learned)] {
            let l = vec![("source".to_owned(), source.to_owned())];
            self.routes.get_or_create(&l).set(n as i64);
        }
    }

    /// A reload of the routes file, `ok` or not.
    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        let l = vec![("result".to_owned(), result.to_owned())];
        self.reloads.get_or_create(&l).inc();
    }

    /// A model named by a slice that the activator does not take, for `reason`.
    pub fn refused_model(&self, reason: &'static str) {
        let l = vec![("reason".to_owned(), reason.to_owned())];
        self.refused_models.get_or_create(&l).inc();
    }

    pub fn reject(&self, host: &str, reason: &str) {
        let mut l = Self::route(host);
        l.push(("reason".to_owned(), reason.to_owned()));
        self.rejected.get_or_create(&l).inc();
    }

    /// The exposition text, with the gauges set from `counts` (each host's, summed over the
    /// routes that share it: a route being replaced and its successor); a host no route has any
    /// more leaves the gauges.
    pub fn render(&self, counts: &QueueCounts) -> String {
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        for gone in shown.iter().filter(|h| !counts.contains_key(h.as_str())) {
            let l = Self::route(gone);
            self.held.remove(&l);
            self.in_flight.remove(&l);
        }
        *shown = counts.keys().cloned().collect();
        drop(shown);
        for (host, c) in counts {
            let l = Self::route(host);
            self.held.get_or_create(&l).set(c.held.unwrap_or(0) as i64);
            self.in_flight.get_or_create(&l).set(c.concurrency as i64);
        }
        crate::edge::exposition_http::exposition(&self.registry)
    }
}
