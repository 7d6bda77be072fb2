//! Serve mode in a cluster: the EndpointSlice that adds the activator pods to a model's Service.
//!
//! The slice is infscale's own: named `SERVICE-infscale`, labelled with the Service's name (so
//! kube-proxy and every EndpointSlice reader count it for the Service) and managed by
//! `infscale.io` (so the EndpointSlice controller leaves it alone, and the activator never counts
//! it as a replica), owned by the Service (deleted with it). It lists the ready activator pods,
//! those behind `activatorUrl`'s Service, under the name of the Service port clients call
//! (`servicePort`, else the Service's first), at a port of the model's own: kube-proxy then
//! sends the Service's connections to the activator at that port, and the port tells the
//! activator which model a request is for whatever name, address or `Host` the client used.
//! The activator learns the model from the slice itself ([`crate::activator::learn`]); its
//! annotations carry the trigger's bounds (`maxHeld`, `holdTimeoutSeconds`).
//!
//! The model's port comes from `serve --activator-ports`: the one the model's slice already
//! has, else the first free one from a hash of `NAMESPACE/SERVICE`, skipping ports other
//! Services' slices name. Before a slice sends clients to an activator pod, that pod is asked
//! at that port whether the port places this model (a probe naming the model): a pod that has
//! not learned the slice yet is listed not ready (kube-proxy sends it nothing), and the slice is
//! written again once it answers; a pod that says the port is another model's makes this model
//! move to another port. With `activatorPort` the model shares that port, placed by its names.
//!
//! One writer per Service: the trigger that holds the Service's lease ([`super::lease`])
//! writes; every other trigger naming the Service (another `serve` replica, another
//! ScaledObject) only observes. The slice is written by server-side apply (the same call
//! creates and updates it) and deleted when the activator leaves the path; a delete of a slice
//! already gone is no error. It is written only in the ScaledObject's namespace, for the
//! Service the trigger names, and only where [`super::slice_guard`] allows: a Service that
//! opted in, a slice by infscale's name that is infscale's own (anything else there is
//! reported and left alone). Where no Lease can be kept, a slice another live trigger wrote is
//! left to it. The activator pods written are the ready endpoints of the activator's Service
//! that are the addresses of pods its selector selects, pod addresses of the expected kind
//! ([`slices::pod_ip`]), at most [`MAX_ACTIVATORS`]; `activatorPort` must be a port of
//! `--activator-ports`.

use super::activators::Members;
use super::lease::{self, Keeper, LeaseSettings, Role};
use super::metadata::ServeMode;
use super::path::{PathSession, PathWriter, WriteError, Wrote};
use super::slice_guard::{self, Owner, MANAGER, RENEWED, WRITER};
use crate::activator::proxy::{ACTIVATOR_HEADER, COUNTS_HEADER, MODEL_HEADER, PROBE_HEADER};
use crate::edge::slices::{
    self, managed_for, HOLD_TIMEOUT_ANNOTATION, INFSCALE, MANAGED_BY, MAX_HELD_ANNOTATION,
    SERVICE_NAME,
};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::Api;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::time::Duration;
use tokio::sync::watch;

/// At most this many activator pods are written into one model's slice (the shipped activator
/// runs two); the rest, in address order, are left out.
pub const MAX_ACTIVATORS: usize = 100;

/// How long a trigger without a Lease leaves a slice another trigger wrote before it reads the
/// slice again.
const DEFER_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// One direct probe of an activator pod's timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Ports tried for a model in one write before it waits for the next.
const MOVES_PER_WRITE: usize = 4;

/// How often, and how many times, the activator pods are asked again after a slice they have
/// not learned yet was written (a watch event away: milliseconds).
const LEARN_POLL: Duration = Duration::from_millis(100);
const LEARN_POLLS: usize = 10;

/// The name of infscale's slice for a Service.
pub fn slice_name(service: &str) -> String {
    format!("{service}-infscale")
}

/// How serve mode places models on the activator, and who writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeModeSettings {
    /// The ports a model may be given (the activator's `--model-ports`).
    pub ports: RangeInclusive<u16>,
    /// The leases that make one writer per Service; `None`: every trigger writes.
    pub lease: Option<LeaseSettings>,
    /// Whether loopback addresses may be activator pods' (a cluster on one machine's loopback,
    /// as the tests' stand-in; never a real cluster's).
    pub loopback_pods: bool,
}

