//! The trigger metadata keys that say where a target's pods are and how to read them, besides
//! the policy's own (which [`infscale_core::policy::keys::KEYS`] carries): one entry per key with its
//! name, default, meaning and what its value must be. The metadata reader takes every default
//! and bound from here, and `infscale reference` renders docs/scaler.md's table from it.

use super::{bad, MetadataError};

/// What a target key's value must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TargetKind {
    /// Text the reader checks in context (a name, a selector, a URL).
    Text,
    /// A TCP port, 1 to 65535.
    Port,
    /// A number of seconds within `[min, max]`.
    Seconds { min: f64, max: f64 },
    /// A whole number within `[min, max]`.
    Count { min: u64, max: u64 },
    /// true or false.
    Flag,
}

/// One trigger metadata key of the target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetKey {
    pub name: &'static str,
    pub kind: TargetKind,
    /// The default, as written; empty when there is none.
    pub default: &'static str,
    pub doc: &'static str,
}

const fn target_key(
    name: &'static str,
    kind: TargetKind,
    default: &'static str,
    doc: &'static str,
) -> TargetKey {
    TargetKey {
        name,
        kind,
        default,
        doc,
    }
}

/// `server` when none is given: the series tell which server it is.
pub const DEFAULT_SERVER: &str = "auto";

/// `metricsPort` when none is given (vLLM's port).
pub const DEFAULT_METRICS_PORT: &str = "8000";

/// `metricsPath` when none is given.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

/// The target key named `name`.
pub fn key(name: &str) -> Option<&'static TargetKey> {
    TARGET_KEYS.iter().find(|k| k.name == name)
}

impl TargetKey {
    /// A port value of this key; the error names the key.
    pub fn port(&self, v: &str) -> Result<u16, MetadataError> {
        v.parse::<u16>()
            .ok()
            .filter(|p| *p > 0 && self.kind == TargetKind::Port)
            .ok_or_else(|| bad(self.name, format!("{v:?} is not a port")))
    }

    /// A seconds value of this key, within its bounds; the error names the key.
    pub fn seconds(&self, v: &str) -> Result<f64, MetadataError> {
        let TargetKind::Seconds { min, max } = self.kind else {
            return Err(bad(self.name, format!("{v:?} is not a number of seconds")));
        };
        let x: f64 = v
            .trim()
            .parse()
            .map_err(|_| bad(self.name, format!("{v:?} is not a number of seconds")))?;
        if !(x.is_finite() && x >= min && x <= max) {
            return Err(bad(
                self.name,
                format!("{v} is outside {min}..{max} seconds"),
            ));
        }
        Ok(x)
    }
}

impl TargetKey {
    /// A count value of this key, within its bounds; the error names the key.
    pub fn count(&self, v: &str) -> Result<u64, MetadataError> {
        let TargetKind::Count { min, max } = self.kind else {
            return Err(bad(self.name, format!("{v:?} is not a count")));
        };
        let n: u64 = v
            .trim()
            .parse()
            .map_err(|_| bad(self.name, format!("{v:?} is not a whole number")))?;
        if n < min || n > max {
            return Err(bad(self.name, format!("{n} is outside {min}..{max}")));
        }
        Ok(n)
    }
}

/// The count value `v` of the key `name`.
pub fn count(name: &str, v: &str) -> Result<u64, MetadataError> {
    key(name)
        .ok_or_else(|| bad(name, "not a target key"))?
        .count(v)
}

/// The port value `v` of the key `name`.
pub fn port(name: &str, v: &str) -> Result<u16, MetadataError> {
    key(name)
        .ok_or_else(|| bad(name, "not a target key"))?
        .port(v)
}

/// The seconds value `v` of the key `name`.
pub fn seconds(name: &str, v: &str) -> Result<f64, MetadataError> {
    key(name)
        .ok_or_else(|| bad(name, "not a target key"))?
        .seconds(v)
}

