//! Knowing when a route's upstream has a ready replica.
//!
//! In a cluster, the route's Service's EndpointSlices are watched (kube's reflector): ready as
//! soon as any endpoint is. Outside one, the upstream's health path is probed: every
//! [`Limits::probe_held`] while requests are held (and at once when one arrives), every
//! [`Limits::probe_idle`] otherwise, each probe on a fresh connection (a pooled one can race the
//! server's own keep-alive close and fail a healthy server). A ready route turns not ready only
//! after [`Limits::probe_failures`] probes in a row fail, and the log says why (refused, timed
//! out, or the status); a route that is not ready turns ready on the first success. Either task
//! is woken when a request is held or the upstream refused a connection (the route is then not
//! ready): the probe probes at once; the EndpointSlice watch looks at its store again
//! [`Limits::endpoints_recheck`] later, since endpoints can outlive the process behind them.
//!
//! infscale's own slices (the activator in a Service's path, [`slices::INFSCALE`]) never count:
//! they point at the activator itself. A `direct` route learns the ready endpoints themselves
//! (each slice's address at its port, or each probed `endpoints` entry) and sends to them, so it
//! never forwards to itself through a Service that includes it.

use super::hold::RouteState;
use super::limits::Limits;
use super::routes::Readiness;
use crate::edge::slices;
use futures::StreamExt;
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use std::sync::Arc;

/// Starts the route's readiness task.
pub fn start(
    state: Arc<RouteState>,
    kube: Option<kube::Client>,
    client: Client<HttpConnector, Empty<bytes::Bytes>>,
    limits: Limits,
) -> Result<tokio::task::JoinHandle<()>, String> {
    match state.route.readiness.clone() {
        Readiness::Probe { path } => Ok(tokio::spawn(probe(state, client, path, limits))),
        Readiness::Given(given) => Ok(tokio::spawn(follow_given(state, given.0))),
        Readiness::EndpointSlices { service, namespace } => {
            let kube = kube.ok_or_else(|| {
                format!(
                    "route {}: watching Service {service}'s EndpointSlices needs the Kubernetes API (or give healthPath)",
                    state.route.counts_host
                )
            })?;
            Ok(tokio::spawn(endpoint_slices(
                state, kube, service, namespace, limits,
            )))
        }
    }
}

/// One probed target: where, and what its probes said lately.
struct Probed {
    uri: http::Uri,
    authority: Option<http::uri::Authority>,
    ready: bool,
    failures: u32,
}

/// Probes the upstream (or each of the route's endpoints) on `path`. A target turns ready on
/// its first success and not ready after [`Limits::probe_failures`] failures in a row.
async fn probe(
    state: Arc<RouteState>,
    client: Client<HttpConnector, Empty<bytes::Bytes>>,
    path: String,
    limits: Limits,
) {
    let route = &state.route;
    let bases: Vec<(String, Option<http::uri::Authority>)> = if route.endpoints.is_empty() {
        vec![(route.upstream.clone(), None)]
    } else {
        route
            .endpoints
            .iter()
            .map(|a| (format!("http://{a}"), Some(a.clone())))
            .collect()
    };
    let mut targets = Vec::new();
    for (base, authority) in bases {
        match format!("{base}{path}").parse::<http::Uri>() {
            Ok(uri) => targets.push(Probed {
                uri,
                authority,
                ready: false,
                failures: 0,
            }),
            Err(e) => {
                tracing::error!(route = %route.counts_host, error = %e, "bad health URL");
                return;
            }
        }
    }
    loop {
        let answers = futures::future::join_all(
            targets
                .iter()
                .map(|t| tokio::time::timeout(limits.probe_timeout, client.get(t.uri.clone()))),
        )
        .await;
        for (t, answer) in targets.iter_mut().zip(answers) {
            // A refused connection since the last probe took the target out: a failing probe
            // does not put it back.
            t.ready = match &t.authority {
                None => state.is_ready(),
                Some(a) => state.has_endpoint(a),
            };
            let failure = match answer {
                Ok(Ok(r)) if r.status().is_success() => None,
                Ok(Ok(r)) => Some(format!("HTTP status {}", r.status().as_u16())),
                Ok(Err(e)) if e.is_connect() => Some(format!("cannot connect: {e}")),
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {:?}", limits.probe_timeout)),
            };
            match failure {
                None => {
                    t.failures = 0;
                    t.ready = true;
                }
                Some(why) => {
                    t.failures += 1;
                    if t.ready && t.failures >= limits.probe_failures {
                        tracing::warn!(route = %route.counts_host, target = %t.uri, %why, failures = t.failures, "health probe failing: not ready");
                        t.ready = false;
                    } else if !t.ready {
                        tracing::debug!(route = %route.counts_host, target = %t.uri, %why, "health probe: not ready yet");
                    }
                }
            }
        }
        if route.endpoints.is_empty() {
            state.set_ready(targets.iter().any(|t| t.ready));
        } else {
            state.set_endpoints(
                targets
                    .iter()
                    .filter(|t| t.ready)
                    .filter_map(|t| t.authority.clone())
                    .collect(),
            );
        }
        let pause = if state.waiting() > 0 {
            limits.probe_held
        } else {
            limits.probe_idle
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = state.wake.notified() => {}
        }
    }
}

