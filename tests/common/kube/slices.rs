//! What serve mode's tests read and write of a Service's EndpointSlices in the API stand-in,
//! and a kube-proxy that routes each connection to a ready endpoint of a Service's slices,
//! infscale's own included; and what the controllers of `common::cluster` need of the store to
//! follow it as the API's watchers do (its resource version, a change waited for) and to write
//! it as a controller does (a read and a write with no other write between them).

use super::objects::{controller_slice, ips, FakePod, ADMIN_SERVICE, MANAGED_BY, SERVICE_NAME};
use super::store::{kind_home, Cluster, Key};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// An endpoint of a slice as kube-proxy reads it: `conditions.ready` (absent = ready), and the
/// `serving` and `terminating` conditions of an endpoint whose pod is being deleted.
fn condition(endpoint: &serde_json::Value, name: &str, absent: bool) -> bool {
    endpoint["conditions"][name].as_bool().unwrap_or(absent)
}

/// Whether a Service port named `service_port` (None or "" for an unnamed one) is the slice port
/// `slice_port`.
fn same_port_name(service_port: Option<&str>, slice_port: &serde_json::Value) -> bool {
    let slice_name = slice_port["name"].as_str().filter(|n| !n.is_empty());
    slice_name == service_port.filter(|n| !n.is_empty())
}

impl Cluster {
    /// The store's resource version: every change raises it.
    pub fn version(&self) -> u64 {
        self.state().rv
    }

    /// Waits up to `d` for a change after resource version `rv`; returns the version then.
    pub fn wait_version(&self, rv: u64, d: Duration) -> u64 {
        self.wait_past(self.state(), rv, d).rv
    }

    /// Changes the object `kind`/`name` in `ns` under the store's lock, so that no other write
    /// falls between the read and the write (as an update with a resourceVersion precondition
    /// retried until it holds); `change` returns whether to write at all. False when there is
    /// no such object or nothing was written.
    pub fn update(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        change: impl FnOnce(&mut serde_json::Value) -> bool,
    ) -> bool {
        let Some((base, resource)) = kind_home(kind) else {
            return false;
        };
        let key = Key {
            base: base.into(),
            ns: ns.into(),
            resource: resource.into(),
            name: name.into(),
        };
        let mut s = self.state();
        let Some(mut object) = s.objects.get(&key).cloned() else {
            return false;
        };
        if !change(&mut object) {
            return false;
        }
        s.put(object);
        drop(s);
        self.0 .1.notify_all();
        true
    }

    /// Where kube-proxy sends a connection to Service `service` in `ns` at its port named
    /// `port_name` (None for an unnamed port): the ready endpoints of every slice labelled for
    /// the Service, whoever manages it, at the slice's port of that name, IPv4 addresses only;
    /// when none is ready, the endpoints that are serving while terminating (KEP-1669, as
    /// kube-proxy falls back to them). In the store's order (slices by name), each address once.
    pub fn endpoints(&self, ns: &str, service: &str, port_name: Option<&str>) -> Vec<SocketAddr> {
        let mut ready = Vec::new();
        let mut terminating = Vec::new();
        for slice in self.all("EndpointSlice") {
            if slice["metadata"]["namespace"] != ns
                || slice["metadata"]["labels"][SERVICE_NAME] != service
                || slice["addressType"].as_str().is_some_and(|t| t != "IPv4")
            {
                continue;
            }
            let port = slice["ports"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| same_port_name(port_name, p)))
                .and_then(|p| p["port"].as_u64())
                .and_then(|p| u16::try_from(p).ok());
            let Some(port) = port else { continue };
            for e in slice["endpoints"].as_array().into_iter().flatten() {
                let to = if condition(e, "ready", true) {
                    &mut ready
                } else if condition(e, "serving", true) && condition(e, "terminating", false) {
                    &mut terminating
                } else {
                    continue;
                };
                for a in e["addresses"].as_array().into_iter().flatten() {
                    if let Some(ip) = a.as_str().and_then(|a| a.parse::<IpAddr>().ok()) {
                        if ip.is_ipv4() && !to.contains(&SocketAddr::new(ip, port)) {
                            to.push(SocketAddr::new(ip, port));
                        }
                    }
                }
            }
        }
        if ready.is_empty() {
            terminating
        } else {
            ready
        }
    }

    /// The slices labelled for `service`, in every namespace.
    pub fn of_service(&self, service: &str) -> Vec<serde_json::Value> {
        self.all("EndpointSlice")
            .into_iter()
            .filter(|v| v["metadata"]["labels"][SERVICE_NAME] == service)
            .collect()
    }

    /// Whether infscale's own slice for `service` is there.
    pub fn ours(&self, service: &str) -> bool {
        self.of_service(service)
            .iter()
            .any(|v| v["metadata"]["labels"][MANAGED_BY] == "infscale.io")
    }

    /// The EndpointSlice controller's slice of `service` in `llm`: its Ready pods at port
    /// `http`.
    pub fn controller(&self, service: &str, pods: &[SocketAddr]) {
        self.controller_port(service, "http", pods);
    }

    /// The EndpointSlice controller's slice of `service` in `llm`: its Ready pods at port
    /// `port_name`.
    pub fn controller_port(&self, service: &str, port_name: &str, pods: &[SocketAddr]) {
        let port = pods.first().map_or(0, |p| p.port());
        self.put(controller_slice(
            "llm",
            &format!("{service}-ctrl"),
            service,
            &[(port_name, port)],
            &ips(pods),
        ));
    }

    /// The activator as the manifests install it and serve mode finds it: its admin Service
    /// (made by [`super::Kube::serve_mode`]) selects `pods` (app=act), each a Running pod, and
    /// the EndpointSlice controller lists them as ready.
    pub fn activator_installed(&self, pods: &[SocketAddr]) {
        self.controller_port(ADMIN_SERVICE, "admin", pods);
        let mut admin = self
            .get("Service", "llm", ADMIN_SERVICE)
            .expect("the admin Service (Kube::serve_mode makes it)");
        admin["spec"]["selector"] = serde_json::json!({"app": "act"});
        self.put(admin);
        for (i, p) in pods.iter().enumerate() {
            let pod = FakePod {
                name: format!("act-{i}"),
                ip: p.ip().to_string(),
                ready: true,
            };
            self.put(super::objects::pod("llm", "act", &pod));
        }
    }

    /// Ready endpoints of `service` at its `http` port, as kube-proxy would route to them.
    pub fn routes(&self, service: &str) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        for slice in self.of_service(service) {
            let port = slice["ports"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["name"] == "http"))
                .and_then(|p| p["port"].as_u64());
            let Some(port) = port else { continue };
            for e in slice["endpoints"].as_array().into_iter().flatten() {
                if e["conditions"]["ready"] == false {
                    continue;
                }
                for a in e["addresses"].as_array().into_iter().flatten() {
                    if let Some(ip) = a.as_str().and_then(|a| a.parse().ok()) {
                        out.push(SocketAddr::new(ip, port as u16));
                    }
                }
            }
        }
        out
    }
}

/// A kube-proxy for `service`: each connection goes to the next ready endpoint of the Service's
/// slices (by turns); with none, it is closed at once, as a Service without endpoints rejects.
pub async fn kube_proxy(cluster: Cluster, service: &'static str) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut turn = 0usize;
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let routes = cluster.routes(service);
            if routes.is_empty() {
                continue;
            }
            let to = routes[turn % routes.len()];
            turn += 1;
            tokio::spawn(async move {
                if let Ok(mut upstream) = tokio::net::TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    addr
}
