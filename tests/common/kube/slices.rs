//! What serve mode's tests read and write of a Service's EndpointSlices in the API stand-in,
//! and a kube-proxy that routes each connection to a ready endpoint of a Service's slices,
//! infscale's own included.

use super::objects::{controller_slice, ips, MANAGED_BY, SERVICE_NAME};
use super::store::Cluster;
use std::net::SocketAddr;

impl Cluster {
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