/// Takes the endpoints an embedding program gives, as they change.
async fn follow_given(
    state: Arc<RouteState>,
    mut given: tokio::sync::watch::Receiver<Vec<http::uri::Authority>>,
) {
    loop {
        state.set_endpoints(given.borrow_and_update().clone());
        if given.changed().await.is_err() {
            return;
        }
    }
}

/// The ready endpoints of the Service's own slices (infscale's left out), each at the slice's
/// port (`port_name`'s, or its only one), as authorities a `direct` route sends to.
fn ready_endpoints(
    store: &Store<EndpointSlice>,
    port_name: Option<&str>,
) -> Vec<http::uri::Authority> {
    let mut out = Vec::new();
    for slice in store.state().iter().filter(|s| !slices::infscales(s)) {
        let Some(port) = slices::port(slice, port_name) else {
            continue;
        };
        out.extend(
            slices::ready_hosts(slice).filter_map(|host| format!("{host}:{port}").parse().ok()),
        );
    }
    out
}

fn any_ready(store: &Store<EndpointSlice>) -> bool {
    store
        .state()
        .iter()
        .filter(|s| !slices::infscales(s))
        .any(|slice| slice.endpoints.iter().flatten().any(slices::endpoint_ready))
}

/// Sets the route's readiness (and a `direct` route's endpoints) from the slices.
fn apply(state: &RouteState, store: &Store<EndpointSlice>) {
    if state.route.direct {
        state.set_endpoints(ready_endpoints(store, state.route.port_name.as_deref()));
    } else {
        state.set_ready(any_ready(store));
    }
}

async fn endpoint_slices(
    state: Arc<RouteState>,
    kube: kube::Client,
    service: String,
    namespace: String,
    limits: Limits,
) {
    let api: Api<EndpointSlice> = Api::namespaced(kube, &namespace);
    let (store, writer) = reflector::store();
    let config =
        watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    let mut stream = std::pin::pin!(stream);
    let mut recheck: Option<tokio::time::Instant> = None;
    loop {
        let due = async {
            match recheck {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = stream.next() => match event {
                None => return,
                Some(Ok(watcher::Event::InitApply(_) | watcher::Event::Init)) => {}
                Some(Ok(_)) => apply(&state, &store),
                Some(Err(e)) => {
                    tracing::warn!(service = %service, error = %e, "EndpointSlice watch failed; retrying")
                }
            },
            _ = state.wake.notified(), if recheck.is_none() => {
                recheck = Some(tokio::time::Instant::now() + limits.endpoints_recheck);
            }
            _ = due => {
                recheck = None;
                apply(&state, &store);
            }
        }
    }
}