impl Default for ServeModeSettings {
    fn default() -> Self {
        ServeModeSettings {
            ports: crate::activator::learn::DEFAULT_MODEL_PORTS,
            lease: Some(LeaseSettings::default()),
            loopback_pods: false,
        }
    }
}

/// Writes serve-mode slices through the Kubernetes API.
pub struct KubePaths {
    pub client: kube::Client,
    pub settings: ServeModeSettings,
}

impl PathWriter for KubePaths {
    fn session(&self, mode: &ServeMode, activator: Option<Members>) -> Box<dyn PathSession> {
        let keeper = self.settings.lease.clone().map(|settings| {
            let annotations = BTreeMap::from([
                (
                    "infscale.io/service".to_owned(),
                    format!("{}/{}", mode.namespace, mode.service),
                ),
                (
                    "infscale.io/scaled-object".to_owned(),
                    format!("{}/{}", mode.namespace, mode.scaled_object),
                ),
            ]);
            let holder = settings.identity(&mode.namespace, &mode.scaled_object, &mode.trigger);
            lease::keep(
                self.client.clone(),
                settings,
                lease::lease_name(&mode.namespace, &mode.service),
                holder,
                annotations,
            )
        });
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(PROBE_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let activator_ref = activator.clone();
        Box::new(KubeSession {
            client: self.client.clone(),
            mode: mode.clone(),
            activator,
            ports: self.settings.ports.clone(),
            loopback: self.settings.loopback_pods,
            uncoordinated: false,
            deferred: None,
            http,
            port: None,
            avoid: BTreeSet::new(),
            verified: BTreeSet::new(),
            // Known once the Service is read: `serviceUrl` is checked against it first.
            probe_url: None,
            keeper,
            members: activator_members(self.client.clone(), activator_ref.as_ref()),
        })
    }
}

/// One trigger's writer of its Service's slice.
struct KubeSession {
    client: kube::Client,
    mode: ServeMode,
    activator: Option<Members>,
    ports: RangeInclusive<u16>,
    /// Whether loopback addresses may be activator pods'.
    loopback: bool,
    /// Whether this write goes without a Lease ([`Role::Uncoordinated`]).
    uncoordinated: bool,
    /// Until when, and to whom, a lease-less trigger leaves the slice (another trigger wrote it).
    deferred: Option<(tokio::time::Instant, String)>,
    http: reqwest::Client,
    /// The model's port, once chosen.
    port: Option<u16>,
    /// Ports an activator pod said are another model's.
    avoid: BTreeSet<u16>,
    /// The activator pods seen holding the model, at the port they held it at: one that then
    /// misses a probe (a slow answer, a timeout) stays listed ready; only one that says it does
    /// not hold the model, or leaves the activator's endpoints, is taken out.
    verified: BTreeSet<(String, u16)>,
    /// Where the Service is probed, once known.
    probe_url: Option<String>,
    keeper: Option<Keeper>,
    /// Changes whenever the activator Service's ready pods change: the slice is written again
    /// at once, so a replaced activator pod is not left in a model's path for a resync.
    members: Option<Followed>,
}

/// The activator Service's ready pods, followed (the task ends with the session).
struct Followed {
    changes: watch::Receiver<u64>,
    _task: super::AbortOnDrop,
}

/// Follows the ready endpoints of the activator's Service (when `activatorUrl` names one).
fn activator_members(client: kube::Client, activator: Option<&Members>) -> Option<Followed> {
    let Some(Members::Service {
        namespace, name, ..
    }) = activator
    else {
        return None;
    };
    let api: Api<EndpointSlice> = Api::namespaced(client, namespace);
    let (tx, changes) = watch::channel(0u64);
    let name = name.clone();
    let task = tokio::spawn(async move {
        use futures::StreamExt;
        use kube::runtime::{reflector, watcher, WatchStreamExt};
        let (store, writer) = reflector::store();
        let config = watcher::Config::default().labels(&format!(
            "{SERVICE_NAME}={name},{MANAGED_BY}={}",
            slices::CONTROLLER
        ));
        let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
        let mut stream = std::pin::pin!(stream);
        let mut last: Option<Vec<String>> = None;
        while let Some(event) = stream.next().await {
            if !matches!(
                event,
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone)
            ) {
                continue;
            }
            let mut ready: Vec<String> = store
                .state()
                .iter()
                .filter(|s| managed_for(s, &name))
                .flat_map(|s| slices::ready_hosts(s).collect::<Vec<_>>())
                .collect();
            ready.sort();
            if last.as_ref().is_some_and(|l| *l != ready) {
                tx.send_modify(|v| *v = v.wrapping_add(1));
            }
            last = Some(ready);
        }
    });
    Some(Followed {
        changes,
        _task: super::AbortOnDrop(task),
    })
}

