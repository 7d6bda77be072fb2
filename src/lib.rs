//! infscale: scale LLM model servers on Kubernetes by requests running plus waiting, not CPU.
//!
//! # Layout
//!
//! A pure core shared by every job, and thin shells that do the I/O.
//!
//! The core is the crate `infscale_core` (no I/O; time is a parameter), in layers: `limits` and
//! `table`, `observe` (a model server's `/metrics` page and the activator's counts), `policy`
//! (the vocabulary: a policy's keys, the HPA's behaviour, the ScaledObject), `reasons`,
//! `project` (signals to demand and its projection), `control` (KEDA and the HPA) and `sim`;
//! its `lib.rs` is the map. The shells, and the tests and benches, import it by those paths
//! (`infscale_core::control::decision::evaluate`); this crate re-exports none of it.
//!
//! The shells:
//! - [`serve`]: `infscale serve`, KEDA's external scaler over gRPC: collectors that scrape the
//!   pods and follow the activator, then the core's `control::decision::evaluate`; and the standalone mode
//!   ([`serve::standalone`]) that `infscale kube` runs.
//! - [`activator`]: `infscale activator`, the proxy that holds requests while no replica is ready.
//! - [`emulate`]: `infscale emulate`, an OpenAI-compatible model server on CPU timed by the
//!   simulator's replica model, exporting `/metrics` in each server's dialect.
//! - [`edge`]: fetching pages from files or URLs (bounded in size and time), the Kubernetes
//!   client, and the `/metrics` endpoint `serve` and the activator share.
//! - [`load`]: `infscale load`, a load generator for OpenAI-compatible servers (closed and open
//!   loop, TTFT, inter-token and end-to-end percentiles) and the sweep that finds the
//!   concurrency a replica saturates at: the queue target to give a policy.
//! - Each binary's operational limits are in [`serve::limits`] and [`activator::limits`]; the
//!   bounds on what comes from outside are the core's `limits`.
//! - [`cli`]: argument parsing and printing for the `infscale` binary.

pub mod activator;
pub mod cli;
pub mod demo;
pub mod edge;
pub mod emulate;
pub mod fuzzing;
pub mod load;
pub mod serve;
