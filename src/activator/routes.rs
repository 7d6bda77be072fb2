//! Which upstream a request goes to, and how each route holds requests.
//!
//! Routes come from a YAML file (`--routes FILE`), from the one-route shorthand flags, or are
//! learned from the slices `serve` writes ([`super::learn`]). On the activator's shared port a
//! request takes the first route whose names and `pathPrefix` both match, where either may be
//! left out; on a model's own port ([`super::table`]) the port alone places it. A route backed
//! by a Service answers to every name a client in the cluster may call that Service by
//! ([`Names`]): the short name, `NAME.NS`, `NAME.NS.svc` and the FQDN in the cluster's domain,
//! with or without a port, besides any `host` it gives. Each route names its upstream URL, how
//! readiness is known (the EndpointSlices of a Service, or an active probe of a health path),
//! its bounds, and the host key under which `/queue` reports its counts.

use serde::Deserialize;
use std::time::Duration;

/// The routes file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutesFile {
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
}

/// The cluster DNS's default domain, the last labels of a Service's FQDN.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Where routes are read: the namespace a route's Service is in when it names none (the
/// activator's own), and the cluster's DNS domain its names end in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub namespace: String,
    pub domain: String,
}

impl Context {
    /// `namespace` in the default cluster domain.
    pub fn new(namespace: &str) -> Context {
        Context {
            namespace: namespace.to_owned(),
            domain: DEFAULT_CLUSTER_DOMAIN.to_owned(),
        }
    }
}

/// A model as the cluster names it: a Service in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Model {
    pub namespace: String,
    pub service: String,
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.service)
    }
}

impl Model {
    /// `NAME.NAMESPACE.svc`: the key a learned model's counts are reported under, and the host
    /// requests are forwarded with.
    pub fn svc_host(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }

    /// Every name a client in the cluster reaches the Service by, as a `Host` header carries it
    /// (port dropped, lower case): `NAME`, `NAME.NS`, `NAME.NS.svc`, `NAME.NS.svc.DOMAIN`.
    pub fn names(&self, domain: &str) -> Vec<String> {
        let (s, ns) = (&self.service, &self.namespace);
        let mut out = vec![s.clone(), format!("{s}.{ns}"), self.svc_host()];
        if !domain.is_empty() {
            out.push(format!("{s}.{ns}.svc.{domain}"));
        }
        out
    }
}

/// One route as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RouteSpec {
    /// Host header to match (port ignored); any host when absent.
    #[serde(default)]
    pub host: Option<String>,
    /// Path prefix to match; any path when absent.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Where requests go: `http://HOST:PORT`.
    pub upstream: String,
    /// A Service whose EndpointSlices say when the upstream is ready.
    #[serde(default)]
    pub service: Option<String>,
    /// The Service's namespace (default: the activator's).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Probe this path on the upstream instead of watching EndpointSlices.
    #[serde(default)]
    pub health_path: Option<String>,
    /// Requests held at once before new ones get 503.
    #[serde(default = "default_max_held")]
    pub max_held: usize,
    /// How long a request is held before it gets 504.
    #[serde(default = "default_hold_timeout")]
    pub hold_timeout_seconds: f64,
    /// The host key in `/queue` (default: `host`, else the Service, else the upstream's host).
    #[serde(default)]
    pub counts_host: Option<String>,
    /// How long a held request whose client gave up still counts as held, so a client that
    /// retries finds the model waking rather than the count back at zero.
    #[serde(default = "default_abandon_lease")]
    pub abandon_lease_seconds: f64,
    /// Released requests in flight at once; the rest send, in order, as responses end.
    #[serde(default = "default_release_concurrency")]
    pub release_concurrency: usize,
    /// Answer a held streaming request (`"stream": true`) at once and send an SSE comment this
    /// often until the model answers; off when absent.
    #[serde(default)]
    pub keep_alive_seconds: Option<f64>,
    /// Send requests straight to the ready endpoints (the Service's EndpointSlices, or
    /// `endpoints`), not through `upstream`: what serve mode needs, where the model's Service
    /// also routes to the activator while it is in the path.
    #[serde(default)]
    pub direct: bool,
    /// The EndpointSlice port to send to when a slice has several (`direct` routes).
    #[serde(default)]
    pub port_name: Option<String>,
    /// The model's replicas by address (`http://HOST:PORT` each), each probed on `healthPath`:
    /// the route sends to those that answer. For servers outside Kubernetes; implies `direct`.
    #[serde(default)]
    pub endpoints: Vec<String>,
}

