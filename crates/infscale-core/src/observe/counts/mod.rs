//! Request counts per host, as an activator reports them to the scaler.
//!
//! The format is the KEDA HTTP add-on's `GET /queue`: `{ "<host>": { "Concurrency": n,
//! "RequestCount": n } }`, where Concurrency counts requests in flight including held ones and
//! RequestCount only grows. infscale's activator adds `"Held"`, the requests waiting for a ready
//! replica, so the scaler does not count twice the ones already running on a pod. The activator
//! writes this type and the scaler reads it (the add-on's interceptor works as a source too).
//! [`wire`] is how the counts travel on the activator's `/queue/watch` event stream.

pub mod wire;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One host's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCounts {
    /// Requests in flight, held ones included.
    #[serde(rename = "Concurrency")]
    pub concurrency: u64,
    /// Requests seen since start.
    #[serde(rename = "RequestCount")]
    pub request_count: u64,
    /// Requests held because no replica is ready (infscale's activator only).
    #[serde(rename = "Held", default, skip_serializing_if = "Option::is_none")]
    pub held: Option<u64>,
}

impl HostCounts {
    /// Requests to count as held demand. With a `Held` field, that; without one (the add-on's
    /// interceptor), Concurrency while no replica is ready (everything in flight is held), and
    /// nothing once replicas run (their own pages count what they serve).
    pub fn held_demand(&self, ready_replicas: usize) -> u64 {
        match self.held {
            Some(held) => held,
            None if ready_replicas == 0 => self.concurrency,
            None => 0,
        }
    }
}

/// Counts for every host an activator serves.
pub type QueueCounts = BTreeMap<String, HostCounts>;

/// What `serve` knows of one target's held requests at its activator (every pod summed).
#[derive(Debug, Clone, PartialEq)]
pub enum Counts {
    /// Not connected yet.
    Unknown,
    /// This target's host's counts (zero when the activator does not list the host).
    Seen(HostCounts),
    /// Some activator pods read (their sum), others not (why).
    Partial { read: HostCounts, failed: String },
    /// The activator cannot be read.
    Failed(String),
}

impl Counts {
    /// The held requests to count with `ready` replicas Ready, or `None` when the count is not
    /// known: at zero the activator is the only source of demand, so its silence is never zero.
    /// With some activator pods unread, the pods read are believed only when they show
    /// activity (above `activation`): what the others hold is unknown, so their sum is never
    /// idle. `serve` and the simulator both take the held demand from here.
    pub fn held_demand(&self, ready: usize, activation: f64) -> Option<f64> {
        match self {
            Counts::Seen(c) => Some(c.held_demand(ready) as f64),
            Counts::Partial { read, .. } => {
                Some(read.held_demand(ready) as f64).filter(|h| *h > activation)
            }
            Counts::Unknown | Counts::Failed(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partly_read_activator_counts_only_above_the_activation_level() {
        let read = |held| HostCounts {
            concurrency: held,
            request_count: 0,
            held: Some(held),
        };
        assert_eq!(Counts::Seen(read(0)).held_demand(0, 0.5), Some(0.0));
        let partial = |held| Counts::Partial {
            read: read(held),
            failed: "pod b: refused".to_owned(),
        };
        assert_eq!(partial(0).held_demand(0, 0.5), None);
        assert_eq!(partial(2).held_demand(0, 0.5), Some(2.0));
        assert_eq!(Counts::Unknown.held_demand(0, 0.5), None);
        assert_eq!(Counts::Failed("down".to_owned()).held_demand(1, 0.5), None);
    }

    #[test]
    fn reads_the_add_on_format_and_ours() {
        let addon: QueueCounts =
            serde_json::from_str(r#"{"chat.llm":{"Concurrency":4,"RequestCount":120}}"#).unwrap();
        assert_eq!(addon["chat.llm"].held, None);
        assert_eq!(addon["chat.llm"].held_demand(0), 4);
        assert_eq!(addon["chat.llm"].held_demand(2), 0);
        let ours = HostCounts {
            concurrency: 9,
            request_count: 300,
            held: Some(3),
        };
        let json = serde_json::to_string(&ours).unwrap();
        assert_eq!(json, r#"{"Concurrency":9,"RequestCount":300,"Held":3}"#);
        assert_eq!(
            serde_json::from_str::<HostCounts>(&json)
                .unwrap()
                .held_demand(2),
            3
        );
    }
}
