//! `infscale activator`: hold requests while a model has no ready replica.

use super::checks::positive_seconds;
use super::serve::{init_logging, shutdown_signal};
use crate::activator::learn::{LearnConfig, Namespaces};
use crate::activator::limits::Limits;
use crate::activator::reload::Reload;
use crate::activator::routes::{self, RouteSpec};
use crate::activator::server::{self, Config};
use crate::edge::files::read_text;
use anyhow::bail;
use infscale_core::limits;
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
    /// A YAML routes file (docs/activator.md), read again when it changes; or one route from
    /// the flags below; or neither, in a cluster, where models are learned from serve's slices.
    #[arg(long, value_name = "FILE", conflicts_with = "upstream")]
    pub routes: Option<PathBuf>,
    /// Seconds between reads of the routes file (a change applies without a restart; 0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub routes_reload_seconds: f64,
    /// The one route's upstream: http://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// Learn models from the EndpointSlices serve writes in serve mode: `auto` does in a cluster
    /// (or with --kube-api), `on` always, `off` never.
    #[arg(long, default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub learn: String,
    /// The namespaces whose models are learned: `all`, or names separated by commas.
    #[arg(long, default_value = "all")]
    pub namespaces: String,
    /// The cluster's DNS domain: a Service's FQDN is NAME.NAMESPACE.svc.DOMAIN.
    #[arg(long, default_value = routes::DEFAULT_CLUSTER_DOMAIN)]
    pub cluster_domain: String,
    /// The ports a learned model may be placed by (serve gives each model one), FIRST-LAST.
    #[arg(long, default_value = "20000-29999")]
    pub model_ports: String,
    /// Models learned at once; the slices of more are refused (counted and logged).
    #[arg(long, default_value_t = 256)]
    pub max_models: usize,
    /// Seconds a learned model stays known (its port open) after its slice went.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub model_linger_seconds: f64,
    /// Requests held at once over every route of one namespace.
    #[arg(long, default_value_t = 4000)]
    pub max_held_per_namespace: usize,
    /// Probe this path on the upstream to know it is ready (outside a cluster).
    #[arg(long, value_name = "PATH")]
    pub health_path: Option<String>,
    /// Watch this Service's EndpointSlices to know the upstream is ready (in a cluster).
    #[arg(long, value_name = "NAME", conflicts_with = "health_path")]
    pub service: Option<String>,
    /// Seconds a request is held before it is answered 504 (the one route's; a learned model's
    /// when its trigger says none, and the longest it may say).
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub hold_timeout: f64,
    /// Requests held at once before new ones are answered 503 (the one route's; a learned
    /// model's when its trigger says none, and the most it may say).
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
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub drain_seconds: f64,
    /// Answer a held streaming request at once and send an SSE comment every this many seconds
    /// until the model answers (off by default).
    #[arg(long, value_name = "SECONDS")]
    pub keep_alive_seconds: Option<f64>,
    /// Client connections at once; at the cap a newcomer takes the place of the least recently
    /// useful connection of the client address holding the most, or, when its own address
    /// holds the most, of one of its own that never spoke (else it is closed).
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
    /// Seconds a client connection to the proxy may last: then it is closed gracefully
    /// with its next request (HTTP/1.1 after that answer, HTTP/2 with GOAWAY).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub connection_max_age_seconds: f64,
    /// Seconds one /queue/watch stream lasts before it ends cleanly (the scaler reconnects).
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub watch_max_seconds: f64,
    /// Client connections from one address at once; one more is closed as it is accepted.
    #[arg(long, default_value_t = 1024)]
    pub max_connections_per_client: usize,
    /// Connections to the admin port at once; at the cap a newcomer makes room as on the proxy
    /// port (--max-connections).
    #[arg(long, default_value_t = 1024)]
    pub admin_max_connections: usize,
    /// Seconds a request head may take to arrive (also how long a connection may sit with no
    /// request open, HTTP/1.1 or HTTP/2).
    #[arg(long, value_name = "SECONDS", default_value_t = 20.0)]
    pub header_timeout: f64,
    /// Seconds a request body may take to arrive (408 after).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub body_timeout: f64,
    /// Bytes of request bodies held or being read at once, over all routes (503 past it).
    #[arg(long, default_value_t = 128 << 20)]
    pub body_budget_bytes: usize,
    /// Bytes of that one client connection may take (503 past it).
    #[arg(long, default_value_t = 32 << 20)]
    pub body_budget_per_connection_bytes: usize,
    /// Bytes of that the bodies from one client address may take (503 past it).
    #[arg(long, default_value_t = 32 << 20)]
    pub body_budget_per_client_bytes: usize,
    /// Bytes of that the bodies of one route may take, read or held (503 past it).
    #[arg(long, default_value_t = 64 << 20)]
    pub body_budget_per_route_bytes: usize,
    /// Seconds a request body may pause with no byte arriving (408 after).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub body_idle: f64,
    /// Seconds an upstream may take to send a response head once the request is written to it
    /// (504 after).
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub upstream_head_timeout: f64,
    /// Seconds an upstream may stay silent in the middle of a response before it is cut.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub upstream_idle: f64,
    /// Seconds a client may read nothing of its response before it is cut.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    pub client_stall: f64,
    /// Seconds between health probes while requests are held (routes probed by a health path).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.025)]
    pub probe_held_seconds: f64,
    /// Seconds between health probes while nothing is held.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub probe_idle_seconds: f64,
    /// Seconds one health probe may take before it counts as failed.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
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

