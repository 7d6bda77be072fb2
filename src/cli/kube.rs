//! `infscale kube`: the standalone mode, without KEDA. Reads a Deployment, scrapes its Ready pods
//! (through the API server's pod proxy from a laptop, or directly in a cluster), prints the
//! decision as `decide` does, and with `--apply` writes the Deployment's scale subresource: for
//! clusters without KEDA, or to compare with it.

use super::checks::{held_flag, positive_seconds};
use super::policy_args::PolicyArgs;
use super::read::Read;
use super::state_file::{load_state, save_state, unix_now};
use super::table;
use crate::metrics::{read_page, Replica, ServerChoice};
use crate::scaler::discovery::{label_selector, EndpointShape, ScrapeVia};
use crate::scaler::scrape::Scraper;
use crate::scaling::{decide, Observation};
use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::Api;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The Deployment's namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// The Deployment to read and (with --apply) scale.
    #[arg(long)]
    pub deployment: String,
    /// The pods' metrics port.
    #[arg(long, default_value_t = 8000)]
    pub metrics_port: u16,
    /// The pods' metrics path.
    #[arg(long, default_value = "/metrics")]
    pub metrics_path: String,
    /// Which server's series to read: auto, vllm, llamacpp, sglang, tgi or triton.
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<ServerChoice>())]
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
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// The time of this decision in seconds [default: now, as Unix time].
    #[arg(long, value_name = "SECONDS")]
    pub now: Option<f64>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let policy = args.policy.policy()?;
    let held = held_flag(args.held)?;
    let timeout = positive_seconds("--timeout", args.timeout)?;
    let now = args.now.unwrap_or_else(unix_now);
    let client = crate::kubeapi::connect(args.kube_api.as_deref()).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &args.namespace);
    let d = deployments
        .get(&args.deployment)
        .await
        .with_context(|| format!("deployment {}/{}", args.namespace, args.deployment))?;
    let current = d.spec.replicas.unwrap_or(1).max(0) as u32;
    let status = d
        .status
        .as_ref()
        .and_then(|s| s.replicas)
        .map(|r| r.max(0) as u32);
    let selector = label_selector(&d)
        .with_context(|| format!("deployment {}: its selector is empty", args.deployment))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &args.namespace);
    let list = pods.list(&ListParams::default().labels(&selector)).await?;
    let via = args.scrape_via.unwrap_or_else(ScrapeVia::here);
    let shape = EndpointShape {
        namespace: args.namespace.clone(),
        port: args.metrics_port,
        path: args.metrics_path.clone(),
        scheme: "http".into(),
        via,
    };
    let scraper = Scraper {
        http: reqwest::Client::new(),
        kube: Some(client.clone()),
        max_bytes: crate::source::DEFAULT_MAX_BYTES,
        permits: Arc::new(tokio::sync::Semaphore::new(32)),
    };
    let mut state = load_state(args.state.as_deref())?;
    let endpoints: Vec<_> = list
        .items
        .iter()
        .filter_map(|p| shape.endpoint(p))
        .collect();
    let pages = scraper.scrape_each(&endpoints, timeout).await;
    let mut reads = Vec::new();
    for (pod, (page, _took)) in endpoints.iter().zip(pages) {
        let read = match page {
            Err(e) => Read {
                source: pod.name.clone(),
                replica: Err(e.to_string()),
                scan: None,
            },
            Ok(page) => {
                let page = read_page(&page, args.server);
                let replica = page.signals.map_err(|e| e.to_string()).map(|signals| {
                    Replica::from_scrape(
                        &pod.name,
                        signals,
                        &mut state.counters,
                        now,
                        pod.cpu_request_cores,
                    )
                });
                Read {
                    source: pod.name.clone(),
                    replica,
                    scan: Some(page.scan),
                }
            }
        };
        reads.push(read);
    }
    let replicas: Vec<Replica> = reads
        .iter()
        .filter_map(|r| r.replica.as_ref().ok().cloned())
        .collect();
    let missing = reads.iter().filter(|r| r.replica.is_err()).count() as u32;
    println!(
        "deployment {}/{}: spec.replicas {current}, ready pods {}, read {}",
        args.namespace,
        args.deployment,
        reads.len(),
        replicas.len()
    );
    if !reads.is_empty() {
        print!("{}", table::render(&reads));
    }
    for r in &reads {
        if let Err(e) = &r.replica {
            println!("{}: {e}: this pod does not vote", r.source);
        }
    }
    let obs = Observation {
        now,
        current,
        status,
        replicas: &replicas,
        missing,
        held: Some(held),
        scraped_at: Some(now),
    };
    let decision = decide(&policy, &obs, &mut state);
    save_state(args.state.as_deref(), &state)?;
    super::decide::print(&decision, &policy);
    if args.apply && decision.desired != current {
        let patch = serde_json::json!({ "spec": { "replicas": decision.desired } });
        deployments
            .patch_scale(
                &args.deployment,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .with_context(|| format!("scaling deployment {}", args.deployment))?;
        println!(
            "scaled deployment/{} to {}",
            args.deployment, decision.desired
        );
    }
    Ok(ExitCode::SUCCESS)
}
