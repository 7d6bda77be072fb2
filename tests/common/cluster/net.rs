//! A cluster's Service networking on loopback: every Service of the API stand-in's store (now
//! and later) gets a ClusterIP from a pool the test chooses, written into the Service as the API
//! server writes it, and kube-proxy's rules, here a listener on ClusterIP:port for each TCP
//! port. kube-proxy's choices are kept: each connection goes, at accept time and from the
//! store's current state, to one endpoint of the Service's EndpointSlices (whoever manages
//! them, so infscale's own slice puts the activator in the path), by turns; ready endpoints
//! first, serving-terminating ones only when no endpoint is ready; bytes copied both ways, so
//! the pod sees what the client sent (no `x-forwarded-for`). A connection to a Service port with
//! no endpoint is reset at once.
//!
//! What is not kube-proxy's: the connection is accepted here and a second one opened to the
//! endpoint (iptables rewrites the packets instead), so where kube-proxy's REJECT rule refuses
//! the connection (no endpoint) or the endpoint refuses it, the client here sees it accepted and
//! then reset; and the pod sees a loopback peer, not the client's address. In exchange the
//! choice follows the store with no lag at all (kube-proxy's rules lag the API by its sync).

use super::pool::Pool;
use crate::common::kube::Cluster;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How often the store is looked at for a change (a Service, a slice): kube-proxy's rules and
/// the ClusterIPs follow within this and a reconcile.
const FOLLOW: Duration = Duration::from_millis(5);
/// Binds that failed are tried again this often, even with nothing changed.
const RETRY: Duration = Duration::from_millis(100);
/// How long the connection to an endpoint may take before the client's is reset.
const CONNECT: Duration = Duration::from_secs(3);
/// At most this many connections are kept in [`Net::log`].
const LOG_CAP: usize = 1_000_000;

/// One connection through a Service.
#[derive(Clone, Debug)]
pub struct Routed {
    pub at: Instant,
    pub namespace: String,
    pub service: String,
    pub port: u16,
    /// The endpoint chosen; `None` when there was none (the connection was reset).
    pub to: Option<SocketAddr>,
}

/// `(namespace, service)`.
type Name = (String, String);

struct Port {
    name: Option<String>,
    /// The accept loop, once bound.
    listener: Option<JoinHandle<()>>,
}

struct Entry {
    ip: Option<Ipv4Addr>,
    ports: BTreeMap<u16, Port>,
}

struct Inner {
    cluster: Cluster,
    pool: Mutex<Pool>,
    services: Mutex<BTreeMap<Name, Entry>>,
    /// Connections per (namespace, service, endpoint).
    counts: Mutex<BTreeMap<(String, String, SocketAddr), u64>>,
    log: Mutex<Vec<Routed>>,
    /// What could not be done (a bind refused), each once.
    errors: Mutex<Vec<String>>,
    stop: tokio::sync::watch::Sender<bool>,
}