/// What an activator pod said, asked at a port whether it places this model.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// It does.
    Holds,
    /// The port is another model's (named when the pod said).
    Taken(String),
    /// It has no route for the model at all, and why.
    NotServed(String),
    /// No answer (not listening there yet, or down).
    Silent(String),
}

impl PathSession for KubeSession {
    fn write(&mut self, in_path: bool) -> BoxFuture<'_, Result<Wrote, WriteError>> {
        Box::pin(async move {
            let role = self
                .keeper
                .as_ref()
                .map_or(Role::Writer, |k| k.role.borrow().clone());
            self.uncoordinated = matches!(role, Role::Uncoordinated(_));
            if !self.uncoordinated {
                self.deferred = None;
            }
            if let Some((until, holder)) = &self.deferred {
                if tokio::time::Instant::now() < *until {
                    return Ok(Wrote::Deferred {
                        probe: self.probe_url.clone(),
                        holder: holder.clone(),
                    });
                }
                self.deferred = None;
            }
            match role {
                Role::Writer | Role::Uncoordinated(_) => {}
                Role::Observer { holder } => {
                    if self.probe_url.is_none() {
                        if let Ok(service) = self.service().await {
                            if let Ok((_, port)) = serving_port(&service, &self.mode) {
                                self.probe_url = Some(self.service_url(&service, port)?);
                            }
                        }
                    }
                    return Ok(Wrote::Deferred {
                        probe: self.probe_url.clone(),
                        holder,
                    });
                }
                Role::Unknown(why) => {
                    return Err(WriteError::other(format!(
                        "who writes this Service's slice is not known: {why}"
                    )))
                }
            }
            if in_path {
                self.write_in().await
            } else {
                self.take_out().await.map(|()| Wrote::Done(None))
            }
        })
    }

    fn changed(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let role = async {
                let alive = match self.keeper.as_mut() {
                    Some(k) => k.role.changed().await.is_ok(),
                    None => false,
                };
                if !alive {
                    std::future::pending::<()>().await;
                }
            };
            let members = async {
                let alive = match self.members.as_mut() {
                    Some(m) => m.changes.changed().await.is_ok(),
                    None => false,
                };
                if !alive {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = role => {}
                _ = members => {}
            }
        })
    }
}

impl KubeSession {
    fn slices(&self) -> Api<EndpointSlice> {
        Api::namespaced(self.client.clone(), &self.mode.namespace)
    }

    async fn service(&self) -> Result<Service, String> {
        let services: Api<Service> = Api::namespaced(self.client.clone(), &self.mode.namespace);
        services
            .get(&self.mode.service)
            .await
            .map_err(|e| format!("reading Service {}: {e}", self.mode.service))
    }

    /// Where the Service is probed: `serviceUrl` (when its address and port are the Service's:
    /// else an error naming the key), else its ClusterIP at `port` (what kube-proxy balances,
    /// with no name to resolve), else (a headless Service) its DNS name.
    fn service_url(&self, service: &Service, port: i32) -> Result<String, WriteError> {
        let spec = service.spec.as_ref();
        let ips: Vec<std::net::IpAddr> = spec
            .into_iter()
            .flat_map(|s| s.cluster_ips.iter().flatten().chain(&s.cluster_ip))
            .filter_map(|ip| ip.parse().ok())
            .collect();
        if let Some(url) = &self.mode.url {
            let ports: Vec<u16> = spec
                .into_iter()
                .flat_map(|s| s.ports.iter().flatten())
                .filter_map(|p| u16::try_from(p.port).ok())
                .collect();
            super::metadata::service_url_fits(url, &self.mode.service, &ips, &ports)
                .map_err(|e| WriteError::metadata("serviceUrl", e))?;
            return Ok(url.clone());
        }
        Ok(match ips.first() {
            Some(std::net::IpAddr::V4(ip)) => format!("http://{ip}:{port}"),
            Some(std::net::IpAddr::V6(ip)) => format!("http://[{ip}]:{port}"),
            None => format!(
                "http://{}.{}.svc:{port}",
                self.mode.service, self.mode.namespace
            ),
        })
    }

    /// This trigger's name on the slice it writes ([`WRITER`]).
    fn me(&self) -> String {
        format!(
            "{}/{}/{}",
            self.mode.namespace, self.mode.scaled_object, self.mode.trigger
        )
    }

