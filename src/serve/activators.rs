//! Every activator pod of a trigger, followed and summed.
//!
//! An activator runs as several replicas behind a Service, and a request may be held at any of
//! them, so the scaler follows each ready pod's `/queue/watch` and sums their counts. Where
//! `activatorUrl` names a Service in the ScaledObject's namespace and the Kubernetes API is at
//! hand, the pods are that Service's ready endpoints (its EndpointSlices, watched; the URL's port
//! is mapped to the endpoints' port through the Service); otherwise each URL given (one, or
//! several separated by commas) is one activator. A pod that cannot be read is a fault, never
//! zero held: the sum is then [`Counts::Partial`], which the collector believes only as far as
//! it shows activity. A Service with no ready activator pod is a fault too.
//!
//! What is followed is bounded: only EndpointSlices the EndpointSlice controller manages for
//! the Service (anyone who may write a slice could label one with its name), only IP addresses
//! (an FQDN slice would send the scaler wherever a name resolves), and at most
//! `activator_max_endpoints` pods; ready ones past the cap count as unread. Where the Service
//! selects its pods (the shipped activator's does), only endpoints that are the addresses of
//! Running pods its selector selects are followed: a slice anyone labelled as the controller's
//! for it sends the scaler nowhere else. Failures reach
//! KEDA as a bounded summary (how many of how many, the first few), never as every pod's
//! error joined.

use super::activator::{self, Counts, Source};
use super::budget::MemoryBudget;
use super::limits::Limits;
use super::AbortOnDrop;
use crate::edge::slices::{self, managed_for, CONTROLLER, MANAGED_BY, SERVICE_NAME};
use futures::StreamExt;
use infscale_core::observe::counts::HostCounts;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{watch, Notify};

/// Where a trigger's activator pods are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Members {
    /// These admin URLs, one per activator.
    Urls(Vec<String>),
    /// The ready endpoints of a Service (`url` is `scheme://NAME.NS.svc:PORT`, followed as it is
    /// where there is no Kubernetes API).
    Service {
        namespace: String,
        name: String,
        port: u16,
        scheme: String,
        url: String,
    },
}

/// Starts following every activator pod of a trigger; the receiver holds their summed counts.
pub fn follow(
    http: reqwest::Client,
    kube: Option<kube::Client>,
    members: Members,
    host: String,
    require_route: bool,
    limits: Limits,
    budget: MemoryBudget,
) -> (watch::Receiver<Counts>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Counts::Unknown);
    let task = tokio::spawn(async move {
        let (urls, _watch) = match (members, kube) {
            (Members::Urls(urls), _) => (watch::channel(Ok(urls)).1, None),
            (service @ Members::Service { .. }, Some(client)) => {
                let (utx, urx) = watch::channel(Err("no activator endpoints read yet".into()));
                (
                    urx,
                    Some(AbortOnDrop(tokio::spawn(endpoints(
                        client,
                        service,
                        utx,
                        limits.api_probe_every(),
                    )))),
                )
            }
            (Members::Service { url, .. }, None) => (watch::channel(Ok(vec![url])).1, None),
        };
        aggregate(http, host, require_route, urls, tx, (limits, budget)).await;
    });
    (rx, task)
}

/// One followed pod.
struct Child {
    counts: watch::Receiver<Counts>,
    _task: AbortOnDrop,
}

async fn aggregate(
    http: reqwest::Client,
    host: String,
    require_route: bool,
    mut urls: watch::Receiver<Result<Vec<String>, String>>,
    tx: watch::Sender<Counts>,
    (limits, budget): (Limits, MemoryBudget),
) {
    let changed = Arc::new(Notify::new());
    let cap = limits.activator_max_endpoints.max(1);
    let mut warned = 0;
    let mut children: BTreeMap<String, Child> = BTreeMap::new();
    // A fixed list's sender is gone at once: its membership simply never changes.
    let mut membership_open = true;
    loop {
        let mut membership = urls.borrow_and_update().clone();
        // Past the cap, the rest are not followed: they count as unread.
        let mut unfollowed = 0;
        if let Ok(list) = membership.as_mut() {
            unfollowed = list.len().saturating_sub(cap);
            list.truncate(cap);
            if unfollowed > 0 && unfollowed != warned {
                tracing::warn!(
                    ready = list.len() + unfollowed,
                    followed = cap,
                    "more activator pods than are followed; the others count as unread"
                );
            }
            warned = unfollowed;
        }
        if let Ok(list) = &membership {
            children.retain(|url, _| list.contains(url));
            for url in list {
                if !children.contains_key(url) {
                    let source = Source {
                        url: url.clone(),
                        host: host.clone(),
                        require_route,
                    };
                    let (counts, task) = activator::follow(
                        http.clone(),
                        source,
                        changed.clone(),
                        limits,
                        budget.clone(),
                    );
                    children.insert(
                        url.clone(),
                        Child {
                            counts,
                            _task: AbortOnDrop(task),
                        },
                    );
                }
            }
        }
        let sum = match membership {
            Err(e) => Counts::Failed(infscale_core::limits::cut(
                &e,
                infscale_core::limits::ERROR_TEXT_BYTES,
            )),
            Ok(_) => sum(&children, unfollowed, cap),
        };
        tx.send_if_modified(|current| {
            let differs = *current != sum;
            *current = sum;
            differs
        });
        if tx.is_closed() {
            return;
        }
        tokio::select! {
            alive = urls.changed(), if membership_open => membership_open = alive.is_ok(),
            _ = changed.notified() => {}
            _ = tx.closed() => return,
        }
    }
}

