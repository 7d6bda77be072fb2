//! Addresses in trigger metadata, parsed and compared as URLs, never as text.
//!
//! Whoever can write a ScaledObject chooses its metadata, and the scaler fetches what it names
//! from inside the cluster, so an address is only accepted in a form with one meaning: an
//! `activatorUrl` is an http(s) URL with no userinfo, query or fragment, whose host is a Service
//! in the ScaledObject's own namespace (`NAME.NS.svc[.cluster.local]`, any port) or whose scheme,
//! host, port and path prefix equal an entry the scaler was started with (`--allow-activator`);
//! a `metricsPath` is an absolute path without dot segments, `%`-escapes of `/`, `.` or `\`,
//! `@`, queries, fragments or control characters, so that the pod proxy's path cannot climb out
//! of the pod.

use infscale_core::limits::{PATH_BYTES, URL_BYTES};
use url::{Host, Url};

/// One `--allow-activator` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
}

/// Activators the scaler may read besides Services in the ScaledObject's own namespace: the
/// `--allow-activator` entries, and Services in the scaler's own namespace (where the shipped
/// activator runs beside it, and no tenant writes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedActivators(Vec<Allowed>, Option<String>);

impl AllowedActivators {
    /// Parses `--allow-activator` entries; an entry that is not a clean URL is an error naming it.
    pub fn parse(entries: &[String]) -> Result<AllowedActivators, String> {
        let mut allowed = Vec::with_capacity(entries.len());
        for entry in entries {
            let url = clean_url(entry)
                .map_err(|e| format!("--allow-activator {:?}: {e}", shown(entry)))?;
            allowed.push(Allowed {
                scheme: url.scheme().to_owned(),
                host: url.host_str().unwrap_or_default().to_owned(),
                port: url.port_or_known_default(),
                path: url.path().trim_end_matches('/').to_owned(),
            });
        }
        Ok(AllowedActivators(allowed, None))
    }

    /// These, and any Service in namespace `own` (the scaler's).
    pub fn with_own_namespace(mut self, own: Option<String>) -> AllowedActivators {
        self.1 = own;
        self
    }

    /// The activator's base URL for a trigger in `namespace`, normalised, or why it is refused.
    pub fn check(&self, raw: &str, namespace: &str) -> Result<String, String> {
        let url = clean_url(raw)?;
        let path = url.path().trim_end_matches('/');
        let listed = self.0.iter().any(|a| {
            a.scheme == url.scheme()
                && Some(a.host.as_str()) == url.host_str()
                && a.port == url.port_or_known_default()
                && (path == a.path || path.starts_with(&format!("{}/", a.path)))
        });
        let own = self.1.as_deref().is_some_and(|own| in_namespace(&url, own));
        if !listed && !own && !in_namespace(&url, namespace) {
            let besides = match &self.1 {
                Some(own) => format!(", nor one in the scaler's own namespace {own}"),
                None => String::new(),
            };
            return Err(format!(
                "{:?} is neither a Service in namespace {namespace} \
                 (http://NAME.{namespace}.svc:PORT){besides}, nor an activator this scaler was \
                 started with (--allow-activator)",
                shown(raw)
            ));
        }
        Ok(url.as_str().trim_end_matches('/').to_owned())
    }
}

/// `raw` as an error may show it: with any userinfo (`user:password@`) replaced by `***@`, so a
/// password written into a URL is not repeated to KEDA (which logs the error and puts it in the
/// ScaledObject's events) or into the scaler's log.
fn shown(raw: &str) -> String {
    if let Some((scheme, rest)) = raw.split_once("://") {
        let authority = rest.find(['/', '?', '#']).map_or(rest, |end| &rest[..end]);
        if let Some(at) = authority.rfind('@') {
            return format!("{scheme}://***@{}", &rest[at + 1..]);
        }
    }
    raw.to_owned()
}

/// An http(s) URL with a host and nothing that could make it mean two things.
fn clean_url(raw: &str) -> Result<Url, String> {
    if raw.len() > URL_BYTES {
        return Err(format!("{} bytes, over {URL_BYTES}", raw.len()));
    }
    if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("has whitespace or control characters".to_owned());
    }
    let shown = shown(raw);
    let url = Url::parse(raw).map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{shown:?}: userinfo (user@ or user:pass@) is not allowed"
        ));
    }
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!("{shown:?}: the scheme must be http or https"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{shown:?}: a query or fragment is not allowed"));
    }
    if url.host().is_none() {
        return Err(format!("{shown:?}: no host"));
    }
    Ok(url)
}

