//! `infscale activator` put together: the proxy listener (HTTP/1.1 and h2c), the readiness task
//! of every route, the admin listener, and a graceful shutdown that answers every held request
//! and lets forwarded ones finish.

use super::admin::Admin;
use super::budget::Budget;
use super::client_conn::ClientConn;
use super::conn_watch::{self, ConnShared, PerClient};
use super::hold::RouteState;
use super::limits::Limits;
use super::preface::{self, Speaks};
use super::proxy::{Proxy, UpstreamClient};
use super::readiness;
use super::routes::Route;
use super::telemetry::Telemetry;
use super::written::SignallingConnector;
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
use tokio::sync::{watch, Semaphore};

/// How to run the activator.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub routes: Vec<Route>,
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
        let routes: Vec<Arc<RouteState>> = config
            .routes
            .iter()
            .map(|r| RouteState::new(r.clone(), changes.clone()))
            .collect();
        let needs_kube = routes.iter().any(|r| {
            matches!(
                r.route.readiness,
                super::routes::Readiness::EndpointSlices { .. }
            )
        });
        let kube = if needs_kube {
            Some(
                crate::edge::kubeapi::connect(config.kube_api.as_deref())
                    .await
                    .context("routes watch EndpointSlices (give healthPath to probe instead)")?,
            )
        } else {
            None
        };
        // A fresh connection per probe: a pooled one can race the server's keep-alive close.
        let probe_client: Client<HttpConnector, Empty<Bytes>> =
            Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(0)
                .build(http_connector(&limits));
        let mut tasks = Vec::new();
        for r in &routes {
            let task = readiness::start(r.clone(), kube.clone(), probe_client.clone(), limits)
                .map_err(anyhow::Error::msg)?;
            tasks.push(task);
        }
        let telemetry = Arc::new(Telemetry::new().with_routes(&routes));
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
            route_telemetry: routes
                .iter()
                .map(|r| telemetry.for_route(&r.route.counts_host))
                .collect(),
            routes: routes.clone(),
            client,
            fresh,
            telemetry: telemetry.clone(),
            limits,
            budget: Budget::new(limits.body_budget),
        });
        let admin = Admin {
            routes: Arc::new(routes.clone()),
            changes: changes_rx,
            telemetry,
            keep_alive: limits.watch_keep_alive,
        };
        let admin_listener = self.admin;
        let admin_bounds = crate::edge::listener::Bounds {
            max_connections: limits.admin_max_connections,
            first_byte: limits.header_timeout,
            idle: limits.admin_idle,
            // `/queue/watch` streams to a scaler that sends nothing more.
            idle_on_writes: true,
            accept_backoff: limits.accept_backoff,
        };
        let admin_head = limits.header_timeout;
        tasks.push(tokio::spawn(async move {
            crate::edge::listener::serve_http(
                admin_listener,
                admin_bounds,
                admin_head,
                admin.router(),
                "admin",
            )
            .await;
        }));
        tracing::info!(listen = %self.proxy.local_addr().map(|a| a.to_string()).unwrap_or_default(), routes = routes.len(), "activator serving");
        // A head must arrive in time (hyper's timer); a connection with nothing open for as long
        // is closed, HTTP/2 ones too (super::conn_watch).
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .keep_alive_interval(limits.header_timeout);
        let max_connections = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        let permits = Arc::new(Semaphore::new(max_connections));
        let per_client = PerClient::new(limits.max_connections_per_client);
        let (closing, closing_rx) = watch::channel(false);
        let listener = self.proxy;
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(limits.accept_backoff).await;
                            continue;
                        }
                    };
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        tracing::warn!(%peer, "connection refused: the connection cap is reached");
                        continue;
                    };
                    let Some(place) = per_client.enter(peer.ip()) else {
                        tracing::warn!(%peer, "connection refused: this client has as many connections as one may");
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let shared = ConnShared::new(limits.conn_body_share);
                    let proxy = proxy.clone();
                    let for_requests = shared.clone();
                    let service = service_fn(move |req| {
                        let p = proxy.clone();
                        let conn = for_requests.clone();
                        async move {
                            let open = conn.open();
                            let response = p.handle(req, peer, &conn).await;
                            // The request stays open on its connection until its answer ends.
                            Ok::<_, Infallible>(response.map(|b| b.map_frame(move |f| { let _ = &open; f }).boxed()))
                        }
                    });
                    let (http1, http2, closing) = (http1.clone(), http2.clone(), closing_rx.clone());
                    let (header_timeout, stall, poll) = (limits.header_timeout, limits.client_stall, limits.preface_poll);
                    tokio::spawn(async move {
                        // The protocol from the first bytes, within the head's time limit.
                        let speaks = match tokio::time::timeout(header_timeout, preface::speaks(&stream, poll)).await {
                            Ok(Ok(Some(speaks))) => speaks,
                            _ => return,
                        };
                        let io = TokioIo::new(ClientConn::new(stream, stall, (permit, place)));
                        match speaks {
                            Speaks::Http1 => {
                                let conn = http1.serve_connection(io, service);
                                conn_watch::serve(conn, |c| c.graceful_shutdown(), &shared, header_timeout, closing).await
                            }
                            Speaks::Http2 => {
                                let conn = http2.serve_connection(io, service);
                                conn_watch::serve(conn, |c| c.graceful_shutdown(), &shared, header_timeout, closing).await
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
        for r in &routes {
            r.shut_down();
        }
        let _ = closing.send(true);
        // Every connection gives its permit back when it ends.
        let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
        if tokio::time::timeout(limits.drain, permits.acquire_many(all))
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
