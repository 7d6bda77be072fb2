//! Serve mode's shell: puts the activator into a model Service's path and takes it out, as
//! [`infscale_core::control::path`] decides, and tells the collector when the activator is seen
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
//! deleted comes back; one a crashed scaler left goes). A failed write is tried again after
//! [`RETRY`], doubling with each failure in a row up to [`WRITE_BACKOFF_MAX`]; a probe no
//! activator answered (the write fresh) after [`RETRY`] doubling up to [`PROBE_BACKOFF_MAX`].
//! A write that fails leaves the activator not answering, so the target stays active rather
//! than go to zero with the Service pointing nowhere; each failure is counted
//! (`infscale_serve_path_write_failures_total`, per reason) and logged the first time, then at
//! most once every [`FAILURE_LOG_EVERY`] with the count. Probes go out at most
//! [`PROBES_PER_SECOND`] a second per trigger (after a burst of one try's) and
//! [`TOTAL_PROBES_PER_SECOND`] across all of the scaler's triggers ([`Probes`]); none follows a
//! redirect, and a redirect is no activator's answer.
//!
//! A trigger that does not write its Service's slice (another scaler replica, or another
//! ScaledObject naming the same Service, holds the Service's lease) only observes: it probes
//! through the Service as often as it retries, so its `answering` follows the writer's slice.
//! A write that keeps failing because no activator pod holds the model (the activator does not
//! serve its namespace, say) for [`NO_ROUTE_AFTER`] is published as the route missing, which
//! the collector turns into an `IsActive` error while the target would read idle.

use super::telemetry::PathSeries;
use super::AbortOnDrop;
use crate::activator::proxy::{ACTIVATOR_HEADER, PROBE_HEADER};
use futures::future::BoxFuture;
use pacing::{Backoff, Pacer, Quiet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often a state is written again while it holds.
pub const RESYNC: Duration = Duration::from_secs(30);

/// How soon a failed write, or a probe no activator answered, is first tried again; each
/// failure in a row doubles it.
pub const RETRY: Duration = Duration::from_millis(500);

/// The longest pause between writes that keep failing (an API server that refuses them).
pub const WRITE_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// The longest pause between tries of a probe no activator answered while the write is fresh
/// (kube-proxy, or the activator, not there yet).
pub const PROBE_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// How often a write that keeps failing is logged again (with the count since).
pub const FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Probes one trigger sends a second at most, after a burst of [`PROBES_PER_TRY`].
pub const PROBES_PER_SECOND: f64 = 2.0;

/// Probes all of a scaler's triggers send a second at most, together, after a burst of as many.
pub const TOTAL_PROBES_PER_SECOND: u32 = 20;

/// How long writes may fail for want of an activator that holds the model before the route is
/// reported missing.
pub const NO_ROUTE_AFTER: Duration = Duration::from_secs(10);

/// Probes sent through the Service per try: each lands on a pod or an activator as the Service
/// balances them.
pub const PROBES_PER_TRY: usize = 8;

mod pacing;
#[cfg(test)]
mod tests;

/// The pace all of a scaler's triggers probe at together: one for the scaler, shared by every
/// path task it starts.
#[derive(Debug)]
pub struct Probes(Pacer);

impl Default for Probes {
    fn default() -> Self {
        Probes(Pacer::new(
            f64::from(TOTAL_PROBES_PER_SECOND),
            TOTAL_PROBES_PER_SECOND,
        ))
    }
}

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
/// would send its clients; `key` when a metadata key does not fit the cluster (a `serviceUrl`
/// that is not the Service's address): published at once as the route missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteError {
    pub why: String,
    pub no_route: bool,
    pub key: Option<&'static str>,
}

impl WriteError {
    pub fn other(why: impl Into<String>) -> WriteError {
        WriteError {
            why: why.into(),
            no_route: false,
            key: None,
        }
    }

    /// Metadata key `key` does not fit what the API says.
    pub fn metadata(key: &'static str, why: impl Into<String>) -> WriteError {
        WriteError {
            why: format!("metadata key {key}: {}", why.into()),
            no_route: false,
            key: Some(key),
        }
    }