/// The pods' counts summed, or what is known of them; `unfollowed` ready pods past the cap
/// are unread.
fn sum(children: &BTreeMap<String, Child>, unfollowed: usize, cap: usize) -> Counts {
    if children.is_empty() {
        return Counts::Failed("no ready activator pod".to_owned());
    }
    let mut total = HostCounts {
        held: Some(0),
        ..HostCounts::default()
    };
    let mut failed = Vec::new();
    for (url, child) in children {
        match &*child.counts.borrow() {
            Counts::Seen(c) => add(&mut total, c),
            Counts::Partial { read, failed: f } => {
                add(&mut total, read);
                failed.push(f.clone());
            }
            Counts::Unknown => failed.push(format!("{url}: not read yet")),
            Counts::Failed(e) => failed.push(e.clone()),
        }
    }
    if failed.is_empty() && unfollowed == 0 {
        return Counts::Seen(total);
    }
    let why = summary(&failed, unfollowed, children.len() + unfollowed, cap);
    if failed.len() == children.len() {
        Counts::Failed(why)
    } else {
        Counts::Partial {
            read: total,
            failed: why,
        }
    }
}

/// The failures as bounded text: a lone failure as it is (cut short); several as how many of
/// how many, the first three (each cut short) and how many more.
fn summary(failed: &[String], unfollowed: usize, endpoints: usize, cap: usize) -> String {
    use infscale_core::limits::{cut, FAILURE_TEXT_BYTES};
    if let ([one], 0) = (failed, unfollowed) {
        return cut(one, FAILURE_TEXT_BYTES * 2);
    }
    let mut out = format!(
        "{} of {endpoints} activator endpoints cannot be read",
        failed.len() + unfollowed
    );
    if unfollowed > 0 {
        out.push_str(&format!(
            " ({unfollowed} not followed: {cap} are followed at most)"
        ));
    }
    let shown: Vec<String> = failed
        .iter()
        .take(3)
        .map(|f| cut(f, FAILURE_TEXT_BYTES))
        .collect();
    if !shown.is_empty() {
        out.push_str(": ");
        out.push_str(&shown.join("; "));
    }
    if failed.len() > shown.len() {
        out.push_str(&format!("; and {} more", failed.len() - shown.len()));
    }
    out
}

fn add(total: &mut HostCounts, c: &HostCounts) {
    total.concurrency += c.concurrency;
    total.request_count += c.request_count;
    total.held = match (total.held, c.held) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
}

