//! The activator's admin endpoint: the counts the scaler reads, live, and the activator's own
//! health and metrics.
//!
//! `GET /queue` answers the KEDA HTTP add-on's format (`{ "<host>": { "Concurrency": n,
//! "RequestCount": n, "Held": n } }`); `GET /queue/watch` is a server-sent event stream that
//! sends the same document on connect and again the moment any count changes (plus a keep-alive
//! comment when nothing was sent for a while), so the scaler can push `StreamIsActive` within
//! milliseconds. The event bytes are [`crate::counts::wire`]'s, which the scaler decodes.

use super::hold::RouteState;
use super::telemetry::Telemetry;
use crate::counts::{wire, QueueCounts};
use axum::body::Body;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use futures::Stream;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Everything the admin endpoint reads.
#[derive(Clone)]
pub struct Admin {
    pub routes: Arc<Vec<Arc<RouteState>>>,
    pub changes: watch::Receiver<u64>,
    pub telemetry: Arc<Telemetry>,
    /// The longest `/queue/watch` stays silent before a keep-alive comment.
    pub keep_alive: Duration,
}

impl Admin {
    /// Counts per host (routes sharing a host are summed).
    pub fn counts(&self) -> QueueCounts {
        let mut counts = QueueCounts::new();
        for r in self.routes.iter() {
            let c = r.counts();
            let e = counts.entry(r.route.counts_host.clone()).or_default();
            e.concurrency += c.concurrency;
            e.request_count += c.request_count;
            e.held = Some(e.held.unwrap_or(0) + c.held.unwrap_or(0));
        }
        counts
    }

    /// The watch stream: the counts at once, then on every change, and a keep-alive after
    /// `keep_alive` without either.
    fn events(self) -> impl Stream<Item = Result<Bytes, Infallible>> {
        let mut rx = self.changes.clone();
        rx.mark_changed();
        let quiet_until = Instant::now() + self.keep_alive;
        futures::stream::unfold(
            (self, rx, None::<Bytes>, quiet_until),
            |(admin, mut rx, mut last, quiet_until)| async move {
                loop {
                    tokio::select! {
                        biased;
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
        let render = move || metrics.telemetry.render(&metrics.routes);
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
            .route("/readyz", get(|| async { "ok\n" }))
    }
}
