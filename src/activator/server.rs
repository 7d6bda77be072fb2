//! `infscale activator` put together: the proxy listener (HTTP/1.1 and h2c) over the shared
//! port and every model's port, the route table with the readiness task of every route, the
//! routes file's reload and the models learned from the cluster, the admin listener, and a
//! graceful shutdown that answers every held request and lets forwarded ones finish.

use super::admin::Admin;
use super::budget::Budget;
use super::conn_watch::{self, ConnShared};
use super::learn::{self, LearnConfig};
use super::limits::Limits;
use super::ports::{PortSet, Ports};
use super::preface::{self, Speaks};
use super::proxy::{Proxy, Throttle, UpstreamClient};
use super::reload::{self, Reload};
use super::routes::Route;
use super::table::{Routing, Starter};
use super::telemetry::Telemetry;
use super::written::SignallingConnector;
use crate::edge::listener::{self, Bounds, Listener};
use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::service::service_fn;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How to run the activator.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub routes: Vec<Route>,
    /// Read the routes file again when it changes (`routes` came from its text).
    pub reload: Option<(Reload, String)>,
    /// Learn models from the slices `serve` writes.
    pub learn: Option<LearnConfig>,
    /// Requests held at once over the routes of one namespace; `None`: no bound of its own.
    pub namespace_cap: Option<usize>,
    /// Talk to this API server without credentials; otherwise in-cluster or kubeconfig.
    pub kube_api: Option<String>,
    pub limits: Limits,
}

/// The activator's sockets, bound, not yet serving.
pub struct Listening {
    proxy: TcpListener,
    admin: TcpListener,
    config: Config,
}

impl Listening {
    pub fn proxy_addr(&self) -> std::io::Result<SocketAddr> {
        self.proxy.local_addr()
    }

    pub fn admin_addr(&self) -> std::io::Result<SocketAddr> {
        self.admin.local_addr()
    }
}

pub async fn bind(config: Config) -> anyhow::Result<Listening> {
    let proxy = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let admin = TcpListener::bind(config.admin_listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.admin_listen))?;
    Ok(Listening {
        proxy,
        admin,
        config,
    })
}

fn http_connector(limits: &Limits) -> HttpConnector {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    c.set_connect_timeout(Some(limits.connect_timeout));
    c
}

