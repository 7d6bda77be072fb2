//! infscale: scale LLM model servers on Kubernetes by requests running plus waiting, not CPU.
//!
//! # Layout
//!
//! A pure core shared by every job, and thin shells that do the I/O.
//!
//! - [`metrics`]: reads a model server's `/metrics` page (Prometheus text or OpenMetrics)
//!   without copying, maps each server's series names (vLLM, llama.cpp, SGLang, TGI, Triton) to
//!   the same [`metrics::Signals`], and turns two scrapes into rates and a TTFT p95.
//! - [`scaling`]: from signals to a replica count: the metric's value ([`scaling::demand`]),
//!   the cold-start lookahead, KEDA's activation and scale to zero, and the Kubernetes HPA
//!   algorithm ([`scaling::hpa`]), with the reasons for every step. Time is a parameter.
//! - [`sim`]: GPU replicas, traces and the KEDA + HPA loop, calling the same [`scaling`]
//!   functions as `serve` and `decide`; the clairvoyant bound and the tuner.
//! - [`scaler`]: `infscale serve`, KEDA's external scaler over gRPC: collectors that scrape the
//!   pods and follow the activator, then [`scaling::evaluate`].
//! - [`activator`]: `infscale activator`, the proxy that holds requests while no replica is ready.
//! - [`counts`]: the `/queue` document the activator writes and the scaler reads.
//! - [`source`]: the shell that fetches pages from files or URLs, bounded in size and time
//!   (its capped body reader serves every HTTP read).
//! - [`kubeapi`], [`exposition_http`]: the Kubernetes client, and the `/metrics` endpoints the
//!   scaler and the activator share.
//! - [`cli`]: argument parsing and printing for the `infscale` binary.

pub mod activator;
pub mod cli;
pub mod counts;
pub mod exposition_http;
pub mod kubeapi;
pub mod limits;
pub mod metrics;
pub mod scaler;
pub mod scaling;
pub mod sim;
pub mod source;
