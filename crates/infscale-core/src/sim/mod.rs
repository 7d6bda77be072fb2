//! The offline simulator: GPU replicas under the real KEDA + HPA loop.
//!
//! [`gpu`] derives a replica from memory bandwidth and FLOPs; [`trace`] makes or reads traffic;
//! [`replica`] and [`cluster`] serve it step by step; [`run`] drives the control loop, calling
//! the same `scaling` functions `serve` and `decide` call; [`report`] turns a run into SLO misses
//! and replica-minutes; [`standby`] is the warm start path beside the cold one; [`bound`] is the
//! clairvoyant lower bound; [`capacity`] measures what one replica carries; [`plot`] draws the
//! runs; [`phases`] runs a day at every offset of the scrapes against the HPA's syncs; [`seeds`]
//! judges policies on many traces of a scenario; [`suite`] on families of days no single
//! generator owns, beside each family's [`anchors`] (its best fixed fleet and the best policy of
//! a bounded search); [`week`] on 24-hour days played as weeks, judged day by day; [`tune`]
//! searches policies.

pub mod anchors;
pub mod bound;
pub mod capacity;
pub mod cluster;
pub mod gpu;
pub mod phases;
pub mod plot;
pub mod replica;
pub mod replicaset;
pub mod report;
pub mod rng;
pub mod run;
pub mod seeds;
pub mod settings;
pub mod standby;
pub mod suite;
pub mod trace;
pub mod tune;
pub mod week;
