//! Serve mode's shell: puts the activator into a model Service's path and takes it out, as
//! [`crate::scaling::path`] decides, and tells the collector when the activator is seen
//! answering through the Service.
//!
//! One task per serve-mode trigger, with a [`PathSession`] of its own: an EndpointSlice in a
//! cluster ([`super::path_kube`], which also makes sure only one writer writes each Service's
//! slice, and that the activator pods hold this model at the port the slice names), the
//! demo's Service outside one. While the activator is wanted in the path the task writes it
//! in and probes through the Service: a request carrying the activator's probe header that the
//! activator answers itself, on a fresh connection each time, until one lands on an activator.
//! Only then is the activator "answering", and only then may `IsActive` say idle. While it is
//! not wanted, it is taken out. Each state is written again every [`RESYNC`] (a slice someone
//! deleted comes back; one a crashed scaler left goes). A failed write, or a probe no activator
//! answered, is tried again every [`RETRY`] (the probe alone while the write is fresh); a write
//! that fails leaves the activator not answering, so the target stays active rather than go to
//! zero with the Service pointing nowhere.
//!
//! A trigger that does not write its Service's slice (another scaler replica, or another
//! ScaledObject naming the same Service, holds the Service's lease) only observes: it probes
//! through the Service as often as it retries, so its `answering` follows the writer's slice.
//! A write that keeps failing because no activator pod holds the model (the activator does not
//! serve its namespace, say) for [`NO_ROUTE_AFTER`] is published as the route missing, which
//! the collector turns into an `IsActive` error while the target would read idle.

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

/// How long writes may fail for want of an activator that holds the model before the route is
/// reported missing.
pub const NO_ROUTE_AFTER: Duration = Duration::from_secs(10);

/// Probes sent through the Service per try: each lands on a pod or an activator as the Service
/// balances them.
const PROBES_PER_TRY: usize = 8;

/// One probe's timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Makes the writer of one trigger's Service path.
pub trait PathWriter: Send + Sync {
    /// The session of one serve-mode trigger, for as long as its collector lives.
    fn session(
        &self,
        mode: &super::metadata::ServeMode,
        activator: Option<super::activators::Members>,
    ) -> Box<dyn PathSession>;
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wrote {
    /// Written; on the way in, the URL to probe the activator through the Service at.
    Done(Option<String>),
    /// Another writes this Service's path (`holder`): nothing written; the Service is probed
    /// at `probe` all the same.
    Deferred {
        probe: Option<String>,
        holder: String,
    },
}

/// Why a write failed; `no_route` when no activator pod holds the model where the slice
/// would send its clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteError {
    pub why: String,
    pub no_route: bool,
}

impl WriteError {
    pub fn other(why: impl Into<String>) -> WriteError {
        WriteError {
            why: why.into(),
            no_route: false,
        }
    }
}

/// One trigger's writer of its Service's path.
pub trait PathSession: Send {
    /// Writes the activator into the Service's path (`in_path`) or out of it.
    fn write(&mut self, in_path: bool) -> BoxFuture<'_, Result<Wrote, WriteError>>;

    /// Resolves when who writes may have changed (a lease won or lost): the task writes again
    /// at once. Never, by default.
    fn changed(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
}

/// A trigger's path task: what the collector wants, and whether the activator answers.
pub struct PathHandle {
    want: watch::Sender<bool>,
    /// True once the activator, wanted in the path, was seen answering through the Service.
    pub answering: watch::Receiver<bool>,
    /// Why no activator holds the model, once that has lasted [`NO_ROUTE_AFTER`].
    pub missing: watch::Receiver<Option<String>>,
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

