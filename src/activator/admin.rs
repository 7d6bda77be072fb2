//! The activator's admin endpoint: the counts the scaler reads, live, and the activator's own
//! health and metrics.
//!
//! `GET /queue` answers the KEDA HTTP add-on's format (`{ "<host>": { "Concurrency": n,
//! "RequestCount": n, "Held": n } }`); `GET /queue/watch` is a server-sent event stream that
//! sends the same document on connect and again the moment any count changes (plus a keep-alive
//! comment when nothing was sent for a while), so the scaler can push `StreamIsActive` within
//! milliseconds. A watch ends after `max_age` between two events, whatever it sent (its
//! keep-alives renew nothing), and the scaler reconnects keeping its last reading: a stream
//! cannot hold its connection's place for ever (issue 37). The event bytes are [`infscale_core::observe::counts::wire`]'s, which the scaler decodes. Every
//! route's host is in the document, at zero too: a host the document lacks is one the
//! activator has no route for. `GET /routes` says what places requests: each route with its
//! names, model and port, the models refused and why, and the ports that could not be bound.

use super::learn::Status;
use super::table::Routing;
use super::telemetry::Telemetry;
use axum::body::Body;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use futures::Stream;
use infscale_core::observe::counts::{wire, QueueCounts};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Everything the admin endpoint reads.
#[derive(Clone)]
pub struct Admin {
    pub routing: Arc<Routing>,
    /// What learning refused, when the activator learns models.
    pub learned: Option<Arc<Status>>,
    pub changes: watch::Receiver<u64>,
    pub telemetry: Arc<Telemetry>,
    /// The longest `/queue/watch` stays silent before a keep-alive comment.
    pub keep_alive: Duration,
    /// How long one `/queue/watch` stream lasts; it ends cleanly between events after it.
    pub max_age: Duration,
}

impl Admin {
    /// Counts per host (routes sharing a host are summed).
    pub fn counts(&self) -> QueueCounts {
        let mut counts = QueueCounts::new();
        for r in self.routing.states() {
            let c = r.counts();
            let e = counts.entry(r.route.counts_host.clone()).or_default();
            e.concurrency += c.concurrency;
            e.request_count += c.request_count;
            e.held = Some(e.held.unwrap_or(0) + c.held.unwrap_or(0));
        }
        counts
    }

    /// The watch stream: the counts at once, then on every change, and a keep-alive after
    /// `keep_alive` without either; it ends after `max_age`.
    fn events(self) -> impl Stream<Item = Result<Bytes, Infallible>> {
        let mut rx = self.changes.clone();
        rx.mark_changed();
        let quiet_until = Instant::now() + self.keep_alive;
        let ends = Instant::now() + self.max_age;
        futures::stream::unfold(
            (self, rx, None::<Bytes>, quiet_until),
            move |(admin, mut rx, mut last, quiet_until)| async move {
                loop {
                    tokio::select! {
                        biased;
                        _ = tokio::time::sleep_until(ends) => return None,
                        changed = rx.changed() => {
                            if changed.is_err() {
                                return None;
                            }
                            let event = wire::event(&admin.counts());
                            if last.as_ref() != Some(&event) {
                                last = Some(event.clone());
                                let next = Instant::now() + admin.keep_alive;
                                return Some((Ok(event), (admin, rx, last, next)));
                            }
                        }
                        _ = tokio::time::sleep_until(quiet_until) => {
                            let next = Instant::now() + admin.keep_alive;
                            let comment = Bytes::from_static(wire::KEEP_ALIVE);
                            return Some((Ok(comment), (admin, rx, last, next)));
                        }
                    }
                }
            },
        )
    }

    pub fn router(self) -> Router {
        let queue = self.clone();
        let watch = self.clone();
        let metrics = self.clone();
        let render = move || metrics.telemetry.render(&metrics.counts());
        let table = self.clone();
        crate::edge::exposition_http::metrics_router(render)
            .route(
                "/queue",
                get(move || {
                    let a = queue.clone();
                    async move {
                        let doc = wire::document(&a.counts());
                        ([("content-type", "application/json")], doc)
                    }
                }),
            )
            .route(
                "/queue/watch",
                get(move || {
                    let a = watch.clone();
                    async move {
                        let headers = [
                            ("content-type", wire::CONTENT_TYPE),
                            ("cache-control", "no-cache"),
                        ];
                        (headers, Body::from_stream(a.events()))
                    }
                }),
            )
            .route(
                "/routes",
                get(move || {
                    let a = table.clone();
                    async move { ([("content-type", "application/json")], a.routes()) }
                }),
            )
            .route("/readyz", get(|| async { "ok\n" }))
    }

    /// `/routes`: what places requests now.
    fn routes(&self) -> String {
        let table = self.routing.table();
        let port_of = |s: &Arc<super::hold::RouteState>| {
            table
                .ports
                .iter()
                .find(|(_, t)| Arc::ptr_eq(t, s))
                .map(|(p, _)| *p)
        };
        let routes: Vec<serde_json::Value> = table
            .routes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let r = &s.route;
                serde_json::json!({
                    "counts": r.counts_host,
                    "source": if i < table.from_file { "file" } else { "learned" },
                    "model": r.model.as_ref().map(|m| m.to_string()),
                    "port": port_of(s),
                    "names": r.names,
                    "anyHost": r.any_host,
                    "pathPrefix": r.path_prefix,
                    "ready": s.is_ready(),
                    "held": s.held(),
                    "maxHeld": r.max_held,
                    "holdTimeoutSeconds": r.hold_timeout.as_secs_f64(),
                })
            })
            .collect();
        let refused: Vec<serde_json::Value> = self
            .learned
            .iter()
            .flat_map(|st| {
                st.refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|(m, r)| serde_json::json!({"model": m.to_string(), "reason": r.reason()}))
                    .collect::<Vec<_>>()
            })
            .collect();
        let unbound: Vec<serde_json::Value> = self
            .routing
            .ports()
            .failed()
            .into_iter()
            .map(|(p, why)| serde_json::json!({"port": p, "error": why}))
            .collect();
        serde_json::json!({"routes": routes, "refused": refused, "unbound": unbound}).to_string()
    }
}