/// The ClusterIPs and kube-proxy of one store, until dropped (listeners closed, every
/// connection through it cut).
pub struct Net {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = self.inner.stop.send(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Net {
    /// Follows `cluster` on a runtime of its own: every Service gets a ClusterIP from `pool`
    /// (three octets of 127.0.0.0/8 and a dot: `"127.0.100."` hands out .1, .2, ...) unless it
    /// has a loopback one already, written as `spec.clusterIP` and `spec.clusterIPs`; a Service
    /// with `clusterIP: None` (headless) gets none. A Service added later is served within
    /// milliseconds. Ports under 1024 need the privilege to bind them (see [`Net::errors`]).
    pub fn start(cluster: &Cluster, pool: &str) -> Net {
        let (stop, _) = tokio::sync::watch::channel(false);
        let inner = Arc::new(Inner {
            cluster: cluster.clone(),
            pool: Mutex::new(Pool::new(pool)),
            services: Mutex::new(BTreeMap::new()),
            counts: Mutex::new(BTreeMap::new()),
            log: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
            stop,
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kube-proxy")
            .enable_all()
            .build()
            .expect("kube-proxy's runtime");
        let follower = inner.clone();
        runtime.spawn(async move {
            let mut stopped = follower.stop.subscribe();
            let (mut seen, mut last) = (u64::MAX, Instant::now());
            loop {
                let now = follower.cluster.version();
                if now != seen || last.elapsed() >= RETRY {
                    reconcile(&follower);
                    (seen, last) = (now, Instant::now());
                }
                tokio::select! {
                    _ = tokio::time::sleep(FOLLOW) => {}
                    _ = stopped.changed() => return,
                }
            }
        });
        // The Services already there are served when this returns.
        let entered = runtime.enter();
        reconcile(&inner);
        drop(entered);
        Net {
            inner,
            runtime: Some(runtime),
        }
    }

    /// The store this follows.
    pub fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }

    /// Service `name`'s ClusterIP in `ns`, once it has one.
    pub fn cluster_ip(&self, ns: &str, name: &str) -> Option<IpAddr> {
        let known = self
            .inner
            .services
            .lock()
            .unwrap()
            .get(&(ns.to_owned(), name.to_owned()))
            .and_then(|e| e.ip);
        known.map(IpAddr::V4)
    }

    /// `ClusterIP:port` of Service `name` in `ns`, once it has a ClusterIP.
    pub fn addr(&self, ns: &str, name: &str, port: u16) -> Option<SocketAddr> {
        self.cluster_ip(ns, name)
            .map(|ip| SocketAddr::new(ip, port))
    }

    /// Waits up to `within` for Service `name` in `ns` to have a ClusterIP.
    pub async fn wait_cluster_ip(&self, ns: &str, name: &str, within: Duration) -> IpAddr {
        let end = Instant::now() + within;
        loop {
            if let Some(ip) = self.cluster_ip(ns, name) {
                return ip;
            }
            assert!(
                Instant::now() < end,
                "Service {ns}/{name} had no ClusterIP within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Connections routed so far to each endpoint of Service `name` in `ns`.
    pub fn connections(&self, ns: &str, name: &str) -> BTreeMap<SocketAddr, u64> {
        self.inner
            .counts
            .lock()
            .unwrap()
            .iter()
            .filter(|((n, s, _), _)| n == ns && s == name)
            .map(|((_, _, to), c)| (*to, *c))
            .collect()
    }

    /// Connections routed so far to endpoints of Service `name` in `ns` at address `ip` (any
    /// port): the activator's, or one pod's.
    pub fn connections_to(&self, ns: &str, name: &str, ip: IpAddr) -> u64 {
        self.connections(ns, name)
            .iter()
            .filter(|(to, _)| to.ip() == ip)
            .map(|(_, c)| c)
            .sum()
    }

    /// Every connection so far, in accept order (at most a million are kept).
    pub fn log(&self) -> Vec<Routed> {
        self.inner.log.lock().unwrap().clone()
    }

    /// What could not be done so far (a ClusterIP:port that would not bind), each once.
    pub fn errors(&self) -> Vec<String> {
        self.inner.errors.lock().unwrap().clone()
    }
}

fn error(inner: &Inner, e: String) {
    let mut errors = inner.errors.lock().unwrap();
    if !errors.contains(&e) {
        errors.push(e);
    }
}

/// `(port, name)` of a Service's TCP ports.
fn tcp_ports(service: &serde_json::Value) -> Vec<(u16, Option<String>)> {
    service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["protocol"].as_str().unwrap_or("TCP") == "TCP")
        .filter_map(|p| {
            let port = u16::try_from(p["port"].as_u64()?).ok()?;
            let name = p["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_owned);
            Some((port, name))
        })
        .collect()
}

/// The Service's ClusterIP: the one it has if it is a loopback address (claimed from the pool),
/// else one from the pool, written into the Service. `None` for a headless or ExternalName
/// Service, or when the pool is spent.
fn cluster_ip(inner: &Inner, key: &Name, service: &serde_json::Value) -> Option<Ipv4Addr> {
    let spec = &service["spec"];
    if spec["type"] == "ExternalName" || spec["clusterIP"] == "None" {
        return None;
    }
    if let Some(ip) = spec["clusterIP"]
        .as_str()
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
        .filter(Ipv4Addr::is_loopback)
    {
        inner.pool.lock().unwrap().claim(ip);
        return Some(ip);
    }
    let Some(ip) = inner.pool.lock().unwrap().take() else {
        error(
            inner,
            format!("Service {}/{}: the ClusterIP pool is spent", key.0, key.1),
        );
        return None;
    };
    let written = inner.cluster.update("Service", &key.0, &key.1, |s| {
        s["spec"]["clusterIP"] = serde_json::json!(ip.to_string());
        s["spec"]["clusterIPs"] = serde_json::json!([ip.to_string()]);
        s["spec"]["ipFamilies"] = serde_json::json!(["IPv4"]);
        s["spec"]["ipFamilyPolicy"] = serde_json::json!("SingleStack");
        true
    });
    if !written {
        inner.pool.lock().unwrap().release(ip);
        return None;
    }
    Some(ip)
}

/// Brings ClusterIPs and listeners in line with the store.
fn reconcile(inner: &Arc<Inner>) {
    let services = inner.cluster.all("Service");
    let mut table = inner.services.lock().unwrap();
    let mut present = Vec::new();
    for service in &services {
        let key: Name = (
            service["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            service["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        present.push(key.clone());
        if !table.contains_key(&key) {
            let ip = cluster_ip(inner, &key, service);
            table.insert(
                key.clone(),
                Entry {
                    ip,
                    ports: BTreeMap::new(),
                },
            );
        }
        let entry = table.get_mut(&key).expect("just put");
        let Some(ip) = entry.ip else { continue };
        let wanted = tcp_ports(service);
        entry.ports.retain(|port, p| {
            let keep = wanted.iter().any(|(w, n)| w == port && *n == p.name);
            if !keep {
                if let Some(l) = p.listener.take() {
                    l.abort();
                }
            }
            keep
        });
        for (port, name) in wanted {
            let p = entry.ports.entry(port).or_insert(Port {
                name: name.clone(),
                listener: None,
            });
            if p.listener.is_none() {
                p.listener = listen(inner, &key, ip, port, name);
            }
        }
    }
    table.retain(|key, entry| {
        let keep = present.contains(key);
        if !keep {
            for p in entry.ports.values_mut() {
                if let Some(l) = p.listener.take() {
                    l.abort();
                }
            }
            if let Some(ip) = entry.ip {
                inner.pool.lock().unwrap().release(ip);
            }
        }
        keep
    });
}

/// Binds `ip:port` for Service `key`'s port `name` and accepts on it; `None` when the bind
/// fails (tried again at the next reconcile).
fn listen(
    inner: &Arc<Inner>,
    key: &Name,
    ip: Ipv4Addr,
    port: u16,
    name: Option<String>,
) -> Option<JoinHandle<()>> {
    let addr = SocketAddr::new(IpAddr::V4(ip), port);
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|_| l))
        .and_then(tokio::net::TcpListener::from_std);
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            error(
                inner,
                format!("Service {}/{}: binding {addr}: {e}", key.0, key.1),
            );
            return None;
        }
    };
    let (inner, key) = (inner.clone(), key.clone());
    Some(tokio::spawn(async move {
        let mut turn = 0usize;
        loop {
            let Ok((client, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            let _ = client.set_nodelay(true);
            let endpoints = inner.cluster.endpoints(&key.0, &key.1, name.as_deref());
            let to = (!endpoints.is_empty()).then(|| endpoints[turn % endpoints.len()]);
            turn = turn.wrapping_add(1);
            {
                let mut log = inner.log.lock().unwrap();
                if log.len() < LOG_CAP {
                    log.push(Routed {
                        at: Instant::now(),
                        namespace: key.0.clone(),
                        service: key.1.clone(),
                        port,
                        to,
                    });
                }
            }
            let Some(to) = to else {
                reset(client);
                continue;
            };
            *inner
                .counts
                .lock()
                .unwrap()
                .entry((key.0.clone(), key.1.clone(), to))
                .or_default() += 1;
            let mut stopped = inner.stop.subscribe();
            tokio::spawn(async move {
                let upstream =
                    tokio::time::timeout(CONNECT, tokio::net::TcpStream::connect(to)).await;
                let Ok(Ok(mut upstream)) = upstream else {
                    reset(client);
                    return;
                };
                let _ = upstream.set_nodelay(true);
                let mut client = client;
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                    _ = stopped.changed() => {}
                }
            });
        }
    }))
}

/// Closes `stream` with a reset, as a connection nothing answers.
fn reset(stream: tokio::net::TcpStream) {
    // A zero linger sends a reset at once; it never blocks the thread (the deprecation is about
    // a non-zero linger).
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}