fn default_release_concurrency() -> usize {
    64
}

fn default_max_held() -> usize {
    1000
}

fn default_abandon_lease() -> f64 {
    10.0
}

fn default_hold_timeout() -> f64 {
    300.0
}

/// How a route knows its upstream is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    EndpointSlices {
        service: String,
        namespace: String,
    },
    /// Probe `path` on the upstream, or on each of the route's `endpoints`.
    Probe {
        path: String,
    },
    /// The ready endpoints as the program embedding the activator gives them (the demo's
    /// Service); never from a routes file.
    Given(GivenEndpoints),
}

/// Ready endpoints handed over by an embedding program, as they change.
#[derive(Debug, Clone)]
pub struct GivenEndpoints(pub tokio::sync::watch::Receiver<Vec<http::uri::Authority>>);

impl PartialEq for GivenEndpoints {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_channel(&other.0)
    }
}

impl Eq for GivenEndpoints {}

/// A checked route.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub host: Option<String>,
    /// Every host name that places a request here on the shared port (the `host`, and the
    /// Service's names), lower case, no port.
    pub names: Vec<String>,
    /// Any host matches (a route of the file that gives no `host`).
    pub any_host: bool,
    /// The Service the route holds requests for, when it is backed by one.
    pub model: Option<Model>,
    pub path_prefix: Option<String>,
    /// Scheme and authority, e.g. `http://chat.llm.svc:8000`, no trailing slash.
    pub upstream: String,
    /// The upstream's authority, and the same as the `Host` header forwarded requests carry.
    pub upstream_authority: http::uri::Authority,
    pub host_header: http::HeaderValue,
    pub readiness: Readiness,
    pub max_held: usize,
    pub hold_timeout: Duration,
    pub counts_host: String,
    /// How long an abandoned hold still counts as held.
    pub abandon_lease: Duration,
    /// Released requests in flight at once.
    pub release_concurrency: usize,
    /// SSE keep-alive for held streaming requests, when set.
    pub keep_alive: Option<Duration>,
    /// Send to the ready endpoints readiness names, not to `upstream`.
    pub direct: bool,
    /// The EndpointSlice port to send to, for slices with several.
    pub port_name: Option<String>,
    /// Probed endpoints (`endpoints` in the file), each an authority.
    pub endpoints: Vec<http::uri::Authority>,
}

/// A route that cannot be used, naming the route and field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("route {index} ({field}): {message}")]
pub struct RouteError {
    pub index: usize,
    pub field: &'static str,
    pub message: String,
}

impl RouteSpec {
    /// A route to `upstream` for any host and path, with the default bounds; readiness still to
    /// be said (`service` or `health_path`).
    pub fn to_upstream(upstream: &str) -> RouteSpec {
        RouteSpec {
            host: None,
            path_prefix: None,
            upstream: upstream.to_owned(),
            service: None,
            namespace: None,
            health_path: None,
            max_held: default_max_held(),
            hold_timeout_seconds: default_hold_timeout(),
            counts_host: None,
            abandon_lease_seconds: default_abandon_lease(),
            release_concurrency: default_release_concurrency(),
            keep_alive_seconds: None,
            direct: false,
            port_name: None,
            endpoints: Vec::new(),
        }
    }

    /// Checks the route; `default_namespace` is the activator's own, in the default cluster
    /// domain.
    pub fn check(&self, index: usize, default_namespace: &str) -> Result<Route, RouteError> {
        self.check_in(index, &Context::new(default_namespace))
    }

