//! `infscale activator`: hold requests while a model has no ready replica.

use super::checks::positive_seconds;
use super::serve::{init_logging, shutdown_signal};
use crate::activator::limits::Limits;
use crate::activator::routes::{self, RouteSpec};
use crate::activator::server::{self, Config};
use crate::edge::files::read_text;
use crate::limits;
use anyhow::bail;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where clients send requests (HTTP/1.1 and h2c).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Where the scaler reads /queue and /queue/watch, and /metrics and /healthz are served.
    #[arg(long, default_value = "0.0.0.0:9092")]
    pub admin_listen: SocketAddr,
    /// A YAML routes file (see the README); or one route from the flags below.
    #[arg(long, value_name = "FILE", conflicts_with = "upstream")]
    pub routes: Option<PathBuf>,
    /// The one route's upstream: http://HOST:PORT.
    #[arg(long, value_name = "URL", required_unless_present = "routes")]
    pub upstream: Option<String>,
    /// Probe this path on the upstream to know it is ready (outside a cluster).
    #[arg(long, value_name = "PATH")]
    pub health_path: Option<String>,
    /// Watch this Service's EndpointSlices to know the upstream is ready (in a cluster).
    #[arg(long, value_name = "NAME", conflicts_with = "health_path")]
    pub service: Option<String>,
    /// Seconds a request is held before it is answered 504.
    #[arg(long, default_value_t = 300.0)]
    pub hold_timeout: f64,
    /// Requests held at once before new ones are answered 503.
    #[arg(long, default_value_t = 1000)]
    pub max_held: usize,
    /// The host under which /queue reports the one route's counts [default: the upstream's host].
    #[arg(long)]
    pub host: Option<String>,
    /// The largest request body accepted, bytes.
    #[arg(long, default_value_t = 16 << 20)]
    pub max_body_bytes: usize,
    /// Namespace of the Services routes name [default: the pod's own, else "default"].
    #[arg(long)]
    pub namespace: Option<String>,
    /// Use this API server without credentials; default: in-cluster, else the kubeconfig.
    #[arg(long, value_name = "URL")]
    pub kube_api: Option<String>,
    /// Seconds forwarded requests may take to finish after SIGTERM.
    #[arg(long, default_value_t = 30.0)]
    pub drain_seconds: f64,
    /// Answer a held streaming request at once and send an SSE comment every this many seconds
    /// until the model answers (off by default).
    #[arg(long, value_name = "SECONDS")]
    pub keep_alive_seconds: Option<f64>,
    /// Client connections at once; at the cap a silent one gives way, or, when every open one
    /// has spoken, the new one is closed.
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
    /// Client connections from one address at once; one more is closed as it is accepted.
    #[arg(long, default_value_t = 1024)]
    pub max_connections_per_client: usize,
    /// Connections to the admin port at once; at the cap a silent one gives way.
    #[arg(long, default_value_t = 1024)]
    pub admin_max_connections: usize,
    /// Seconds a request head may take to arrive (also how long a connection may sit with no
    /// request open, HTTP/1.1 or HTTP/2).
    #[arg(long, default_value_t = 20.0)]
    pub header_timeout: f64,
    /// Seconds a request body may take to arrive (408 after).
    #[arg(long, default_value_t = 60.0)]
    pub body_timeout: f64,
    /// Bytes of request bodies held or being read at once, over all routes (503 past it).
    #[arg(long, default_value_t = 128 << 20)]
    pub body_budget_bytes: usize,
    /// Bytes of that one client connection may take (503 past it).
    #[arg(long, default_value_t = 32 << 20)]
    pub body_budget_per_connection_bytes: usize,
    /// Seconds an upstream may stay silent in the middle of a response before it is cut.
    #[arg(long, default_value_t = 300.0)]
    pub upstream_idle: f64,
    /// Seconds a client may read nothing of its response before it is cut.
    #[arg(long, default_value_t = 120.0)]
    pub client_stall: f64,
    /// Seconds between health probes while requests are held (routes probed by a health path).
    #[arg(long, default_value_t = 0.025)]
    pub probe_held_seconds: f64,
    /// Seconds between health probes while nothing is held.
    #[arg(long, default_value_t = 5.0)]
    pub probe_idle_seconds: f64,
    /// Seconds one health probe may take before it counts as failed.
    #[arg(long, default_value_t = 1.0)]
    pub probe_timeout_seconds: f64,
    /// Failed health probes in a row that turn a ready route not ready.
    #[arg(long, default_value_t = 3)]
    pub probe_failures: u32,
    /// Log format: text or json (level from RUST_LOG, default info).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

