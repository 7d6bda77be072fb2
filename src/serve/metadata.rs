//! A ScaledObject trigger's metadata, read into the target it describes.
//!
//! KEDA forwards every key of the trigger's `metadata` (and `scalerAddress`) in each call. The
//! keys follow KEDA's own naming style; a wrong key or value is an `InvalidArgument` that names
//! the key. Keys KEDA itself reads are accepted and ignored. An `activatorUrl` is only accepted
//! when it points at a Service in the ScaledObject's own namespace or at an activator the scaler
//! was started with: a URL in metadata is never fetched blindly.

mod address;
pub(crate) use address::service_url_fits;
mod keda_keys;
mod target_keys;

use crate::serve::activators::Members;
pub use address::AllowedActivators;
use infscale_core::limits::{METADATA_KEYS, METADATA_KEY_BYTES, METADATA_VALUE_BYTES};
use infscale_core::observe::metrics::ServerChoice;
use infscale_core::policy::{keys, Metric, Policy, PolicyError};
pub use keda_keys::{KedaKey, KedaPlace, KEDA_KEYS};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
pub use target_keys::{
    TargetKey, TargetKind, DEFAULT_METRICS_PATH, DEFAULT_METRICS_PORT, DEFAULT_SERVER, TARGET_KEYS,
};

/// Which pods make up the scale target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pods {
    /// The pods of a Deployment (its selector, read from the API).
    Deployment(String),
    /// Pods matching a label selector.
    Selector(String),
}

/// Where the activator's counts are read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ActivatorRef {
    /// The activator pods (`/queue` and `/queue/watch` below each admin base URL).
    pub members: crate::serve::activators::Members,
    /// The host whose counts belong to this target.
    pub host: String,
}

/// Serve mode's settings: the model's Service the activator joins while it is needed.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeMode {
    /// The Service's namespace (the ScaledObject's) and name.
    pub namespace: String,
    pub service: String,
    /// Where to probe the activator through the Service, when given.
    pub url: Option<String>,
    /// The Service port clients call (its name or number); the Service's first when `None`.
    pub service_port: Option<String>,
    /// The activator pods' port for this model's requests; `None`: one of the model's own.
    pub activator_port: Option<u16>,
    /// The activator's bounds for this model, when the trigger sets them.
    pub max_held: Option<u64>,
    pub hold_timeout_s: Option<f64>,
    pub settle_s: f64,
    /// Who writes: the ScaledObject and the trigger (its id), named in the Service's lease.
    pub scaled_object: String,
    pub trigger: String,
    /// The key the trigger reads the activator's counts under (`activatorHost`): an activator
    /// that counts the model under another holds requests no one would see.
    pub counts_host: String,
}

/// Everything a collector needs to know about one scale target.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetSpec {
    pub namespace: String,
    /// The ScaledObject's name.
    pub name: String,
    pub pods: Pods,
    pub server: ServerChoice,
    pub metrics_port: u16,
    pub metrics_path: String,
    pub metrics_scheme: String,
    /// The metric, per-replica target, activation level and lookahead.
    pub policy: Policy,
    pub activator: Option<ActivatorRef>,
    /// Serve mode, when on.
    pub serve_mode: Option<ServeMode>,
    pub scrape_interval: Duration,
    pub scrape_timeout: Duration,
    /// Canonical identity: namespace plus the metadata that matters, sorted.
    pub key: String,
}

/// A metadata key that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trigger metadata {key}: {message}")]
pub struct MetadataError {
    pub key: String,
    pub message: String,
}