    /// Checks the route in `ctx`.
    pub fn check_in(&self, index: usize, ctx: &Context) -> Result<Route, RouteError> {
        let default_namespace = ctx.namespace.as_str();
        let bad = |field, message: String| RouteError {
            index,
            field,
            message,
        };
        let rest = self.upstream.strip_prefix("http://").ok_or_else(|| {
            bad(
                "upstream",
                format!("{:?} must be an http:// URL", self.upstream),
            )
        })?;
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(bad(
                "upstream",
                format!(
                    "{:?} must be http://HOST[:PORT] with no path",
                    self.upstream
                ),
            ));
        }
        let not_authority = || bad("upstream", format!("{authority:?} is not a host[:port]"));
        let upstream_authority: http::uri::Authority =
            authority.parse().map_err(|_| not_authority())?;
        let host_header = http::HeaderValue::from_str(authority).map_err(|_| not_authority())?;
        if let Some(p) = &self.path_prefix {
            if !p.starts_with('/') {
                return Err(bad("pathPrefix", format!("{p:?} must start with /")));
            }
        }
        let readiness = match (&self.service, &self.health_path) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "healthPath",
                    "give service or healthPath, not both".into(),
                ))
            }
            (Some(service), None) => Readiness::EndpointSlices {
                service: service.clone(),
                namespace: self
                    .namespace
                    .clone()
                    .unwrap_or_else(|| default_namespace.to_owned()),
            },
            (None, Some(path)) if path.starts_with('/') => Readiness::Probe { path: path.clone() },
            (None, Some(path)) => {
                return Err(bad("healthPath", format!("{path:?} must start with /")))
            }
            (None, None) => {
                return Err(bad(
                    "service",
                    "say how readiness is known: service (EndpointSlices) or healthPath".into(),
                ))
            }
        };
        if self.max_held == 0 {
            return Err(bad("maxHeld", "must be at least 1".into()));
        }
        let hold_timeout = infscale_core::limits::seconds(
            self.hold_timeout_seconds,
            false,
            infscale_core::limits::MAX_HOLD_SECONDS,
        )
        .map_err(|e| bad("holdTimeoutSeconds", e))?;
        let abandon_lease = infscale_core::limits::seconds(
            self.abandon_lease_seconds,
            true,
            infscale_core::limits::MAX_HOLD_SECONDS,
        )
        .map_err(|e| bad("abandonLeaseSeconds", e))?;
        let keep_alive = self
            .keep_alive_seconds
            .map(|s| {
                infscale_core::limits::seconds(s, false, infscale_core::limits::MAX_HOLD_SECONDS)
            })
            .transpose()
            .map_err(|e| bad("keepAliveSeconds", e))?;
        let endpoints = self
            .endpoints
            .iter()
            .map(|e| endpoint_authority(e).map_err(|m| bad("endpoints", m)))
            .collect::<Result<Vec<_>, _>>()?;
        if !endpoints.is_empty() && !matches!(readiness, Readiness::Probe { .. }) {
            return Err(bad(
                "endpoints",
                "probed endpoints need healthPath (a Service's endpoints come from its slices)"
                    .into(),
            ));
        }
        let direct = self.direct || !endpoints.is_empty();
        if direct && endpoints.is_empty() && self.service.is_none() {
            return Err(bad(
                "direct",
                "direct needs the Service whose EndpointSlices name the replicas, or endpoints"
                    .into(),
            ));
        }
        if self.release_concurrency == 0 {
            return Err(bad("releaseConcurrency", "must be at least 1".into()));
        }
        let host_of_upstream = authority.split(':').next().unwrap_or(authority).to_owned();
        let counts_host = self
            .counts_host
            .clone()
            .or_else(|| self.host.clone())
            .or_else(|| self.service.clone())
            .unwrap_or(host_of_upstream);
        let host = self
            .host
            .as_deref()
            .map(|h| route_host(h).map_err(|e| bad("host", e)))
            .transpose()?;
        let model = match &readiness {
            Readiness::EndpointSlices { service, namespace } => Some(Model {
                namespace: namespace.clone(),
                service: service.clone(),
            }),
            _ => None,
        };
        let mut names: Vec<String> = host.iter().cloned().collect();
        if let Some(m) = &model {
            names.extend(m.names(&ctx.domain));
        }
        names.dedup();
        Ok(Route {
            any_host: host.is_none(),
            names,
            model,
            host,
            path_prefix: self.path_prefix.clone(),
            upstream: format!("http://{authority}"),
            upstream_authority,
            host_header,
            readiness,
            max_held: self.max_held,
            hold_timeout,
            counts_host,
            abandon_lease,
            release_concurrency: self.release_concurrency,
            keep_alive,
            direct,
            port_name: self.port_name.clone(),
            endpoints,
        })
    }
}

/// An endpoint as written, `http://HOST:PORT`, as the authority requests are sent to.
fn endpoint_authority(e: &str) -> Result<http::uri::Authority, String> {
    let rest = e
        .strip_prefix("http://")
        .ok_or_else(|| format!("{e:?} must be an http:// URL"))?
        .trim_end_matches('/');
    if rest.is_empty() || rest.contains('/') {
        return Err(format!("{e:?} must be http://HOST[:PORT] with no path"));
    }
    rest.parse()
        .map_err(|_| format!("{rest:?} is not a host[:port]"))
}

