//! The standalone mode, without KEDA: one decision for a Deployment from its Ready pods' pages,
//! and the write of its scale subresource. `infscale kube` parses flags, calls these and prints;
//! the pods are found and scraped as `serve` does (its discovery and scraper), and their pages
//! become replicas through the same [`fleet::read`] as everywhere. With `deletioncost=true` a
//! scale-down first writes the pods' deletion costs, through the planner `serve` uses.

use super::discovery::{label_selector, EndpointShape, PodEndpoint, ScrapeVia};
use super::scrape::Scraper;
use anyhow::Context;
use infscale_core::control::decision::{decide, Decision, ScalerState};
use infscale_core::observe::metrics::ServerChoice;
use infscale_core::policy::Policy;
use infscale_core::project::demand::Observation;
use infscale_core::project::fleet::{self, Fetched, Fleet, Input};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::Api;
use std::sync::Arc;
use std::time::Duration;

/// The Deployment and how to read its pods.
#[derive(Debug, Clone)]
pub struct DeploymentRef {
    pub namespace: String,
    pub deployment: String,
    pub metrics_port: u16,
    pub metrics_path: String,
    pub server: ServerChoice,
    /// How to reach the pods' pages (default: direct in a cluster, the API's proxy outside).
    pub scrape_via: Option<ScrapeVia>,
    /// Allowed for each scrape.
    pub timeout: Duration,
}

/// One decision and what it was made from.
#[derive(Debug)]
pub struct Decided {
    /// The Deployment's `spec.replicas`.
    pub current: u32,
    pub fleet: Fleet,
    /// The Ready pods scraped.
    pub pods: Vec<PodEndpoint>,
    pub decision: Decision,
}

/// Reads the Deployment and its Ready pods' pages at `now` and decides, with `held` requests
/// held at an activator; `state` is the HPA's memory and the pods' last counters.
pub async fn decide_once(
    client: &kube::Client,
    target: &DeploymentRef,
    policy: &Policy,
    held: f64,
    now: f64,
    state: &mut ScalerState,
) -> anyhow::Result<Decided> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &target.namespace);
    let d = deployments
        .get(&target.deployment)
        .await
        .with_context(|| format!("deployment {}/{}", target.namespace, target.deployment))?;
    let current = d.spec.replicas.unwrap_or(1).max(0) as u32;
    let status = d
        .status
        .as_ref()
        .and_then(|s| s.replicas)
        .map(|r| r.max(0) as u32);
    let selector = label_selector(&d)
        .with_context(|| format!("deployment {}: its selector is empty", target.deployment))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &target.namespace);
    let list = pods.list(&ListParams::default().labels(&selector)).await?;
    let shape = EndpointShape {
        namespace: target.namespace.clone(),
        port: target.metrics_port,
        path: target.metrics_path.clone(),
        scheme: "http".into(),
        via: target.scrape_via.unwrap_or_else(ScrapeVia::here),
    };
    let scraper = Scraper {
        // A page is read where it was asked for, never where an answer redirects to.
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?,
        kube: Some(client.clone()),
        max_bytes: crate::edge::source::DEFAULT_MAX_BYTES,
        permits: Arc::new(tokio::sync::Semaphore::new(32)),
        budget: super::budget::MemoryBudget::new(
            super::limits::Limits::default().scrape_memory_bytes,
            32,
        ),
    };
    let endpoints: Vec<_> = list
        .items
        .iter()
        .filter_map(|p| shape.endpoint(p))
        .collect();
    let pages = scraper
        .scrape_each(&endpoints, target.timeout, target.server)
        .await;
    let inputs = endpoints
        .iter()
        .zip(pages)
        .map(|(pod, (page, _took))| Input {
            name: pod.name.clone(),
            fetched: match page {
                Ok(read) => Fetched::Read(read),
                Err(e) => Fetched::Failed(e.to_string()),
            },
            earlier: state.counters.get(&pod.name),
            cpu_request_cores: pod.cpu_request_cores,
        });
    let mut fleet = fleet::read(inputs, target.server, now);
    fleet.remember(&mut state.counters);
    state
        .counters
        .retain(|name, _| endpoints.iter().any(|p| &p.name == name));
    let starting: Vec<f64> =
        super::discovery::starting_ages(&list.items, super::discovery::wall_clock_s())
            .into_iter()
            .map(|age| now - age)
            .collect();
    let observation = Observation {
        starting_since: &starting,
        ..fleet.observation(now, current, status, Some(held), Some(now))
    };
    // `lookahead=auto`: the cold start of the pods there now (the prior without one).
    let mut cold = infscale_core::project::cold_start::ColdStarts::default();
    for s in super::discovery::pod_starts(&list.items) {
        cold.observe(&s.pod, s.created_s, s.ready_s);
    }
    let decision = decide(&policy.with_horizon(cold.learned()), &observation, state);
    Ok(Decided {
        current,
        fleet,
        pods: endpoints,
        decision,
    })
}

/// Before a scale-down (`deletioncost=true`): writes each pod's deletion cost, its in-flight
/// requests as read, where it moved meaningfully, at most the policy's per-minute budget. The
/// scale-down follows at once, so it is known to be near. Returns each write and how it ended.
pub async fn write_costs(
    client: &kube::Client,
    target: &DeploymentRef,
    policy: &Policy,
    decided: &Decided,
    now: f64,
) -> Vec<(String, i32, Result<(), String>)> {
    use infscale_core::control::deletion_cost::{plan, round, Budget};
    let (costs, _) = round(&decided.fleet, &[], |name| {
        let pod = decided.pods.iter().find(|p| p.name == name && p.vouched)?;
        Some(pod.deletion_cost)
    });
    let mut budget = Budget::new(policy.deletion_cost_writes);
    let api: Api<Pod> = Api::namespaced(client.clone(), &target.namespace);
    let mut out = Vec::new();
    for (pod, cost) in plan(&costs, true, &mut budget, now) {
        let result = super::deletion_cost::patch_cost(&api, &pod, cost).await;
        out.push((pod, cost, result));
    }
    out
}

/// Writes `replicas` to the Deployment's scale subresource.
pub async fn apply(
    client: &kube::Client,
    target: &DeploymentRef,
    replicas: u32,
) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &target.namespace);
    let patch = serde_json::json!({ "spec": { "replicas": replicas } });
    deployments
        .patch_scale(
            &target.deployment,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .with_context(|| format!("scaling deployment {}", target.deployment))?;
    Ok(())
}
