//! A cluster's networking and controllers on loopback, around the API stand-in's store
//! ([`crate::common::kube::Cluster`]), so that a test installs infscale as a user does and sends
//! clients by every name a Kubernetes client uses. Each piece follows the store as the real
//! component follows the API (every change, within milliseconds), runs on threads of its own
//! (so the test's runtime, whatever its flavour, is not theirs) and stops when dropped.
//!
//! # Layout
//!
//! - [`net`]: ClusterIPs and kube-proxy. Every Service gets a ClusterIP from a loopback pool,
//!   each TCP port a listener; a connection goes to one endpoint of the Service's slices (any
//!   manager's: infscale's own slice is how the activator enters the path), by turns, chosen
//!   at accept time; counters say where connections went.
//! - [`dns`]: a client pod's resolver (`chat`, `chat.llm`, `chat.llm.svc`, the FQDN), reqwest
//!   clients that use it, and a raw HTTP/1.0 request with no `Host`.
//! - [`models`]: the Deployment controller, the kubelet and the EndpointSlice controller
//!   ([`endpoints`]) for model Deployments: pods with their own IPs, cold starts, Ready, drains
//!   on scale-down; each pod a vLLM-like server ([`server`]) that records what it received.
//! - [`keda`]: KEDA's operator and its HPA ([`hpa`]) run from a ScaledObject document against a
//!   scaler's gRPC address, periods divided by a time scale, every answer and scale recorded.
//! - [`apply`] and [`kustomize`]: manifests into the store, as `kubectl apply [-k]` puts them.
//! - [`pool`] and [`stamp`]: loopback address pools and API timestamps, shared by the above.
//!
//! Give each test its own address pools (`"127.0.100."` for ClusterIPs, `"127.0.120."` for
//! pods, ...): tests of one binary run at once.

pub mod apply;
pub mod dns;
pub mod endpoints;
pub mod hpa;
pub mod keda;
pub mod kustomize;
pub mod models;
pub mod net;
pub mod pool;
pub mod server;
pub mod stamp;

// Not every test uses every name.
#[allow(unused_imports)]
pub use apply::{apply, apply_file, apply_in};
#[allow(unused_imports)]
pub use dns::{http10_post, http10_post_with, Dns};
#[allow(unused_imports)]
pub use endpoints::Slices;
#[allow(unused_imports)]
pub use keda::{By, Keda, What};
#[allow(unused_imports)]
pub use kustomize::kustomize;
#[allow(unused_imports)]
pub use models::{Models, Options, Phase, PodView};
#[allow(unused_imports)]
pub use net::Net;
#[allow(unused_imports)]
pub use server::{ModelServer, Seen};

use std::time::{Duration, Instant};

/// Waits up to `within` for `ok`, looking every 5 ms; panics naming `what` if it never holds.
pub async fn eventually(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < end, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