/// A route's `host` as requests are compared with it: lower case, a port dropped. Anything a
/// `Host` header with its port stripped can never equal (empty, a second port, an unbracketed
/// IPv6 address, not a URI authority) is refused: such a route would never match.
fn route_host(h: &str) -> Result<String, String> {
    let host = strip_port(h).to_ascii_lowercase();
    let bracketed = host.starts_with('[') && host.ends_with(']');
    let ok = !host.is_empty()
        && !host.contains('@')
        && (bracketed || !host.contains(':'))
        && host.parse::<http::uri::Authority>().is_ok()
        && strip_port(&host) == host;
    if ok {
        Ok(host)
    } else {
        Err(format!("{h:?} is not a host name (HOST or HOST:PORT)"))
    }
}

fn strip_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.is_empty() => h,
        _ => host,
    }
}

/// A request's host as routes compare it: the port dropped, a trailing dot (an absolute DNS
/// name) dropped.
fn bare_host(host: &str) -> &str {
    let h = strip_port(host);
    h.strip_suffix('.').filter(|h| !h.is_empty()).unwrap_or(h)
}

/// What a model learned from `serve`'s slice says of itself: its Service, the Service port's
/// name requests go to, and the bounds the trigger asked for (already within the activator's).
#[derive(Debug, Clone, PartialEq)]
pub struct Learned {
    pub model: Model,
    pub port_name: Option<String>,
    pub max_held: usize,
    pub hold_timeout: Duration,
    pub keep_alive: Option<Duration>,
}

impl Route {
    /// The route of a learned model: held for its Service whatever name the client used, sent
    /// straight to the ready pods of its Service's own slices at `port_name`, counted under
    /// `NAME.NS.svc`. It matches no host it was not named by: the shared port serves many.
    pub fn learned(l: &Learned, domain: &str) -> Route {
        let host = l.model.svc_host();
        // A Service and a namespace are DNS labels: the host is an authority and a header value.
        let upstream_authority = host
            .parse::<http::uri::Authority>()
            .unwrap_or_else(|_| http::uri::Authority::from_static("invalid"));
        let host_header = http::HeaderValue::from_str(&host)
            .unwrap_or_else(|_| http::HeaderValue::from_static("invalid"));
        Route {
            host: None,
            names: l.model.names(domain),
            any_host: false,
            model: Some(l.model.clone()),
            path_prefix: None,
            upstream: format!("http://{host}"),
            upstream_authority,
            host_header,
            readiness: Readiness::EndpointSlices {
                service: l.model.service.clone(),
                namespace: l.model.namespace.clone(),
            },
            max_held: l.max_held,
            hold_timeout: l.hold_timeout,
            counts_host: host,
            abandon_lease: Duration::from_secs_f64(default_abandon_lease()),
            release_concurrency: default_release_concurrency(),
            keep_alive: l.keep_alive,
            direct: true,
            port_name: l.port_name.clone(),
            endpoints: Vec::new(),
        }
    }

    /// Whether the route takes requests for `host` (whatever their path).
    pub fn matches_host(&self, host: Option<&str>) -> bool {
        self.any_host
            || host.is_some_and(|got| {
                let got = bare_host(got);
                self.names.iter().any(|n| got.eq_ignore_ascii_case(n))
            })
    }

    pub fn matches(&self, host: Option<&str>, path: &str) -> bool {
        self.matches_host(host)
            && self
                .path_prefix
                .as_ref()
                .is_none_or(|p| path.starts_with(p.as_str()))
    }
}

/// The index of the first of `routes` that matches a request's `Host` header (or the URI's
/// host, for an absolute-form request) and path.
pub fn pick<'a>(
    routes: impl IntoIterator<Item = &'a Route>,
    headers: &http::HeaderMap,
    uri: &http::Uri,
) -> Option<usize> {
    let host = request_host(headers, uri);
    let path = uri.path();
    routes.into_iter().position(|r| r.matches(host, path))
}

/// The host a request names: its own authority first (absolute form, HTTP/2's `:authority`),
/// then its `Host` header.
pub fn request_host<'a>(headers: &'a http::HeaderMap, uri: &'a http::Uri) -> Option<&'a str> {
    uri.host().or_else(|| {
        headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
    })
}

