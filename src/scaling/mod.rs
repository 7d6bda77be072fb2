//! From load signals to a replica count, as KEDA and its HPA would compute it.
//!
//! [`policy`] says what to scale on, and [`exports`] whether a named server can give it;
//! [`demand`] turns replica signals into the metric's value
//! (held requests included); [`lookahead`] and [`forecast`] project it over the cold start;
//! [`floors`] puts the SLO-aware floor, the scale-down guard and the starting credit under it,
//! counting on the rate per replica [`capacity`] learned; [`hold`] keeps replicas through
//! the gaps the traffic came back from; [`activity`] holds
//! the fault rules for `IsActive`; [`path`] when the activator belongs in a model Service's
//! path (serve mode); [`keda`] decides activation and the step to zero; [`hpa`] is the Kubernetes HPA algorithm; [`decision`] runs
//! them in order and keeps the reasons. All pure: time is a parameter, nothing here does I/O.

pub mod activity;
pub mod capacity;
pub mod cold_start;
pub mod decision;
pub mod deletion_cost;
pub mod demand;
pub mod exports;
pub mod fleet;
pub mod floors;
pub mod forecast;
pub mod hold;
pub mod hpa;
pub mod keda;
pub mod keys;
pub mod lookahead;
pub mod path;
pub mod policy;
pub mod scaled_object;
pub mod several;
pub mod work;

pub use activity::Activity;
pub use decision::{decide, evaluate, hpa_sync, Decision, Evaluation, HpaSync, ScalerState, Why};
pub use demand::{Demand, Observation};
pub use policy::{Metric, Policy, PolicyError};
