//! The edges every shell shares: fetching pages from files and URLs (bounded in size and time),
//! connecting to the Kubernetes API and reading its EndpointSlices, serving a `/metrics` endpoint, listeners bounded in
//! connections and time, the process's open-file limit, and how a closed stdout ends a command. No scaling logic lives here;
//! `serve`, the activator and the CLI reach the outside world through these.

pub mod broken_pipe;
pub mod descriptors;
pub(crate) mod exposition_http;
pub(crate) mod files;
pub(crate) mod kubeapi;
pub mod listener;
pub(crate) mod slices;
pub(crate) mod source;
