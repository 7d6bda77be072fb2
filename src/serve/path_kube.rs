//! Serve mode in a cluster: the EndpointSlice that adds the activator pods to a model's Service.
//!
//! The slice is infscale's own: named `SERVICE-infscale`, labelled with the Service's name (so
//! kube-proxy and every EndpointSlice reader count it for the Service) and managed by
//! `infscale.io` (so the EndpointSlice controller leaves it alone, and the activator never counts
//! it as a replica), owned by the Service (deleted with it). It lists the ready activator pods,
//! those behind `activatorUrl`'s Service, at `activatorPort` under each of the Service's port
//! names, so any Service port reaches the activator. It is written by server-side apply (the same
//! call creates and updates it) and deleted when the activator leaves the path; a delete of a
//! slice already gone is no error. It is written only in the ScaledObject's namespace, for the
//! Service the trigger names.

use super::activators::Members;
use super::metadata::ServeMode;
use super::path::PathWriter;
use crate::edge::slices::{self, managed_for, INFSCALE, MANAGED_BY, SERVICE_NAME};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::Api;
use std::collections::BTreeMap;

/// The field manager of infscale's writes.
const MANAGER: &str = "infscale";

/// The name of infscale's slice for a Service.
pub fn slice_name(service: &str) -> String {
    format!("{service}-infscale")
}

/// Writes serve-mode slices through the Kubernetes API.
pub struct KubePaths {
    pub client: kube::Client,
}

impl PathWriter for KubePaths {
    fn write<'a>(
        &'a self,
        mode: &'a ServeMode,
        activator: Option<&'a Members>,
        in_path: bool,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            let slices: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &mode.namespace);
            let name = slice_name(&mode.service);
            if !in_path {
                return match slices.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(None),
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
                    Err(e) => Err(format!("deleting EndpointSlice {name}: {e}")),
                };
            }
            let services: Api<Service> = Api::namespaced(self.client.clone(), &mode.namespace);
            let service = services
                .get(&mode.service)
                .await
                .map_err(|e| format!("reading Service {}: {e}", mode.service))?;
            let addresses = activator_addresses(&self.client, activator).await?;
            if addresses.is_empty() {
                return Err("no ready activator pod to put in the path".to_owned());
            }
            let slice = slice_for(mode, &service, &addresses);
            slices
                .patch(
                    &name,
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(&slice),
                )
                .await
                .map_err(|e| format!("writing EndpointSlice {name}: {e}"))?;
            let port = service
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_ref())
                .and_then(|p| p.first())
                .map_or(80, |p| p.port);
            Ok(Some(mode.url.clone().unwrap_or_else(|| {
                format!("http://{}.{}.svc:{port}", mode.service, mode.namespace)
            })))
        })
    }
}

/// The slice that adds `addresses` (the activator pods) to `service`.
pub fn slice_for(mode: &ServeMode, service: &Service, addresses: &[String]) -> EndpointSlice {
    let labels = BTreeMap::from([
        (SERVICE_NAME.to_owned(), mode.service.clone()),
        (MANAGED_BY.to_owned(), INFSCALE.to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "infscale".to_owned(),
        ),
    ]);
    let owner = service.metadata.uid.clone().map(|uid| OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: mode.service.clone(),
        uid,
        ..OwnerReference::default()
    });
    let names: Vec<Option<String>> = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ports| ports.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_else(|| vec![None]);
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(slice_name(&mode.service)),
            namespace: Some(mode.namespace.clone()),
            labels: Some(labels),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        ports: Some(
            names
                .into_iter()
                .map(|name| EndpointPort {
                    name,
                    port: Some(i32::from(mode.activator_port)),
                    protocol: Some("TCP".into()),
                    ..EndpointPort::default()
                })
                .collect(),
        ),
        endpoints: Some(
            addresses
                .iter()
                .map(|a| Endpoint {
                    addresses: vec![a.clone()],
                    conditions: Some(EndpointConditions {
                        ready: Some(true),
                        ..EndpointConditions::default()
                    }),
                    ..Endpoint::default()
                })
                .collect(),
        ),
    }
}

/// The ready activator pods' IPv4 addresses: the ready endpoints of the slices the EndpointSlice
/// controller manages for `activatorUrl`'s Service, or the IP hosts of the URLs given.
async fn activator_addresses(
    client: &kube::Client,
    activator: Option<&Members>,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    match activator {
        None => return Err("serve mode needs activatorUrl".to_owned()),
        Some(Members::Urls(urls)) => {
            for u in urls {
                let host = u
                    .parse::<http::Uri>()
                    .ok()
                    .and_then(|u| u.host().map(str::to_owned));
                match host.filter(|h| h.parse::<std::net::Ipv4Addr>().is_ok()) {
                    Some(ip) => out.push(ip),
                    None => {
                        return Err(format!(
                            "activatorUrl {u}: serve mode needs an IPv4 address or a Service"
                        ))
                    }
                }
            }
        }
        Some(Members::Service {
            namespace, name, ..
        }) => {
            let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
            let list = api
                .list(&ListParams::default().labels(&format!("{SERVICE_NAME}={name}")))
                .await
                .map_err(|e| {
                    format!("listing the activator Service {name}'s EndpointSlices: {e}")
                })?;
            // As `serve` follows them: the controller's slices for the Service, IP addresses.
            for slice in list.items.iter().filter(|s| managed_for(s, name)) {
                if slice.address_type == "IPv4" {
                    out.extend(slices::ready_hosts(slice));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

    #[test]
    fn the_slice_names_every_activator_under_every_service_port() {
        let mode = ServeMode {
            namespace: "llm".into(),
            service: "chat".into(),
            url: None,
            activator_port: 8080,
            settle_s: 30.0,
        };
        let port = |name: &str, port: i32| ServicePort {
            name: Some(name.into()),
            port,
            ..ServicePort::default()
        };
        let service = Service {
            metadata: ObjectMeta {
                name: Some("chat".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(vec![port("http", 8000), port("metrics", 9000)]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        let addresses = ["10.0.0.7".to_owned(), "10.0.0.8".to_owned()];
        let s = slice_for(&mode, &service, &addresses);
        let labels = s.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[SERVICE_NAME], "chat");
        assert_eq!(labels[MANAGED_BY], INFSCALE);
        assert_eq!(s.metadata.name.as_deref(), Some("chat-infscale"));
        let owner = &s.metadata.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Service", "u-1")
        );
        let ports: Vec<(Option<String>, Option<i32>)> = s
            .ports
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.name, p.port))
            .collect();
        assert_eq!(
            ports,
            [
                (Some("http".into()), Some(8080)),
                (Some("metrics".into()), Some(8080))
            ]
        );
        let endpoints = s.endpoints.unwrap_or_default();
        assert_eq!(endpoints.len(), 2);
        assert!(endpoints
            .iter()
            .all(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true)));
        assert_eq!(endpoints[1].addresses, ["10.0.0.8"]);
    }
}
