//! One replica's load: the signals of its latest page and the rates since its previous one.
//!
//! This is what every job hands to the decision: `serve` builds it from scrapes of a pod, `decide`
//! from files or URLs, the simulator from its replica model.

use super::profile::Signals;
use super::rates::Rates;
use serde::{Deserialize, Serialize};

/// The CPU request assumed when a pod's is unknown, in cores.
pub const DEFAULT_CPU_REQUEST_CORES: f64 = 1.0;

/// A ready replica that was read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replica {
    /// Pod name, file name or URL.
    pub name: String,
    pub signals: Signals,
    /// `None` until there is an earlier scrape to compare with.
    pub rates: Option<Rates>,
    /// The pod's CPU request, for CPU as a percentage of it.
    pub cpu_request_cores: f64,
}

impl Replica {
    pub fn new(name: impl Into<String>, signals: Signals, rates: Option<Rates>) -> Self {
        Replica {
            name: name.into(),
            signals,
            rates,
            cpu_request_cores: DEFAULT_CPU_REQUEST_CORES,
        }
    }

    /// Requests in the running batch: the server's gauge, or (Triton) the mean number executing
    /// over the last interval.
    pub fn running(&self) -> Option<f64> {
        self.signals
            .running
            .or_else(|| self.rates.as_ref()?.executing)
    }

    pub fn waiting(&self) -> f64 {
        self.signals.waiting
    }

    /// Running plus waiting, when running is known.
    pub fn in_flight(&self) -> Option<f64> {
        Some(self.running()? + self.signals.waiting)
    }

    pub fn kv(&self) -> Option<f64> {
        self.signals.kv
    }

    pub fn cpu_percent(&self) -> Option<f64> {
        self.rates.as_ref()?.cpu_percent(self.cpu_request_cores)
    }

    pub fn output_tokens_per_s(&self) -> Option<f64> {
        self.rates.as_ref()?.output_tokens_per_s
    }

    pub fn ttft_p95(&self) -> Option<f64> {
        self.rates.as_ref()?.ttft_p95()
    }
}