/// The Service a checked activator URL names, `(namespace, name, port, scheme)`, when its host
/// is `NAME.NAMESPACE.svc` or `NAME.NAMESPACE.svc.cluster.local` (in the ScaledObject's namespace,
/// or one the scaler was started with: [`AllowedActivators::check`] took it): every ready pod
/// behind it is then followed, not one that kube-proxy picks.
pub fn service_named(url: &str) -> Option<(String, String, u16, String)> {
    let url = Url::parse(url).ok()?;
    let Some(Host::Domain(host)) = url.host() else {
        return None;
    };
    let labels: Vec<&str> = host.split('.').collect();
    let (name, ns) = match labels.as_slice() {
        [name, ns, "svc"] | [name, ns, "svc", "cluster", "local"] => (*name, *ns),
        _ => return None,
    };
    if !in_namespace(&url, ns) {
        return None;
    }
    Some((
        ns.to_owned(),
        name.to_owned(),
        url.port_or_known_default()?,
        url.scheme().to_owned(),
    ))
}

/// A `servicePort`: a Service port's name (a DNS label of at most 15 characters, as Kubernetes
/// names ports) or its number.
pub fn service_port(raw: &str) -> Result<String, String> {
    let v = raw.trim();
    if let Ok(n) = v.parse::<u16>() {
        return if n > 0 {
            Ok(n.to_string())
        } else {
            Err("port 0 is no port".to_owned())
        };
    }
    let ok = !v.is_empty()
        && v.len() <= 15
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-')
        && v.bytes().any(|b| b.is_ascii_lowercase());
    if ok {
        Ok(v.to_owned())
    } else {
        Err(format!("{raw:?} is neither a port's name nor its number"))
    }
}

/// `NAME.NAMESPACE.svc` or `NAME.NAMESPACE.svc.cluster.local`, in `namespace`.
fn in_namespace(url: &Url, namespace: &str) -> bool {
    let Some(Host::Domain(host)) = url.host() else {
        return false;
    };
    let labels: Vec<&str> = host.split('.').collect();
    let (service, ns, tail) = match labels.as_slice() {
        [service, ns, tail @ ..] => (*service, *ns, tail),
        _ => return false,
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    label_ok(service) && ns == namespace && (tail == ["svc"] || tail == ["svc", "cluster", "local"])
}

/// A `metricsPath` as the scaler will send it, or why it is refused.
pub fn metrics_path(raw: &str) -> Result<String, String> {
    if raw.len() > PATH_BYTES {
        return Err(format!("{} bytes, over {PATH_BYTES}", raw.len()));
    }
    if !raw.starts_with('/') {
        return Err(format!("{raw:?} is not an absolute path"));
    }
    if let Some(c) = raw
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || matches!(c, '@' | '?' | '#' | '\\'))
    {
        return Err(format!(
            "{raw:?} has {c:?}: a path only (no queries, fragments, @, \\ or control characters)"
        ));
    }
    let lower = raw.to_ascii_lowercase();
    for escape in ["%2e", "%2f", "%5c", "%40", "%00"] {
        if lower.contains(escape) {
            return Err(format!(
                "{raw:?} escapes a character a path must not hide ({escape})"
            ));
        }
    }
    let segments: Vec<&str> = raw[1..].split('/').collect();
    for (i, segment) in segments.iter().enumerate() {
        if *segment == "." || *segment == ".." {
            return Err(format!("{raw:?} has a dot segment"));
        }
        if segment.is_empty() && i + 1 < segments.len() {
            return Err(format!("{raw:?} has an empty segment (//)"));
        }
    }
    Ok(raw.to_owned())
}

