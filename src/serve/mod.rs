//! `infscale serve`: the KEDA external scaler.
//!
//! KEDA calls [`service`] (IsActive, StreamIsActive, GetMetricSpec, GetMetrics) with a trigger's
//! metadata, read by [`metadata`]. Each scale target gets a background [`collector`], held in the
//! [`registry`], that finds the target's pods ([`discovery`]: a watched store of the Kubernetes
//! API, or a static list), scrapes them within bounds ([`scrape`]; every body's bytes within one
//! memory [`budget`]), follows the activator's held
//! count live ([`activator`]), and publishes what `control::decision::evaluate` concludes. Calls only read
//! that publication. [`server`] assembles the gRPC server with health, reflection and TLS, and
//! [`telemetry`] is the scaler's own `/metrics`. In serve mode, [`path`] puts the activator in a
//! model Service's path while it is needed ([`path_kube`]: an EndpointSlice) and out of it once
//! the replicas carry the traffic. [`limits`] holds every operational bound, passed
//! down from the server to each part. With `--state-dir`, [`memory_file`] keeps what each
//! target's decision learned across a restart.

pub(crate) mod activator;
pub(crate) mod activators;
pub mod budget;
pub(crate) mod collector;
pub(crate) mod connections;
pub(crate) mod deletion_cost;
pub mod discovery;
pub mod lease;
pub mod limits;
pub mod memory_file;
pub mod metadata;
pub(crate) mod path;
pub mod path_kube;
pub mod proto;
pub(crate) mod registry;
pub(crate) mod scrape;
pub(crate) mod selector;
pub mod server;
pub(crate) mod service;
pub mod slice_guard;
pub(crate) mod standalone;
pub(crate) mod telemetry;

/// A background task that ends when its owner drops this.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
