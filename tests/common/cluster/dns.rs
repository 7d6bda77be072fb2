//! Cluster DNS as a client pod sees it: names resolved the way a pod in namespace `ns` resolves
//! them (its resolv.conf: `search NS.svc.cluster.local svc.cluster.local cluster.local`,
//! `ndots:5`; CoreDNS answering `NAME.NS.svc.cluster.local` with the Service's ClusterIP, or
//! with its ready endpoints when it is headless), so a test sends clients by every name a
//! Kubernetes client uses: `chat`, `chat.llm`, `chat.llm.svc`, `chat.llm.svc.cluster.local`
//! (with or without the final dot), and the ClusterIP itself. Any other name does not resolve.
//! Clients built here (reqwest, HTTP/1.1 or h2 with prior knowledge) keep the name in their
//! `Host` (or `:authority`), as a real client does; [`http10_post`] sends what old clients
//! send: HTTP/1.0 with no `Host` at all.

use crate::common::kube::Cluster;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The cluster domain.
pub const DOMAIN: &str = "cluster.local";
/// How long a lookup waits for a Service just created to be given its ClusterIP (the API
/// server gives it at once; here [`super::Net`] writes it within milliseconds).
const ASSIGNED: Duration = Duration::from_millis(200);

/// Name resolution for a client pod in one namespace.
#[derive(Clone)]
pub struct Dns {
    cluster: Cluster,
    namespace: String,
}

/// The Service a fully qualified name is: `NAME.NS.svc.cluster.local`.
fn service_of_fqdn(fqdn: &str) -> Option<(String, String)> {
    let rest = fqdn.strip_suffix(&format!(".svc.{DOMAIN}"))?;
    let (name, ns) = rest.split_once('.')?;
    let label = |l: &str| !l.is_empty() && !l.contains('.');
    (label(name) && label(ns)).then(|| (ns.to_owned(), name.to_owned()))
}

impl Dns {
    /// DNS for a client pod in namespace `ns` of `cluster`.
    pub fn new(cluster: &Cluster, ns: &str) -> Dns {
        Dns {
            cluster: cluster.clone(),
            namespace: ns.to_owned(),
        }
    }

    /// The names the resolver asks for, in order, for `host`: with fewer than five dots the
    /// search domains first and the name as given last; a name ending in a dot only as given.
    pub fn queries(&self, host: &str) -> Vec<String> {
        let host = host.to_ascii_lowercase();
        if let Some(absolute) = host.strip_suffix('.') {
            return vec![absolute.to_owned()];
        }
        let search = [
            format!("{}.svc.{DOMAIN}", self.namespace),
            format!("svc.{DOMAIN}"),
            DOMAIN.to_owned(),
        ];
        let expanded = search.iter().map(|s| format!("{host}.{s}"));
        if host.matches('.').count() >= 5 {
            std::iter::once(host.clone()).chain(expanded).collect()
        } else {
            expanded.chain(std::iter::once(host.clone())).collect()
        }
    }

    /// The Service `(namespace, name)` that `host` names, if one exists.
    pub fn service(&self, host: &str) -> Option<(String, String)> {
        self.queries(host)
            .iter()
            .filter_map(|q| service_of_fqdn(q))
            .find(|(ns, name)| self.cluster.get("Service", ns, name).is_some())
    }

    /// What the name's Service answers now: its ClusterIP, or a headless Service's ready
    /// endpoints; `None` when no Service is named (or it has no ClusterIP yet).
    fn answer(&self, host: &str) -> Option<Vec<IpAddr>> {
        if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
            return Some(vec![ip]);
        }
        let (ns, name) = self.service(host)?;
        let service = self.cluster.get("Service", &ns, &name)?;
        let ip = service["spec"]["clusterIP"].as_str()?;
        if ip == "None" {
            let mut ips: Vec<IpAddr> = Vec::new();
            for slice in self.cluster.of_service(&name) {
                if slice["metadata"]["namespace"] != ns.as_str() {
                    continue;
                }
                for e in slice["endpoints"].as_array().into_iter().flatten() {
                    if e["conditions"]["ready"] == false {
                        continue;
                    }
                    for a in e["addresses"].as_array().into_iter().flatten() {
                        if let Some(ip) = a.as_str().and_then(|a| a.parse().ok()) {
                            if !ips.contains(&ip) {
                                ips.push(ip);
                            }
                        }
                    }
                }
            }
            return (!ips.is_empty()).then_some(ips);
        }
        ip.parse().ok().map(|ip| vec![ip])
    }

    /// The address `host` resolves to now (an IP address resolves to itself), for a raw TCP
    /// client.
    pub fn resolve(&self, host: &str) -> Option<IpAddr> {
        self.answer(host)?.into_iter().next()
    }

    /// A client that resolves names here: HTTP/1.1, a connection per request (no idle pool),
    /// every request bounded by `timeout`.
    pub fn client(&self, timeout: Duration) -> reqwest::Client {
        self.builder(timeout)
            .http1_only()
            .build()
            .expect("a reqwest client")
    }

    /// As [`Dns::client`], speaking h2 with prior knowledge (h2c; `:authority` is the name
    /// used).
    pub fn h2_client(&self, timeout: Duration) -> reqwest::Client {
        self.builder(timeout)
            .http2_prior_knowledge()
            .build()
            .expect("a reqwest client")
    }

    fn builder(&self, timeout: Duration) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .dns_resolver(Arc::new(self.clone()))
            .no_proxy()
            .pool_max_idle_per_host(0)
            .timeout(timeout)
    }
}

/// A name that does not resolve.
#[derive(Debug)]
struct NxDomain(String);

impl std::fmt::Display for NxDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: no such host in the cluster", self.0)
    }
}

impl std::error::Error for NxDomain {}

impl reqwest::dns::Resolve for Dns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (dns, host) = (self.clone(), name.as_str().to_owned());
        Box::pin(async move {
            let until = Instant::now() + ASSIGNED;
            loop {
                if let Some(ips) = dns.answer(&host) {
                    // Port 0: the URL's port (or the scheme's) is put in by the connector.
                    let addrs: Vec<SocketAddr> =
                        ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect();
                    return Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs);
                }
                let named = dns.service(&host).is_some();
                if !named || Instant::now() >= until {
                    return Err(
                        Box::new(NxDomain(host)) as Box<dyn std::error::Error + Send + Sync>
                    );
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    }
}

/// POSTs `body` (JSON) to `path` at `addr` as HTTP/1.0 with no `Host` header, over a TCP
/// connection of its own, within 30 s; the status and the body of the answer (read to the end
/// of the connection, as HTTP/1.0 ends an answer).
pub async fn http10_post(
    addr: SocketAddr,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    http10_post_with(addr, path, body, &[]).await
}

/// [`http10_post`] with `headers` besides (never a `Host`).
pub async fn http10_post_with(
    addr: SocketAddr,
    path: &str,
    body: &str,
    headers: &[(&str, String)],
) -> std::io::Result<(u16, String)> {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let request = format!(
            "POST {path} HTTP/1.0\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await?;
        let mut all = Vec::new();
        s.read_to_end(&mut all).await?;
        Ok::<_, std::io::Error>(all)
    };
    let all = tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 30 s"))??;
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of the answer's head"))?;
    let head = String::from_utf8_lossy(&all[..end]);
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status in the answer"))?;
    Ok((
        status,
        String::from_utf8_lossy(&all[end + 4..]).into_owned(),
    ))
}