    /// The slice by infscale's name, and whose it is (`None`: there is none).
    async fn existing(&self, service: &Service) -> Result<Option<(EndpointSlice, Owner)>, String> {
        let name = slice_name(&self.mode.service);
        let slice = self
            .slices()
            .get_opt(&name)
            .await
            .map_err(|e| format!("reading EndpointSlice {name}: {e}"))?;
        Ok(slice.map(|s| {
            let owner = slice_guard::owner(&s, service, &self.me());
            (s, owner)
        }))
    }

    /// Whether a lease-less trigger leaves the slice to the trigger that wrote it (live), and
    /// remembers so for [`DEFER_FOR`].
    fn defer_to(&mut self, owner: &Owner) -> Option<String> {
        let Owner::Trigger { writer, renewed } = owner else {
            return None;
        };
        if !self.uncoordinated || slice_guard::stale(*renewed, slice_guard::unix_now()) {
            return None;
        }
        self.deferred = Some((tokio::time::Instant::now() + DEFER_FOR, writer.clone()));
        Some(writer.clone())
    }

    async fn take_out(&mut self) -> Result<(), WriteError> {
        let name = slice_name(&self.mode.service);
        let service = match self.service().await {
            Ok(s) => s,
            // No Service: its slices went with it (owner references).
            Err(e) if e.contains("404") || e.contains("NotFound") => return Ok(()),
            Err(e) => return Err(WriteError::other(e)),
        };
        let (slice, owner) = match self.existing(&service).await.map_err(WriteError::other)? {
            None => return Ok(()),
            Some(found) => found,
        };
        match &owner {
            Owner::Foreign(why) => {
                tracing::debug!(service = %self.mode.service, why = %why, "serve mode: a slice by infscale's name is not infscale's; left alone");
                return Ok(());
            }
            // Another trigger's, written without a Lease: it takes its own out.
            Owner::Trigger { .. } if self.uncoordinated => {
                if self.defer_to(&owner).is_some() {
                    return Ok(());
                }
            }
            Owner::Trigger { .. } | Owner::Mine => {}
        }
        let mut params = DeleteParams::default();
        if let Some(uid) = slice.metadata.uid.clone() {
            params.preconditions = Some(kube::api::Preconditions {
                uid: Some(uid),
                resource_version: slice.metadata.resource_version.clone(),
            });
        }
        match self.slices().delete(&name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(WriteError::other(format!(
                "deleting EndpointSlice {name}: {e}"
            ))),
        }
    }

