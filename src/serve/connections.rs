//! The bounds of `serve`'s two listeners, from its limits ([`crate::edge::listener`] enforces
//! them): the gRPC port (`--max-connections`, `--connection-idle-seconds`) and the metrics port
//! (`--metrics-max-connections`); both want a first byte within `--header-timeout-seconds` (or
//! the port's idle timeout, if shorter: a silent connection never outlasts an idle one), and the
//! metrics port a whole request head within it. Neither has a write stall (neither had one
//! before the listener was shared with the activator).
//!
//! A live gRPC client is never idle for `connection_idle`: the server sends HTTP/2 pings more
//! often than that ([`keepalive`]), and the ping's acknowledgement is a byte read. Pings and a
//! preface sent a byte at a time are bytes, not calls, so a gRPC connection must also begin a
//! call within `connection_idle` of its accept, and every call marks its connection useful
//! ([`mark_useful`]): at the cap, the least recently useful of the address holding the most
//! gives way ([`crate::edge::listener`]).

use super::limits::Limits;
use crate::edge::listener::{Bounds, ConnInfo};
use std::time::Duration;

/// How often the server pings a connection, for a given idle timeout: three pings fit in it.
pub fn keepalive(idle: Duration) -> Duration {
    idle / 3
}

/// The gRPC port's bounds.
pub fn grpc(limits: &Limits) -> Bounds {
    Bounds {
        max_connections: limits.max_connections,
        max_per_client: None,
        first_byte: limits.header_timeout.min(limits.connection_idle),
        head_timeout: limits.header_timeout,
        idle: Some(limits.connection_idle),
        idle_on_writes: false,
        write_stall: None,
        // KEDA calls at every polling interval (30 s by default) on the connection it opened.
        first_request: Some(limits.connection_idle),
        // tonic's own `max_connection_age` (server.rs), with GOAWAY.
        max_age: None,
        accept_backoff: limits.accept_backoff,
    }
}

/// A tonic interceptor marking the connection of every call useful (plain or TLS).
pub fn mark_useful(req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    let ext = req.extensions();
    let info = ext.get::<ConnInfo>().or_else(|| {
        ext.get::<tonic::transport::server::TlsConnectInfo<ConnInfo>>()
            .map(|tls| tls.get_ref())
    });
    if let Some(info) = info {
        info.useful().now();
    }
    Ok(req)
}

/// The metrics port's bounds.
pub fn metrics(limits: &Limits) -> Bounds {
    Bounds {
        max_connections: limits.metrics_max_connections,
        max_per_client: None,
        first_byte: limits.header_timeout.min(limits.metrics_idle),
        head_timeout: limits.header_timeout,
        idle: Some(limits.metrics_idle),
        idle_on_writes: false,
        write_stall: None,
        // hyper's head timeout bounds the time to a request.
        first_request: None,
        max_age: Some(limits.connection_max_age),
        accept_backoff: limits.accept_backoff,
    }
}
