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

use crate::limits::{PATH_BYTES, URL_BYTES};
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

/// A serve-mode probe URL: `http://HOST[:PORT]`, no credentials, no path; returned without a
/// trailing slash.
pub fn service_url(raw: &str) -> Result<String, String> {
    let base = raw.trim_end_matches('/');
    let rest = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("{raw:?} must be an http:// URL"))?;
    let authority: http::uri::Authority = rest
        .parse()
        .map_err(|_| format!("{raw:?} must be http://HOST[:PORT] with no path"))?;
    if rest.is_empty() || rest.contains(['/', '@', '?', '#']) || authority.host().is_empty() {
        return Err(format!("{raw:?} must be http://HOST[:PORT] with no path"));
    }
    Ok(base.to_owned())
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
