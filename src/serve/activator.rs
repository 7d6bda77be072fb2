//! Following one activator pod's counts of held requests, live ([`crate::serve::activators`]
//! follows every pod of an activator Service and sums them).
//!
//! The follower first opens the activator's watch endpoint (`GET {url}/queue/watch`, server-sent
//! events, one `data:` line of counts JSON per change, decoded by [`infscale_core::observe::counts::wire`]), so a request held at the activator
//! reaches the scaler, and KEDA through `StreamIsActive`, within milliseconds. Where there is no
//! watch endpoint (the KEDA HTTP add-on's interceptor), it polls `GET {url}/queue`. Responses
//! and event lines are size-capped and every read is bounded in time: a `/queue` that does not
//! answer within [`Limits::activator_timeout`], or a watch silent for
//! [`Limits::activator_watch_idle`] (the activator sends a keep-alive every 5 s), has failed. A
//! failure is published as [`Counts::Failed`], never as zero held, and the follower reconnects
//! with back-off. What a follower holds of a body (a `/queue` document, a watch's partial line
//! and the chunk in hand) past a small allowance is charged to the scrape memory budget
//! ([`super::budget`]) as it arrives; a body that does not fit fails the read, naming the budget.

use super::budget::{read_charged, MemoryBudget, ReadError, ACTIVATOR_FREE_BYTES};
use super::limits::Limits;
use infscale_core::observe::counts::wire::{self, WireError};
use infscale_core::observe::counts::HostCounts;
use std::sync::Arc;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// What the follower last saw: the core's [`Counts`], whose `held_demand` is the rule on what a
/// partly read activator is worth.
pub use infscale_core::observe::counts::Counts;

/// One activator pod to follow: its admin base URL and the host whose counts are the target's.
#[derive(Debug, Clone)]
pub struct Source {
    pub url: String,
    pub host: String,
    /// Whether a watch document without the host is an error (the activator lists every host
    /// it routes, so one it lacks has no route: proxy mode), or zero held (serve mode, where
    /// the activator learns the model from the slice only while it is in the path).
    pub require_route: bool,
}

/// The host's counts in a watch document, or why there are none: a host the activator does
/// not list has no route there (when the source requires one).
fn mine(
    counts: &infscale_core::observe::counts::QueueCounts,
    activator: &Source,
    url: &str,
) -> Result<HostCounts, String> {
    match counts.get(&activator.host) {
        Some(c) => Ok(*c),
        None if !activator.require_route => Ok(HostCounts::default()),
        None => {
            let listed: Vec<&str> = counts.keys().take(8).map(String::as_str).collect();
            Err(infscale_core::limits::cut(
                &format!(
                    "{url}: the activator has no route for host {:?} (activatorHost); it counts {}",
                    activator.host,
                    if listed.is_empty() {
                        "no host".to_owned()
                    } else {
                        listed.join(", ")
                    }
                ),
                infscale_core::limits::ERROR_TEXT_BYTES,
            ))
        }
    }
}

/// Starts following one activator; the receiver changes on every new reading, and `changed`
/// is notified then too.
pub fn follow(
    http: reqwest::Client,
    activator: Source,
    changed: Arc<Notify>,
    limits: Limits,
    budget: MemoryBudget,
) -> (watch::Receiver<Counts>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Counts::Unknown);
    let tx = Announcing { tx, changed };
    let task = tokio::spawn(async move {
        let mut backoff = limits.activator_backoff;
        loop {
            let mut followed_since = None;
            let outcome = watch_events(
                &http,
                &activator,
                &tx,
                (&limits, &budget),
                &mut followed_since,
            )
            .await;
            // A watch that delivered counts for longer than the longest pause was no failure
            // in a row: the next failure starts the back-off over (an activator restart after
            // hours must not wait out the pause earned while it was down at start-up).
            if followed_since.is_some_and(|t: Instant| t.elapsed() >= limits.activator_backoff_max)
            {
                backoff = limits.activator_backoff;
            }
            match outcome {
                Ok(Mode::NoWatch) => poll(&http, &activator, &tx, &limits, &budget).await,
                Ok(Mode::Ended) => backoff = limits.activator_backoff,
                Err(e) => {
                    tracing::warn!(activator = %activator.url, error = %e, "the activator's held count cannot be read");
                    publish(&tx, Counts::Failed(e));
                    backoff = (backoff * 2).min(limits.activator_backoff_max);
                }
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(backoff).await;
        }
    });
    (rx, task)
}

enum Mode {
    /// The activator has no watch endpoint: poll instead.
    NoWatch,
    /// The event stream ended; reconnect.
    Ended,
}

fn host_counts(doc: &[u8], host: &str) -> Result<HostCounts, String> {
    let counts = wire::counts(doc).map_err(|e| e.to_string())?;
    Ok(counts.get(host).copied().unwrap_or_default())
}

