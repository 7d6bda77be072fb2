//! Fetching one pod's page, bounded in time, size and concurrency.
//!
//! Every scrape holds a permit from a semaphore shared by all collectors (so a thousand targets
//! never open a thousand connections at once), gives up after the target's timeout, and refuses a
//! body over the size cap instead of reading it: a hung or hostile pod costs one timeout, never
//! memory or a stuck collector.

use super::discovery::{Address, PodEndpoint};
use crate::edge::source::{cause, error_body, read_capped, status_message, Cause};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Why a pod's page could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScrapeError {
    #[error("timed out: no page within {0:?}")]
    Timeout(Duration),
    #[error("HTTP status {}{}", .0, .1.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Status(u16, Option<String>),
    #[error("page larger than the {0}-byte cap")]
    TooLarge(usize),
    #[error("{0}")]
    Transport(Cause),
    #[error("pod proxy needs the Kubernetes API")]
    NoApi,
}

impl ScrapeError {
    /// A short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ScrapeError::Timeout(_) => "timeout",
            ScrapeError::Status(..) => "status",
            ScrapeError::TooLarge(_) => "too_large",
            ScrapeError::Transport(c) => c.kind,
            ScrapeError::NoApi => "no_api",
        }
    }
}

/// Shared by every collector.
#[derive(Clone)]
pub struct Scraper {
    pub http: reqwest::Client,
    pub kube: Option<kube::Client>,
    pub max_bytes: usize,
    pub permits: Arc<Semaphore>,
}

impl Scraper {
    /// The pod's page, or why not, within `timeout` (waiting for a permit included).
    pub async fn scrape(
        &self,
        pod: &PodEndpoint,
        timeout: Duration,
    ) -> Result<Vec<u8>, ScrapeError> {
        let work = async {
            let _permit = self.permits.acquire().await.map_err(|e| {
                ScrapeError::Transport(Cause {
                    kind: "transport",
                    text: e.to_string(),
                })
            })?;
            match &pod.address {
                Address::Url(url) => self.fetch(url).await,
                Address::Proxy(path) => self.via_proxy(path).await,
            }
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| ScrapeError::Timeout(timeout))?
    }

    /// Every pod's page at once (each within `timeout`, all bounded by the shared permits), with
    /// how long each took, in the order of `pods`.
    pub async fn scrape_each(
        &self,
        pods: &[PodEndpoint],
        timeout: Duration,
    ) -> Vec<(Result<Vec<u8>, ScrapeError>, Duration)> {
        futures::future::join_all(pods.iter().map(|pod| async move {
            let started = std::time::Instant::now();
            let page = self.scrape(pod, timeout).await;
            (page, started.elapsed())
        }))
        .await
    }

    async fn fetch(&self, url: &str) -> Result<Vec<u8>, ScrapeError> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| ScrapeError::Transport(cause(&e)))?;
        self.page(http::Response::from(response)).await
    }

    /// A successful response's body, within the size cap.
    async fn page<B>(&self, response: http::Response<B>) -> Result<Vec<u8>, ScrapeError>
    where
        B: hyper::body::Body,
        B::Error: std::fmt::Display,
    {
        let status = response.status();
        if !status.is_success() {
            let said = status_message(&error_body(response.into_body()).await);
            return Err(ScrapeError::Status(status.as_u16(), said));
        }
        read_capped(response.into_body(), self.max_bytes)
            .await
            .map_err(|e| {
                ScrapeError::Transport(Cause {
                    kind: "body",
                    text: format!("reading the body: {e}"),
                })
            })?
            .ok_or(ScrapeError::TooLarge(self.max_bytes))
    }

    async fn via_proxy(&self, path: &str) -> Result<Vec<u8>, ScrapeError> {
        let client = self.kube.as_ref().ok_or(ScrapeError::NoApi)?;
        let transport = |e: String| {
            ScrapeError::Transport(Cause {
                kind: "transport",
                text: e,
            })
        };
        let request = http::Request::get(path)
            .body(kube::client::Body::empty())
            .map_err(|e| transport(e.to_string()))?;
        let response = client
            .send(request)
            .await
            .map_err(|e| transport(format!("through the API server's pod proxy: {e}")))?;
        self.page(response).await
    }
}
