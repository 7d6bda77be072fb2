//! infscale's pure core: everything that turns what model servers say into a replica count, and
//! the simulator that runs it all on a trace. No I/O, no clock: time is a parameter, so `serve`,
//! `decide`, the demo and the simulator compute the same thing from the same inputs. The crate's
//! manifest names none of tokio, hyper, kube, reqwest or tonic, and `tests/purity.rs` reads the
//! sources for a clock, a socket or a file.
//!
//! # Layers, in the order a value flows through them
//! - [`observe`]: what the replicas and the activator say. [`observe::metrics`] reads a model
//!   server's `/metrics` page without copying and maps each server's series to the same
//!   signals; [`observe::counts`] is the activator's held and in-flight counts and their wire form.
//! - [`project`]: from signals to demand and its projection over the cold start: the fleet that
//!   votes, the metric's value, the lookahead, the forecast, the floors, the learned rates.
//! - [`control`]: KEDA's operator and the HPA, as they act on that value: activation and the step
//!   to zero, the Kubernetes HPA algorithm, the evaluation that runs each step and keeps its
//!   causes.
//! - [`policy`]: what to scale on, every key of it in one table, and the ScaledObject a policy
//!   is written as and read back from.
//! - [`sim`]: GPU replicas, traces, the clairvoyant bound and the tuner, on the control loop above.
//! - [`limits`]: the bounds on what comes from outside.
//! - [`table`]: the one writer of the tables the CLI prints.
//!
//! [`scaling`] is the path the shells have always used: it names the modules of `project`,
//! `control` and `policy` together.

pub mod control;
pub mod limits;
pub mod observe;
pub mod policy;
pub mod project;
pub mod scaling;
pub mod sim;
pub mod table;

pub use observe::{counts, metrics};
