//! How a simulation runs: which control loop, which KEDA trigger, the engine's step, the
//! periods, the SLO, the faults, the start and the standby pool. Its own file so the run and the
//! clairvoyant bound both read it without reading each other.

use super::cluster::Balancer;
use super::standby::Standby;
use crate::control::cycle;
use serde::Serialize;

/// Which control loop drives the replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Hpa,
    Keda,
}

/// The KEDA trigger type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    External,
    ExternalPush,
}

/// How the simulation runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub mode: Mode,
    pub trigger: Trigger,
    /// Engine step, seconds.
    pub dt: f64,
    /// HPA sync period (the controller's 15 s).
    pub hpa_period_s: f64,
    /// KEDA's pollingInterval.
    pub polling_interval_s: f64,
    /// How often `serve` scrapes the pods.
    pub scrape_interval_s: f64,
    /// A first token later than this misses the SLO.
    pub slo_ttft_s: f64,
    /// How long the activator holds a request before answering 504.
    pub hold_timeout_s: f64,
    pub record_timeline: bool,
    /// Sample replicas and demand every this many seconds (0: no series).
    pub series_every_s: f64,
    /// Note the replica-seconds billed so far every this many seconds (0: none), for the cost
    /// of each hour and day of a long run.
    pub ledger_every_s: f64,
    /// The chance that one replica's scrape fails (0 to 1), drawn per replica per scrape.
    pub unreadable: f64,
    /// How long a replica removed by a scale-down serves what it holds before what is left is
    /// cut (vLLM's `--shutdown-timeout`, within the pod's `terminationGracePeriodSeconds`;
    /// infinite: until it is done).
    pub drain_s: f64,
    /// The `preStop` pause of a removed replica, seconds: it leaves the balancer at once, keeps
    /// serving what it holds, and is billed until the pause ends even when idle; its drain
    /// (`drain_s`) starts after it, as the server's SIGTERM comes after the hook. 0: an idle
    /// replica is gone the moment it is removed (the figures in docs/benchmark.md);
    /// [`SHIPPED_PRE_STOP_S`] is what the example manifests ship.
    pub pre_stop_s: f64,
    /// Where `serve`'s scrapes fall within their interval, seconds: at this offset past each
    /// multiple of `scrape_interval_s`, while KEDA polls and the HPA syncs on the multiples of
    /// their periods. 0 (the default) scrapes in the step the HPA syncs in, so each sync reads
    /// an evaluation of that instant; in a cluster the offset is whatever it happens to be, and
    /// a day's cost can move with it ([`super::phases`]).
    pub scrape_offset_s: f64,
    /// Cold starts vary around the GPU model's by this log-normal sigma (0: all equal).
    pub cold_start_spread: f64,
    /// How arrivals are spread over the ready replicas.
    pub balancer: Balancer,
    /// Replicas already Ready at time 0.
    pub start: Start,
    /// The standby pool a scale-down fills and a scale-up wakes first (size 0: none).
    pub standby: Standby,
}

/// How many replicas are Ready at time 0. A trace that starts mid-day starts warm: a replay of
/// a busy hour from one cold replica measures a start-up transient no operator lives through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Start {
    /// The policy's `min`, at least one.
    #[default]
    Policy,
    /// This many (never fewer than the policy's `min`).
    Replicas(u32),
    /// As many as the clairvoyant bound wants before a replica ordered at time 0 could be
    /// Ready (its most over the first cold start).
    Bound,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Keda,
            trigger: Trigger::ExternalPush,
            dt: DEFAULT_STEP_S,
            hpa_period_s: cycle::HPA_SYNC_PERIOD_S,
            polling_interval_s: cycle::POLLING_INTERVAL_S,
            scrape_interval_s: cycle::SCRAPE_INTERVAL_S,
            slo_ttft_s: 2.0,
            hold_timeout_s: 300.0,
            record_timeline: false,
            series_every_s: 0.0,
            ledger_every_s: 0.0,
            unreadable: 0.0,
            drain_s: DEFAULT_DRAIN_S,
            pre_stop_s: 0.0,
            scrape_offset_s: 0.0,
            cold_start_spread: 0.0,
            balancer: Balancer::LeastRequest,
            start: Start::Policy,
            standby: Standby::default(),
        }
    }
}

/// The engine's step, seconds (`--dt`): each replica serves `[t, t + dt)` in one pass, and a
/// scrape sees it as it is at the end of a step. The demo's emulated replicas step as long.
pub const DEFAULT_STEP_S: f64 = 0.25;

/// The drain the example manifests ship (`manifests/examples/`): a removed pod serves what it
/// holds for 120 s (vLLM's `--shutdown-timeout 120`, within its `terminationGracePeriodSeconds`)
/// before what is left is cut. vLLM's own default, 0, aborts in-flight requests at SIGTERM.
pub const DEFAULT_DRAIN_S: f64 = 120.0;

/// The `preStop` pause the example manifests ship (`manifests/examples/`; tests/manifests.rs
/// checks them): 10 s for the endpoint removal to reach every client before the server stops
/// accepting. The demo's Deployment pauses as long, and its comparison simulates it.
pub const SHIPPED_PRE_STOP_S: f64 = 10.0;