    async fn write_in(&mut self) -> Result<Wrote, WriteError> {
        // Refusals are reported to KEDA as a missing route is: the target never goes idle.
        let refused = |why: String| WriteError {
            why: infscale_core::limits::cut(&why, infscale_core::limits::ERROR_TEXT_BYTES),
            no_route: true,
            key: None,
        };
        if let Some(p) = self.mode.activator_port.filter(|p| !self.ports.contains(p)) {
            return Err(refused(format!(
                "activatorPort: {p} is not one of the activator's model ports (serve \
                 --activator-ports {}-{})",
                self.ports.start(),
                self.ports.end()
            )));
        }
        let service = self.service().await.map_err(WriteError::other)?;
        slice_guard::opted_in(&service, &self.mode.namespace, &self.mode.service)
            .map_err(refused)?;
        let (port_name, service_port) =
            serving_port(&service, &self.mode).map_err(WriteError::other)?;
        self.probe_url = Some(self.service_url(&service, service_port)?);
        match self.existing(&service).await.map_err(WriteError::other)? {
            Some((_, Owner::Foreign(why))) => {
                return Err(refused(format!(
                    "EndpointSlice {} in namespace {} is not infscale's ({why}); serve mode \
                     leaves it alone: delete or rename it so that serve can write its own",
                    slice_name(&self.mode.service),
                    self.mode.namespace
                )))
            }
            Some((_, owner)) => {
                if let Some(holder) = self.defer_to(&owner) {
                    return Ok(Wrote::Deferred {
                        probe: self.probe_url.clone(),
                        holder,
                    });
                }
            }
            None => {}
        }
        let addresses = activator_addresses(&self.client, self.activator.as_ref(), self.loopback)
            .await
            .map_err(WriteError::other)?;
        if addresses.is_empty() {
            return Err(WriteError::other(
                "no ready activator pod to put in the path",
            ));
        }
        let model = format!("{}/{}", self.mode.namespace, self.mode.service);
        let mut verdicts = Vec::new();
        let mut port = 0;
        for _ in 0..MOVES_PER_WRITE {
            port = match self.mode.activator_port {
                Some(p) => p,
                None => self.model_port().await.map_err(WriteError::other)?,
            };
            verdicts = self.ask(&addresses, port, &model).await;
            let known = addresses
                .iter()
                .any(|a| self.verified.contains(&(a.clone(), port)));
            if !verdicts.contains(&Verdict::Holds) && !known {
                // No pod holds the model here yet: it learns the model from the slice, so the
                // slice goes first, naming every pod not ready (kube-proxy sends them nothing),
                // and the pods are asked again as they take it.
                let none: Vec<(String, bool)> =
                    addresses.iter().map(|a| (a.clone(), false)).collect();
                self.apply(&service, port_name.clone(), port, &none).await?;
                for _ in 0..LEARN_POLLS {
                    tokio::time::sleep(LEARN_POLL).await;
                    verdicts = self.ask(&addresses, port, &model).await;
                    if verdicts
                        .iter()
                        .any(|v| matches!(v, Verdict::Holds | Verdict::Taken(_)))
                    {
                        break;
                    }
                }
            }
            let taken = verdicts.iter().any(|v| matches!(v, Verdict::Taken(_)));
            if !taken || self.mode.activator_port.is_some() {
                break;
            }
            // Another model's port: move.
            tracing::info!(service = %self.mode.service, port, "serve mode: an activator pod says this port is another model's; moving");
            self.avoid.insert(port);
            self.port = None;
        }
        // A pod not heard from yet (a new one, learning the model from the slice as it starts)
        // is asked again for a moment, so it joins now rather than at the next resync.
        let silent_new = |v: &[Verdict], verified: &BTreeSet<(String, u16)>| {
            addresses.iter().zip(v).any(|(a, v)| {
                matches!(v, Verdict::Silent(_)) && !verified.contains(&(a.clone(), port))
            })
        };
        if verdicts.contains(&Verdict::Holds) && silent_new(&verdicts, &self.verified) {
            for _ in 0..LEARN_POLLS {
                tokio::time::sleep(LEARN_POLL).await;
                verdicts = self.ask(&addresses, port, &model).await;
                if !silent_new(&verdicts, &self.verified) {
                    break;
                }
            }
        }
        let ready: Vec<(String, bool)> = addresses
            .iter()
            .zip(&verdicts)
            .map(|(a, v)| {
                let seen = (a.clone(), port);
                let holds = match v {
                    Verdict::Holds => {
                        self.verified.insert(seen);
                        true
                    }
                    Verdict::Silent(_) => self.verified.contains(&seen),
                    Verdict::Taken(_) | Verdict::NotServed(_) => {
                        self.verified.remove(&seen);
                        false
                    }
                };
                (a.clone(), holds)
            })
            .collect();
        // Pods no longer among the activator's endpoints are forgotten.
        self.verified
            .retain(|(a, p)| *p == port && addresses.contains(a));
        self.apply(&service, port_name, port, &ready).await?;
        if ready.iter().any(|(_, r)| *r) {
            return Ok(Wrote::Done(self.probe_url.clone()));
        }
        let said: Vec<String> = addresses
            .iter()
            .zip(&verdicts)
            .take(3)
            .map(|(a, v)| match v {
                Verdict::Holds => format!("{a}: holds it"),
                Verdict::Taken(owner) => format!("{a}: the port is {owner}'s"),
                Verdict::NotServed(why) => format!("{a}: {why}"),
                Verdict::Silent(why) => format!("{a}: {why}"),
            })
            .collect();
        Err(WriteError {
            why: infscale_core::limits::cut(
                &format!(
                    "no activator pod holds {model} at port {port} (does the activator serve \
                     namespace {}? see its /routes): {}",
                    self.mode.namespace,
                    said.join("; ")
                ),
                infscale_core::limits::ERROR_TEXT_BYTES,
            ),
            no_route: true,
            key: None,
        })
    }

    /// What each activator pod says of `model` at `port`.
    async fn ask(&self, addresses: &[String], port: u16, model: &str) -> Vec<Verdict> {
        futures::future::join_all(
            addresses
                .iter()
                .map(|a| verdict(&self.http, a, port, model, &self.mode.counts_host)),
        )
        .await
    }