fn own_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok()
        })
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

pub fn config(args: &Args) -> anyhow::Result<Config> {
    let namespace = args.namespace.clone().unwrap_or_else(own_namespace);
    let routes = match (&args.routes, &args.upstream) {
        (Some(path), _) => {
            let text = read_text(path, limits::MAX_CONFIG_FILE_BYTES)?;
            routes::parse(&path.display().to_string(), &text, &namespace)
                .map_err(anyhow::Error::msg)?
        }
        (None, Some(upstream)) => {
            let spec = RouteSpec {
                service: args.service.clone(),
                health_path: args.health_path.clone(),
                max_held: args.max_held,
                hold_timeout_seconds: args.hold_timeout,
                counts_host: args.host.clone(),
                keep_alive_seconds: args.keep_alive_seconds,
                ..RouteSpec::to_upstream(upstream)
            };
            vec![spec
                .check(0, &namespace)
                .map_err(|e| anyhow::anyhow!("{e}"))?]
        }
        (None, None) => bail!("give --routes FILE or --upstream URL"),
    };
    Ok(Config {
        listen: args.listen,
        admin_listen: args.admin_listen,
        routes,
        kube_api: args.kube_api.clone(),
        limits: limits(args)?,
    })
}

/// The limits the flags set, the others at their defaults.
pub fn limits(args: &Args) -> anyhow::Result<Limits> {
    let drain = super::checks::seconds_from_zero("--drain-seconds", args.drain_seconds)?;
    if args.max_body_bytes == 0 {
        bail!("--max-body-bytes must be above 0");
    }
    if args.probe_failures == 0 {
        bail!("--probe-failures 0: expected at least 1");
    }
    Ok(Limits {
        max_connections: args.max_connections.max(1),
        max_connections_per_client: args.max_connections_per_client.max(1),
        admin_max_connections: args.admin_max_connections.max(1),
        header_timeout: positive_seconds("--header-timeout", args.header_timeout)?,
        body_timeout: positive_seconds("--body-timeout", args.body_timeout)?,
        max_body: args.max_body_bytes,
        body_budget: args.body_budget_bytes,
        conn_body_share: args.body_budget_per_connection_bytes,
        upstream_idle: positive_seconds("--upstream-idle", args.upstream_idle)?,
        client_stall: positive_seconds("--client-stall", args.client_stall)?,
        drain,
        probe_held: positive_seconds("--probe-held-seconds", args.probe_held_seconds)?,
        probe_idle: positive_seconds("--probe-idle-seconds", args.probe_idle_seconds)?,
        probe_timeout: positive_seconds("--probe-timeout-seconds", args.probe_timeout_seconds)?,
        probe_failures: args.probe_failures,
        ..Limits::default()
    })
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logging(&args.log_format);
    let mut config = config(&args)?;
    if let Some(open_files) = crate::edge::descriptors::raise_and_log() {
        config.limits = config.limits.within_descriptors(open_files);
    }
    let bound = server::bind(config).await?;
    bound.run(shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Activator {
        #[command(flatten)]
        args: Args,
    }

    fn parsed(flags: &[&str]) -> Args {
        use clap::Parser;
        let all = ["activator", "--upstream", "http://127.0.0.1:8000"];
        Activator::parse_from(all.iter().chain(flags).copied()).args
    }

    #[test]
    fn the_flags_defaults_are_the_limits_defaults() {
        assert_eq!(limits(&parsed(&[])).unwrap(), Limits::default());
        let set = limits(&parsed(&[
            "--probe-held-seconds",
            "0.1",
            "--probe-failures",
            "5",
        ]))
        .unwrap();
        assert_eq!(set.probe_held, std::time::Duration::from_millis(100));
        assert_eq!(set.probe_failures, 5);
        assert!(limits(&parsed(&["--probe-failures", "0"])).is_err());
        assert!(limits(&parsed(&["--probe-idle-seconds=-1"])).is_err());
    }
}