/// Publishes the admin URLs of the Service's ready endpoints whenever they change. The
/// Service read is bounded by `bound` and asked again while it goes unanswered (kube sets no
/// read timeout: a read the API accepted and never answered would leave the held count unknown
/// for good).
async fn endpoints(
    client: kube::Client,
    members: Members,
    tx: watch::Sender<Result<Vec<String>, String>>,
    bound: std::time::Duration,
) {
    let Members::Service {
        namespace,
        name,
        port,
        scheme,
        ..
    } = members
    else {
        return;
    };
    // The Service maps the URL's port to the endpoints' port, by name.
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let (port_name, selector) = loop {
        match tokio::time::timeout(bound, services.get(&name)).await {
            Ok(Ok(s)) => {
                let spec = s.spec.unwrap_or_default();
                let selector = spec.selector.filter(|s| !s.is_empty());
                let port_name = spec
                    .ports
                    .unwrap_or_default()
                    .into_iter()
                    .find(|p| p.port == i32::from(port))
                    .and_then(|p| p.name);
                break (port_name, selector);
            }
            Ok(Err(e)) => {
                let _ = tx.send(Err(format!("activator Service {namespace}/{name}: {e}")));
                break (None, None);
            }
            Err(_) => {
                let _ = tx.send(Err(format!(
                    "activator Service {namespace}/{name}: no answer within {bound:?}"
                )));
                if tx.is_closed() {
                    return;
                }
            }
        }
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let api: Api<EndpointSlice> = Api::namespaced(client, &namespace);
    let (store, writer) = reflector::store();
    let config = watcher::Config::default()
        .labels(&format!("{SERVICE_NAME}={name},{MANAGED_BY}={CONTROLLER}"));
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init) => {}
            Ok(_) => {
                let mut urls = ready_urls(&store, &name, port_name.as_deref(), port, &scheme);
                if let Some(selector) = &selector {
                    match selected_hosts(&pods, selector, bound).await {
                        Ok(hosts) => {
                            urls.retain(|u| url_host(u).is_some_and(|h| hosts.contains(&h)))
                        }
                        Err(e) => {
                            tracing::warn!(service = %name, error = %e, "cannot list the activator Service's pods; keeping the endpoints followed before");
                            continue;
                        }
                    }
                }
                tx.send_if_modified(|current| {
                    let new = Ok(urls);
                    let differs = *current != new;
                    *current = new;
                    differs
                });
            }
            Err(e) => {
                tracing::warn!(service = %name, error = %e, "activator EndpointSlice watch failed; retrying")
            }
        }
    }
}

/// The addresses (as URL hosts) of the Running pods `selector` selects.
async fn selected_hosts(
    pods: &Api<Pod>,
    selector: &BTreeMap<String, String>,
    bound: std::time::Duration,
) -> Result<Vec<String>, String> {
    let list = tokio::time::timeout(
        bound,
        pods.list(&kube::api::ListParams::default().labels(&slices::selector_query(selector))),
    )
    .await
    .map_err(|_| format!("no answer within {bound:?}"))?
    .map_err(|e| e.to_string())?;
    Ok(slices::running_pod_ips(&list.items, selector)
        .filter_map(|ip| {
            let ip: std::net::IpAddr = ip.parse().ok()?;
            Some(match ip {
                std::net::IpAddr::V4(v4) => v4.to_string(),
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            })
        })
        .collect())
}

/// The host of a `scheme://HOST:PORT` URL, as [`slices::ip_host`] writes it.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let (host, _) = rest.rsplit_once(':')?;
    Some(host.to_owned())
}

/// `scheme://IP:PORT` for every ready endpoint of the controller's slices for `service`, the
/// port found by the Service port's name (or the only port, or the URL's port); sorted, so the
/// cap always keeps the same ones.
fn ready_urls(
    store: &Store<EndpointSlice>,
    service: &str,
    port_name: Option<&str>,
    service_port: u16,
    scheme: &str,
) -> Vec<String> {
    let mut urls = Vec::new();
    for slice in store.state() {
        if !managed_for(&slice, service) {
            continue;
        }
        let port = slices::port(&slice, port_name).unwrap_or(service_port);
        // FQDN slices, and anything not an IP address of the slice's type, are skipped.
        urls.extend(slices::ready_hosts(&slice).map(|host| format!("{scheme}://{host}:{port}")));
    }
    urls.sort();
    urls.dedup();
    urls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_host_is_its_ip_as_written() {
        assert_eq!(
            url_host("http://10.0.0.7:9092").as_deref(),
            Some("10.0.0.7")
        );
        assert_eq!(
            url_host("https://[fd00::7]:9092").as_deref(),
            Some("[fd00::7]")
        );
        assert_eq!(url_host("10.0.0.7"), None);
    }

    #[test]
    fn failures_are_summarised_within_bounds() {
        let one = vec!["http://10.0.0.1:9092/queue/watch: connection refused".to_owned()];
        assert_eq!(summary(&one, 0, 2, 32), one[0]);
        let many: Vec<String> = (0..1800)
            .map(|i| {
                format!(
                    "http://10.0.{}.{}:9092/queue/watch: {}",
                    i / 250,
                    i % 250,
                    "x".repeat(300)
                )
            })
            .collect();
        let text = summary(&many[..32], 1768, 1800, 32);
        assert!(text.starts_with(
            "1800 of 1800 activator endpoints cannot be read (1768 not followed: 32 are followed \
             at most): http://10.0.0.0:9092/queue/watch: "
        ), "{text}");
        assert!(text.ends_with("; and 29 more"), "{text}");
        assert!(text.len() < 1024, "{}", text.len());
    }
}
