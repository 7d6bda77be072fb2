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

use super::hold::RouteState;
use super::limits::Limits;
use super::routes::Readiness;
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

async fn probe(
    state: Arc<RouteState>,
    client: Client<HttpConnector, Empty<bytes::Bytes>>,
    path: String,
    limits: Limits,
) {
    let uri: http::Uri = match format!("{}{path}", state.route.upstream).parse() {
        Ok(u) => u,
        Err(e) => {
            tracing::error!(route = %state.route.counts_host, error = %e, "bad health URL");
            return;
        }
    };
    let mut failures = 0;
    loop {
        let answer = tokio::time::timeout(limits.probe_timeout, client.get(uri.clone())).await;
        let failure = match answer {
            Ok(Ok(r)) if r.status().is_success() => None,
            Ok(Ok(r)) => Some(format!("HTTP status {}", r.status().as_u16())),
            Ok(Err(e)) if e.is_connect() => Some(format!("cannot connect: {e}")),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {:?}", limits.probe_timeout)),
        };
        match failure {
            None => {
                failures = 0;
                state.set_ready(true);
            }
            Some(why) => {
                failures += 1;
                if state.is_ready() && failures >= limits.probe_failures {
                    tracing::warn!(route = %state.route.counts_host, %why, failures, "health probe failing: not ready");
                    state.set_ready(false);
                } else if !state.is_ready() {
                    tracing::debug!(route = %state.route.counts_host, %why, "health probe: not ready yet");
                }
            }
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

fn any_ready(store: &Store<EndpointSlice>) -> bool {
    store.state().iter().any(|slice| {
        slice.endpoints.iter().flatten().any(|e| {
            // An endpoint with no readiness condition is ready (the API's own rule).
            e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
        })
    })
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
                Some(Ok(_)) => state.set_ready(any_ready(&store)),
                Some(Err(e)) => {
                    tracing::warn!(service = %service, error = %e, "EndpointSlice watch failed; retrying")
                }
            },
            _ = state.wake.notified(), if recheck.is_none() => {
                recheck = Some(tokio::time::Instant::now() + limits.endpoints_recheck);
            }
            _ = due => {
                recheck = None;
                state.set_ready(any_ready(&store));
            }
        }
    }
}
