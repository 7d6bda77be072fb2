//! Every operational bound of `infscale activator`, in one struct: what slow or hostile clients
//! can make it hold, how long it waits for upstreams, and how often it looks at their readiness.
//!
//! Every client of every model passes through the activator, so one client must not be able to
//! starve the others. A listener keeps at most `max_connections` (at the cap the least recently
//! useful connection of the client address holding the most gives way to a newcomer from
//! another address, [`crate::edge::listener`]); a
//! request head must arrive within `header_timeout` (which also closes idle keep-alive
//! connections) and its body within `body_timeout`; the bodies held or being read share one
//! memory budget ([`super::budget`]), and a request that would pass it is answered 503 before its
//! body is read; an upstream silent for `upstream_idle` in the middle of a response is cut, and so
//! is a client that reads nothing of its response for `client_stall` (the listener's write stall,
//! [`crate::edge::listener`]). The defaults fit the shipped manifest's 256 MiB memory limit.
//!
//! [`Limits::default`] holds the defaults; the `activator` command sets the ones an operator may
//! need to change from its flags (named on each field), and the server passes the struct down.
//! Per-route bounds (`maxHeld`, `holdTimeoutSeconds`, ...) belong to the routes file, and bounds
//! on what a caller may send to stay in [`infscale_core::limits`].

use std::time::Duration;

/// The activator's operational limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Client connections per listener at once; at the cap the address holding the most gives
    /// way to a newcomer from another.
    /// Default 4,096: far above what one activator serves, low enough to keep descriptors and
    /// memory bounded. `--max-connections`.
    pub max_connections: usize,
    /// Client connections from one address at once. Default 1,024: a gateway's pool fits, one
    /// client cannot take the whole cap. `--max-connections-per-client`.
    pub max_connections_per_client: usize,
    /// The longest a request head may take, and a connection (HTTP/1.1 or HTTP/2) may sit with
    /// no request open. Default 20 s: the slow-loris bound. `--header-timeout`.
    pub header_timeout: Duration,
    /// The longest a request body may take to arrive (408 after). Default 60 s.
    /// `--body-timeout`.
    pub body_timeout: Duration,
    /// The largest request body accepted (413 past it). Default 16 MiB: LLM requests are small
    /// JSON. `--max-body-bytes`.
    pub max_body: usize,
    /// Bytes of request bodies held or being read, over all routes (503 past it), charged as
    /// they arrive. Default 128 MiB, half the manifest's memory limit. `--body-budget-bytes`.
    pub body_budget: usize,
    /// The most of that one client connection may take (its bodies being read and held, 503
    /// past it). Default 32 MiB: twice the largest body, a quarter of the budget.
    /// `--body-budget-per-connection-bytes`.
    pub conn_body_share: usize,
    /// The most of the budget the bodies from one client address may take (over all its
    /// connections). Default 32 MiB, a quarter of the budget: two of the largest bodies, and
    /// thousands of ordinary LLM requests (a gateway or a sidecar in front makes many clients
    /// one address). `--body-budget-per-client-bytes`.
    pub client_body_share: usize,
    /// The most of the budget the bodies of one route may take (read or held). Default
    /// 64 MiB, half the budget: a route at zero holding large bodies leaves the other half to
    /// the other routes. `--body-budget-per-route-bytes`.
    pub route_body_share: usize,
    /// The longest a request body may pause with no byte arriving (408 after, its share of the
    /// budget given back at once). Default 10 s: a client that sends nothing for that long is
    /// gone or stalling on purpose (a body one byte short held its share for `body_timeout`).
    /// `--body-idle`.
    pub body_idle: Duration,
    /// The longest an upstream may take to send a response head once the request is written
    /// to it (504 after). Default 300 s, `upstream_idle`'s: a model server sends a streamed
    /// answer's head at once, but a whole (not streamed) completion's only with its last token.
    /// The request's body is given back to the budget once written (unless it may be sent
    /// again), so the wait holds no body memory. `--upstream-head-timeout`.
    pub upstream_head_timeout: Duration,
    /// The longest an upstream may stay silent in the middle of a response. Default 300 s: a
    /// model may think long before its first token. `--upstream-idle`.
    pub upstream_idle: Duration,
    /// The longest a client may read nothing of its response. Default 120 s. `--client-stall`.
    pub client_stall: Duration,
    /// How long forwarded requests may take to finish after a shutdown signal. Default 30 s,
    /// Kubernetes' grace period. `--drain-seconds`.
    pub drain: Duration,
    /// The first pause after a failed `accept` (out of descriptors, say) before the next; it
    /// doubles while accepts keep failing, up to a second. Default 50 ms: short enough to
    /// recover at once, long enough not to spin.
    pub accept_backoff: Duration,
    /// How long to wait for the rest of a partly arrived HTTP/2 preface before peeking again.
    /// Default 5 ms: h2 clients send the preface in one write, so this is rare.
    pub preface_poll: Duration,
    /// The longest a TCP connect to an upstream (or a health probe's) may take. Default 5 s.
    pub connect_timeout: Duration,
    /// How long an idle pooled upstream connection is kept. Default 4 s: under the 5 s after
    /// which the usual model servers (uvicorn, which vLLM runs on, and llama.cpp's server)
    /// close an idle keep-alive connection. A longer pool reuses a connection just as the
    /// upstream closes it, and a request the upstream never saw is answered 502 (it cannot be
    /// sent again: nothing tells it from one the upstream did see); with 90 s, every request on
    /// a connection reused at 4.9 s failed (tests/upstream_churn.rs).
    pub pool_idle: Duration,
    /// Idle pooled connections kept per upstream. Default 1,024, enough for a release's burst.
    pub pool_max_idle: usize,
    /// Connections to the admin port (`/queue`, `/queue/watch`, `/metrics`) at once; at the cap
    /// the address holding the most gives way to a newcomer from another
    /// ([`crate::edge::listener`]). Default 1,024: a watch per
    /// scaler replica and trigger, and the scrapes, far below the descriptors.
    /// `--admin-max-connections`.
    pub admin_max_connections: usize,
    /// How long an admin connection may pass no byte either way. Default 60 s: a watch gets a
    /// keep-alive comment every `watch_keep_alive`.
    pub admin_idle: Duration,
    /// The longest `/queue/watch` stays silent before a keep-alive comment. Default 5 s: the
    /// scaler counts a watch silent for 12 s as stalled.
    pub watch_keep_alive: Duration,
    /// How long one `/queue/watch` stream lasts before it ends cleanly (the scaler reconnects at
    /// once and keeps its last reading meanwhile), so a watch's keep-alives cannot hold its
    /// connection for ever. Default 300 s: a reconnect every five minutes costs nothing.
    /// `--watch-max-seconds`.
    pub watch_max_age: Duration,
    /// How long one client connection to the proxy may last: after it, it is closed gracefully
    /// with its next request (HTTP/1.1 after that answer, with `Connection: close`; HTTP/2 with
    /// GOAWAY, its open streams finishing), so no connection keeps its place for ever by being busy. Default 600 s: longer than a
    /// hold (300 s by default). `--connection-max-age-seconds`.
    pub connection_max_age: Duration,
    /// Health probe cadence while requests are held (and at once when one arrives). Default
    /// 25 ms: a held request is released within that of the model becoming ready.
    /// `--probe-held-seconds`.
    pub probe_held: Duration,
    /// Health probe cadence while nothing is held. Default 5 s. `--probe-idle-seconds`.
    pub probe_idle: Duration,
    /// The longest one health probe may take. Default 1 s. `--probe-timeout-seconds`.
    pub probe_timeout: Duration,
    /// Failed probes in a row that turn a ready route not ready. Default 3: one lost probe is
    /// not an outage. `--probe-failures`.
    pub probe_failures: u32,
    /// How long the EndpointSlice watch waits, when woken, before it looks at its store again
    /// (endpoints can outlive the process behind them). Default 250 ms.
    pub endpoints_recheck: Duration,
}