/// Reads and checks a routes file that must hold at least one route.
pub fn parse(name: &str, text: &str, default_namespace: &str) -> Result<Vec<Route>, String> {
    let routes = parse_in(name, text, &Context::new(default_namespace))?;
    if routes.is_empty() {
        return Err(format!("{name}: no routes"));
    }
    Ok(routes)
}

/// Reads and checks a routes file in `ctx`; an empty list is no error (the activator may learn
/// every model from the cluster).
pub fn parse_in(name: &str, text: &str, ctx: &Context) -> Result<Vec<Route>, String> {
    // An empty file, or one of comments only, is an empty list.
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(Vec::new());
    }
    let file: RoutesFile = serde_yaml::from_str(text).map_err(|e| format!("{name}: {e}"))?;
    file.routes
        .iter()
        .enumerate()
        .map(|(i, r)| r.check_in(i, ctx).map_err(|e| format!("{name}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(upstream: &str) -> RouteSpec {
        RouteSpec {
            health_path: Some("/health".into()),
            ..RouteSpec::to_upstream(upstream)
        }
    }

    #[test]
    fn a_host_no_request_could_match_is_refused() {
        // Found by the fuzzer (fuzz/regressions/routes/): "a:80:80" kept "a:80", which a Host
        // header's stripped "a" never equals.
        for host in [
            "chat.llm.svc:80:80",
            "",
            ":80",
            "::1",
            "user@chat",
            "chat llm",
        ] {
            let text = format!(
                "routes:\n  - host: {host:?}\n    upstream: http://chat:8000\n    service: chat\n"
            );
            let err = parse("routes.yaml", &text, "llm").expect_err(host);
            assert!(err.contains("(host)"), "{host:?}: {err}");
        }
        for (host, kept) in [
            ("Chat.LLM.svc:8080", "chat.llm.svc"),
            ("[::1]:80", "[::1]"),
            ("10.0.0.1", "10.0.0.1"),
        ] {
            let text = format!(
                "routes:\n  - host: {host:?}\n    upstream: http://chat:8000\n    service: chat\n"
            );
            let routes = parse("routes.yaml", &text, "llm").expect(host);
            assert_eq!(routes[0].host.as_deref(), Some(kept));
            assert!(routes[0].matches(Some(host), "/"));
        }
    }

    #[test]
    fn a_service_route_answers_to_every_name_of_its_service() {
        let text = "routes:\n  - host: chat.llm.svc\n    upstream: http://chat.llm.svc:8000\n    service: chat\n    namespace: llm\n";
        let ctx = Context {
            namespace: "infscale".into(),
            domain: "example.internal".into(),
        };
        let routes = parse_in("routes.yaml", text, &ctx).unwrap();
        let r = &routes[0];
        for host in [
            "chat",
            "chat:8000",
            "chat.llm",
            "CHAT.llm:80",
            "chat.llm.svc",
            "chat.llm.svc:8000",
            "chat.llm.svc.example.internal",
            "chat.llm.svc.example.internal.",
            "chat.llm.svc.example.internal.:8000",
        ] {
            assert!(r.matches(Some(host), "/v1/completions"), "{host}");
        }
        for host in [
            "chat.other",
            "chat.llm.svc.cluster.local",
            "chatx",
            "10.0.0.1",
            ".",
        ] {
            assert!(!r.matches(Some(host), "/"), "{host}");
        }
        assert!(
            !r.matches(None, "/"),
            "a Host-less request is placed by port only"
        );
        let m = r.model.clone().unwrap();
        assert_eq!(m.to_string(), "llm/chat");
        // A Service-backed route without a host still takes any host (the file's old meaning).
        let any = parse_in(
            "r.yaml",
            "routes:\n  - upstream: http://chat:8000\n    service: chat\n",
            &ctx,
        )
        .unwrap();
        assert!(any[0].matches(Some("whatever"), "/") && any[0].matches(None, "/"));
        assert_eq!(any[0].model.as_ref().unwrap().namespace, "infscale");
    }

    #[test]
    fn a_learned_route_is_its_services_and_nothing_else() {
        let l = Learned {
            model: Model {
                namespace: "llm".into(),
                service: "chat".into(),
            },
            port_name: Some("http".into()),
            max_held: 7,
            hold_timeout: Duration::from_secs(9),
            keep_alive: None,
        };
        let r = Route::learned(&l, "cluster.local");
        assert_eq!(r.counts_host, "chat.llm.svc");
        assert!(r.direct && !r.any_host);
        assert!(r.matches(Some("chat.llm.svc.cluster.local:8000"), "/"));
        assert!(r.matches(Some("chat"), "/"));
        assert!(!r.matches(Some("embed"), "/") && !r.matches(None, "/"));
        assert_eq!(r.host_header, "chat.llm.svc");
        assert_eq!((r.max_held, r.hold_timeout), (7, Duration::from_secs(9)));
    }

    #[test]
    fn an_empty_routes_file_is_no_route_but_no_error() {
        let ctx = Context::new("llm");
        assert!(parse_in("r.yaml", "", &ctx).unwrap().is_empty());
        assert!(parse_in("r.yaml", "# none yet\n", &ctx).unwrap().is_empty());
        assert!(parse_in("r.yaml", "routes: []\n", &ctx).unwrap().is_empty());
        assert!(parse("r.yaml", "routes: []\n", "llm").is_err());
    }

    #[test]
    fn a_routes_file() {
        let text = "routes:\n  - host: chat.llm.svc\n    upstream: http://chat.llm.svc:8000\n    service: chat\n  - pathPrefix: /v1/embeddings\n    upstream: http://embed:8080/\n    healthPath: /health\n    maxHeld: 5\n";
        let routes = parse("routes.yaml", text, "llm").unwrap();
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0].counts_host, "chat.llm.svc");
        assert_eq!(
            routes[0].readiness,
            Readiness::EndpointSlices {
                service: "chat".into(),
                namespace: "llm".into()
            }
        );
        assert!(routes[0].matches(Some("chat.llm.svc:80"), "/v1/chat/completions"));
        assert!(!routes[0].matches(Some("other"), "/"));
        assert!(routes[1].matches(Some("anything"), "/v1/embeddings"));
        assert!(!routes[1].matches(Some("anything"), "/v1/chat"));
        assert_eq!(routes[1].upstream, "http://embed:8080");
        assert_eq!(routes[1].counts_host, "embed");
    }

    #[test]
    fn direct_routes_need_somewhere_to_learn_the_replicas() {
        let e = parse(
            "r.yaml",
            "routes:\n  - upstream: http://a:1\n    healthPath: /h\n    direct: true\n",
            "ns",
        )
        .unwrap_err();
        assert!(e.contains("route 0 (direct)"), "{e}");
        let e = parse(
            "r.yaml",
            "routes:\n  - upstream: http://a:1\n    service: a\n    endpoints: [http://b:2]\n",
            "ns",
        )
        .unwrap_err();
        assert!(e.contains("route 0 (endpoints)"), "{e}");
        let e = parse(
            "r.yaml",
            "routes:\n  - upstream: http://a:1\n    healthPath: /h\n    endpoints: [http://b:2/x]\n",
            "ns",
        )
        .unwrap_err();
        assert!(e.contains("route 0 (endpoints)"), "{e}");
        let routes = parse(
            "r.yaml",
            "routes:\n  - upstream: http://a:1\n    healthPath: /h\n    endpoints: [http://b:2, http://c:3/]\n",
            "ns",
        )
        .unwrap();
        assert!(routes[0].direct);
        assert_eq!(routes[0].endpoints.len(), 2);
        let routes = parse(
            "r.yaml",
            "routes:\n  - upstream: http://a:1\n    service: a\n    direct: true\n    portName: http\n",
            "ns",
        )
        .unwrap();
        assert!(routes[0].direct && routes[0].port_name.as_deref() == Some("http"));
    }

    #[test]
    fn errors_name_the_route_and_field() {
        let e = parse("r.yaml", "routes:\n  - upstream: http://a:1\n", "ns").unwrap_err();
        assert!(e.contains("route 0 (service)"), "{e}");
        let e = spec("https://a:1").check(3, "ns").unwrap_err();
        assert_eq!((e.index, e.field), (3, "upstream"));
        assert_eq!(
            spec("http://a:1/v1").check(0, "ns").unwrap_err().field,
            "upstream"
        );
        let e = parse(
            "r.yaml",
            "routes:\n  - upstream: http://a:1\n    colour: red\n",
            "ns",
        )
        .unwrap_err();
        assert!(e.contains("colour"), "{e}");
        let mut s = spec("http://a:1");
        s.max_held = 0;
        assert_eq!(s.check(0, "ns").unwrap_err().field, "maxHeld");
    }
}
