//! The edges every shell shares: fetching pages from files and URLs (bounded in size and time),
//! connecting to the Kubernetes API, and serving a `/metrics` endpoint. No scaling logic lives
//! here; `serve`, the activator and the CLI reach the outside world through these.

pub mod exposition_http;
pub mod kubeapi;
pub mod source;