fn bad(key: &str, message: impl Into<String>) -> MetadataError {
    MetadataError {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// Every key infscale reads: the target's, then the policy's trigger keys.
pub fn keys() -> impl Iterator<Item = &'static str> {
    TARGET_KEYS
        .iter()
        .map(|k| k.name)
        .chain(keys::KEYS.iter().filter_map(|k| k.metadata()))
}

/// The policy the trigger carries: each policy key found under its metadata name, set through
/// [`Policy::set`] (so with the same bounds as everywhere), then validated. `threshold` is
/// required; `coldStartSeconds` (bounded as the lookahead) is the lookahead when
/// `lookaheadSeconds` is not given.
fn policy_of<'a>(get: &dyn Fn(&str) -> Option<&'a str>) -> Result<Policy, MetadataError> {
    if get("threshold").is_none() {
        return Err(bad(
            "threshold",
            "required: the per-replica target, as in KEDA's Prometheus scaler",
        ));
    }
    let mut policy = Policy::new(Metric::Queue, 1.0);
    let mut set = |name: &str, key: &str, value: &str| {
        policy.set(key, value).map_err(|e| match e {
            PolicyError::BadValue { expected, .. } => bad(name, format!("{value:?}: {expected}")),
            other => bad(name, other.to_string()),
        })
    };
    // The cold start first: an explicit lookaheadSeconds then replaces it.
    if let Some(cold) = get("coldStartSeconds") {
        set("coldStartSeconds", "lookahead", cold)?;
    }
    for key in keys::KEYS {
        if let Some(name) = key.metadata() {
            if let Some(value) = get(name) {
                set(name, key.name, value)?;
            }
        }
    }
    policy
        .validate()
        .map_err(|e| bad("threshold", e.to_string()))?;
    Ok(policy)
}

fn dns_name(key: &str, v: &str) -> Result<String, MetadataError> {
    let ok = !v.is_empty()
        && v.len() <= 253
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !v.starts_with(['-', '.'])
        && !v.ends_with(['-', '.']);
    if ok {
        Ok(v.to_owned())
    } else {
        Err(bad(key, format!("{v:?} is not a Kubernetes object name")))
    }
}

/// 12 hex digits of an FNV-1a hash of a trigger's key ([`TargetSpec::trigger_id`]).
fn trigger_id(key: &str) -> String {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{:012x}", hash >> 16)
}

/// Refuses metadata larger than a trigger needs, before reading any of it.
fn check_sizes(metadata: &HashMap<String, String>) -> Result<(), MetadataError> {
    if metadata.len() > METADATA_KEYS {
        return Err(bad(
            "scalerMetadata",
            format!("{} keys, over {METADATA_KEYS}", metadata.len()),
        ));
    }
    for (k, v) in metadata {
        if k.len() > METADATA_KEY_BYTES {
            let shown: String = k.chars().take(32).collect();
            return Err(bad(
                &format!("{shown}..."),
                format!("a key of {} bytes, over {METADATA_KEY_BYTES}", k.len()),
            ));
        }
        if v.len() > METADATA_VALUE_BYTES {
            return Err(bad(
                k,
                format!("a value of {} bytes, over {METADATA_VALUE_BYTES}", v.len()),
            ));
        }
    }
    Ok(())
}