    /// Why the route is missing, if it is.
    pub fn route_missing(&self) -> Option<String> {
        self.missing.borrow().clone()
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
    let (missing_tx, missing) = watch::channel(None);
    let session = writer.session(&mode, activator);
    let task = tokio::spawn(run(session, mode, want_rx, answering_tx, missing_tx));
    PathHandle {
        want,
        answering,
        missing,
        _task: AbortOnDrop(task),
    }
}

async fn run(
    mut session: Box<dyn PathSession>,
    mode: super::metadata::ServeMode,
    mut want: watch::Receiver<bool>,
    answering: watch::Sender<bool>,
    missing: watch::Sender<Option<String>>,
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
    // Since when writes have failed for want of an activator holding the model.
    let mut no_route_since: Option<tokio::time::Instant> = None;
    // Who else writes, as last said (logged on change).
    let mut deferred_to: Option<String> = None;
    loop {
        let in_path = *want.borrow_and_update();
        let fresh = written
            .as_ref()
            .filter(|(w, at, _)| *w == in_path && at.elapsed() < RESYNC)
            .map(|(_, _, url)| url.clone());
        let wrote = match fresh {
            Some(url) => Ok(Wrote::Done(url)),
            None => session.write(in_path).await,
        };
        let holder = match &wrote {
            Ok(Wrote::Deferred { holder, .. }) => Some(holder.clone()),
            _ => None,
        };
        if holder != deferred_to {
            match &holder {
                Some(h) => {
                    tracing::info!(service = %mode.service, writer = %h, "serve mode: another writes this Service's slice; this trigger observes it")
                }
                None if deferred_to.is_some() => {
                    tracing::info!(service = %mode.service, "serve mode: this trigger writes the Service's slice")
                }
                None => {}
            }
            deferred_to = holder;
        }
        match &wrote {
            Err(e) if e.no_route => {
                let since = *no_route_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= NO_ROUTE_AFTER && missing.borrow().as_ref() != Some(&e.why) {
                    tracing::warn!(service = %mode.service, error = %e.why, "serve mode: no activator holds this model");
                    missing.send_replace(Some(e.why.clone()));
                }
            }
            Err(_) => {}
            Ok(_) => {
                no_route_since = None;
                if missing.borrow().is_some() {
                    tracing::info!(service = %mode.service, "serve mode: the activator holds this model again");
                    missing.send_replace(None);
                }
            }
        }
        let settled = if in_path {
            match wrote {
                Ok(Wrote::Done(url)) => {
                    if written
                        .as_ref()
                        .is_none_or(|(w, at, _)| *w != in_path || at.elapsed() >= RESYNC)
                    {
                        written = Some((true, tokio::time::Instant::now(), url.clone()));
                    }
                    let seen = probe_seen(&http, url.or_else(|| mode.url.clone())).await;
                    if seen != *answering.borrow() {
                        tracing::info!(service = %mode.service, answering = seen, "serve mode: the activator in the Service's path");
                    }
                    answering.send_replace(seen);
                    seen
                }
                Ok(Wrote::Deferred { probe, .. }) => {
                    written = None;
                    let seen = probe_seen(&http, probe.or_else(|| mode.url.clone())).await;
                    answering.send_replace(seen);
                    // The writer may take it out at any time: look again soon.
                    false
                }
                Err(e) => {
                    tracing::warn!(service = %mode.service, error = %e.why, "serve mode: cannot put the activator in the Service's path");
                    written = None;
                    answering.send_replace(false);
                    false
                }
            }
        } else {
            answering.send_replace(false);
            match wrote {
                Ok(Wrote::Done(_)) => {
                    if written.as_ref().is_none_or(|(w, _, _)| *w) {
                        written = Some((false, tokio::time::Instant::now(), None));
                    }
                    true
                }
                Ok(Wrote::Deferred { .. }) => {
                    written = None;
                    true
                }
                Err(e) => {
                    tracing::warn!(service = %mode.service, error = %e.why, "serve mode: cannot take the activator out of the Service's path");
                    written = None;
                    false
                }
            }
        };
        let pause = if settled { RESYNC } else { RETRY };
        tokio::select! {
            changed = want.changed() => if changed.is_err() { return },
            _ = session.changed() => written = None,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Whether an activator answers a probe through the Service at `url`.
async fn probe_seen(http: &reqwest::Client, url: Option<String>) -> bool {
    match url {
        Some(u) => probe(http, &u).await,
        None => false,
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
