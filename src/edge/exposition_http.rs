//! What the scaler's and the activator's own `/metrics` endpoints share: the exposition text of
//! a registry, and the small router that serves it next to `/healthz`.

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// The text of every series in `registry` (empty if it cannot be written).
pub fn exposition(registry: &Registry) -> String {
    let mut out = String::new();
    if encode(&mut out, registry).is_err() {
        out.clear();
    }
    out
}

/// `GET /metrics` (what `render` writes, as Prometheus text) and `GET /healthz`.
pub fn metrics_router<F>(render: F) -> axum::Router
where
    F: Fn() -> String + Clone + Send + Sync + 'static,
{
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let text = render();
                async move {
                    (
                        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                        text,
                    )
                }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
}
