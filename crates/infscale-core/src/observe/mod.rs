//! The observation layer: what the replicas and the activator say, read into values the rest of the
//! core can use. Nothing here decides anything.

pub mod counts;
pub mod metrics;
