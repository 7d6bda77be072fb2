//! One background task per scale target: discover its pods, scrape them, evaluate, publish.
//!
//! Every `scrapeIntervalSeconds` the collector scrapes the target's Ready pods concurrently, reads
//! each page through the server profile, turns counters into rates against the pod's previous
//! scrape, and runs `scaling::evaluate` (the very function `decide` and the simulator run) for
//! the value `GetMetrics` returns and the answer `IsActive` gives. A change in the activator's
//! held count re-evaluates at once with the last pod readings, so `StreamIsActive` can push
//! within milliseconds. Failures are published as errors, never as zero: all pods of a non-empty
//! target failing, the pod list gone stale, or the activator unreadable while nothing runs.

use super::activator::{self, Counts};
use super::discovery::{Discovery, DiscoveryContext, PodEndpoint};
use super::metadata::TargetSpec;
use super::scrape::Scraper;
use super::telemetry::Telemetry;
use crate::metrics::rates::Snapshot;
use crate::metrics::{read_page, Replica};
use crate::scaling::{evaluate, Observation, ScalerState};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;
use tracing::Instrument;

/// What a target's collector last concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// No scrape has finished yet.
    Pending,
    Ready(Report),
    /// The target cannot be read; KEDA should keep the current count.
    Failed(String),
}

/// A finished evaluation: what KEDA is answered with (the reasons go to the debug log).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// The value for `GetMetrics`; `None` when no pod gave a sample for the metric.
    pub value: Option<f64>,
    /// The answer for `IsActive`.
    pub active: bool,
}

/// What every collector shares.
#[derive(Clone)]
pub struct Shared {
    pub discovery: DiscoveryContext,
    pub scraper: Scraper,
    pub telemetry: Arc<Telemetry>,
    /// The clock every target's time is measured on.
    pub epoch: Instant,
}

/// The last scrape of the pods, kept for re-evaluation when only the held count changes.
struct Scraped {
    /// The pods that were read; the others `failed`.
    replicas: Vec<Replica>,
    failed: usize,
    first_error: Option<String>,
}

impl Scraped {
    /// Ready pods, read or not.
    fn pods(&self) -> usize {
        self.replicas.len() + self.failed
    }
}

/// Starts a target's collector; it publishes on `tx` until aborted.
pub fn spawn(
    shared: Shared,
    spec: TargetSpec,
    tx: watch::Sender<Reading>,
) -> tokio::task::JoinHandle<()> {
    let span = tracing::info_span!("collector", target = %spec.label());
    tokio::spawn(run(shared, spec, tx).instrument(span))
}

