//! The edges every shell shares: fetching pages from files and URLs (bounded in size and time),
//! connecting to the Kubernetes API and reading its EndpointSlices, serving a `/metrics` endpoint, listeners bounded in
//! connections and time, and the process's open-file limit. No scaling logic lives here;
//! `serve`, the activator and the CLI reach the outside world through these.

pub mod descriptors;
pub mod exposition_http;
pub mod files;
pub mod kubeapi;
pub mod listener;
pub mod slices;
pub mod source;