impl Listening {
    /// Serves until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let config = self.config;
        let limits = config.limits;
        let (changes, changes_rx) = watch::channel(0u64);
        let changes = Arc::new(changes);
        let needs_kube = config.learn.is_some()
            || config
                .routes
                .iter()
                .any(|r| matches!(r.readiness, super::routes::Readiness::EndpointSlices { .. }));
        let kube = if needs_kube {
            Some(
                crate::edge::kubeapi::connect(config.kube_api.as_deref())
                    .await
                    .context("routes watch EndpointSlices, and models are learned from them (give healthPath to probe instead)")?,
            )
        } else {
            None
        };
        // A fresh connection per probe: a pooled one can race the server's keep-alive close.
        let probe_client: Client<HttpConnector, Empty<Bytes>> =
            Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(0)
                .build(http_connector(&limits));
        let telemetry = Arc::new(Telemetry::new());
        let shared = self.proxy.local_addr()?;
        let ports = PortSet::new(shared.ip());
        let domain = config
            .learn
            .as_ref()
            .map(|l| l.domain.clone())
            .or_else(|| config.reload.as_ref().map(|(r, _)| r.ctx.domain.clone()))
            .unwrap_or_else(|| super::routes::DEFAULT_CLUSTER_DOMAIN.to_owned());
        let routing = Arc::new(Routing::new(
            changes.clone(),
            telemetry.clone(),
            Starter {
                kube: kube.clone(),
                probe_client,
                limits,
            },
            config.namespace_cap,
            ports.clone(),
            domain,
        ));
        routing
            .set_file(config.routes.clone())
            .map_err(anyhow::Error::msg)?;
        let mut tasks = Vec::new();
        let status = Arc::new(learn::Status::default());
        if let (Some(learn), Some(kube)) = (config.learn.clone(), kube.clone()) {
            tasks.push(tokio::spawn(learn::follow(
                kube,
                learn,
                routing.clone(),
                telemetry.clone(),
                status.clone(),
            )));
        }
        if let Some((r, text)) = config.reload.clone() {
            tasks.push(tokio::spawn(reload::follow(
                r,
                routing.clone(),
                telemetry.clone(),
                text,
            )));
        }
        let reaper = routing.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(REAP_EVERY);
            loop {
                tick.tick().await;
                reaper.reap();
            }
        }));
        // The pool's timer closes idle connections on time, not only when one is next wanted.
        let client: UpstreamClient = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(limits.pool_idle)
            .pool_max_idle_per_host(limits.pool_max_idle)
            .build(SignallingConnector(http_connector(&limits)));
        let fresh: UpstreamClient = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(SignallingConnector(http_connector(&limits)));
        let proxy = Arc::new(Proxy {
            routing: routing.clone(),
            shared_port: shared.port(),
            client,
            fresh,
            telemetry: telemetry.clone(),
            limits,
            budget: Budget::new(limits.body_budget),
            unrouted_log: Throttle::default(),
        });
        let admin = Admin {
            routing: routing.clone(),
            learned: config.learn.is_some().then(|| status.clone()),
            changes: changes_rx,
            telemetry,
            keep_alive: limits.watch_keep_alive,
            max_age: limits.watch_max_age,
        };
        let admin_listener = self.admin;
        let admin_bounds = Bounds {
            max_connections: limits.admin_max_connections,
            max_per_client: None,
            first_byte: limits.header_timeout,
            head_timeout: limits.header_timeout,
            idle: Some(limits.admin_idle),
            // `/queue/watch` streams to a scaler that sends nothing more.
            idle_on_writes: true,
            write_stall: None,
            first_request: None,
            // No age of the connection's own: a watch ends at its age (`watch_max_age`) and the
            // scaler asks again on the same pooled connection; a connection closed under that
            // second request would read as a failure. Other admin answers are short.
            max_age: None,
            accept_backoff: limits.accept_backoff,
        };
        tasks.push(tokio::spawn(async move {
            listener::serve_http(admin_listener, admin_bounds, admin.router(), "admin").await;
        }));
        tracing::info!(listen = %shared, routes = routing.table().routes.len(), learning = config.learn.is_some(), "activator serving");
        let bounds = proxy_bounds(&limits);
        // A head must arrive in time (hyper's timer); a connection with nothing open for as long
        // is closed, HTTP/2 ones too (super::conn_watch).
        let http1 = bounds.http1();
        let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .keep_alive_interval(limits.header_timeout);
        let (closing, closing_rx) = watch::channel(false);
        let mut listener = Listener::new(Ports::new(self.proxy, ports), bounds, "proxy");
        let open = listener.open_connections();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                conn = listener.accept() => {
                    let peer = conn.peer();
                    let port = conn.local_addr().ok().map(|a| a.port());
                    let shared = ConnShared::new(limits.conn_body_share);
                    let proxy = proxy.clone();
                    let for_requests = shared.clone();
                    // A request beginning and its answer mark the connection useful: at the
                    // cap, the least recently useful of the address holding the most gives way.
                    let useful = conn.useful();
                    let service = service_fn(move |req| {
                        let p = proxy.clone();
                        let conn = for_requests.clone();
                        let useful = useful.clone();
                        useful.now();
                        async move {
                            let open = conn.open();
                            let response = p.handle(req, peer, &conn, port).await;
                            useful.now();
                            // The request stays open on its connection until its answer ends.
                            Ok::<_, Infallible>(response.map(|b| b.map_frame(move |f| { let _ = &open; f }).boxed()))
                        }
                    });
                    let (http1, http2, closing) = (http1.clone(), http2.clone(), closing_rx.clone());
                    let (header_timeout, poll) = (limits.header_timeout, limits.preface_poll);
                    let watch = (header_timeout, limits.connection_max_age);
                    tokio::spawn(async move {
                        let mut conn = conn;
                        // The protocol from the first bytes, within the head's time limit.
                        let speaks = match tokio::time::timeout(header_timeout, preface::speaks(&mut conn, poll)).await {
                            Ok(Ok(Some(speaks))) => speaks,
                            _ => return,
                        };
                        let io = TokioIo::new(conn);
                        match speaks {
                            Speaks::Http1 => {
                                let conn = http1.serve_connection(io, service);
                                conn_watch::serve(conn, |c| c.graceful_shutdown(), &shared, watch, closing).await
                            }
                            Speaks::Http2 => {
                                let conn = http2.serve_connection(io, service);
                                conn_watch::serve(conn, |c| c.graceful_shutdown(), &shared, watch, closing).await
                            }
                        }
                    });
                }
                _ = &mut shutdown => break,
            }
        }
        // Stop listening: a new connection is refused at once rather than left in the backlog;
        // a new request on an open connection is answered 503 with `Connection: close`.
        drop(listener);
        tracing::info!("shutting down: answering held requests, letting forwarded ones finish");
        routing.shut_down();
        let _ = closing.send(true);
        // Every connection gives its place back when it ends.
        if tokio::time::timeout(limits.drain, open.drained())
            .await
            .is_err()
        {
            tracing::warn!("drain timeout: closing the remaining connections");
        }
        for t in tasks {
            t.abort();
        }
        Ok(())
    }
}

/// How often retired routes that hold nothing are let go.
const REAP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The proxy port's bounds: its caps, a first byte and a request head within the header
/// timeout, and a write stall at the client stall. No idle limit of the listener's: a held
/// request's client may send nothing for as long as the hold lasts; a connection with no request
/// open is closed after the header timeout instead ([`super::conn_watch`]).
pub fn proxy_bounds(limits: &Limits) -> Bounds {
    Bounds {
        max_connections: limits.max_connections,
        max_per_client: Some(limits.max_connections_per_client),
        first_byte: limits.header_timeout,
        head_timeout: limits.header_timeout,
        idle: None,
        idle_on_writes: false,
        write_stall: Some(limits.client_stall),
        // The preface's deadline and conn_watch bound the time to a request.
        first_request: None,
        // conn_watch closes it at `connection_max_age`, h2 too.
        max_age: None,
        accept_backoff: limits.accept_backoff,
    }
}
