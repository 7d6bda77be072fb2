//! `kubectl apply` into the API stand-in's store: each document (YAML, as a manifest or
//! [`super::kustomize`] gives it) put as the JSON object the API would hold, the kinds the store
//! knows (Pods, Services, Deployments, EndpointSlices); the others (Namespaces, RBAC,
//! ConfigMaps, PodDisruptionBudgets, ScaledObjects, ...) are skipped and named, so a test can
//! tell it installed everything that matters to it. An object already there is updated as
//! apply's merge updates it: the fields the document gives replace the stored ones (a
//! Deployment's `spec.replicas` too, as with a real apply), the others stay (a Service's
//! ClusterIP, a status). A field dropped from the document is not removed (apply's
//! last-applied bookkeeping is not modelled).

use super::kustomize::load;
use crate::common::kube::rest::merge;
use crate::common::kube::store::kind_home;
use crate::common::kube::Cluster;
use std::path::Path;

/// Kinds that live in no namespace.
const CLUSTER_SCOPED: [&str; 7] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
    "StorageClass",
    "APIService",
];

/// `Kind/namespace/name` of a document (`Kind/name` for a cluster-scoped kind), for what was
/// skipped.
fn named(doc: &serde_json::Value, ns: &str) -> String {
    let kind = doc["kind"].as_str().unwrap_or("?");
    let name = doc["metadata"]["name"].as_str().unwrap_or("?");
    if CLUSTER_SCOPED.contains(&kind) {
        format!("{kind}/{name}")
    } else {
        format!("{kind}/{ns}/{name}")
    }
}

/// `kubectl apply -n NS`: each document into `cluster`, in namespace `ns` when it names none
/// (it must not name another: kubectl refuses that; cluster-scoped kinds are skipped whatever
/// they say). Returns what was skipped, as `Kind/namespace/name` (`Kind/name` when
/// cluster-scoped).
pub fn apply_in(cluster: &Cluster, ns: &str, docs: &[serde_yaml::Value]) -> Vec<String> {
    let mut skipped = Vec::new();
    for doc in docs.iter().filter(|d| !d.is_null()) {
        let mut doc = serde_json::to_value(doc).expect("a YAML document as JSON");
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        let given = doc["metadata"]["namespace"].as_str().map(str::to_owned);
        if let Some(g) = given
            .as_ref()
            .filter(|_| !CLUSTER_SCOPED.contains(&kind.as_str()))
        {
            assert_eq!(
                g,
                ns,
                "{}: the document's namespace is not the one applied to",
                named(&doc, g)
            );
        }
        if kind_home(&kind).is_none() {
            skipped.push(named(&doc, ns));
            continue;
        }
        doc["metadata"]["namespace"] = serde_json::json!(ns);
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("a {kind} with no name"))
            .to_owned();
        let merged = cluster.update(&kind, ns, &name, |stored| {
            merge(stored, &doc);
            true
        });
        if !merged {
            cluster.put(doc);
        }
    }
    skipped
}

/// `kubectl apply` of documents that each name their namespace (`default` for one that does
/// not). Returns what was skipped, as `Kind/namespace/name`.
pub fn apply(cluster: &Cluster, docs: &[serde_yaml::Value]) -> Vec<String> {
    let mut skipped = Vec::new();
    for doc in docs {
        let ns = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        skipped.extend(apply_in(cluster, &ns, std::slice::from_ref(doc)));
    }
    skipped
}

/// `kubectl apply -f FILE` of a multi-document YAML file.
pub fn apply_file(cluster: &Cluster, path: impl AsRef<Path>) -> Vec<String> {
    apply(cluster, &load(path.as_ref()))
}