    /// Writes the slice naming `addresses` (each ready or not) at `port`.
    async fn apply(
        &self,
        service: &Service,
        port_name: Option<String>,
        port: u16,
        addresses: &[(String, bool)],
    ) -> Result<(), WriteError> {
        let name = slice_name(&self.mode.service);
        let mut slice = slice_for(&self.mode, service, port_name, port, addresses);
        let notes = slice.metadata.annotations.get_or_insert_with(BTreeMap::new);
        notes.insert(WRITER.to_owned(), self.me());
        if self.uncoordinated {
            notes.insert(RENEWED.to_owned(), slice_guard::unix_now().to_string());
        }
        self.slices()
            .patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&slice),
            )
            .await
            .map(|_| ())
            .map_err(|e| WriteError::other(format!("writing EndpointSlice {name}: {e}")))
    }

    /// The model's port: the one chosen before, or the one its slice names (a scaler that
    /// restarted), or the first free one from the model's hash.
    async fn model_port(&mut self) -> Result<u16, String> {
        if let Some(p) = self.port {
            return Ok(p);
        }
        let ours = slice_name(&self.mode.service);
        if let Ok(Some(slice)) = self.slices().get_opt(&ours).await {
            let named = slice_port(&slice).filter(|p| {
                slices::infscales(&slice) && self.ports.contains(p) && !self.avoid.contains(p)
            });
            if let Some(p) = named {
                self.port = Some(p);
                return Ok(p);
            }
        }
        // Ports other Services' slices name, in every namespace. A list the API refuses (the
        // scaler confined to some namespaces) only costs a first guess: the activator answers a
        // port another model holds with 409, and the model moves on.
        let all: Api<EndpointSlice> = Api::all(self.client.clone());
        let items = match all
            .list(&ListParams::default().labels(&format!("{MANAGED_BY}={INFSCALE}")))
            .await
        {
            Ok(list) => list.items,
            Err(e) => {
                tracing::warn!(service = %self.mode.service, error = %e, "serve mode: cannot list infscale's EndpointSlices in every namespace; choosing the model's port from its hash alone");
                Vec::new()
            }
        };
        let taken: BTreeSet<u16> = items
            .iter()
            .filter(|s| {
                let labels = s.metadata.labels.as_ref();
                let service = labels.and_then(|l| l.get(SERVICE_NAME));
                !(s.metadata.namespace.as_deref() == Some(&self.mode.namespace)
                    && service == Some(&self.mode.service))
            })
            .filter_map(slice_port)
            .collect();
        let p = first_free(
            &self.ports,
            &format!("{}/{}", self.mode.namespace, self.mode.service),
            |p| taken.contains(&p) || self.avoid.contains(&p),
        )
        .ok_or_else(|| {
            format!(
                "no free activator port in {}-{}",
                self.ports.start(),
                self.ports.end()
            )
        })?;
        self.port = Some(p);
        Ok(p)
    }
}

/// A slice's first port.
fn slice_port(slice: &EndpointSlice) -> Option<u16> {
    slice
        .ports
        .as_ref()?
        .first()?
        .port
        .and_then(|p| u16::try_from(p).ok())
}

/// The first port of `range`, from where `model`'s hash falls, that `taken` does not hold.
fn first_free(
    range: &RangeInclusive<u16>,
    model: &str,
    taken: impl Fn(u16) -> bool,
) -> Option<u16> {
    let (lo, hi) = (u32::from(*range.start()), u32::from(*range.end()));
    if lo > hi {
        return None;
    }
    let len = hi - lo + 1;
    let hash = model.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (0..len)
        .map(|i| (lo + (hash % len + i) % len) as u16)
        .find(|p| !taken(*p))
}

/// The Service port clients call: the one `servicePort` names (by name or number), else the
/// first; its name (as the slice's port is named) and number (where the Service is probed).
fn serving_port(service: &Service, mode: &ServeMode) -> Result<(Option<String>, i32), String> {
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let found = match &mode.service_port {
        None => ports.first(),
        Some(want) => ports
            .iter()
            .find(|p| p.name.as_deref() == Some(want.as_str()) || p.port.to_string() == *want),
    };
    match found {
        Some(p) => Ok((p.name.clone(), p.port)),
        None => Err(match &mode.service_port {
            Some(want) => format!("Service {} has no port {want:?}", mode.service),
            None => format!("Service {} has no port", mode.service),
        }),
    }
}

