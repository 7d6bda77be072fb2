//! Which metrics a model server can give a value for, read from its profile
//! ([`crate::observe::metrics::profile`]), and the check every job makes when a server and a metric are
//! both named: `serve` when it reads a trigger's metadata, `decide` and `kube` from their flags.
//!
//! A metric whose series a server does not export never has a sample there: accepted, it would
//! answer "no value" for as long as the trigger lives, with a reason about the wrong thing. So a
//! named server with such a metric is refused where it is named, with what that server does
//! export. With `server: auto` the server is known only from a page; a pod that turns out not to
//! export the metric is explained by [`missing`] in the value's reason.

use crate::observe::metrics::profile::Profile;
use crate::observe::metrics::{Server, ServerChoice};
use crate::policy::{Metric, Policy};

/// Whether a profile reads a series.
type Has = fn(&Profile) -> bool;

/// What a metric needs from a page beyond the queue series every server has, and whether a
/// profile has it; `None` for the metrics every server can give.
fn need(metric: Metric) -> Option<(&'static str, Has)> {
    match metric {
        Metric::Queue | Metric::Waiting | Metric::Running | Metric::Occupancy => None,
        Metric::Kv => Some(("KV-cache usage gauge", |p| !p.kv.is_empty())),
        Metric::Cpu => Some(("process CPU counter (process_cpu_seconds_total)", |p| {
            p.process_cpu
        })),
        Metric::Ttft => Some(("time-to-first-token histogram", |p| {
            p.ttft_buckets.is_some()
        })),
        Metric::Work => Some(("prompt-token counter", |p| !p.prompt_tokens.is_empty())),
    }
}

/// What `server` lacks for `metric` (`None` when its pages can give the metric).
pub fn missing(server: Server, metric: Metric) -> Option<&'static str> {
    let (what, has) = need(metric)?;
    (!has(server.profile())).then_some(what)
}

/// The metrics `server`'s pages can give, in the usual order.
pub fn readable(server: Server) -> Vec<Metric> {
    Metric::ALL
        .into_iter()
        .filter(|m| missing(server, *m).is_none())
        .collect()
}

/// A named server that does not export what a metric needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "server {server} exports no {lacks}, which metric {metric} needs (it can never be read \
     there); {server} gives {}",
    readable(*.server).iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
)]
pub struct Unexported {
    pub server: Server,
    pub metric: Metric,
    pub lacks: &'static str,
}

/// Whether every metric of `policy` can be read from `server`'s pages; `auto` passes (the
/// server is known only from a page).
pub fn check(server: ServerChoice, policy: &Policy) -> Result<(), Unexported> {
    let ServerChoice::Is(server) = server else {
        return Ok(());
    };
    for (metric, _) in policy.metrics() {
        if let Some(lacks) = missing(server, metric) {
            return Err(Unexported {
                server,
                metric,
                lacks,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_gives_what_its_profile_reads() {
        let names = |s| {
            readable(s)
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            names(Server::Vllm),
            "queue,waiting,running,kv,cpu,occupancy,ttft,work"
        );
        assert_eq!(
            names(Server::LlamaCpp),
            "queue,waiting,running,occupancy,work"
        );
        assert_eq!(names(Server::Tgi), "queue,waiting,running,occupancy,work");
        assert_eq!(
            names(Server::Triton),
            "queue,waiting,running,occupancy,ttft"
        );
        assert_eq!(
            names(Server::Sglang),
            "queue,waiting,running,kv,cpu,occupancy,ttft,work"
        );
        assert_eq!(
            names(Server::Trtllm),
            "queue,waiting,running,kv,cpu,occupancy,ttft,work"
        );
    }

    #[test]
    fn a_named_server_without_the_series_is_refused_and_auto_passes() {
        let kv = Policy::parse("kv:0.8").unwrap();
        let e = check(ServerChoice::Is(Server::LlamaCpp), &kv).unwrap_err();
        assert_eq!(
            e.to_string(),
            "server llamacpp exports no KV-cache usage gauge, which metric kv needs (it can \
             never be read there); llamacpp gives queue, waiting, running, occupancy, work"
        );
        assert!(check(ServerChoice::Auto, &kv).is_ok());
        assert!(check(ServerChoice::Is(Server::Vllm), &kv).is_ok());
        // Every metric of a multi-metric policy is checked.
        let both = Policy::parse("queue+ttft:4,2").unwrap();
        let e = check(ServerChoice::Is(Server::Tgi), &both).unwrap_err();
        assert_eq!(e.metric, Metric::Ttft);
    }
}
