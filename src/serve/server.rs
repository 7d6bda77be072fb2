//! `infscale serve` put together: the gRPC server (external scaler, health, reflection, TLS), the
//! collectors' shared parts, the reaper, and the HTTP server for the scaler's own `/metrics`;
//! both listeners bounded ([`super::connections`]).

use super::collector::Shared;
use super::connections;
use super::discovery::{ApiHealth, DiscoveryContext, ScrapeVia, StaticTargets};
use super::limits::Limits;
use super::metadata::AllowedActivators;
use super::path::PathWriter;
use super::proto::external_scaler_server::ExternalScalerServer;
use super::proto::FILE_DESCRIPTOR_SET;
use super::registry::Registry;
use super::scrape::Scraper;
use super::service::Scaler;
use super::telemetry::Telemetry;
use crate::edge::files::read_text;
use anyhow::Context;
use infscale_core::limits::MAX_CONFIG_FILE_BYTES;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;
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
    pub limits: Limits,
    /// Where serve mode writes the activator into a Service's path; without it, EndpointSlices
    /// through the Kubernetes API (when there is one).
    pub paths: Option<Paths>,
    /// How serve mode places models on the activator, and who writes each Service's slice.
    pub serve_mode: super::path_kube::ServeModeSettings,
    /// Where each target's learned memory is kept across restarts (`--state-dir`), if anywhere.
    pub state_dir: Option<std::path::PathBuf>,
}

/// A serve-mode [`PathWriter`] given to the scaler (the demo's Service, say).
#[derive(Clone)]
pub struct Paths(pub Arc<dyn PathWriter>);

impl std::fmt::Debug for Paths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Paths(..)")
    }
}

/// The scaler's sockets, bound, not yet serving.
pub struct Listening {
    grpc: TcpListener,
    metrics: Option<TcpListener>,
    config: Config,
    kube: Option<kube::Client>,
    allowed: AllowedActivators,
}

impl Listening {
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
    match crate::edge::kubeapi::connect(config.kube_api.as_deref()).await {
        Ok(client) => Some(client),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "only --static-target targets can be served");
            None
        }
    }
}

/// Binds the sockets (so the scaler is reachable, and health SERVING, as soon as it runs).
pub async fn bind(config: Config) -> anyhow::Result<Listening> {
    let allowed = AllowedActivators::parse(&config.allowed_activators)
        .map_err(anyhow::Error::msg)?
        .with_own_namespace(
            config
                .serve_mode
                .lease
                .as_ref()
                .map(|l| l.namespace.clone()),
        );
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
    Ok(Listening {
        grpc,
        metrics,
        config,
        kube,
        allowed,
    })
}

fn tls_config(files: &TlsFiles) -> anyhow::Result<ServerTlsConfig> {
    let read = |p: &PathBuf| read_text(p, MAX_CONFIG_FILE_BYTES).map(String::into_bytes);
    let mut tls =
        ServerTlsConfig::new().identity(Identity::from_pem(read(&files.cert)?, read(&files.key)?));
    if let Some(ca) = &files.client_ca {
        tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(tls)
}

impl Listening {
    /// Serves until `shutdown` resolves, then finishes the calls in flight.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let config = self.config;
        let telemetry = Arc::new(Telemetry::new());
        let via = config.scrape_via.unwrap_or_else(ScrapeVia::here);
        let limits = config.limits;
        // Scrapes and the activator follower: a page is read where it was asked for, never
        // where an answer redirects to.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits.connect_timeout)
            .pool_idle_timeout(limits.pool_idle)
            .build()
            .context("cannot build the HTTP client")?;
        let api = Arc::new(ApiHealth::default());
        let probe = self
            .kube
            .clone()
            .map(|client| api.clone().probe(client, limits.api_probe_every()));
        let paths: Option<Arc<dyn PathWriter>> = match (&config.paths, &self.kube) {
            (Some(p), _) => Some(p.0.clone()),
            (None, Some(client)) => Some(Arc::new(super::path_kube::KubePaths {
                client: client.clone(),
                settings: config.serve_mode.clone(),
            })),
            (None, None) => None,
        };
        let shared = Shared {
            paths,
            probes: Arc::default(),
            discovery: DiscoveryContext {
                statics: Arc::new(config.statics.clone()),
                client: self.kube.clone(),
                via,
                staleness: limits.staleness,
                api,
                watches: Arc::default(),
            },
            scraper: Scraper {
                http,
                kube: self.kube,
                max_bytes: limits.max_page_bytes,
                permits: Arc::new(tokio::sync::Semaphore::new(
                    limits.max_concurrent_scrapes.max(1),
                )),
                budget: super::budget::MemoryBudget::new(
                    limits.scrape_memory_bytes,
                    limits.max_concurrent_scrapes.max(1),
                ),
            },
            telemetry: telemetry.clone(),
            epoch: Instant::now(),
            limits,
            state_dir: config.state_dir.clone().map(Arc::new),
        };
        let registry = Arc::new(Registry::new(shared, &limits));
        let reaper = {
            let registry = registry.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(limits.reap_every());
                loop {
                    every.tick().await;
                    registry.reap(limits.idle_stop, limits.spec_only_stop);
                }
            })
        };
        let (closing_tx, mut closing_rx) = watch::channel(false);
        let scaler = Scaler {
            registry: registry.clone(),
            allowed: self.allowed,
            telemetry: telemetry.clone(),
            closing: closing_rx.clone(),
            heartbeat: limits.heartbeat,
            first_answer_wait: limits.first_answer_wait,
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
            let app = crate::edge::exposition_http::metrics_router(move || telemetry.render());
            tokio::spawn(crate::edge::listener::serve_http(
                listener,
                connections::metrics(&limits),
                app,
                "metrics",
            ))
        });
        tracing::info!(listen = %self.grpc.local_addr().map(|a| a.to_string()).unwrap_or_default(), "serving KEDA's external scaler protocol");
        let incoming =
            crate::edge::listener::incoming(self.grpc, connections::grpc(&limits), "grpc");
        // SIGTERM: tell the streams to end, let tonic finish the calls in flight, and stop
        // waiting for them after the drain.
        let signal = async move {
            shutdown.await;
            let _ = closing_tx.send(true);
        };
        let drained = async move {
            let _ = closing_rx.wait_for(|closing| *closing).await;
            tokio::time::sleep(limits.drain).await;
        };
        let serve = builder
            .layer(tonic::service::InterceptorLayer::new(
                connections::mark_useful,
            ))
            .http2_keepalive_interval(Some(connections::keepalive(limits.connection_idle)))
            .http2_keepalive_timeout(Some(connections::keepalive(limits.connection_idle)))
            .max_connection_age(limits.connection_max_age)
            .max_connection_age_grace(limits.drain)
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(ExternalScalerServer::new(scaler))
            .serve_with_incoming_shutdown(incoming, signal);
        let served = tokio::select! {
            served = serve => served,
            _ = drained => {
                tracing::warn!(drain = ?limits.drain, "drain over: exiting with calls still open");
                Ok(())
            }
        };
        reaper.abort();
        // The collectors go, and with them their leases: the other replica writes at once.
        registry.stop_all();
        super::lease::releases_done(std::time::Duration::from_secs(3)).await;
        if let Some(p) = probe {
            p.abort();
        }
        if let Some(t) = metrics_task {
            t.abort();
        }
        served.context("the gRPC server failed")
    }
}
