//! `infscale serve` put together: the gRPC server (external scaler, health, reflection, TLS), the
//! collectors' shared parts, the reaper, and the HTTP server for the scaler's own `/metrics`.

use super::collector::Shared;
use super::connections;
use super::discovery::{ApiHealth, DiscoveryContext, ScrapeVia, StaticTargets};
use super::metadata::AllowedActivators;
use super::proto::external_scaler_server::ExternalScalerServer;
use super::proto::FILE_DESCRIPTOR_SET;
use super::registry::Registry;
use super::scrape::Scraper;
use super::service::Scaler;
use super::telemetry::Telemetry;
use anyhow::Context;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

/// Certificate files for TLS, and a CA for mutual TLS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// How to run the scaler.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    pub tls: Option<TlsFiles>,
    pub statics: StaticTargets,
    pub allowed_activators: Vec<String>,
    /// Talk to this API server without credentials (tests, `kubectl proxy`); otherwise the
    /// in-cluster or kubeconfig configuration, if any.
    pub kube_api: Option<String>,
    /// Whether to use the Kubernetes API at all.
    pub use_kube: bool,
    pub scrape_via: Option<ScrapeVia>,
    pub max_page_bytes: usize,
    pub max_concurrent_scrapes: usize,
    /// Stop a collector no call has asked about for this long.
    pub idle_stop: Duration,
    /// Trust the last pod list this long after the API stops answering.
    pub staleness: Duration,
    pub bounds: Bounds,
}

/// What callers can make the scaler hold, and how long a shutdown may take.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// Triggers with a collector at once; a call for one more is `RESOURCE_EXHAUSTED`.
    pub max_targets: usize,
    /// gRPC connections at once; one more is closed as it is accepted.
    pub max_connections: usize,
    /// A gRPC connection is closed after this long without a byte from its client (the server
    /// pings three times in it, so a live client always answers in time).
    pub connection_idle: Duration,
    /// After SIGTERM: streams are closed at once, and calls in flight get this long.
    pub drain: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_targets: 1000,
            max_connections: 512,
            connection_idle: Duration::from_secs(120),
            drain: Duration::from_secs(10),
        }
    }
}

/// The scaler's sockets, bound, not yet serving.
pub struct Bound {
    grpc: TcpListener,
    metrics: Option<TcpListener>,
    config: Config,
    kube: Option<kube::Client>,
    allowed: AllowedActivators,
}

impl Bound {
    pub fn grpc_addr(&self) -> std::io::Result<SocketAddr> {
        self.grpc.local_addr()
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }
}

async fn kube_client(config: &Config) -> Option<kube::Client> {
    if !config.use_kube {
        return None;
    }
    match crate::kubeapi::connect(config.kube_api.as_deref()).await {
        Ok(client) => Some(client),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "only --static-target targets can be served");
            None
        }
    }
}

/// Binds the sockets (so the scaler is reachable, and health SERVING, as soon as it runs).
pub async fn bind(config: Config) -> anyhow::Result<Bound> {
    let allowed =
        AllowedActivators::parse(&config.allowed_activators).map_err(anyhow::Error::msg)?;
    let grpc = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let metrics = match config.metrics_listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?,
        ),
        None => None,
    };
    let kube = kube_client(&config).await;
    Ok(Bound {
        grpc,
        metrics,
        config,
        kube,
        allowed,
    })
}

fn tls_config(files: &TlsFiles) -> anyhow::Result<ServerTlsConfig> {
    let read =
        |p: &PathBuf| std::fs::read(p).with_context(|| format!("{}: cannot read", p.display()));
    let mut tls =
        ServerTlsConfig::new().identity(Identity::from_pem(read(&files.cert)?, read(&files.key)?));
    if let Some(ca) = &files.client_ca {
        tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(tls)
}

impl Bound {
    /// Serves until `shutdown` resolves, then finishes the calls in flight.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let config = self.config;
        let telemetry = Arc::new(Telemetry::new());
        let via = config.scrape_via.unwrap_or_else(ScrapeVia::here);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .context("cannot build the HTTP client")?;
        let api = Arc::new(ApiHealth::default());
        let probe = self.kube.clone().map(|client| {
            let every =
                (config.staleness / 4).clamp(Duration::from_millis(250), Duration::from_secs(10));
            api.clone().probe(client, every)
        });
        let shared = Shared {
            discovery: DiscoveryContext {
                statics: Arc::new(config.statics.clone()),
                client: self.kube.clone(),
                via,
                staleness: config.staleness,
                api,
                watches: Arc::default(),
            },
            scraper: Scraper {
                http,
                kube: self.kube,
                max_bytes: config.max_page_bytes,
                permits: Arc::new(tokio::sync::Semaphore::new(
                    config.max_concurrent_scrapes.max(1),
                )),
            },
            telemetry: telemetry.clone(),
            epoch: Instant::now(),
        };
        let registry = Arc::new(Registry::new(shared, config.bounds.max_targets));
        let reaper = {
            let registry = registry.clone();
            let idle = config.idle_stop;
            tokio::spawn(async move {
                let mut every = tokio::time::interval(
                    (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(60)),
                );
                loop {
                    every.tick().await;
                    registry.reap(idle);
                }
            })
        };
        let (closing_tx, mut closing_rx) = watch::channel(false);
        let scaler = Scaler {
            registry,
            allowed: self.allowed,
            telemetry: telemetry.clone(),
            closing: closing_rx.clone(),
        };
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<ExternalScalerServer<Scaler>>().await;
        let reflection_v1 = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .context("reflection")?;
        let reflection_v1alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()
            .context("reflection")?;
        let mut builder = Server::builder();
        if let Some(files) = &config.tls {
            builder = builder.tls_config(tls_config(files)?).context("TLS")?;
        }
        let metrics_task = self.metrics.map(|listener| {
            let app = crate::exposition_http::metrics_router(move || telemetry.render());
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(error = %e, "the metrics server stopped");
                }
            })
        });
        tracing::info!(listen = %self.grpc.local_addr().map(|a| a.to_string()).unwrap_or_default(), "serving KEDA's external scaler protocol");
        let bounds = config.bounds.clone();
        let incoming =
            connections::incoming(self.grpc, bounds.max_connections, bounds.connection_idle);
        // SIGTERM: tell the streams to end, let tonic finish the calls in flight, and stop
        // waiting for them after the drain.
        let signal = async move {
            shutdown.await;
            let _ = closing_tx.send(true);
        };
        let drained = async move {
            let _ = closing_rx.wait_for(|closing| *closing).await;
            tokio::time::sleep(bounds.drain).await;
        };
        let serve = builder
            .http2_keepalive_interval(Some(connections::keepalive(bounds.connection_idle)))
            .http2_keepalive_timeout(Some(connections::keepalive(bounds.connection_idle)))
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(ExternalScalerServer::new(scaler))
            .serve_with_incoming_shutdown(incoming, signal);
        let served = tokio::select! {
            served = serve => served,
            _ = drained => {
                tracing::warn!(drain = ?bounds.drain, "drain over: exiting with calls still open");
                Ok(())
            }
        };
        reaper.abort();
        if let Some(p) = probe {
            p.abort();
        }
        if let Some(t) = metrics_task {
            t.abort();
        }
        served.context("the gRPC server failed")
    }
}
