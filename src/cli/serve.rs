//! `infscale serve`: the KEDA external scaler.

use super::checks::{positive_seconds, seconds_from_zero};
use crate::serve::discovery::{ScrapeVia, StaticTargets};
use crate::serve::lease::LeaseSettings;
use crate::serve::limits::Limits;
use crate::serve::path_kube::ServeModeSettings;
use crate::serve::server::{self, Config, TlsFiles};
use anyhow::{bail, Context};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where KEDA reaches the gRPC service (a trigger's scalerAddress).
    #[arg(long, default_value = "0.0.0.0:9090")]
    pub listen: SocketAddr,
    /// Where the scaler's own /metrics and /healthz are served ("none" to turn off).
    #[arg(long, default_value = "0.0.0.0:9091")]
    pub metrics_listen: String,
    /// Server certificate (PEM), for TLS (KEDA's enableTLS).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Server key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) that client certificates must chain to: mutual TLS (KEDA's tlsClientCert).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Local discovery: metadata `deployment: NAME` scrapes these URLs; no Kubernetes API is used
    /// for it. Repeatable.
    #[arg(long, value_name = "NAME=URL[,URL...]")]
    pub static_target: Vec<String>,
    /// An activator admin URL that trigger metadata may name besides Services in the
    /// ScaledObject's own namespace: its scheme, host and port must match exactly, and its path
    /// be a prefix on a segment boundary. Repeatable.
    #[arg(long, value_name = "URL")]
    pub allow_activator: Vec<String>,
    /// Serve mode: the ports models are given on the activator (its `--model-ports`),
    /// FIRST-LAST.
    #[arg(long, default_value = "20000-29999")]
    pub activator_ports: String,
    /// The scaler's own namespace: serve mode's leases (one writer per Service) are kept there,
    /// and a trigger in any namespace may name an activator Service there [default: the pod's
    /// (POD_NAMESPACE), else "infscale"].
    #[arg(long)]
    pub namespace: Option<String>,
    /// Serve mode: seconds a Service's lease holds unrenewed before another replica takes over.
    #[arg(long, value_name = "SECONDS", default_value_t = 15.0)]
    pub lease_seconds: f64,
    /// Use this Kubernetes API server without credentials (e.g. `kubectl proxy`'s); default:
    /// the in-cluster service account, else the kubeconfig.
    #[arg(long, value_name = "URL")]
    pub kube_api: Option<String>,
    /// Never use the Kubernetes API (static targets only).
    #[arg(long)]
    pub no_kube: bool,
    /// How to reach pod pages: direct (pod IP) or proxy (the API server's pod proxy, for use out
    /// of a cluster) [default: direct in a cluster, proxy outside].
    #[arg(long, value_enum)]
    pub scrape_via: Option<ScrapeVia>,
    /// The largest page read from a pod, bytes.
    #[arg(long, default_value_t = crate::edge::source::DEFAULT_MAX_BYTES)]
    pub max_page_bytes: usize,
    /// Scrapes in flight at once, over all targets.
    #[arg(long, default_value_t = 64)]
    pub max_concurrent_scrapes: usize,
    /// The bytes of pod pages and activator counts held at once, over all targets: half in one
    /// share per scrape in flight (a page within it always fits), half pooled for larger ones
    /// (a page that does not fit fails for its pod alone).
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub scrape_memory_bytes: usize,
    /// Keep what each target's decision learned (`reserve=auto`, `hold`, `forecast=history`'s
    /// daily cycles) in this directory, one file per trigger written at most once a minute, so a
    /// restart keeps it (an emptyDir outlives a container's restart, a volume the pod's)
    /// [default: in memory only].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Stop a target's collector after this many seconds without a call for it.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub idle_stop_seconds: f64,
    /// Keep using the last pod list this many seconds after the Kubernetes API stops answering,
    /// then answer with errors.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub stale_after_seconds: f64,
    /// The most triggers followed at once; a call for one more is RESOURCE_EXHAUSTED unless a
    /// quiet one gives way.
    #[arg(long, default_value_t = 1000)]
    pub max_targets: usize,
    /// The most triggers followed at once in one namespace.
    #[arg(long, default_value_t = 200)]
    pub max_targets_per_namespace: usize,
    /// The most gRPC connections at once; at the cap a newcomer takes the place of the least
    /// recently useful connection of the client address holding the most, or, when its own
    /// address holds the most, of one of its own that never spoke (else it is closed).
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
    /// Seconds a gRPC connection may last: then GOAWAY, and closed --drain-seconds later with
    /// what is open on it (KEDA reconnects). A metrics-port connection past this age is closed
    /// with its next answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub connection_max_age_seconds: f64,
    /// Close a gRPC connection after this many seconds without a byte from its client (the
    /// scaler pings three times in that span, so live clients always answer), or without a
    /// call since it was accepted.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    pub connection_idle_seconds: f64,
    /// The most connections to the metrics port at once; at the cap a newcomer makes room as
    /// on the gRPC port (--max-connections).
    #[arg(long, default_value_t = 64)]
    pub metrics_max_connections: usize,
    /// Seconds a new connection (either port) has to send its first byte, and a metrics
    /// request its whole head.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub header_timeout_seconds: f64,
    /// After SIGTERM, how long calls in flight have before the process exits (streams end at once).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub drain_seconds: f64,
    /// Seconds an activator has to answer `/queue`, or the head of its `/queue/watch`.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub activator_timeout_seconds: f64,
    /// Seconds an activator's `/queue/watch` may stay silent (no event, no keep-alive) before it
    /// counts as stalled; keep it above twice the activator's keep-alive interval (5 s).
    #[arg(long, value_name = "SECONDS", default_value_t = 12.0)]
    pub activator_watch_idle_seconds: f64,
    /// Log format: text or json (level from RUST_LOG, default info).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// `NAME=URL[,URL...]` flags into a map.
pub fn static_targets(flags: &[String]) -> anyhow::Result<StaticTargets> {
    let mut map = StaticTargets::new();
    for flag in flags {
        let Some((name, urls)) = flag.split_once('=') else {
            bail!("--static-target {flag:?}: expected NAME=URL[,URL...]");
        };
        let urls: Vec<String> = urls.split(',').map(|u| u.trim().to_owned()).collect();
        if name.is_empty() || urls.iter().any(|u| !crate::edge::source::Reader::is_url(u)) {
            bail!("--static-target {flag:?}: expected NAME=URL[,URL...] with http(s) URLs");
        }
        map.entry(name.to_owned()).or_default().extend(urls);
    }
    Ok(map)
}

/// Logs as text or JSON lines, level from RUST_LOG (default info), coloured as `--color` says.
pub fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(super::color::logs())
        .with_writer(std::io::stderr);
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
    tracing::info!("shutting down");
}

