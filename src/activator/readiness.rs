//! Knowing when a route's upstream has a ready replica.
//!
//! In a cluster, the route's Service's EndpointSlices are watched (kube's reflector): ready as
//! soon as any endpoint is. Outside one, the upstream's health path is probed: every 25 ms while
//! requests are held (and at once when one arrives), every few seconds otherwise, each probe on a
//! fresh connection (a pooled one can race the server's own keep-alive close and fail a healthy
//! server). A ready route turns not ready only after [`FAILURES`] probes in a row fail, and the
//! log says why (refused, timed out, or the status); a route that is not ready turns ready on the
//! first success. Either task is woken when a request is held or the upstream refused a
//! connection (the route is then not ready): the probe probes at once; the EndpointSlice watch
//! looks at its store again 250 ms later, since endpoints can outlive the process behind them.

use super::hold::RouteState;
use super::routes::Readiness;
use futures::StreamExt;
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use std::sync::Arc;
use std::time::Duration;

/// Probe cadence while requests are held.
pub const PROBE_HELD: Duration = Duration::from_millis(25);
/// How long the EndpointSlice watch waits before looking at its store again when woken.
const RECHECK: Duration = Duration::from_millis(250);
/// Failed probes in a row that turn a ready route not ready.
pub const FAILURES: u32 = 3;
/// Probe cadence while nothing is held.
pub const PROBE_IDLE: Duration = Duration::from_secs(5);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Starts the route's readiness task.
pub fn start(
    state: Arc<RouteState>,
    kube: Option<kube::Client>,
    client: Client<HttpConnector, Empty<bytes::Bytes>>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    match state.route.readiness.clone() {
        Readiness::Probe { path } => Ok(tokio::spawn(probe(state, client, path))),
        Readiness::EndpointSlices { service, namespace } => {
            let kube = kube.ok_or_else(|| {
                format!(
                    "route {}: watching Service {service}'s EndpointSlices needs the Kubernetes API (or give healthPath)",
                    state.route.counts_host
                )
            })?;
            Ok(tokio::spawn(endpoint_slices(
                state, kube, service, namespace,
            )))
        }
    }
}

async fn probe(
    state: Arc<RouteState>,
    client: Client<HttpConnector, Empty<bytes::Bytes>>,
    path: String,
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
        let answer = tokio::time::timeout(PROBE_TIMEOUT, client.get(uri.clone())).await;
        let failure = match answer {
            Ok(Ok(r)) if r.status().is_success() => None,
            Ok(Ok(r)) => Some(format!("HTTP status {}", r.status().as_u16())),
            Ok(Err(e)) if e.is_connect() => Some(format!("cannot connect: {e}")),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {PROBE_TIMEOUT:?}")),
        };
        match failure {
            None => {
                failures = 0;
                state.set_ready(true);
            }
            Some(why) => {
                failures += 1;
                if state.is_ready() && failures >= FAILURES {
                    tracing::warn!(route = %state.route.counts_host, %why, failures, "health probe failing: not ready");
                    state.set_ready(false);
                } else if !state.is_ready() {
                    tracing::debug!(route = %state.route.counts_host, %why, "health probe: not ready yet");
                }
            }
        }
        let pause = if state.waiting() > 0 {
            PROBE_HELD
        } else {
            PROBE_IDLE
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
                recheck = Some(tokio::time::Instant::now() + RECHECK);
            }
            _ = due => {
                recheck = None;
                state.set_ready(any_ready(&store));
            }
        }
    }
}