/// A watch stream's failure as the follower reports it, naming the URL. The wire's errors
/// never quote what the peer sent.
fn wire_failure(url: &str, e: WireError) -> String {
    format!("{url}: {e}")
}

async fn watch_events(
    http: &reqwest::Client,
    activator: &Source,
    tx: &Announcing,
    (limits, budget): (&Limits, &MemoryBudget),
    followed_since: &mut Option<Instant>,
) -> Result<Mode, String> {
    let (timeout, idle) = (limits.activator_timeout, limits.activator_watch_idle);
    let url = format!("{}/queue/watch", activator.url);
    let request = http.get(&url).header("accept", wire::CONTENT_TYPE).send();
    let mut response = tokio::time::timeout(timeout, request)
        .await
        .map_err(|_| format!("{url}: no answer within {timeout:?}"))?
        .map_err(|e| format!("{url}: {}", crate::edge::source::cause(&e)))?;
    if matches!(response.status().as_u16(), 404 | 405 | 501) {
        return Ok(Mode::NoWatch);
    }
    if !response.status().is_success() {
        return Err(format!("{url}: HTTP status {}", response.status()));
    }
    let mut decoder = wire::Decoder::new(limits.activator_max_bytes);
    let mut charge = budget.charge(ACTIVATOR_FREE_BYTES);
    loop {
        let chunk = tokio::time::timeout(idle, response.chunk())
            .await
            .map_err(|_| format!("{url}: silent for {idle:?} (no event, no keep-alive): stalled"))?
            .map_err(|e| format!("{url}: {}", crate::edge::source::cause(&e)))?;
        let Some(chunk) = chunk else { break };
        // The chunk in hand and what the decoder keeps of a line not yet ended.
        charge
            .hold(decoder.held() + chunk.len())
            .map_err(|full| format!("{url}: the watch's event refused: {full}"))?;
        for event in decoder.feed(&chunk) {
            let counts = event.map_err(|e| wire_failure(&url, e))?;
            followed_since.get_or_insert_with(Instant::now);
            match mine(&counts, activator, &url) {
                Ok(c) => publish(tx, Counts::Seen(c)),
                Err(why) => {
                    tracing::warn!(activator = %activator.url, host = %activator.host, "the activator has no route for this target's host");
                    publish(tx, Counts::Failed(why));
                }
            }
        }
        drop(chunk);
        let _ = charge.hold(decoder.held());
    }
    Ok(Mode::Ended)
}

async fn poll(
    http: &reqwest::Client,
    activator: &Source,
    tx: &Announcing,
    limits: &Limits,
    budget: &MemoryBudget,
) {
    let (timeout, max_bytes) = (limits.activator_timeout, limits.activator_max_bytes);
    let url = format!("{}/queue", activator.url);
    loop {
        let reading = async {
            let response = http
                .get(&url)
                .send()
                .await
                .map_err(|e| format!("{url}: {}", crate::edge::source::cause(&e)))?;
            if !response.status().is_success() {
                return Err(format!("{url}: HTTP status {}", response.status()));
            }
            let body = http::Response::from(response).into_body();
            let mut charge = budget.charge(ACTIVATOR_FREE_BYTES);
            let doc = read_charged(body, max_bytes, &mut charge)
                .await
                .map_err(|e| match e {
                    ReadError::Body(e) => format!("{url}: {}", crate::edge::source::cause(&e)),
                    ReadError::TooLarge => format!("{url}: counts over {max_bytes} bytes"),
                    ReadError::NeverFits { declared, most } => format!(
                        "{url}: counts of {declared} bytes refused: one body may hold at most \
                         {most} of the {}-byte scrape memory budget (--scrape-memory-bytes)",
                        budget.total()
                    ),
                    ReadError::Budget(full) => format!("{url}: counts refused: {full}"),
                })?;
            host_counts(&doc, &activator.host).map_err(|e| format!("{url}: {e}"))
        };
        let reading = tokio::time::timeout(timeout, reading)
            .await
            .unwrap_or_else(|_| Err(format!("{url}: no answer within {timeout:?}")));
        let new = match reading {
            Ok(c) => Counts::Seen(c),
            Err(e) => Counts::Failed(e),
        };
        publish(tx, new);
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(limits.activator_poll).await;
    }
}

/// A follower's channel, and who to tell of a change.
struct Announcing {
    tx: watch::Sender<Counts>,
    changed: Arc<Notify>,
}

impl Announcing {
    fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Publishes counts, telling the listener only when they differ from the last.
fn publish(tx: &Announcing, new: Counts) {
    let changed = tx.tx.send_if_modified(|c| {
        let changed = *c != new;
        if changed {
            *c = new;
        }
        changed
    });
    if changed {
        tx.changed.notify_one();
    }
}

#[cfg(test)]
mod tests;