/// The keys infscale reads besides the policy's (which [`keys::KEYS`] names), in the order the
/// trigger metadata reference lists them.
pub const TARGET_KEYS: &[TargetKey] = &[
    target_key(
        "deployment",
        TargetKind::Text,
        "",
        "the Deployment whose Ready pods are scraped (its selector, in the ScaledObject's \
         namespace); without it and `podSelector`, the ScaledObject's name",
    ),
    target_key(
        "podSelector",
        TargetKind::Text,
        "",
        "a label selector instead of `deployment`",
    ),
    target_key(
        "server",
        TargetKind::Text,
        DEFAULT_SERVER,
        "`vllm`, `llamacpp`, `sglang`, `tgi` (archived upstream, March 2026), `triton`, \
         `trtllm` (trtllm-serve, Triton's TensorRT-LLM backend); a metric the server cannot \
         export is refused",
    ),
    target_key(
        "metricsPort",
        TargetKind::Port,
        DEFAULT_METRICS_PORT,
        "the port of each pod's metrics page",
    ),
    target_key(
        "metricsPath",
        TargetKind::Text,
        DEFAULT_METRICS_PATH,
        "the path of each pod's metrics page",
    ),
    target_key(
        "metricsScheme",
        TargetKind::Text,
        "http",
        "`http` or `https`",
    ),
    target_key(
        "coldStartSeconds",
        // Read through the `lookahead` key, with its bounds.
        TargetKind::Seconds {
            min: 0.0,
            max: 3600.0,
        },
        "",
        "the pods' cold start; the lookahead's default, and the prior of `lookaheadSeconds: auto`",
    ),
    target_key(
        "activatorUrl",
        TargetKind::Text,
        "",
        "the activator's admin URL: a Service in the ScaledObject's namespace or in the \
         scaler's own (`serve --namespace`, where the shipped activator runs: \
         `http://NAME.NS.svc:PORT`; every ready pod behind it is followed), or URLs named by \
         `--allow-activator` (several, comma-separated, are summed)",
    ),
    target_key(
        "activatorHost",
        TargetKind::Text,
        "",
        "the host whose counts in the activator's `/queue` are this target's; without it, \
         `SERVICE.NAMESPACE.svc` in serve mode (the key the activator counts a model it learned \
         from serve's slice under), else `deployment`. A host the activator has no route for is \
         an error, never zero held",
    ),
    target_key(
        "serveMode",
        TargetKind::Flag,
        "false",
        "`true`: clients call the model's own Service, and the activator is added to it (an \
         EndpointSlice infscale owns) only while no replica is Ready, requests are held, or the \
         target is idle; `IsActive` says idle only once the activator answers through the \
         Service. Needs `activatorUrl`",
    ),
    target_key(
        "service",
        TargetKind::Text,
        "",
        "serve mode: the model's Service; without it, `deployment`",
    ),
    target_key(
        "serviceUrl",
        TargetKind::Text,
        "",
        "serve mode: where the activator is probed through the Service: `http://HOST[:PORT]` \
         with HOST the trigger's `service` in the ScaledObject's namespace (`SERVICE`, \
         `SERVICE.NAMESPACE`, `SERVICE.NAMESPACE.svc[.cluster.local]`) or its ClusterIP, and \
         PORT one of its ports; without it, `http://SERVICE.NAMESPACE.svc:PORT` at \
         `servicePort`",
    ),
    target_key(
        "servicePort",
        TargetKind::Text,
        "",
        "serve mode: the Service port (its name, or its number) clients call the model on, the \
         one the activator joins and sends held requests to; without it, the Service's first",
    ),
    target_key(
        "activatorPort",
        TargetKind::Port,
        "",
        "serve mode: the port the activator pods take this model's requests on, where it then \
         places them by their `Host`; without it, `serve` gives the model a port of its own \
         (`serve --activator-ports`), so the port names the model whatever name or address \
         the client used",
    ),
    target_key(
        "maxHeld",
        TargetKind::Count {
            min: 1,
            max: 1_000_000,
        },
        "",
        "serve mode: requests the activator holds at once for this model before it answers 503; \
         without it, the activator's `--max-held` (which also caps it)",
    ),
    target_key(
        "holdTimeoutSeconds",
        TargetKind::Seconds {
            min: 1.0,
            max: 3600.0,
        },
        "",
        "serve mode: how long the activator holds a request for this model before it answers \
         504; without it, the activator's `--hold-timeout` (which also caps it)",
    ),
    target_key(
        "serveModeSettleSeconds",
        TargetKind::Seconds {
            min: 0.0,
            max: 3600.0,
        },
        "30",
        "serve mode: how long the target is busy, with Ready replicas and nothing held, before \
         the activator leaves the Service's path",
    ),
    target_key(
        "scrapeIntervalSeconds",
        TargetKind::Seconds {
            min: 0.1,
            max: 300.0,
        },
        // The core's `cycle::SCRAPE_INTERVAL_S`, which the simulator scrapes by; a test ties them.
        "5",
        "how often the pods are scraped",
    ),
    target_key(
        "scrapeTimeoutSeconds",
        TargetKind::Seconds {
            min: 0.05,
            max: 60.0,
        },
        "2",
        "the timeout of one pod's scrape",
    ),
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_scrape_interval_default_is_the_one_the_simulator_scrapes_by() {
        let default = key("scrapeIntervalSeconds").map(|k| k.default.parse::<f64>());
        assert_eq!(
            default,
            Some(Ok(infscale_core::control::cycle::SCRAPE_INTERVAL_S))
        );
    }

    use super::*;

    #[test]
    fn names_are_unique_and_defaults_are_values() {
        for (i, a) in TARGET_KEYS.iter().enumerate() {
            assert!(
                TARGET_KEYS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
            if a.default.is_empty() {
                continue;
            }
            match a.kind {
                TargetKind::Port => assert!(a.port(a.default).is_ok(), "{}", a.name),
                TargetKind::Seconds { .. } => assert!(a.seconds(a.default).is_ok(), "{}", a.name),
                TargetKind::Flag => assert!(["true", "false"].contains(&a.default)),
                TargetKind::Count { .. } => assert!(a.count(a.default).is_ok(), "{}", a.name),
                TargetKind::Text => {}
            }
        }
        let e = seconds("scrapeIntervalSeconds", "0.01").unwrap_err();
        assert_eq!(e.key, "scrapeIntervalSeconds");
    }
}
