//! What serve mode may write, checked before every write and delete of a `SERVICE-infscale`
//! slice: whoever can create a ScaledObject chooses its trigger's `service`, and a slice
//! labelled with a Service's name redirects that Service's clients, so a write is refused
//! unless the Service opted in, and a slice by infscale's name is only touched when it is
//! infscale's own.
//!
//! - A Service opts in with the label [`OPT_IN`]` = "true"`, which a namespace admin sets (the
//!   examples' Services carry it). The API server's own Service (`default/kubernetes`) and every
//!   Service of the system namespaces are refused whatever their labels.
//! - A slice is infscale's when it carries infscale's managed-by label, an owner reference to
//!   this very Service (its uid), and, where the API reports who wrote its fields, infscale's
//!   field manager among them. Any other slice by that name is someone else's: it is reported
//!   and left alone, never patched or deleted.
//! - The writer of infscale's slice is named on it ([`WRITER`]): a trigger writing without a
//!   Lease (an API that has none, or refuses serve one) leaves a slice another live trigger
//!   wrote to that trigger, and never deletes it.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label a namespace admin sets on a Service (`"true"`) to let serve mode add the activator
/// to it.
pub const OPT_IN: &str = "infscale.io/serve-mode";

/// The annotation naming the trigger that wrote infscale's slice (`NAMESPACE/SCALEDOBJECT/ID`).
pub const WRITER: &str = "infscale.io/writer";

/// The annotation a trigger writing without a Lease renews (Unix seconds): a slice whose writer
/// has not renewed it for [`STALE_AFTER_S`] is taken over by another trigger.
pub const RENEWED: &str = "infscale.io/renewed";

/// How old a lease-less writer's renewal may be before another trigger takes its slice over:
/// three resyncs (the writer renews at each), with room for clocks that disagree.
pub const STALE_AFTER_S: u64 = 3 * super::path::RESYNC.as_secs();

/// Namespaces whose Services serve mode never writes into.
const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The field manager of infscale's writes.
pub const MANAGER: &str = "infscale";

/// Whether serve mode may write Service `name` in `namespace`: `Err` says why not, and how to
/// opt in.
pub fn opted_in(service: &Service, namespace: &str, name: &str) -> Result<(), String> {
    if SYSTEM_NAMESPACES.contains(&namespace) || (namespace == "default" && name == "kubernetes") {
        return Err(format!(
            "service: {namespace}/{name} is a system Service; serve mode never adds the \
             activator to it"
        ));
    }
    let label = service
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OPT_IN))
        .map(String::as_str);
    if label != Some("true") {
        return Err(format!(
            "service: Service {namespace}/{name} has not opted in to serve mode: a namespace \
             admin labels it {OPT_IN}=\"true\" (kubectl label service {name} -n {namespace} \
             {OPT_IN}=true)"
        ));
    }
    Ok(())
}

/// Who a slice by infscale's name belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// infscale's own, written by this trigger (or one that named no writer).
    Mine,
    /// infscale's own, last written by another trigger (its [`WRITER`]) at `renewed` (Unix
    /// seconds, when a lease-less writer said).
    Trigger {
        writer: String,
        renewed: Option<u64>,
    },
    /// Someone else's: why it is not infscale's.
    Foreign(String),
}

