//! From load signals to a replica count, as KEDA and its HPA would compute it: the modules of
//! [`crate::project`], [`crate::control`] and [`crate::policy`] under the one name the shells,
//! the tests and the benches use. It holds nothing of its own.

pub use crate::control::{
    activity, cycle, decision, deletion_cost, hold, hpa, keda, path, reasons, several,
};
pub use crate::policy::{self, exports, keys, scaled_object};
pub use crate::project::{
    asleep, capacity, cold_start, demand, fleet, floors, forecast, lookahead, wake, work,
};

pub use crate::control::activity::Activity;
pub use crate::control::decision::{
    decide, evaluate, hpa_sync, Decision, Evaluation, HpaSync, ScalerState, Why,
};
pub use crate::policy::{Metric, Policy, PolicyError};
pub use crate::project::demand::{Demand, Observation};
