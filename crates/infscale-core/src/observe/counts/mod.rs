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

#[cfg(test)]
mod tests {
    use super::*;

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
