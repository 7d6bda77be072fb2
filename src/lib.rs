//! infscale: scale LLM model servers on Kubernetes by requests running plus waiting, not CPU.
//!
//! # Layout
//!
//! A pure core shared by every job, and thin shells that do the I/O.
//!
//! The core (no I/O; time is a parameter):
//! - [`metrics`]: reads a model server's `/metrics` page (Prometheus text or OpenMetrics)
//!   without copying, maps each server's series names (vLLM, llama.cpp, SGLang, TGI, Triton) to
//!   the same [`metrics::Signals`], and turns two scrapes into rates and a TTFT p95.
//! - [`scaling`]: from pages to a replica count. [`scaling::keys`] names every policy key once;
//!   [`scaling::fleet`] turns one scrape round into the replicas that vote; then the metric's
//!   value ([`scaling::demand`]), the cold-start lookahead, KEDA's activation and scale to zero,
//!   and the Kubernetes HPA algorithm ([`scaling::hpa`]), with the reasons for every step.
//!   [`scaling::scaled_object`] writes a policy as a ScaledObject and reads one back.
//! - [`counts`]: the activator's held and in-flight counts, and their wire form (`/queue` and
//!   the `/queue/watch` event stream), written by the activator and read by `serve`.
//! - [`sim`]: GPU replicas, traces and the KEDA + HPA loop, calling the same [`scaling`]
//!   functions as `serve` and `decide`; the clairvoyant bound and the tuner.
//!
//! The shells:
//! - [`serve`]: `infscale serve`, KEDA's external scaler over gRPC: collectors that scrape the
//!   pods and follow the activator, then [`scaling::evaluate`]; and the standalone mode
//!   ([`serve::standalone`]) that `infscale kube` runs.
//! - [`activator`]: `infscale activator`, the proxy that holds requests while no replica is ready.
//! - [`emulate`]: `infscale emulate`, an OpenAI-compatible model server on CPU timed by the
//!   simulator's replica model, exporting `/metrics` in each server's dialect.
//! - [`edge`]: fetching pages from files or URLs (bounded in size and time), the Kubernetes
//!   client, and the `/metrics` endpoint `serve` and the activator share.
//! - [`load`]: `infscale load`, a load generator for OpenAI-compatible servers (closed and open
//!   loop, TTFT, inter-token and end-to-end percentiles) and the sweep that finds the
//!   concurrency a replica saturates at: the queue target to give a policy.
//! - [`limits`]: the bounds on what comes from outside (validation); each binary's operational
//!   limits are in [`serve::limits`] and [`activator::limits`].
//! - [`cli`]: argument parsing and printing for the `infscale` binary.

pub mod activator;
pub mod cli;
pub mod demo;
pub mod edge;
pub mod emulate;
pub mod fuzzing;
pub mod load;
pub mod serve;

pub use infscale_core::{counts, limits, metrics, scaling, sim, table};