impl TargetSpec {
    /// Reads a trigger's metadata for the ScaledObject `name` in `namespace`.
    pub fn from_metadata(
        name: &str,
        namespace: &str,
        metadata: &HashMap<String, String>,
        allowed: &AllowedActivators,
    ) -> Result<TargetSpec, MetadataError> {
        let namespace = dns_name("namespace", namespace)?;
        check_sizes(metadata)?;
        let mut used: BTreeMap<&str, &str> = BTreeMap::new();
        for (k, v) in metadata {
            if keda_keys::is_kedas(k) {
                continue;
            }
            if !keys().any(|known| known == k) {
                let known: Vec<_> = keys().collect();
                let hint = infscale_core::policy::suggest::nearest(k, keys())
                    .map_or_else(String::new, |near| format!("did you mean {near:?}? "));
                return Err(bad(
                    k,
                    format!("unknown key; {hint}infscale reads {}", known.join(", ")),
                ));
            }
            used.insert(k, v.as_str());
        }
        let get = |k: &str| used.get(k).map(|v| v.trim());
        // A target key's value, or its default from the table.
        let value =
            |k: &str| get(k).unwrap_or_else(|| target_keys::key(k).map_or("", |t| t.default));
        let port = |k: &str| target_keys::port(k, value(k));
        let seconds = |k: &str| target_keys::seconds(k, value(k));
        // A key without a default: its value when given.
        let given_port = |k: &str| get(k).map(|v| target_keys::port(k, v)).transpose();
        let given_seconds = |k: &str| get(k).map(|v| target_keys::seconds(k, v)).transpose();
        let given_count = |k: &str| get(k).map(|v| target_keys::count(k, v)).transpose();
        let pods = match (get("deployment"), get("podSelector")) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "podSelector",
                    "give deployment or podSelector, not both",
                ))
            }
            (Some(d), None) => Pods::Deployment(dns_name("deployment", d)?),
            (None, Some(s)) => {
                let ok = !s.is_empty()
                    && s.len() <= 1024
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_./=!,() ".contains(&b));
                if !ok {
                    return Err(bad("podSelector", format!("{s:?} is not a label selector")));
                }
                Pods::Selector(s.to_owned())
            }
            (None, None) => Pods::Deployment(dns_name("deployment", name)?),
        };
        let server: ServerChoice = value("server")
            .parse()
            .map_err(|e: String| bad("server", e))?;
        let metrics_port = port("metricsPort")?;
        let metrics_path =
            address::metrics_path(value("metricsPath")).map_err(|e| bad("metricsPath", e))?;
        let metrics_scheme = value("metricsScheme").to_owned();
        if metrics_scheme != "http" && metrics_scheme != "https" {
            return Err(bad("metricsScheme", "expected http or https"));
        }
        let policy = policy_of(&get)?;
        // A metric the named server never exports would answer "no value" for good.
        infscale_core::policy::exports::check(server, &policy)
            .map_err(|e| bad("metric", e.to_string()))?;
        let scrape_interval = seconds("scrapeIntervalSeconds")?;
        let scrape_timeout = seconds("scrapeTimeoutSeconds")?;
        let serve_mode_on = match value("serveMode") {
            "false" => false,
            "true" => true,
            other => {
                return Err(bad(
                    "serveMode",
                    format!("{other:?}: expected true or false"),
                ))
            }
        };
        let service = match (get("service"), &pods) {
            (Some(s), _) => dns_name("service", s)?,
            (None, Pods::Deployment(d)) => d.clone(),
            (None, Pods::Selector(_)) if serve_mode_on => {
                return Err(bad("service", "required with podSelector in serve mode"))
            }
            (None, Pods::Selector(_)) => name.to_owned(),
        };
        let activator = match get("activatorUrl") {
            None => {
                if get("activatorHost").is_some() {
                    return Err(bad("activatorHost", "needs activatorUrl"));
                }
                None
            }
            Some(urls) => {
                let urls = urls
                    .split(',')
                    .map(|u| allowed.check(u.trim(), &namespace))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad("activatorUrl", e))?;
                let host = match get("activatorHost") {
                    Some(h) if !h.is_empty() && h.len() <= 253 => h.to_owned(),
                    Some(h) => return Err(bad("activatorHost", format!("{h:?} is not a host"))),
                    // What the activator counts a model learned from serve's slice under.
                    None if serve_mode_on => format!("{service}.{namespace}.svc"),
                    None => match &pods {
                        Pods::Deployment(d) => d.clone(),
                        Pods::Selector(_) => name.to_owned(),
                    },
                };
                let members = match urls.as_slice() {
                    // A Service, in this namespace or one the scaler was started with: every
                    // ready pod behind it is followed.
                    [one] => match address::service_named(one) {
                        Some((ns, name, port, scheme)) => Members::Service {
                            namespace: ns,
                            name,
                            port,
                            scheme,
                            url: one.clone(),
                        },
                        None => Members::Urls(urls),
                    },
                    _ => Members::Urls(urls),
                };
                Some(ActivatorRef { members, host })
            }
        };
        // One collector per ScaledObject and trigger: its series and logs name both.
        let mut key = format!("{namespace}\nscaledObject={name}");
        for (k, v) in &used {
            key.push_str(&format!("\n{k}={v}"));
        }
        let serve_mode = if serve_mode_on {
            if activator.is_none() {
                return Err(bad("serveMode", "needs activatorUrl"));
            }
            // Serve mode puts the activator's pods into the model's Service: only an activator
            // the operator gave (`--allow-activator`, or a Service in the scaler's own
            // namespace), never one of the tenant's namespace (a database's Service, say).
            // Hosts are lowercase, so no URL is "in" namespace `NONE`: what `check` then
            // accepts is the operator's alone.
            for u in get("activatorUrl").unwrap_or_default().split(',') {
                if allowed.check(u.trim(), "NONE").is_err() {
                    return Err(bad(
                        "activatorUrl",
                        format!(
                            "{:?}: in serve mode the activator's pods join the model's Service, \
                             so activatorUrl must be the activator this scaler was started with \
                             (--allow-activator) or a Service in the scaler's own namespace, \
                             not a Service of namespace {namespace}",
                            infscale_core::limits::cut(u.trim(), 200)
                        ),
                    ));
                }
            }
            let url = get("serviceUrl")
                .map(|u| {
                    address::service_url(u, &service, &namespace).map_err(|e| bad("serviceUrl", e))
                })
                .transpose()?;
            let service_port = get("servicePort")
                .map(|p| address::service_port(p).map_err(|e| bad("servicePort", e)))
                .transpose()?;
            Some(ServeMode {
                namespace: namespace.clone(),
                service,
                url,
                service_port,
                activator_port: given_port("activatorPort")?,
                max_held: given_count("maxHeld")?,
                hold_timeout_s: given_seconds("holdTimeoutSeconds")?,
                settle_s: seconds("serveModeSettleSeconds")?,
                scaled_object: name.to_owned(),
                trigger: trigger_id(&key),
                counts_host: activator
                    .as_ref()
                    .map(|a| a.host.clone())
                    .unwrap_or_default(),
            })
        } else {
            for k in [
                "servicePort",
                "activatorPort",
                "maxHeld",
                "holdTimeoutSeconds",
            ] {
                if get(k).is_some() {
                    return Err(bad(k, "a serve mode key: set serveMode: \"true\""));
                }
            }
            None
        };
        Ok(TargetSpec {
            namespace,
            name: name.to_owned(),
            pods,
            server,
            metrics_port,
            metrics_path,
            metrics_scheme,
            policy,
            activator,
            serve_mode,
            scrape_interval: Duration::from_secs_f64(scrape_interval),
            scrape_timeout: Duration::from_secs_f64(scrape_timeout),
            key,
        })
    }

    /// A short name for the trigger, the same in every scaler replica: 12 hex digits of an
    /// FNV-1a hash of its key. Triggers that differ in any key (`server`, the scrape interval,
    /// a port) differ here, so each has its own series; the collector's start is logged with
    /// it and the key.
    pub fn trigger_id(&self) -> String {
        trigger_id(&self.key)
    }

    /// The labels of the trigger's own series on the scaler's `/metrics`: the ScaledObject, the
    /// scale target, the trigger's metric and threshold, and the trigger itself
    /// ([`TargetSpec::trigger_id`]): two triggers never share a series.
    pub fn series_labels(&self) -> Vec<(String, String)> {
        let target = match &self.pods {
            Pods::Deployment(d) => d.clone(),
            Pods::Selector(s) => format!("{{{s}}}"),
        };
        vec![
            ("namespace".to_owned(), self.namespace.clone()),
            ("scaledobject".to_owned(), self.name.clone()),
            ("target".to_owned(), target),
            ("metric".to_owned(), self.policy.metric_list(",")),
            (
                "threshold".to_owned(),
                self.policy
                    .metrics()
                    .iter()
                    .map(|m| infscale_core::reasons::fmt(m.1))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("trigger".to_owned(), self.trigger_id()),
        ]
    }

    /// What the target is called in logs and metrics: `namespace/deployment` or the selector.
    pub fn label(&self) -> String {
        match &self.pods {
            Pods::Deployment(d) => format!("{}/{d}", self.namespace),
            Pods::Selector(s) => format!("{}/{{{s}}}", self.namespace),
        }
    }

    /// The metric's name: `infscale-<metric>-<deployment or ScaledObject>`.
    pub fn metric_name(&self) -> String {
        let names = self.metric_names();
        names.into_iter().next().map(|n| n.0).unwrap_or_default()
    }

    /// Every metric's name with its per-replica target (`metric: queue,kv` gives two), the
    /// first metric first: one MetricSpec each.
    pub fn metric_names(&self) -> Vec<(String, f64)> {
        let who = match &self.pods {
            Pods::Deployment(d) => d.as_str(),
            Pods::Selector(_) => self.name.as_str(),
        };
        self.policy
            .metrics()
            .into_iter()
            .map(|(m, target)| (format!("infscale-{m}-{who}"), target))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn spec(pairs: &[(&str, &str)]) -> Result<TargetSpec, MetadataError> {
        TargetSpec::from_metadata("chat", "llm", &meta(pairs), &AllowedActivators::default())
    }

    #[test]
    fn a_misspelt_trigger_key_gets_the_key_meant() {
        let e = spec(&[("threshold", "24"), ("lookaheadSecond", "45")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("lookaheadSecond"), "{e}");
        assert!(e.contains("did you mean \"lookaheadSeconds\"?"), "{e}");
    }

    #[test]
    fn defaults_and_names() {
        let s = spec(&[("threshold", "24"), ("scalerAddress", "infscale:9090")]).unwrap();
        assert_eq!(s.pods, Pods::Deployment("chat".into()));
        assert_eq!(
            (s.metrics_port, s.metrics_path.as_str()),
            (8000, "/metrics")
        );
        assert_eq!((s.policy.metric, s.policy.target), (Metric::Queue, 24.0));
        assert_eq!(s.metric_name(), "infscale-queue-chat");
        assert_eq!(s.scrape_interval, Duration::from_secs(5));
        assert_eq!(s.label(), "llm/chat");
    }

    #[test]
    fn serve_mode_reads_its_service_and_refuses_what_cannot_work() {
        let with = |extra: &[(&'static str, &'static str)]| {
            let allowed = AllowedActivators::parse(&["http://10.0.0.9:9092".to_owned()]).unwrap();
            let mut pairs = vec![
                ("threshold", "24"),
                ("activatorUrl", "http://10.0.0.9:9092"),
                ("serveMode", "true"),
            ];
            pairs.extend_from_slice(extra);
            TargetSpec::from_metadata("chat", "llm", &meta(&pairs), &allowed)
        };
        let read = with(&[]).unwrap();
        assert_eq!(read.activator.as_ref().unwrap().host, "chat.llm.svc");
        let m = read.serve_mode.unwrap();
        assert_eq!(
            (m.service.as_str(), m.activator_port, m.settle_s, m.url),
            ("chat", None, 30.0, None)
        );
        assert_eq!(
            (m.max_held, m.hold_timeout_s, m.service_port),
            (None, None, None)
        );
        assert_eq!((m.scaled_object.as_str(), m.trigger.len()), ("chat", 12));
        let m = with(&[
            ("servicePort", "http"),
            ("activatorPort", "8080"),
            ("maxHeld", "50"),
            ("holdTimeoutSeconds", "120"),
        ])
        .unwrap()
        .serve_mode
        .unwrap();
        assert_eq!(
            (
                m.service_port.as_deref(),
                m.activator_port,
                m.max_held,
                m.hold_timeout_s
            ),
            (Some("http"), Some(8080), Some(50), Some(120.0))
        );
        let m = with(&[
            ("service", "chat-svc"),
            ("serviceUrl", "http://chat-svc.llm:8000/"),
        ])
        .unwrap()
        .serve_mode
        .unwrap();
        assert_eq!(m.service, "chat-svc");
        assert_eq!(m.url.as_deref(), Some("http://chat-svc.llm.svc:8000"));
        for (bad, key) in [
            (("serveMode", "yes"), "serveMode"),
            (("serviceUrl", "http://a/b"), "serviceUrl"),
            (("serviceUrl", "https://a"), "serviceUrl"),
            // Another Service, another namespace's, another host: never probed.
            (("serviceUrl", "http://db.llm.svc:5432"), "serviceUrl"),
            (("serviceUrl", "http://chat.other.svc"), "serviceUrl"),
            (("serviceUrl", "http://169.254.169.254"), "serviceUrl"),
            (("activatorPort", "0"), "activatorPort"),
            (("serveModeSettleSeconds", "-1"), "serveModeSettleSeconds"),
            (("service", "Chat_Svc"), "service"),
            (("servicePort", "Http Port"), "servicePort"),
            (("maxHeld", "0"), "maxHeld"),
            (("holdTimeoutSeconds", "0"), "holdTimeoutSeconds"),
        ] {
            let e = with(&[bad]).unwrap_err();
            assert_eq!(e.key, key, "{bad:?}: {e}");
        }
        let e = spec(&[("threshold", "24"), ("serveMode", "true")]).unwrap_err();
        assert_eq!(e.key, "serveMode");
        assert!(spec(&[("threshold", "24"), ("serveMode", "false")])
            .unwrap()
            .serve_mode
            .is_none());
        let e = spec(&[("threshold", "24"), ("maxHeld", "5")]).unwrap_err();
        assert_eq!(e.key, "maxHeld", "a serve mode key without serve mode: {e}");
    }

    #[test]
    fn serve_mode_takes_only_the_operators_activator_never_a_service_of_the_tenant() {
        let allowed = AllowedActivators::parse(&[])
            .unwrap()
            .with_own_namespace(Some("infscale".into()));
        let read = |url: &str, serve: &str| {
            let pairs = [
                ("threshold", "24"),
                ("activatorUrl", url),
                ("serveMode", serve),
            ];
            TargetSpec::from_metadata("chat", "llm", &meta(&pairs), &allowed)
        };
        let db = "http://db.llm.svc:5432";
        let e = read(db, "true").unwrap_err();
        assert_eq!(e.key, "activatorUrl", "{e}");
        assert!(e.to_string().contains("db.llm.svc"), "{e}");
        assert!(
            read(db, "false").is_ok(),
            "outside serve mode its counts are read as before"
        );
        assert!(read("http://infscale-activator-admin.infscale.svc:9092", "true").is_ok());
    }

    #[test]
    fn cold_start_is_the_default_lookahead() {
        let s = spec(&[("threshold", "24"), ("coldStartSeconds", "90")]).unwrap();
        assert_eq!(s.policy.lookahead_s, 90.0);
        let s = spec(&[
            ("threshold", "24"),
            ("coldStartSeconds", "90"),
            ("lookaheadSeconds", "30"),
        ])
        .unwrap();
        assert_eq!(s.policy.lookahead_s, 30.0);
        // auto: the learned cold start, with coldStartSeconds as the prior.
        let s = spec(&[
            ("threshold", "24"),
            ("coldStartSeconds", "90"),
            ("lookaheadSeconds", "auto"),
        ])
        .unwrap();
        assert_eq!(
            (s.policy.lookahead_s, s.policy.lookahead_auto),
            (90.0, true)
        );
        assert_eq!(s.policy.with_horizon(Some(50.0)).lookahead_s, 50.0);
        assert_eq!(s.policy.with_horizon(None).lookahead_s, 90.0);
    }

    #[test]
    fn errors_name_the_key() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "threshold"),
            (&[("threshold", "-1")], "threshold"),
            (&[("threshold", "4"), ("colour", "red")], "colour"),
            (&[("threshold", "4"), ("metric", "gpu")], "metric"),
            (&[("threshold", "4"), ("server", "ollama")], "server"),
            (
                &[("threshold", "4"), ("metricsPort", "80000")],
                "metricsPort",
            ),
            (
                &[("threshold", "4"), ("metricsPath", "metrics")],
                "metricsPath",
            ),
            (
                &[("threshold", "4"), ("deployment", "Chat_1")],
                "deployment",
            ),
            (
                &[
                    ("threshold", "4"),
                    ("deployment", "a"),
                    ("podSelector", "app=a"),
                ],
                "podSelector",
            ),
            (
                &[("threshold", "4"), ("scrapeIntervalSeconds", "0")],
                "scrapeIntervalSeconds",
            ),
            (
                &[("threshold", "4"), ("activatorHost", "x")],
                "activatorHost",
            ),
            (
                &[
                    ("threshold", "0.8"),
                    ("metric", "kv"),
                    ("server", "llamacpp"),
                ],
                "metric",
            ),
        ];
        for (pairs, key) in cases {
            let e = spec(pairs).unwrap_err();
            assert_eq!(e.key, *key, "{pairs:?}: {e}");
        }
    }

    #[test]
    fn an_activator_must_be_in_the_namespace_or_allowed() {
        let ok = spec(&[
            ("threshold", "4"),
            ("activatorUrl", "http://act.llm.svc:9091"),
        ])
        .unwrap();
        let a = ok.activator.unwrap();
        assert_eq!(
            a.members,
            Members::Service {
                namespace: "llm".into(),
                name: "act".into(),
                port: 9091,
                scheme: "http".into(),
                url: "http://act.llm.svc:9091".into(),
            }
        );
        assert_eq!(a.host, "chat");
        let two = spec(&[
            ("threshold", "4"),
            (
                "activatorUrl",
                "http://127.0.0.1:9091, http://127.0.0.1:9091/b",
            ),
        ]);
        assert!(two.is_err(), "unlisted URLs are refused one by one");
        assert!(spec(&[
            ("threshold", "4"),
            ("activatorUrl", "http://act.llm.svc.cluster.local:9091/")
        ])
        .is_ok());
        for url in [
            "http://act.other.svc:9091",
            "http://169.254.169.254/latest",
            "http://act.llm.svc.evil.com/",
        ] {
            let e = spec(&[("threshold", "4"), ("activatorUrl", url)]).unwrap_err();
            assert_eq!(e.key, "activatorUrl", "{url}");
        }
        let allowed = AllowedActivators::parse(&["http://127.0.0.1:9091".to_owned()]).unwrap();
        let m = meta(&[
            ("threshold", "4"),
            ("activatorUrl", "http://127.0.0.1:9091"),
        ]);
        assert!(TargetSpec::from_metadata("chat", "llm", &m, &allowed).is_ok());
    }

    #[test]
    fn the_key_ignores_what_keda_reads_and_orders_the_rest() {
        let a = spec(&[
            ("threshold", "4"),
            ("metric", "queue"),
            ("enableTLS", "false"),
        ])
        .unwrap();
        let b = spec(&[("metric", "queue"), ("threshold", "4")]).unwrap();
        assert_eq!(a.key, b.key);
        let c = spec(&[("metric", "queue"), ("threshold", "5")]).unwrap();
        assert_ne!(a.key, c.key);
    }

    #[test]
    fn every_key_that_changes_the_scrape_or_its_reading_changes_the_trigger() {
        let base = [("threshold", "4"), ("metric", "queue")];
        let plain = spec(&base).unwrap();
        assert_eq!(plain.trigger_id().len(), 12);
        assert_eq!(plain.trigger_id(), spec(&base).unwrap().trigger_id());
        for (key, value) in [
            ("server", "vllm"),
            ("scrapeIntervalSeconds", "10"),
            ("scrapeTimeoutSeconds", "1"),
            ("metricsPort", "9000"),
            ("metricsPath", "/other"),
            ("metricsScheme", "https"),
        ] {
            let mut pairs = base.to_vec();
            pairs.push((key, value));
            let other = spec(&pairs).unwrap();
            assert_ne!(other.key, plain.key, "{key}");
            assert_ne!(other.trigger_id(), plain.trigger_id(), "{key}");
            let label = |s: &TargetSpec| s.series_labels().last().cloned();
            assert_ne!(label(&other), label(&plain), "{key}");
        }
    }
}