/// Asks the activator pod at `address` whether `port` places `model`, counted under `counts`.
async fn verdict(
    http: &reqwest::Client,
    address: &str,
    port: u16,
    model: &str,
    counts: &str,
) -> Verdict {
    let answer = http
        .get(format!("http://{address}:{port}/"))
        .header(PROBE_HEADER, "1")
        .header(MODEL_HEADER, model)
        .send()
        .await;
    let r = match answer {
        Ok(r) => r,
        Err(e) => return Verdict::Silent(crate::edge::source::cause(&e).to_string()),
    };
    if !r.headers().contains_key(ACTIVATOR_HEADER) {
        return Verdict::Silent(format!(
            "HTTP status {} from something not the activator",
            r.status()
        ));
    }
    let owner = r
        .headers()
        .get(MODEL_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let counted = r
        .headers()
        .get(COUNTS_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match r.status().as_u16() {
        200..=299 => match counted {
            Some(c) if c != counts => Verdict::NotServed(infscale_core::limits::cut(
                &format!(
                    "the activator counts {model} under {c:?}, but this trigger reads \
                     {counts:?}: make activatorHost and the activator's route agree (without a \
                     route of its own in the activator's file, leave activatorHost out)"
                ),
                infscale_core::limits::FAILURE_TEXT_BYTES,
            )),
            _ => Verdict::Holds,
        },
        409 => Verdict::Taken(owner.unwrap_or_else(|| "another model".to_owned())),
        s => {
            // Its first 4 KiB, within 1 s: the address answering may be anyone's.
            let text = crate::edge::source::error_body(http::Response::from(r).into_body()).await;
            let why = serde_json::from_slice::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("HTTP status {s}"));
            Verdict::NotServed(infscale_core::limits::cut(
                &why,
                infscale_core::limits::FAILURE_TEXT_BYTES,
            ))
        }
    }
}

/// The slice that adds the activator pods `addresses` (each ready or not) to `service` under
/// its port `port_name`, at `port`.
pub fn slice_for(
    mode: &ServeMode,
    service: &Service,
    port_name: Option<String>,
    port: u16,
    addresses: &[(String, bool)],
) -> EndpointSlice {
    let labels = BTreeMap::from([
        (SERVICE_NAME.to_owned(), mode.service.clone()),
        (MANAGED_BY.to_owned(), INFSCALE.to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "infscale".to_owned(),
        ),
    ]);
    let mut annotations = BTreeMap::from([(
        "infscale.io/scaled-object".to_owned(),
        mode.scaled_object.clone(),
    )]);
    if let Some(n) = mode.max_held {
        annotations.insert(MAX_HELD_ANNOTATION.to_owned(), n.to_string());
    }
    if let Some(s) = mode.hold_timeout_s {
        annotations.insert(HOLD_TIMEOUT_ANNOTATION.to_owned(), s.to_string());
    }
    let owner = service.metadata.uid.clone().map(|uid| OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: mode.service.clone(),
        uid,
        ..OwnerReference::default()
    });
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(slice_name(&mode.service)),
            namespace: Some(mode.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        ports: Some(vec![EndpointPort {
            name: port_name,
            port: Some(i32::from(port)),
            protocol: Some("TCP".into()),
            ..EndpointPort::default()
        }]),
        endpoints: Some(
            addresses
                .iter()
                .map(|(a, ready)| Endpoint {
                    addresses: vec![a.clone()],
                    conditions: Some(EndpointConditions {
                        ready: Some(*ready),
                        serving: Some(*ready),
                        terminating: Some(false),
                    }),
                    ..Endpoint::default()
                })
                .collect(),
        ),
    }
}

/// The ready activator pods' IPv4 addresses, at most [`MAX_ACTIVATORS`]: the ready endpoints
/// of the slices the EndpointSlice controller manages for `activatorUrl`'s Service that are the
/// addresses of pods the Service's selector selects in its namespace (a slice anyone labelled
/// with the Service's name adds nothing), or the IP hosts of the URLs the scaler was started
/// with; each a pod address of the expected kind ([`slices::pod_ip`]).
async fn activator_addresses(
    client: &kube::Client,
    activator: Option<&Members>,
    loopback: bool,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let pod_like = |ip: &str| {
        ip.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| slices::pod_ip(ip, loopback))
    };
    match activator {
        None => return Err("serve mode needs activatorUrl".to_owned()),
        Some(Members::Urls(urls)) => {
            for u in urls {
                let host = u
                    .parse::<http::Uri>()
                    .ok()
                    .and_then(|u| u.host().map(str::to_owned));
                match host.filter(|h| h.parse::<std::net::Ipv4Addr>().is_ok()) {
                    Some(ip) if pod_like(&ip) => out.push(ip),
                    Some(ip) => {
                        return Err(format!(
                            "activatorUrl {u}: {ip} is not an address an activator pod may have"
                        ))
                    }
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
            let pods = selected_pod_ips(client, namespace, name).await?;
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
                    out.extend(
                        slices::ready_hosts(slice).filter(|a| pod_like(a) && pods.contains(a)),
                    );
                }
            }
        }
    }
    out.sort();
    out.dedup();
    if out.len() > MAX_ACTIVATORS {
        tracing::warn!(
            ready = out.len(),
            written = MAX_ACTIVATORS,
            "serve mode: more activator pods than one slice lists; the rest are left out"
        );
        out.truncate(MAX_ACTIVATORS);
    }
    Ok(out)
}