/// Whether a Kubernetes API is at hand without being named: the pod's own environment.
fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

pub fn config(args: &Args) -> anyhow::Result<Config> {
    let namespace = args.namespace.clone().unwrap_or_else(own_namespace);
    let ctx = routes::Context {
        namespace: namespace.clone(),
        domain: args
            .cluster_domain
            .trim()
            .trim_matches('.')
            .to_ascii_lowercase(),
    };
    let learning = match args.learn.as_str() {
        "on" => true,
        "off" => false,
        _ => in_cluster() || args.kube_api.is_some(),
    };
    let mut reload = None;
    let routes = match (&args.routes, &args.upstream) {
        (Some(path), _) => {
            let text = read_text(path, limits::MAX_CONFIG_FILE_BYTES)?;
            let routes = routes::parse_in(&path.display().to_string(), &text, &ctx)
                .map_err(anyhow::Error::msg)?;
            if args.routes_reload_seconds > 0.0 {
                let every =
                    positive_seconds("--routes-reload-seconds", args.routes_reload_seconds)?;
                reload = Some((
                    Reload {
                        path: path.clone(),
                        ctx: ctx.clone(),
                        every,
                    },
                    text,
                ));
            }
            routes
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
            vec![spec.check_in(0, &ctx).map_err(|e| anyhow::anyhow!("{e}"))?]
        }
        (None, None) if learning => Vec::new(),
        (None, None) => bail!(
            "give --routes FILE or --upstream URL, or run in a cluster (or with --kube-api) to \
             learn models from the slices serve writes"
        ),
    };
    if routes.is_empty() && !learning && reload.is_none() {
        bail!("the routes file has no route, and models are not learned (--learn off, or not in a cluster)");
    }
    let learn = if learning {
        if args.max_held == 0 {
            bail!("--max-held must be at least 1");
        }
        let namespaces: Namespaces = args
            .namespaces
            .parse()
            .map_err(|e| anyhow::anyhow!("--namespaces: {e}"))?;
        let ports = super::checks::port_range("--model-ports", &args.model_ports)?;
        if ports.contains(&args.listen.port()) || ports.contains(&args.admin_listen.port()) {
            bail!(
                "--model-ports {}-{} holds the --listen or --admin-listen port",
                ports.start(),
                ports.end()
            );
        }
        Some(LearnConfig {
            namespaces,
            domain: ctx.domain.clone(),
            ports,
            shared_port: args.listen.port(),
            max_models: args.max_models.max(1),
            linger: super::checks::seconds_from_zero(
                "--model-linger-seconds",
                args.model_linger_seconds,
            )?,
            max_held: args.max_held,
            hold_timeout: positive_seconds("--hold-timeout", args.hold_timeout)?,
            keep_alive: args
                .keep_alive_seconds
                .map(|s| positive_seconds("--keep-alive-seconds", s))
                .transpose()?,
        })
    } else {
        None
    };
    Ok(Config {
        listen: args.listen,
        admin_listen: args.admin_listen,
        routes,
        reload,
        learn,
        namespace_cap: Some(args.max_held_per_namespace.max(1)),
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
        connection_max_age: positive_seconds(
            "--connection-max-age-seconds",
            args.connection_max_age_seconds,
        )?,
        watch_max_age: positive_seconds("--watch-max-seconds", args.watch_max_seconds)?,
        header_timeout: positive_seconds("--header-timeout", args.header_timeout)?,
        body_timeout: positive_seconds("--body-timeout", args.body_timeout)?,
        max_body: args.max_body_bytes,
        body_budget: args.body_budget_bytes,
        conn_body_share: args.body_budget_per_connection_bytes,
        client_body_share: args.body_budget_per_client_bytes,
        route_body_share: args.body_budget_per_route_bytes,
        body_idle: positive_seconds("--body-idle", args.body_idle)?,
        upstream_head_timeout: positive_seconds(
            "--upstream-head-timeout",
            args.upstream_head_timeout,
        )?,
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
    fn learning_follows_the_flags_and_checks_them() {
        let c = config(&parsed(&[
            "--health-path",
            "/health",
            "--learn",
            "on",
            "--namespaces",
            "llm,team-b",
        ]))
        .unwrap();
        let l = c.learn.unwrap();
        assert_eq!(l.ports, crate::activator::learn::DEFAULT_MODEL_PORTS);
        assert!(l.namespaces.allows("team-b") && !l.namespaces.allows("kube-system"));
        let off = config(&parsed(&["--health-path", "/h", "--learn", "off"])).unwrap();
        assert!(off.learn.is_none());
        for bad in [
            &["--learn", "on", "--model-ports", "30000-20000"][..],
            &["--learn", "on", "--model-ports", "8000-9000"],
            &["--learn", "on", "--namespaces", "Bad"],
        ] {
            let bad: Vec<&str> = ["--health-path", "/h"].iter().chain(bad).copied().collect();
            assert!(config(&parsed(&bad)).is_err(), "{bad:?}");
        }
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
