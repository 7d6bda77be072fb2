//! The control layer: what KEDA and its HPA do with the value.
//!
//! [`missing`] applies the HPA's rule for replicas that gave no sample to the measured demand;
//! [`activity`] holds the fault rules for `IsActive`; [`keda`] decides activation and the step
//! to zero; [`hpa`] is the Kubernetes HPA algorithm (its configuration is vocabulary, in
//! [`crate::policy::behavior`]); [`hold`] keeps replicas through the gaps the traffic came back
//! from; [`reserve`] keeps the level bursts reached faster than a start could follow;
//! [`decision`] runs them in order and keeps the causes (as [`crate::reasons`]), on the memory
//! [`memory`] holds, [`several`] for a trigger's further metrics; [`cycle`] is KEDA's operator
//! and the HPA's sync loop that the simulator, the demo and `decide` play; [`path`] says when
//! the activator belongs in a model Service's path (serve mode); [`deletion_cost`] which pod a
//! scale-down should take.

pub mod activity;
pub mod cycle;
pub mod decision;
pub mod deletion_cost;
pub mod hold;
pub mod hpa;
pub mod keda;
pub mod memory;
pub mod missing;
pub mod path;
pub mod reserve;
pub mod several;