impl Limits {
    /// The connection caps fitted to `open_files` descriptors: the client listener at most half
    /// of them, the admin port an eighth, the rest for upstream connections and the API. A cap
    /// above the descriptors is no cap: idle connections exhaust them first, and then `/queue`
    /// and the proxy stop accepting alike.
    pub fn within_descriptors(self, open_files: u64) -> Limits {
        let share = |part: u64| {
            usize::try_from(open_files / part)
                .unwrap_or(usize::MAX)
                .max(8)
        };
        let fitted = Limits {
            max_connections: self.max_connections.min(share(2)),
            admin_max_connections: self.admin_max_connections.min(share(8)),
            ..self
        };
        if fitted != self {
            tracing::warn!(
                open_files,
                max_connections = fitted.max_connections,
                admin_max_connections = fitted.admin_max_connections,
                "connection caps lowered to fit the open-file limit"
            );
        }
        fitted
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 4096,
            max_connections_per_client: 1024,
            header_timeout: Duration::from_secs(20),
            body_timeout: Duration::from_secs(60),
            max_body: 16 << 20,
            body_budget: 128 << 20,
            conn_body_share: 32 << 20,
            client_body_share: 32 << 20,
            route_body_share: 64 << 20,
            body_idle: Duration::from_secs(10),
            upstream_head_timeout: Duration::from_secs(300),
            upstream_idle: Duration::from_secs(300),
            client_stall: Duration::from_secs(120),
            drain: Duration::from_secs(30),
            accept_backoff: Duration::from_millis(50),
            preface_poll: Duration::from_millis(5),
            connect_timeout: Duration::from_secs(5),
            pool_idle: Duration::from_secs(4),
            pool_max_idle: 1024,
            admin_max_connections: 1024,
            admin_idle: Duration::from_secs(60),
            watch_keep_alive: Duration::from_secs(5),
            watch_max_age: Duration::from_secs(300),
            connection_max_age: Duration::from_secs(600),
            probe_held: Duration::from_millis(25),
            probe_idle: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(1),
            probe_failures: 3,
            endpoints_recheck: Duration::from_millis(250),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn caps_fit_the_descriptors() {
        let l = super::Limits::default().within_descriptors(256);
        assert_eq!((l.max_connections, l.admin_max_connections), (128, 32));
        let roomy = super::Limits::default().within_descriptors(1 << 20);
        assert_eq!(roomy, super::Limits::default());
    }
}