/// The IPv4 addresses of the Running pods that activator Service `name`'s selector selects in
/// `namespace`.
async fn selected_pod_ips(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<BTreeSet<String>, String> {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let service = services
        .get(name)
        .await
        .map_err(|e| format!("reading the activator Service {namespace}/{name}: {e}"))?;
    let selector = service
        .spec
        .and_then(|s| s.selector)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            format!("the activator Service {namespace}/{name} selects no pods (no selector)")
        })?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels(&slices::selector_query(&selector)))
        .await
        .map_err(|e| format!("listing the activator pods in {namespace}: {e}"))?;
    Ok(slices::running_pod_ips(&list.items, &selector).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

    fn mode() -> ServeMode {
        ServeMode {
            namespace: "llm".into(),
            service: "chat".into(),
            url: None,
            service_port: None,
            activator_port: None,
            max_held: Some(50),
            hold_timeout_s: None,
            settle_s: 30.0,
            scaled_object: "chat".into(),
            trigger: "0123456789ab".into(),
            counts_host: "chat.llm.svc".into(),
        }
    }

    fn service() -> Service {
        let port = |name: &str, port: i32| ServicePort {
            name: Some(name.into()),
            port,
            ..ServicePort::default()
        };
        Service {
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
        }
    }

    #[test]
    fn the_slice_names_each_activator_at_the_models_port_under_the_serving_ports_name() {
        let addresses = [
            ("10.0.0.7".to_owned(), true),
            ("10.0.0.8".to_owned(), false),
        ];
        let s = slice_for(&mode(), &service(), Some("http".into()), 20123, &addresses);
        let labels = s.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[SERVICE_NAME], "chat");
        assert_eq!(labels[MANAGED_BY], INFSCALE);
        assert_eq!(s.metadata.name.as_deref(), Some("chat-infscale"));
        let notes = s.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(notes[MAX_HELD_ANNOTATION], "50");
        assert!(!notes.contains_key(HOLD_TIMEOUT_ANNOTATION));
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
        assert_eq!(ports, [(Some("http".into()), Some(20123))]);
        let endpoints = s.endpoints.unwrap_or_default();
        let ready: Vec<Option<bool>> = endpoints
            .iter()
            .map(|e| e.conditions.as_ref().and_then(|c| c.ready))
            .collect();
        assert_eq!(ready, [Some(true), Some(false)]);
        let serving = endpoints[1].conditions.as_ref().and_then(|c| c.serving);
        assert_eq!(serving, Some(false), "not ready is not serving either");
    }

    #[test]
    fn the_serving_port_is_named_by_name_or_number_else_the_first() {
        let mut m = mode();
        assert_eq!(
            serving_port(&service(), &m),
            Ok((Some("http".into()), 8000))
        );
        m.service_port = Some("metrics".into());
        assert_eq!(
            serving_port(&service(), &m),
            Ok((Some("metrics".into()), 9000))
        );
        m.service_port = Some("8000".into());
        assert_eq!(
            serving_port(&service(), &m),
            Ok((Some("http".into()), 8000))
        );
        m.service_port = Some("grpc".into());
        assert!(serving_port(&service(), &m).unwrap_err().contains("grpc"));
    }

    #[test]
    fn a_models_port_comes_from_its_hash_and_skips_taken_ones() {
        let range = 20000..=20009;
        let p = first_free(&range, "llm/chat", |_| false).unwrap();
        assert!(range.contains(&p));
        assert_eq!(first_free(&range, "llm/chat", |_| false), Some(p), "stable");
        let next = first_free(&range, "llm/chat", |q| q == p).unwrap();
        assert_ne!(next, p);
        assert!(range.contains(&next));
        assert_eq!(first_free(&range, "llm/chat", |_| true), None);
    }
}
