//! `deletionCost: true`: keeping each Ready pod's `controller.kubernetes.io/pod-deletion-cost`
//! at its in-flight requests while a scale-down is near, so the ReplicaSet removes the least
//! busy pod.
//!
//! After each scrape round the collector hands [`CostWriter::after`] what it read; the core's
//! [`deletion_cost::plan`] (the simulator runs the same) says which pods to write, within the
//! target's per-minute budget. A background task sends the merge patches one at a time, each
//! bounded in time, so a slow API server never holds the collector; a write that fails is
//! forgotten, so the next round plans it again. Only pods the Kubernetes API vouches for are
//! written, only in the target's own namespace.

use super::discovery::{DiscoveryContext, PodEndpoint};
use super::AbortOnDrop;
use infscale_core::control::deletion_cost::{self, Budget, ANNOTATION};
use infscale_core::project::fleet::Fleet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::Api;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long one write may take before it counts as failed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The costs this collector wrote, by pod (the watch may not have shown them yet).
type Carried = Arc<Mutex<HashMap<String, i32>>>;

/// One target's deletion-cost writer.
pub struct CostWriter {
    budget: Budget,
    carried: Carried,
    tx: mpsc::Sender<Vec<(String, i32)>>,
    _task: AbortOnDrop,
}

/// What a write ended as, for the log and `/metrics`.
pub enum Written {
    Ok,
    /// Refused or not answered (the warning logged says why).
    Failed,
}

impl CostWriter {
    /// A writer for a target that opted in; `None` when it did not, or when there is no
    /// Kubernetes API to write to (logged once: the metadata asks for what cannot be done).
    pub fn start(
        discovery: &DiscoveryContext,
        namespace: &str,
        policy: &infscale_core::policy::Policy,
        report: impl Fn(Written) + Send + 'static,
    ) -> Option<CostWriter> {
        if !policy.deletion_cost {
            return None;
        }
        let Some(client) = discovery.client.clone() else {
            tracing::warn!(
                "deletionCost is set, but there is no Kubernetes API to write pod annotations to; nothing is written"
            );
            return None;
        };
        let api: Api<Pod> = Api::namespaced(client, namespace);
        let carried: Carried = Arc::default();
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(write_all(api, rx, carried.clone(), report));
        Some(CostWriter {
            budget: Budget::new(policy.deletion_cost_writes),
            carried,
            tx,
            _task: AbortOnDrop(task),
        })
    }

    /// After a round: plans and queues the writes for the pods read ([`deletion_cost::round`]),
    /// given each metric's value and target.
    pub fn after(
        &mut self,
        pods: &[PodEndpoint],
        fleet: &Fleet,
        values: &[(Option<f64>, f64)],
        now: f64,
    ) {
        let Ok(mut carried) = self.carried.lock() else {
            return;
        };
        carried.retain(|pod, _| pods.iter().any(|p| &p.name == pod));
        let (costs, near) = deletion_cost::round(fleet, values, |name| {
            let pod = pods.iter().find(|p| p.name == name && p.vouched)?;
            Some(carried.get(name).copied().or(pod.deletion_cost))
        });
        // Only a writer that is free takes a batch; a busy one is left to finish, and the
        // budget is not spent on writes that were never sent.
        let Ok(permit) = self.tx.try_reserve() else {
            return;
        };
        let writes = deletion_cost::plan(&costs, near, &mut self.budget, now);
        if writes.is_empty() {
            return;
        }
        for (pod, cost) in &writes {
            carried.insert(pod.clone(), *cost);
        }
        permit.send(writes);
    }
}

/// Writes one pod's cost as a merge patch of its annotation, bounded to [`WRITE_TIMEOUT`].
pub async fn patch_cost(api: &Api<Pod>, pod: &str, cost: i32) -> Result<(), String> {
    let params = PatchParams {
        field_manager: Some("infscale".to_owned()),
        ..PatchParams::default()
    };
    let patch = serde_json::json!({
        "metadata": {"annotations": {ANNOTATION: cost.to_string()}}
    });
    match tokio::time::timeout(
        WRITE_TIMEOUT,
        api.patch(pod, &params, &Patch::Merge(&patch)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {WRITE_TIMEOUT:?}")),
    }
}

/// Sends each batch's patches in turn; a failed one is forgotten so it is planned again.
async fn write_all(
    api: Api<Pod>,
    mut rx: mpsc::Receiver<Vec<(String, i32)>>,
    carried: Carried,
    report: impl Fn(Written),
) {
    while let Some(batch) = rx.recv().await {
        for (pod, cost) in batch {
            match patch_cost(&api, &pod, cost).await {
                Ok(()) => {
                    tracing::debug!(pod = %pod, cost, "deletion cost written");
                    report(Written::Ok);
                }
                Err(e) => {
                    tracing::warn!(pod = %pod, cost, error = %e, "deletion cost not written");
                    if let Ok(mut c) = carried.lock() {
                        if c.get(&pod) == Some(&cost) {
                            c.remove(&pod);
                        }
                    }
                    report(Written::Failed);
                }
            }
        }
    }
}