    /// The reason it is counted under: a few words, never the text itself.
    pub fn reason(&self) -> &'static str {
        if self.key.is_some() {
            return "metadata";
        }
        if self.no_route {
            return "no_route";
        }
        // The API's status, as kube shows it (`... code: 403 }`).
        let code = self
            .why
            .rsplit_once("code: ")
            .and_then(|(_, rest)| rest.get(..3))
            .and_then(|c| c.parse::<u16>().ok());
        match code {
            Some(403) => "forbidden",
            Some(404) => "not_found",
            Some(409) => "conflict",
            Some(422) => "invalid",
            Some(429) => "throttled",
            Some(400..=499) => "refused",
            Some(500..=599) => "api_error",
            _ => "error",
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
/// Its probes share `probes` with every other trigger's; its failed writes count in `series`.
pub fn start(
    writer: Arc<dyn PathWriter>,
    mode: super::metadata::ServeMode,
    activator: Option<super::activators::Members>,
    probes: Arc<Probes>,
    series: PathSeries,
) -> PathHandle {
    let (want, want_rx) = watch::channel(true);
    let (answering_tx, answering) = watch::channel(false);
    let (missing_tx, missing) = watch::channel(None);
    let session = writer.session(&mode, activator);
    let pace = Pace {
        own: Pacer::new(PROBES_PER_SECOND, PROBES_PER_TRY as u32),
        total: probes,
    };
    let task = tokio::spawn(run(
        session,
        Channels {
            want: want_rx,
            answering: answering_tx,
            missing: missing_tx,
        },
        mode,
        pace,
        series,
    ));
    PathHandle {
        want,
        answering,
        missing,
        _task: AbortOnDrop(task),
    }
}

/// The task's ends of its handle's channels.
struct Channels {
    want: watch::Receiver<bool>,
    answering: watch::Sender<bool>,
    missing: watch::Sender<Option<String>>,
}

/// The pace of one trigger's probes: its own, and the scaler's.
struct Pace {
    own: Pacer,
    total: Arc<Probes>,
}

/// One trigger's failed writes: the pause before the next, the log kept quiet, the counter.
struct Failures {
    backoff: Backoff,
    quiet: Quiet,
    series: PathSeries,
}

impl Failures {
    /// One more failure, of a write `what` (in the path or out of it): counted, logged when due;
    /// the pause before the next try.
    fn failed(
        &mut self,
        mode: &super::metadata::ServeMode,
        what: &str,
        e: &WriteError,
    ) -> Duration {
        self.series.write_failed(e.reason());
        let pause = self.backoff.next();
        if let Some(failures) = self.quiet.failed() {
            tracing::warn!(
                namespace = %mode.namespace,
                scaled_object = %mode.scaled_object,
                service = %mode.service,
                reason = e.reason(),
                failures,
                retry_in = ?pause,
                error = %e.why,
                "serve mode: cannot {what} (the target stays active; logged again at most once a minute)"
            );
        }
        pause
    }

    /// A write that went through.
    fn succeeded(&mut self, mode: &super::metadata::ServeMode) {
        self.backoff.reset();
        if let Some(failures) = self.quiet.recovered() {
            tracing::info!(
                namespace = %mode.namespace,
                scaled_object = %mode.scaled_object,
                service = %mode.service,
                failures,
                "serve mode: the Service's path is written again"
            );
        }
    }
}

async fn run(
    mut session: Box<dyn PathSession>,
    channels: Channels,
    mode: super::metadata::ServeMode,
    pace: Pace,
    series: PathSeries,
) {
    let Channels {
        mut want,
        answering,
        missing,
    } = channels;
    // Fresh connections only: a pooled one would keep landing on the same endpoint. No
    // redirect is followed: the probe goes to the model's own Service and nowhere it points.
    let http = match reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(PROBE_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "serve mode: no HTTP client for the probe");
            return;
        }
    };
    let mut failures = Failures {
        backoff: Backoff::new(RETRY, WRITE_BACKOFF_MAX),
        quiet: Quiet::new(FAILURE_LOG_EVERY),
        series,
    };
    // Tries of a fresh write whose probe no activator answered, in a row.
    let mut misses = Backoff::new(RETRY, PROBE_BACKOFF_MAX);
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
            Err(e) if e.key.is_some() => {
                if missing.borrow().as_ref() != Some(&e.why) {
                    missing.send_replace(Some(e.why.clone()));
                }
            }
            Err(e) if e.no_route => {
                let since = *no_route_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= NO_ROUTE_AFTER && missing.borrow().as_ref() != Some(&e.why) {
                    tracing::warn!(service = %mode.service, error = %e.why, "serve mode: no activator holds this model");
                    missing.send_replace(Some(e.why.clone()));
                }
            }
            Err(_) => {}
            Ok(_) => {
                failures.succeeded(&mode);
                no_route_since = None;
                if missing.borrow().is_some() {
                    tracing::info!(service = %mode.service, "serve mode: the activator holds this model again");
                    missing.send_replace(None);
                }
            }
        }
        let pause = if in_path {
            match wrote {
                Ok(Wrote::Done(url)) => {
                    if written
                        .as_ref()
                        .is_none_or(|(w, at, _)| *w != in_path || at.elapsed() >= RESYNC)
                    {
                        written = Some((true, tokio::time::Instant::now(), url.clone()));
                    }
                    let seen = probe_seen(&http, &pace, url).await;
                    if seen != *answering.borrow() {
                        tracing::info!(service = %mode.service, answering = seen, "serve mode: the activator in the Service's path");
                    }
                    answering.send_replace(seen);
                    if seen {
                        misses.reset();
                        RESYNC
                    } else {
                        misses.next()
                    }
                }
                Ok(Wrote::Deferred { probe, .. }) => {
                    written = None;
                    let seen = probe_seen(&http, &pace, probe).await;
                    answering.send_replace(seen);
                    // The writer may take it out at any time: look again soon (one probe a
                    // try while it answers), later while it does not.
                    if seen {
                        misses.reset();
                        RETRY
                    } else {
                        misses.next()
                    }
                }
                Err(e) => {
                    written = None;
                    answering.send_replace(false);
                    failures.failed(&mode, "put the activator in the Service's path", &e)
                }
            }
        } else {
            answering.send_replace(false);
            misses.reset();
            match wrote {
                Ok(Wrote::Done(_)) => {
                    if written.as_ref().is_none_or(|(w, _, _)| *w) {
                        written = Some((false, tokio::time::Instant::now(), None));
                    }
                    RESYNC
                }
                Ok(Wrote::Deferred { .. }) => {
                    written = None;
                    RESYNC
                }
                Err(e) => {
                    written = None;
                    failures.failed(&mode, "take the activator out of the Service's path", &e)
                }
            }
        };
        tokio::select! {
            changed = want.changed() => if changed.is_err() { return },
            _ = session.changed() => written = None,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Whether an activator answers a probe through the Service at `url`: only the URL the session
/// gave (a `serviceUrl` it checked against the Service), never the metadata's unchecked.
async fn probe_seen(http: &reqwest::Client, pace: &Pace, url: Option<String>) -> bool {
    match url {
        Some(u) => probe(http, pace, &u).await,
        None => false,
    }
}

/// Whether an activator answers a probe sent through the Service at `url`, within
/// [`PROBES_PER_TRY`] probes, each sent when both the trigger's pace and the scaler's allow.
/// A redirect is not an answer (and is not followed).
async fn probe(http: &reqwest::Client, pace: &Pace, url: &str) -> bool {
    for _ in 0..PROBES_PER_TRY {
        pace.own.take().await;
        pace.total.0.take().await;
        let answer = http
            .get(format!("{url}/"))
            .header(PROBE_HEADER, "1")
            .send()
            .await;
        if answer.is_ok_and(|r| {
            !r.status().is_redirection() && r.headers().contains_key(ACTIVATOR_HEADER)
        }) {
            return true;
        }
    }
    false
}