async fn run(shared: Shared, spec: TargetSpec, tx: watch::Sender<Reading>) {
    let label = spec.label();
    let _gauge = CollectorGauge::new(&shared.telemetry);
    let (mut counts, _follower) = match &spec.activator {
        Some(a) => {
            let (rx, task) = activator::follow(shared.scraper.http.clone(), a.clone());
            (Some(rx), Some(AbortOnDrop(task)))
        }
        None => (None, None),
    };
    let mut discovery: Option<Discovery> = None;
    let mut state = ScalerState::default();
    let mut last: Option<Scraped> = None;
    // The held demand the last evaluation used: a change of the activator's counts that leaves
    // it as it was (RequestCount grows with every request) evaluates nothing.
    let mut evaluated_held: Option<Result<f64, String>> = None;
    let mut ticker = tokio::time::interval(spec.scrape_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let counts_changed = async {
            match counts.as_mut() {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = ticker.tick() => {
                if discovery.is_none() {
                    match Discovery::start(&shared.discovery, &spec).await {
                        Ok(d) => discovery = Some(d),
                        Err(e) => {
                            publish(&tx, &shared, &label, Reading::Failed(e.to_string()));
                            continue;
                        }
                    }
                }
                let pods = match discovery.as_ref().map(|d| d.pods(&shared.discovery)) {
                    Some(Ok(pods)) => pods,
                    Some(Err(e)) => {
                        publish(&tx, &shared, &label, Reading::Failed(e.to_string()));
                        continue;
                    }
                    None => continue,
                };
                last = Some(scrape_all(&shared, &spec, &label, &pods, &mut state.counters).await);
            }
            alive = counts_changed => {
                if !alive {
                    counts = None;
                    continue;
                }
                let unchanged = last.as_ref().is_some_and(|scraped| {
                    evaluated_held.as_ref() == Some(&held_demand(counts.as_ref(), scraped.pods()))
                });
                if last.is_none() || unchanged {
                    continue;
                }
            }
        }
        if let Some(scraped) = &last {
            let held = held_demand(counts.as_ref(), scraped.pods());
            evaluated_held = Some(held.clone());
            let reading = conclude(&shared, &spec, scraped, held, &mut state);
            publish(&tx, &shared, &label, reading);
        }
        if tx.is_closed() {
            return;
        }
    }
}

/// Counts a collector in the collectors gauge while it lives.
struct CollectorGauge(Arc<Telemetry>);

impl CollectorGauge {
    fn new(t: &Arc<Telemetry>) -> CollectorGauge {
        t.collectors.inc();
        CollectorGauge(t.clone())
    }
}

impl Drop for CollectorGauge {
    fn drop(&mut self) {
        self.0.collectors.dec();
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn scrape_all(
    shared: &Shared,
    spec: &TargetSpec,
    label: &str,
    pods: &[PodEndpoint],
    counters: &mut BTreeMap<String, Snapshot>,
) -> Scraped {
    let pages = shared.scraper.scrape_each(pods, spec.scrape_timeout).await;
    let now = shared.epoch.elapsed().as_secs_f64();
    let labels = Telemetry::target(label);
    let mut replicas = Vec::with_capacity(pods.len());
    let mut failed = 0;
    let mut first_error = None;
    for (pod, (page, took)) in pods.iter().zip(pages) {
        shared
            .telemetry
            .scrape_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        let error = match page {
            Err(e) => {
                let mut l = labels.clone();
                l.push(("reason".to_owned(), e.reason().to_owned()));
                shared.telemetry.scrape_errors.get_or_create(&l).inc();
                e.to_string()
            }
            Ok(bytes) => match read_page(&bytes, spec.server).signals {
                Ok(signals) => {
                    replicas.push(Replica::from_scrape(
                        pod.name.clone(),
                        signals,
                        counters,
                        now,
                        pod.cpu_request_cores,
                    ));
                    continue;
                }
                Err(e) => {
                    let mut l = labels.clone();
                    l.push(("reason".to_owned(), "unreadable".to_owned()));
                    shared.telemetry.scrape_errors.get_or_create(&l).inc();
                    e.to_string()
                }
            },
        };
        tracing::warn!(target_name = %label, pod = %pod.name, error = %error, "scrape failed; the pod does not vote");
        failed += 1;
        first_error.get_or_insert(format!("{}: {error}", pod.name));
    }
    counters.retain(|name, _| pods.iter().any(|p| &p.name == name));
    Scraped {
        replicas,
        failed,
        first_error,
    }
}

/// The held requests to count, from the activator's latest counts (none without an activator),
/// or why there is no reading: at zero, the activator is the only source of demand.
fn held_demand(counts: Option<&watch::Receiver<Counts>>, pods: usize) -> Result<f64, String> {
    let Some(rx) = counts else { return Ok(0.0) };
    match &*rx.borrow() {
        Counts::Seen(c) => Ok(c.held_demand(pods) as f64),
        Counts::Unknown if pods == 0 => {
            Err("no ready pods, and the activator's counts are not read yet".into())
        }
        Counts::Failed(e) if pods == 0 => Err(format!(
            "no ready pods, and the activator cannot be read: {e}"
        )),
        _ => Ok(0.0),
    }
}

/// The reading for the latest scrape and held demand.
fn conclude(
    shared: &Shared,
    spec: &TargetSpec,
    scraped: &Scraped,
    held: Result<f64, String>,
    state: &mut ScalerState,
) -> Reading {
    let pods = scraped.pods();
    if pods > 0 && scraped.failed == pods {
        return Reading::Failed(format!(
            "none of the {pods} ready pods could be read ({})",
            scraped
                .first_error
                .as_deref()
                .unwrap_or("no error recorded")
        ));
    }
    let held = match held {
        Ok(held) => held,
        Err(e) => return Reading::Failed(e),
    };
    let obs = Observation {
        now: shared.epoch.elapsed().as_secs_f64(),
        current: pods as u32,
        status: Some(pods as u32),
        replicas: &scraped.replicas,
        missing: scraped.failed as u32,
        held,
    };
    let eval = evaluate(&spec.policy, &obs, state);
    tracing::debug!(value = ?eval.value, active = eval.active, reasons = ?eval.lines, "evaluated");
    // No NaN, no infinity, no negative value ever leaves the scaler.
    if eval.value.is_some_and(|v| !v.is_finite()) {
        return Reading::Failed("the metric came out non-finite".into());
    }
    Reading::Ready(Report {
        value: eval.value.map(|v| v.max(0.0)),
        active: eval.active,
    })
}

fn publish(tx: &watch::Sender<Reading>, shared: &Shared, label: &str, reading: Reading) {
    let labels = Telemetry::target(label);
    if let Reading::Ready(r) = &reading {
        if let Some(v) = r.value {
            shared.telemetry.value.get_or_create(&labels).set(v);
        }
        shared
            .telemetry
            .active
            .get_or_create(&labels)
            .set(i64::from(r.active));
    }
    if let Reading::Failed(e) = &reading {
        tracing::warn!(target_name = %label, error = %e, "target has no reading");
    }
    tx.send_if_modified(|current| {
        let changed = *current != reading;
        *current = reading;
        changed
    });
}
