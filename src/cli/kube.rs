//! `infscale kube`: the standalone mode, without KEDA. Reads a Deployment, scrapes its Ready pods
//! (through the API server's pod proxy from a laptop, or directly in a cluster), prints the
//! decision as `decide` does, and with `--apply` writes the Deployment's scale subresource: for
//! clusters without KEDA, or to compare with it. The work is `serve::standalone`'s; this file
//! is its flags and its printing.

use super::checks::{held_flag, now_flag, positive_seconds};
use super::policy_args::PolicyArgs;
use super::state_file::{load_state, save_state};
use super::table;
use crate::serve::discovery::ScrapeVia;
use crate::serve::metadata;
use crate::serve::standalone::{self, DeploymentRef};
use infscale_core::observe::metrics::ServerChoice;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The Deployment's namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// The Deployment to read and (with --apply) scale.
    #[arg(long)]
    pub deployment: String,
    /// The pods' metrics port.
    #[arg(long, default_value = metadata::DEFAULT_METRICS_PORT)]
    pub metrics_port: u16,
    /// The pods' metrics path.
    #[arg(long, default_value = metadata::DEFAULT_METRICS_PATH)]
    pub metrics_path: String,
    /// Which server's series to read: auto, vllm, llamacpp, sglang, tgi (archived upstream,
    /// March 2026), triton or trtllm (trtllm-serve and Triton's TensorRT-LLM backend).
    #[arg(long, default_value = metadata::DEFAULT_SERVER, value_parser = |s: &str| s.parse::<ServerChoice>())]
    pub server: ServerChoice,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Requests held at an activator for this Deployment.
    #[arg(long, default_value_t = 0.0)]
    pub held: f64,
    /// JSON file that keeps the HPA's memory and counters between runs.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Write the decision to the Deployment's scale subresource.
    #[arg(long)]
    pub apply: bool,
    /// Use this API server without credentials (e.g. `kubectl proxy`'s); default: the kubeconfig
    /// or the in-cluster service account.
    #[arg(long, value_name = "URL")]
    pub kube_api: Option<String>,
    /// How to reach pod pages: proxy (through the API server) or direct (pod IPs, in a
    /// cluster) [default: direct in a cluster, proxy outside].
    #[arg(long, value_enum)]
    pub scrape_via: Option<ScrapeVia>,
    /// Seconds allowed for each scrape.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub timeout: f64,
    /// The time of this decision in seconds [default: now, as Unix time].
    #[arg(long, value_name = "SECONDS")]
    pub now: Option<f64>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let policy = args.policy.policy()?;
    infscale_core::policy::exports::check(args.server, &policy)?;
    let held = held_flag(args.held)?;
    let now = now_flag(args.now)?;
    if args.metrics_path.len() > infscale_core::limits::PATH_BYTES {
        anyhow::bail!(
            "--metrics-path: {} bytes, more than {}",
            args.metrics_path.len(),
            infscale_core::limits::PATH_BYTES
        );
    }
    let target = DeploymentRef {
        namespace: args.namespace.clone(),
        deployment: args.deployment.clone(),
        metrics_port: args.metrics_port,
        metrics_path: args.metrics_path.clone(),
        server: args.server,
        scrape_via: args.scrape_via,
        timeout: positive_seconds("--timeout", args.timeout)?,
    };
    // Every input is read before the cluster is.
    let mut state = load_state(args.state.as_deref())?;
    let client = crate::edge::kubeapi::connect(args.kube_api.as_deref()).await?;
    let reading = standalone::decide_once(&client, &target, &policy, held, now, &mut state).await?;
    save_state(args.state.as_deref(), &state)?;
    let outcomes = &reading.fleet.outcomes;
    println!(
        "deployment {}/{}: spec.replicas {}, ready pods {}, read {}, asleep {}",
        args.namespace,
        args.deployment,
        reading.current,
        outcomes.len(),
        reading.fleet.replicas.len() + reading.fleet.asleep.len(),
        reading.fleet.asleep.len()
    );
    if !outcomes.is_empty() {
        print!("{}", table::render(outcomes));
    }
    for o in outcomes {
        if let Some(Err(e)) = &o.vote {
            println!("{}: {e}: this pod does not vote", o.name);
        }
    }
    super::decide::print(&reading.decision, &reading.decision.lines, &policy);
    let desired = reading.decision.desired;
    if args.apply && desired != reading.current {
        if desired < reading.current && policy.deletion_cost {
            // A write that fails leaves the choice to the ReplicaSet; the scale-down goes on.
            for (pod, cost, result) in
                standalone::write_costs(&client, &target, &policy, &reading, now).await
            {
                match result {
                    Ok(()) => println!("deletion cost of pod {pod}: {cost}"),
                    Err(e) => println!("deletion cost of pod {pod} not written: {e}"),
                }
            }
        }
        standalone::apply(&client, &target, desired).await?;
        println!("scaled deployment/{} to {desired}", args.deployment);
    }
    Ok(ExitCode::SUCCESS)
}