/// A serve-mode probe URL (`serviceUrl`): `http://HOST[:PORT]`, no credentials, no path, whose
/// host is the trigger's own `service` in the ScaledObject's `namespace`, by name (`NAME`,
/// `NAME.NS`, `NAME.NS.svc`, `NAME.NS.svc.cluster.local`), or an IP address, which must then be
/// that Service's ClusterIP when the API is read ([`service_url_fits`]). The short forms are
/// returned as `NAME.NS.svc`, which names that one Service from any namespace (a bare `NAME`
/// would resolve in the scaler's own); the URL is returned without a trailing slash.
pub fn service_url(raw: &str, service: &str, namespace: &str) -> Result<String, String> {
    let shown = shown(raw);
    if !raw.starts_with("http://") {
        return Err(format!("{shown:?} must be an http:// URL"));
    }
    let mut url = clean_url(raw)?;
    if url.path() != "/" {
        return Err(format!("{shown:?} must be http://HOST[:PORT] with no path"));
    }
    let own = format!("{service}.{namespace}.svc");
    let refused = || {
        format!(
            "{shown:?} is not Service {service} of namespace {namespace}: the host must be \
             {own} (or {service}, {service}.{namespace}, {own}.cluster.local) or its ClusterIP"
        )
    };
    match url.host() {
        Some(Host::Domain(host)) => {
            let host = host.trim_end_matches('.').to_owned();
            let labels: Vec<&str> = host.split('.').collect();
            match labels.as_slice() {
                [name] if *name == service => {}
                [name, ns] | [name, ns, "svc"] | [name, ns, "svc", "cluster", "local"]
                    if *name == service && *ns == namespace => {}
                _ => return Err(refused()),
            }
            if labels.len() < 5 {
                url.set_host(Some(&own)).map_err(|_| refused())?;
            }
        }
        Some(Host::Ipv4(ip)) => {
            if ip.is_unspecified() || ip.is_link_local() || ip.is_multicast() || ip.is_broadcast() {
                return Err(format!("{shown:?}: {ip} is never a Service's ClusterIP"));
            }
        }
        Some(Host::Ipv6(ip)) => {
            let link_local = (ip.segments()[0] & 0xffc0) == 0xfe80;
            if ip.is_unspecified() || ip.is_multicast() || link_local {
                return Err(format!("{shown:?}: {ip} is never a Service's ClusterIP"));
            }
        }
        None => return Err(refused()),
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// Whether `serviceUrl` (as [`service_url`] returned it) fits the Service the API shows: an IP
/// host is one of its `cluster_ips`, and the port one of its `ports`, so that the probe goes
/// through that Service and nowhere else (a ClusterIP at another port can reach what listens on
/// the node). An error says which and what the Service has.
pub fn service_url_fits(
    url: &str,
    service: &str,
    cluster_ips: &[std::net::IpAddr],
    ports: &[u16],
) -> Result<(), String> {
    let parsed = Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    let ip = match parsed.host() {
        Some(Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
        _ => None,
    };
    if let Some(ip) = ip {
        if !cluster_ips.contains(&ip) {
            let has: Vec<String> = cluster_ips.iter().map(|i| i.to_string()).collect();
            return Err(format!(
                "{url:?}: {ip} is not Service {service}'s ClusterIP ({})",
                if has.is_empty() {
                    "it has none".to_owned()
                } else {
                    has.join(", ")
                }
            ));
        }
    }
    let port = parsed.port_or_known_default().unwrap_or(80);
    if !ports.contains(&port) {
        let has: Vec<String> = ports.iter().map(|p| p.to_string()).collect();
        return Err(format!(
            "{url:?}: port {port} is not a port of Service {service} ({})",
            has.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str]) -> AllowedActivators {
        AllowedActivators::parse(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>())
            .unwrap()
    }

    #[test]
    fn services_in_the_scalers_own_namespace_are_allowed_too() {
        let own = AllowedActivators::default().with_own_namespace(Some("infscale".into()));
        assert!(own
            .check("http://infscale-activator-admin.infscale.svc:9092", "llm")
            .is_ok());
        assert!(own.check("http://act.other.svc:9092", "llm").is_err());
        let e = AllowedActivators::default()
            .check("http://infscale-activator-admin.infscale.svc:9092", "llm")
            .unwrap_err();
        assert!(!e.contains("own namespace"), "{e}");
    }

    #[test]
    fn services_in_the_namespace_only() {
        let none = AllowedActivators::default();
        for ok in [
            "http://act.llm.svc:9092",
            "http://act.llm.svc.cluster.local:9092/",
            "https://act.llm.svc",
        ] {
            assert!(none.check(ok, "llm").is_ok(), "{ok}");
        }
        for refused in [
            // The probes that passed the text rule.
            "http://act.llm.svc:x@127.0.0.1:39092/internal/admin?",
            "http://act.llm.svc@127.0.0.1/",
            "http://act.llm.svc:9092/queue?",
            "http://act.llm.svc:9092/#x",
            "http://act.other.svc:9091",
            "http://169.254.169.254/latest",
            "http://act.llm.svc.evil.com/",
            "ftp://act.llm.svc/",
            "http://act.llm.svc:9092/\r\nx",
            "http://.llm.svc:9092",
        ] {
            assert!(none.check(refused, "llm").is_err(), "{refused}");
        }
    }

    #[test]
    fn allowed_entries_match_host_port_and_path_exactly() {
        let a = allowed(&["http://127.0.0.1:39092", "http://act/admin"]);
        assert_eq!(
            a.check("http://127.0.0.1:39092/", "llm"),
            Ok("http://127.0.0.1:39092".to_owned())
        );
        assert!(a.check("http://act:80/admin/x", "llm").is_ok());
        for refused in [
            "http://127.0.0.1:39092@evil.example/queue",
            "http://127.0.0.1:390920",
            "http://127.0.0.1:39093",
            "https://127.0.0.1:39092",
            "http://act.evil.example/admin",
            "http://act/administrator",
            "http://act/",
        ] {
            assert!(a.check(refused, "llm").is_err(), "{refused}");
        }
        assert!(AllowedActivators::parse(&["http://u:p@host".to_owned()]).is_err());
        let e = AllowedActivators::parse(&["http://u:pw1@host".to_owned()]).unwrap_err();
        assert!(!e.contains("pw1"), "{e}");
        assert!(AllowedActivators::parse(&["not a url".to_owned()]).is_err());
    }

    #[test]
    fn a_service_url_names_the_triggers_own_service_only() {
        for (ok, normal) in [
            ("http://chat", "http://chat.llm.svc"),
            ("http://chat.llm:8000/", "http://chat.llm.svc:8000"),
            ("http://chat.llm.svc:8000", "http://chat.llm.svc:8000"),
            (
                "http://chat.llm.svc.cluster.local:8000",
                "http://chat.llm.svc.cluster.local:8000",
            ),
            ("http://CHAT.llm.svc", "http://chat.llm.svc"),
            ("http://10.96.0.7:80", "http://10.96.0.7"),
            ("http://[fd00::7]:8000", "http://[fd00::7]:8000"),
        ] {
            assert_eq!(
                service_url(ok, "chat", "llm").as_deref(),
                Ok(normal),
                "{ok}"
            );
        }
        for refused in [
            // Another Service, here or in another namespace.
            "http://db.llm.svc:5432",
            "http://db:5432",
            "http://chat.other.svc:8000",
            "http://chat.other",
            "http://kubernetes.default.svc",
            // Another host.
            "http://chat.llm.svc.evil.example",
            "http://evil.example",
            "http://chat.llm.svc.cluster.local.evil.example",
            // Addresses that are never a ClusterIP.
            "http://169.254.169.254",
            "http://0.0.0.0:8000",
            "http://255.255.255.255",
            "http://224.0.0.1",
            "http://[fe80::1]",
            "http://[::]",
            // Not a bare http origin.
            "https://chat.llm.svc",
            "http://chat.llm.svc/latest/meta-data",
            "http://u:p@chat.llm.svc",
            "http://chat.llm.svc@169.254.169.254",
            "http://chat.llm.svc?x",
        ] {
            let e = service_url(refused, "chat", "llm").unwrap_err();
            assert!(!e.is_empty(), "{refused}");
        }
        let e = service_url("http://u:secret@chat", "chat", "llm").unwrap_err();
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn a_service_urls_address_and_port_are_the_services() {
        let ips = ["10.96.0.7".parse().unwrap()];
        assert!(service_url_fits("http://10.96.0.7:8000", "chat", &ips, &[8000]).is_ok());
        assert!(service_url_fits("http://chat.llm.svc", "chat", &ips, &[80]).is_ok());
        for (url, says) in [
            (
                "http://10.96.0.8:8000",
                "not Service chat's ClusterIP (10.96.0.7)",
            ),
            (
                "http://10.96.0.7:10250",
                "port 10250 is not a port of Service chat",
            ),
            ("http://chat.llm.svc:22", "port 22"),
        ] {
            let e = service_url_fits(url, "chat", &ips, &[8000, 80]).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
        let e = service_url_fits("http://10.96.0.7", "chat", &[], &[80]).unwrap_err();
        assert!(e.contains("it has none"), "{e}");
    }

    #[test]
    fn metrics_paths_cannot_climb() {
        for ok in ["/metrics", "/v1/metrics", "/metrics/", "/a-b_c.d/metrics"] {
            assert_eq!(metrics_path(ok).as_deref(), Ok(ok));
        }
        for refused in [
            "metrics",
            "/../../../../api/v1/namespaces/kube-system/secrets",
            "/metrics/..",
            "/./metrics",
            "/%2e%2e/secrets",
            "/%2E%2E%2Fsecrets",
            "/a%2fb",
            "/metrics@evil",
            "/metrics\r\nHost: x",
            "/metrics?x=1",
            "/metrics#x",
            "//metrics",
            "/a\\..\\b",
        ] {
            assert!(metrics_path(refused).is_err(), "{refused:?}");
        }
        assert!(metrics_path(&format!("/{}", "a".repeat(1 << 20))).is_err());
    }
}