/// Whose `slice` is, for Service `service` and the trigger named `me`.
pub fn owner(slice: &EndpointSlice, service: &Service, me: &str) -> Owner {
    let name = slice.metadata.name.clone().unwrap_or_default();
    if !crate::edge::slices::infscales(slice) {
        return Owner::Foreign(format!(
            "EndpointSlice {name} is not managed by {} (its {} label)",
            crate::edge::slices::INFSCALE,
            crate::edge::slices::MANAGED_BY
        ));
    }
    let uid = service.metadata.uid.as_deref();
    let owned = slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Service" && Some(o.uid.as_str()) == uid && uid.is_some());
    if !owned {
        return Owner::Foreign(format!(
            "EndpointSlice {name} has no owner reference to Service {} (uid {})",
            service.metadata.name.as_deref().unwrap_or_default(),
            uid.unwrap_or("unknown")
        ));
    }
    if let Some(fields) = &slice.metadata.managed_fields {
        if !fields.is_empty() && !fields.iter().any(|f| f.manager.as_deref() == Some(MANAGER)) {
            return Owner::Foreign(format!(
                "EndpointSlice {name}'s fields were written by {}, never by {MANAGER}",
                fields
                    .iter()
                    .filter_map(|f| f.manager.as_deref())
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let notes = slice.metadata.annotations.as_ref();
    match notes.and_then(|a| a.get(WRITER)) {
        Some(w) if w != me => Owner::Trigger {
            writer: infscale_core::limits::cut(w, 256),
            renewed: notes
                .and_then(|a| a.get(RENEWED))
                .and_then(|r| r.parse().ok()),
        },
        _ => Owner::Mine,
    }
}

/// Whether a lease-less writer's renewal at `renewed` is stale at `now` (Unix seconds).
pub fn stale(renewed: Option<u64>, now: u64) -> bool {
    renewed.is_none_or(|r| now.saturating_sub(r) > STALE_AFTER_S)
}

/// Now, in Unix seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, ObjectMeta, OwnerReference,
    };
    use std::collections::BTreeMap;

    fn service(labels: &[(&str, &str)]) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("chat".into()),
                uid: Some("u-1".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Service::default()
        }
    }

    fn slice(managed_by: &str, uid: &str, writer: Option<&str>) -> EndpointSlice {
        let mut notes = BTreeMap::new();
        if let Some(w) = writer {
            notes.insert(WRITER.to_owned(), w.to_owned());
        }
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some("chat-infscale".into()),
                labels: Some(BTreeMap::from([(
                    crate::edge::slices::MANAGED_BY.to_owned(),
                    managed_by.to_owned(),
                )])),
                annotations: Some(notes),
                owner_references: Some(vec![OwnerReference {
                    kind: "Service".into(),
                    name: "chat".into(),
                    uid: uid.into(),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            ..EndpointSlice::default()
        }
    }

    #[test]
    fn only_a_service_labelled_in_a_namespace_of_its_own_is_written() {
        let on = service(&[(OPT_IN, "true")]);
        assert_eq!(opted_in(&on, "llm", "chat"), Ok(()));
        let off = opted_in(&service(&[]), "llm", "victim").unwrap_err();
        assert!(off.contains(OPT_IN) && off.contains("llm/victim"), "{off}");
        assert!(opted_in(&service(&[(OPT_IN, "yes")]), "llm", "chat").is_err());
        assert!(opted_in(&on, "default", "kubernetes").is_err());
        assert!(opted_in(&on, "kube-system", "kube-dns").is_err());
        assert_eq!(opted_in(&on, "default", "chat"), Ok(()));
    }

    #[test]
    fn a_slice_is_infscales_by_label_owner_and_manager_not_by_name() {
        let svc = service(&[]);
        assert_eq!(
            owner(&slice("infscale.io", "u-1", None), &svc, "me"),
            Owner::Mine
        );
        assert!(matches!(
            owner(&slice("team/mesh", "u-1", None), &svc, "me"),
            Owner::Foreign(_)
        ));
        assert!(matches!(
            owner(&slice("infscale.io", "u-2", None), &svc, "me"),
            Owner::Foreign(_)
        ));
        let mut by_kubectl = slice("infscale.io", "u-1", None);
        by_kubectl.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..ManagedFieldsEntry::default()
        }]);
        assert!(matches!(owner(&by_kubectl, &svc, "me"), Owner::Foreign(_)));
        assert_eq!(
            owner(&slice("infscale.io", "u-1", Some("me")), &svc, "me"),
            Owner::Mine
        );
        assert_eq!(
            owner(&slice("infscale.io", "u-1", Some("other")), &svc, "me"),
            Owner::Trigger {
                writer: "other".into(),
                renewed: None
            }
        );
    }

    #[test]
    fn a_lease_less_writer_is_stale_after_three_resyncs() {
        assert!(!stale(Some(1_000), 1_000 + STALE_AFTER_S));
        assert!(stale(Some(1_000), 1_001 + STALE_AFTER_S));
        assert!(stale(None, 0));
        assert!(!stale(Some(2_000), 1_000), "a clock behind is not stale");
    }
}
