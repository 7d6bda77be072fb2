//! The third layer: what KEDA and its HPA do with the value.
//!
//! [`activity`] holds the fault rules for `IsActive`; [`keda`] decides activation and the step
//! to zero; [`hpa`] is the Kubernetes HPA algorithm; [`hold`] keeps replicas through the gaps the
//! traffic came back from; [`reserve`] keeps the level bursts reached faster than a start could
//! follow; [`decision`] runs them in order and keeps the causes, on the memory [`memory`] holds, [`several`]
//! for a trigger's further metrics; [`reasons`] holds those causes as data, and their words;
//! [`cycle`] is KEDA's operator and the HPA's sync loop that the simulator, the demo and
//! `decide` play; [`path`] says when the activator belongs in a model Service's path (serve
//! mode); [`deletion_cost`] which pod a scale-down should take.

pub mod activity;
pub mod cycle;
pub mod decision;
pub mod deletion_cost;
pub mod hold;
pub mod hpa;
pub mod keda;
pub mod memory;
pub mod path;
pub mod reasons;
pub mod reserve;
pub mod several;