fn at_least_one(flag: &str, n: usize) -> anyhow::Result<usize> {
    if n == 0 {
        bail!("{flag} 0: expected at least 1");
    }
    Ok(n)
}

/// `--scrape-memory-bytes`, within what the budget can count.
fn scrape_memory(bytes: usize) -> anyhow::Result<usize> {
    use crate::serve::budget::{MAX_BYTES, MIN_BYTES};
    if !(MIN_BYTES..=MAX_BYTES).contains(&bytes) {
        bail!("--scrape-memory-bytes {bytes}: expected {MIN_BYTES} to {MAX_BYTES}");
    }
    Ok(bytes)
}

/// The limits the flags set, the others at their defaults.
pub fn limits(args: &Args) -> anyhow::Result<Limits> {
    Ok(Limits {
        max_targets: at_least_one("--max-targets", args.max_targets)?,
        max_targets_per_namespace: at_least_one(
            "--max-targets-per-namespace",
            args.max_targets_per_namespace,
        )?,
        max_connections: at_least_one("--max-connections", args.max_connections)?,
        connection_idle: positive_seconds(
            "--connection-idle-seconds",
            args.connection_idle_seconds,
        )?,
        connection_max_age: positive_seconds(
            "--connection-max-age-seconds",
            args.connection_max_age_seconds,
        )?,
        metrics_max_connections: at_least_one(
            "--metrics-max-connections",
            args.metrics_max_connections,
        )?,
        header_timeout: positive_seconds("--header-timeout-seconds", args.header_timeout_seconds)?,
        drain: seconds_from_zero("--drain-seconds", args.drain_seconds)?,
        idle_stop: positive_seconds("--idle-stop-seconds", args.idle_stop_seconds)?,
        max_page_bytes: args.max_page_bytes,
        max_concurrent_scrapes: args.max_concurrent_scrapes,
        scrape_memory_bytes: scrape_memory(args.scrape_memory_bytes)?,
        staleness: positive_seconds("--stale-after-seconds", args.stale_after_seconds)?,
        activator_timeout: positive_seconds(
            "--activator-timeout-seconds",
            args.activator_timeout_seconds,
        )?,
        activator_watch_idle: positive_seconds(
            "--activator-watch-idle-seconds",
            args.activator_watch_idle_seconds,
        )?,
        ..Limits::default()
    })
}

