//! Serve mode's shell: puts the activator into a model Service's path and takes it out, as
//! [`crate::scaling::path`] decides, and tells the collector when the activator is seen
//! answering through the Service.
//!
//! One task per serve-mode trigger. While the activator is wanted in the path it writes it in
//! (a [`PathWriter`]: an EndpointSlice in a cluster, [`super::path_kube`]; the demo's Service
//! outside one) and probes through the Service: a request carrying the activator's probe header
//! that the activator answers itself, on a fresh connection each time, until one lands on an
//! activator. Only then is the activator "answering", and only then may `IsActive` say idle.
//! While it is not wanted, it is taken out. Each state is written again every
//! [`RESYNC`] (a slice someone deleted comes back; one a crashed scaler left goes). A failed
//! write, or a probe no activator answered, is tried again every [`RETRY`] (the probe alone
//! while the write is fresh); a write that fails leaves the activator not answering, so the
//! target stays active rather than go to zero with the Service pointing nowhere.

use super::AbortOnDrop;
use crate::activator::proxy::{ACTIVATOR_HEADER, PROBE_HEADER};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often a state is written again while it holds.
pub const RESYNC: Duration = Duration::from_secs(30);

/// How soon a failed write, or a probe no activator answered, is tried again.
pub const RETRY: Duration = Duration::from_millis(500);

/// Probes sent through the Service per try: each lands on a pod or an activator as the Service
/// balances them.
const PROBES_PER_TRY: usize = 8;

/// One probe's timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Puts the activator in (or out of) one Service's path.
pub trait PathWriter: Send + Sync {
    /// Writes the activator into the Service's path (`in_path`) or out of it; on the way in,
    /// the URL to probe it through.
    fn write<'a>(
        &'a self,
        target: &'a super::metadata::ServeMode,
        activator: Option<&'a super::activators::Members>,
        in_path: bool,
    ) -> BoxFuture<'a, Result<Option<String>, String>>;
}

/// A trigger's path task: what the collector wants, and whether the activator answers.
pub struct PathHandle {
    want: watch::Sender<bool>,
    /// True once the activator, wanted in the path, was seen answering through the Service.
    pub answering: watch::Receiver<bool>,
    _task: AbortOnDrop,
}

impl PathHandle {
    /// Asks for the activator in the path, or out of it (nothing is written when unchanged).
    pub fn want(&self, in_path: bool) {
        self.want
            .send_if_modified(|w| std::mem::replace(w, in_path) != in_path);
    }

    /// Whether the activator is wanted in the path now.
    pub fn wanted(&self) -> bool {
        *self.want.borrow()
    }

    pub fn is_answering(&self) -> bool {
        *self.answering.borrow()
    }
}

/// Starts the path task of a trigger; the activator starts wanted in the path (the safe side).
pub fn start(
    writer: Arc<dyn PathWriter>,
    mode: super::metadata::ServeMode,
    activator: Option<super::activators::Members>,
) -> PathHandle {
    let (want, want_rx) = watch::channel(true);
    let (answering_tx, answering) = watch::channel(false);
    let task = tokio::spawn(run(writer, mode, activator, want_rx, answering_tx));
    PathHandle {
        want,
        answering,
        _task: AbortOnDrop(task),
    }
}

async fn run(
    writer: Arc<dyn PathWriter>,
    mode: super::metadata::ServeMode,
    activator: Option<super::activators::Members>,
    mut want: watch::Receiver<bool>,
    answering: watch::Sender<bool>,
) {
    // Fresh connections only: a pooled one would keep landing on the same endpoint.
    let http = match reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(PROBE_TIMEOUT)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "serve mode: no HTTP client for the probe");
            return;
        }
    };
    // The last state written, when, and the URL to probe through: a slice written lately is not
    // written again while only the probe is retried.
    let mut written: Option<(bool, tokio::time::Instant, Option<String>)> = None;
    loop {
        let in_path = *want.borrow_and_update();
        let fresh = written
            .as_ref()
            .filter(|(w, at, _)| *w == in_path && at.elapsed() < RESYNC)
            .map(|(_, _, url)| url.clone());
        let settled = if in_path {
            let wrote = match fresh {
                Some(url) => Ok(url),
                None => writer
                    .write(&mode, activator.as_ref(), true)
                    .await
                    .inspect(|url| {
                        written = Some((true, tokio::time::Instant::now(), url.clone()))
                    }),
            };
            match wrote {
                Ok(url) => {
                    let url = url.or_else(|| mode.url.clone());
                    let seen = match &url {
                        Some(u) => probe(&http, u).await,
                        None => false,
                    };
                    if seen != *answering.borrow() {
                        tracing::info!(service = %mode.service, answering = seen, "serve mode: the activator in the Service's path");
                    }
                    answering.send_replace(seen);
                    seen
                }
                Err(e) => {
                    tracing::warn!(service = %mode.service, error = %e, "serve mode: cannot put the activator in the Service's path");
                    written = None;
                    answering.send_replace(false);
                    false
                }
            }
        } else {
            answering.send_replace(false);
            match writer.write(&mode, activator.as_ref(), false).await {
                Ok(_) => {
                    written = Some((false, tokio::time::Instant::now(), None));
                    true
                }
                Err(e) => {
                    tracing::warn!(service = %mode.service, error = %e, "serve mode: cannot take the activator out of the Service's path");
                    written = None;
                    false
                }
            }
        };
        let pause = if settled { RESYNC } else { RETRY };
        tokio::select! {
            changed = want.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Whether an activator answers a probe sent through the Service at `url`, within
/// [`PROBES_PER_TRY`] probes.
async fn probe(http: &reqwest::Client, url: &str) -> bool {
    for _ in 0..PROBES_PER_TRY {
        let answer = http
            .get(format!("{url}/"))
            .header(PROBE_HEADER, "1")
            .send()
            .await;
        if answer.is_ok_and(|r| r.headers().contains_key(ACTIVATOR_HEADER)) {
            return true;
        }
    }
    false
}
