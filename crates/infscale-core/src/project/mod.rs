//! The projection layer: from the replicas' signals to the metric's value and its projection.
//!
//! [`fleet`] turns one scrape round into the replicas that vote; [`demand`] turns their signals
//! into the metric's value (held requests included; the HPA's rule for replicas without a sample
//! is applied above, in [`crate::control::missing`]) and [`work`] into the work signal;
//! [`lookahead`] and [`forecast`] project it over the cold start, which [`cold_start`] learns;
//! [`floors`] puts the SLO-aware floor, the scale-down guard and the starting credit under it,
//! counting on the rate per replica [`capacity`] learned. [`asleep`] keeps sleeping replicas out
//! of the capacity and in the count; [`wake`] times their wakes.

pub mod asleep;
pub mod capacity;
pub mod cold_start;
pub mod demand;
pub mod fleet;
pub mod floors;
pub mod forecast;
pub mod lookahead;
pub mod wake;
pub mod work;
