//! The activator's admin endpoint: the counts the scaler reads, live, and the activator's own
//! health and metrics.
//!
//! `GET /queue` answers the KEDA HTTP add-on's format (`{ "<host>": { "Concurrency": n,
//! "RequestCount": n, "Held": n } }`); `GET /queue/watch` is a server-sent event stream that
//! sends the same document on connect and again the moment any count changes (plus a keep-alive
//! comment every 5 s), so the scaler can push `StreamIsActive` within milliseconds.

use super::hold::RouteState;
use super::telemetry::Telemetry;
use crate::counts::QueueCounts;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use futures::Stream;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Everything the admin endpoint reads.
#[derive(Clone)]
pub struct Admin {
    pub routes: Arc<Vec<Arc<RouteState>>>,
    pub changes: watch::Receiver<u64>,
    pub telemetry: Arc<Telemetry>,
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

    fn json(&self) -> String {
        serde_json::to_string(&self.counts()).unwrap_or_else(|_| "{}".to_owned())
    }

    fn events(self) -> impl Stream<Item = Result<Event, Infallible>> {
        let mut rx = self.changes.clone();
        rx.mark_changed();
        futures::stream::unfold(
            (self, rx, None::<String>),
            |(admin, mut rx, mut last)| async move {
                loop {
                    if rx.changed().await.is_err() {
                        return None;
                    }
                    let doc = admin.json();
                    if last.as_deref() != Some(doc.as_str()) {
                        last = Some(doc.clone());
                        return Some((Ok(Event::default().data(doc)), (admin, rx, last)));
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
        crate::exposition_http::metrics_router(render)
            .route(
                "/queue",
                get(move || {
                    let a = queue.clone();
                    async move { ([("content-type", "application/json")], a.json()) }
                }),
            )
            .route(
                "/queue/watch",
                get(move || {
                    let a = watch.clone();
                    async move {
                        Sse::new(a.events())
                            .keep_alive(KeepAlive::new().interval(Duration::from_secs(5)))
                    }
                }),
            )
            .route("/readyz", get(|| async { "ok\n" }))
    }
}