/// Serve mode's settings from the flags.
fn serve_mode(
    ports: &str,
    namespace: Option<String>,
    lease_seconds: f64,
) -> anyhow::Result<ServeModeSettings> {
    let duration = positive_seconds("--lease-seconds", lease_seconds)?;
    let mut lease = LeaseSettings::default();
    if let Some(ns) = namespace {
        lease.namespace = ns;
    }
    lease.duration = duration;
    lease.renew = (duration / 3).max(std::time::Duration::from_millis(10));
    Ok(ServeModeSettings {
        ports: super::checks::port_range("--activator-ports", ports)?,
        lease: Some(lease),
        ..ServeModeSettings::default()
    })
}

/// The scaler's configuration from its flags.
pub fn config(args: &Args) -> anyhow::Result<Config> {
    let limits = limits(args)?;
    if let Some(dir) = &args.state_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--state-dir {}: cannot create it", dir.display()))?;
    }
    let metrics_listen =
        match args.metrics_listen.as_str() {
            "none" => None,
            addr => Some(addr.parse().with_context(|| {
                format!("--metrics-listen {addr:?}: expected HOST:PORT or none")
            })?),
        };
    Ok(Config {
        listen: args.listen,
        metrics_listen,
        tls: args
            .tls_cert
            .clone()
            .zip(args.tls_key.clone())
            .map(|(cert, key)| TlsFiles {
                cert,
                key,
                client_ca: args.tls_client_ca.clone(),
            }),
        statics: static_targets(&args.static_target)?,
        allowed_activators: args.allow_activator.clone(),
        kube_api: args.kube_api.clone(),
        use_kube: !args.no_kube,
        scrape_via: args.scrape_via,
        paths: None,
        serve_mode: serve_mode(
            &args.activator_ports,
            args.namespace.clone(),
            args.lease_seconds,
        )?,
        limits,
        state_dir: args.state_dir.clone(),
    })
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logging(&args.log_format);
    let _ = crate::edge::descriptors::raise_and_log();
    let config = config(&args)?;
    let bound = server::bind(config).await?;
    bound.run(shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_targets_parse() {
        let m = static_targets(&[
            "chat=http://127.0.0.1:8001/metrics,http://127.0.0.1:8002/metrics".into(),
        ])
        .unwrap();
        assert_eq!(m["chat"].len(), 2);
        assert!(static_targets(&["chat".into()]).is_err());
        assert!(static_targets(&["chat=file.prom".into()]).is_err());
    }

    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: Args,
    }

    fn parsed(flags: &[&str]) -> Args {
        use clap::Parser;
        Serve::parse_from(std::iter::once("serve").chain(flags.iter().copied())).args
    }

    #[test]
    fn the_flags_defaults_are_the_limits_defaults() {
        assert_eq!(limits(&parsed(&[])).unwrap(), Limits::default());
        let set = limits(&parsed(&[
            "--activator-timeout-seconds",
            "0.5",
            "--activator-watch-idle-seconds",
            "30",
        ]))
        .unwrap();
        assert_eq!(set.activator_timeout, std::time::Duration::from_millis(500));
        assert_eq!(set.activator_watch_idle, std::time::Duration::from_secs(30));
        assert!(limits(&parsed(&["--activator-timeout-seconds", "0"])).is_err());
    }
}
