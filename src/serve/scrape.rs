//! Fetching one pod's page, bounded in time, size, concurrency and memory.
//!
//! Every scrape holds a permit from a semaphore shared by all collectors (so a thousand targets
//! never open a thousand connections at once), gives up after the target's timeout, and refuses a
//! body over the size cap instead of reading it: a hung or hostile pod costs one timeout, never
//! a stuck collector. The page's bytes are charged to the [`MemoryBudget`] shared by every target
//! as they arrive, and the page is read (parsed) while the scrape still holds its permit and its
//! charge, then dropped: no page outlives its scrape slot, so at most
//! `--max-concurrent-scrapes` pages are held at once, within the budget. A llama.cpp pod's
//! `/props` is fetched beside its page the same way: its sleep state is said there.

use super::budget::{read_charged, Charge, MemoryBudget, ReadError};
use super::discovery::{Address, PodEndpoint};
use crate::edge::source::{cause, error_body, status_message, Cause};
use infscale_core::observe::metrics::{props, read_page, PageRead, ServerChoice};
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
    /// The page does not fit the memory budget, now or (with its declared length) ever.
    #[error("page refused: {0}")]
    OverBudget(String),
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
            ScrapeError::OverBudget(_) => "over_budget",
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
    /// Every page's bytes, charged as they arrive.
    pub budget: MemoryBudget,
}

impl Scraper {
    /// What `address` answers, as `read` reads it, or why there is none, within `timeout`
    /// (waiting for a permit included). The body is read within the scrape's permit and charge,
    /// and dropped.
    async fn scrape<T>(
        &self,
        address: &Address,
        timeout: Duration,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, ScrapeError> {
        let work = async {
            let _permit = self.permits.acquire().await.map_err(|e| {
                ScrapeError::Transport(Cause {
                    kind: "transport",
                    text: e.to_string(),
                })
            })?;
            let mut charge = self.budget.charge(self.budget.page_share());
            let page = match address {
                Address::Url(url) => self.fetch(url, &mut charge).await,
                Address::Proxy(path) => self.via_proxy(path, &mut charge).await,
            }?;
            Ok(read(&page))
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| ScrapeError::Timeout(timeout))?
    }

    /// Every pod's page at once, read with `server`'s profile (each within `timeout`, all
    /// bounded by the shared permits and budget), with how long each took, in the order of
    /// `pods`. A llama.cpp page's sleep state is read from the `/props` beside it, within what is
    /// left of the timeout; one that cannot be read leaves it unknown (the page still votes).
    pub async fn scrape_each(
        &self,
        pods: &[PodEndpoint],
        timeout: Duration,
        server: ServerChoice,
    ) -> Vec<(Result<PageRead, ScrapeError>, Duration)> {
        futures::future::join_all(pods.iter().map(|pod| async move {
            let started = tokio::time::Instant::now();
            let read = |page: &[u8]| read_page(page, server);
            let mut page = self.scrape(&pod.address, timeout, read).await;
            if let Ok(PageRead {
                signals: Ok(signals),
                ..
            }) = &mut page
            {
                if props::wanted(signals) {
                    let left = timeout.saturating_sub(started.elapsed());
                    let said = match props_address(&pod.address) {
                        Some(at) => self.scrape(&at, left, |b| props::read(b, "/props")).await,
                        None => Ok(Err("no /props address beside the page".to_owned())),
                    };
                    match said.map_err(|e| e.to_string()).and_then(|r| r) {
                        Ok(asleep) => signals.asleep = asleep,
                        Err(e) => {
                            tracing::debug!(pod = %pod.name, error = %e, "sleep state not read");
                        }
                    }
                }
            }
            (page, started.elapsed())
        }))
        .await
    }

    async fn fetch(&self, url: &str, charge: &mut Charge) -> Result<Vec<u8>, ScrapeError> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| ScrapeError::Transport(cause(&e)))?;
        self.page(http::Response::from(response), charge).await
    }

    /// A successful response's body, within the size cap and the budget.
    async fn page<B>(
        &self,
        response: http::Response<B>,
        charge: &mut Charge,
    ) -> Result<Vec<u8>, ScrapeError>
    where
        B: hyper::body::Body,
        B::Error: std::fmt::Display,
    {
        let status = response.status();
        if !status.is_success() {
            let said = status_message(&error_body(response.into_body()).await);
            return Err(ScrapeError::Status(status.as_u16(), said));
        }
        read_charged(response.into_body(), self.max_bytes, charge)
            .await
            .map_err(|e| match e {
                ReadError::Body(e) => ScrapeError::Transport(Cause {
                    kind: "body",
                    text: format!("reading the body: {e}"),
                }),
                ReadError::TooLarge => ScrapeError::TooLarge(self.max_bytes),
                ReadError::NeverFits { declared, most } => ScrapeError::OverBudget(format!(
                    "it declares {declared} bytes, and one page may hold at most {most} of the \
                     {}-byte scrape memory budget (--scrape-memory-bytes)",
                    self.budget.total()
                )),
                ReadError::Budget(full) => ScrapeError::OverBudget(full.to_string()),
            })
    }

    async fn via_proxy(&self, path: &str, charge: &mut Charge) -> Result<Vec<u8>, ScrapeError> {
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
        self.page(response, charge).await
    }
}

/// Where llama.cpp's `/props` is, beside the page at `page`.
fn props_address(page: &Address) -> Option<Address> {
    match page {
        Address::Url(u) => props::beside_url(u).map(Address::Url),
        Address::Proxy(path) => Some(Address::Proxy(props::beside(path))),
    }
}
