//! infscale's pure core: everything that turns what model servers say into a replica count, and
//! the simulator that runs it all on a trace. No I/O, no clock: time is a parameter, so `serve`,
//! `decide`, the demo and the simulator compute the same thing from the same inputs. The crate's
//! manifest names none of tokio, hyper, kube, reqwest or tonic, and `tests/purity.rs` reads the
//! sources for a clock, a socket or a file.
//!
//! # Layers, bottom first
//! Each module is one layer, in the order a value flows through them; a file uses its own layer
//! and those listed before it, never one after (the workspace's `tests/layers.rs` keeps this).
//! Every module has this one path: there is no second name for any of them.
//! - [`limits`]: the bounds on what comes from outside. [`table`]: the one writer of the tables
//!   the CLI prints. Neither uses anything.
//! - [`observe`]: what the replicas and the activator say. [`observe::metrics`] reads a model
//!   server's `/metrics` page without copying and maps each server's series to the same
//!   signals; [`observe::counts`] is the activator's held and in-flight counts and their wire form.
//! - [`policy`]: the vocabulary every layer above speaks: what to scale on, every key of it in
//!   one table ([`policy::keys`]), the HPA's behaviour configuration ([`policy::behavior`]),
//!   which server exports which metric, and the ScaledObject a policy is written as and read
//!   back from.
//! - [`reasons`]: the steps a decision takes and the causes of its answers, as data, and their
//!   words.
//! - [`project`]: from signals to demand and its projection over the cold start: the fleet that
//!   votes, the metric's value, the lookahead, the forecast, the floors, the learned rates.
//! - [`control`]: KEDA's operator and the HPA, as they act on that value: the HPA's rule for
//!   replicas without a sample, activation and the step to zero, the Kubernetes HPA algorithm,
//!   the evaluation that runs each step and keeps its causes.
//! - [`sim`]: GPU replicas, traces, the clairvoyant bound and the tuner, on the control loop
//!   above.

pub mod control;
pub mod limits;
pub mod observe;
pub mod policy;
pub mod project;
pub mod reasons;
pub mod sim;
pub mod table;
