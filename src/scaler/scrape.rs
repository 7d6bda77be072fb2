//! Fetching one pod's page, bounded in time, size and concurrency.
//!
//! Every scrape holds a permit from a semaphore shared by all collectors (so a thousand targets
//! never open a thousand connections at once), gives up after the target's timeout, and refuses a
//! body over the size cap instead of reading it: a hung or hostile pod costs one timeout, never
//! memory or a stuck collector.

use super::discovery::{Address, PodEndpoint};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Why a pod's page could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScrapeError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("page larger than the {0}-byte cap")]
    TooLarge(usize),
    #[error("{0}")]
    Transport(String),
    #[error("pod proxy needs the Kubernetes API")]
    NoApi,
}

impl ScrapeError {
    /// A short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ScrapeError::Timeout(_) => "timeout",
            ScrapeError::Status(_) => "status",
            ScrapeError::TooLarge(_) => "too_large",
            ScrapeError::Transport(_) => "transport",
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
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|e| ScrapeError::Transport(e.to_string()))?;
            match &pod.address {
                Address::Url(url) => self.fetch(url).await,
                Address::Proxy(path) => self.via_proxy(path).await,
            }
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| ScrapeError::Timeout(timeout))?
    }

    async fn fetch(&self, url: &str) -> Result<Vec<u8>, ScrapeError> {
        let transport = |e: reqwest::Error| ScrapeError::Transport(e.to_string());
        let mut response = self.http.get(url).send().await.map_err(transport)?;
        if !response.status().is_success() {
            return Err(ScrapeError::Status(response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > self.max_bytes as u64)
        {
            return Err(ScrapeError::TooLarge(self.max_bytes));
        }
        let mut page = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if page.len() + chunk.len() > self.max_bytes {
                return Err(ScrapeError::TooLarge(self.max_bytes));
            }
            page.extend_from_slice(&chunk);
        }
        Ok(page)
    }

    async fn via_proxy(&self, path: &str) -> Result<Vec<u8>, ScrapeError> {
        let client = self.kube.as_ref().ok_or(ScrapeError::NoApi)?;
        let request = http::Request::get(path)
            .body(kube::client::Body::empty())
            .map_err(|e| ScrapeError::Transport(e.to_string()))?;
        let response = client
            .send(request)
            .await
            .map_err(|e| ScrapeError::Transport(e.to_string()))?;
        if !response.status().is_success() {
            return Err(ScrapeError::Status(response.status().as_u16()));
        }
        let mut body = response.into_body();
        let mut page = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ScrapeError::Transport(e.to_string()))?;
            if let Some(data) = frame.data_ref() {
                if page.len() + data.len() > self.max_bytes {
                    return Err(ScrapeError::TooLarge(self.max_bytes));
                }
                page.extend_from_slice(data);
            }
        }
        Ok(page)
    }
}
