//! One background task per trigger: discover its pods, scrape them, evaluate, publish.
//!
//! Two things feed a collector, and neither waits for the other. A scrape task, every
//! `scrapeIntervalSeconds`, finds the target's Ready pods and scrapes them concurrently; the
//! activator follower streams the held count. Each scrape round and each change of the held
//! demand runs `control::decision::evaluate` (the very function `decide` and the simulator run) on what is
//! known at that instant, from the collector's first one: a request held before any pod list or
//! scrape has arrived wakes the target within milliseconds. The core's rules decide what may be
//! said: a replica that could not be read keeps the target active, never idle; a release is not
//! read as idle before a scrape that began after it; with nothing known, the answer is an error,
//! never zero. In serve mode each evaluation also decides the activator's place in the model
//! Service's path ([`infscale_core::control::path`]), and `IsActive` says idle only once the path task
//! has seen the activator answering there.

use super::activator::Counts;
use super::activators;
use super::deletion_cost::{CostWriter, Written};
use super::discovery::{wall_clock_s, Discovery, DiscoveryError, PodEndpoint, PodStart};
use super::limits::Limits;
use super::memory_file::MemoryFile;
use super::metadata::TargetSpec;
use super::path::PathHandle;
use super::scrape::{ScrapeError, Scraper};
use super::telemetry::{Telemetry, TriggerSeries};
use super::AbortOnDrop;
use infscale_core::control::activity::Activity;
use infscale_core::control::cycle::Cycle;
use infscale_core::control::decision::{evaluate, ScalerState};
use infscale_core::control::deletion_cost::metric_values;
use infscale_core::control::path::{PathFacts, PathRule};
use infscale_core::observe::metrics::profile::ProfileError;
use infscale_core::observe::metrics::rates::Snapshot;
use infscale_core::observe::metrics::PageRead;
use infscale_core::project::cold_start::{ColdStarts, HoldTimer};
use infscale_core::project::demand::Observation;
use infscale_core::project::fleet::{self, Fetched, Fleet, Input, Unread};
use infscale_core::project::wake::WakeTimer;
use infscale_core::reasons::no_value_text;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

/// What a trigger's collector last concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// Nothing evaluated yet.
    Pending,
    Ready(Report),
}

/// A finished evaluation: what KEDA is answered with (the reasons go to the debug log).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The value for `GetMetrics`, or why there is none (KEDA's HPA keeps the current count).
    pub value: Result<f64, String>,
    /// The answer for `IsActive`, or why it cannot be told (KEDA neither wakes nor sleeps).
    pub active: Result<bool, String>,
    /// The values of the trigger's further metrics (`metric: queue,kv`), in order.
    pub others: Vec<Result<f64, String>>,
}

/// What every collector shares.
#[derive(Clone)]
pub struct Shared {
    pub discovery: super::discovery::DiscoveryContext,
    pub scraper: Scraper,
    pub telemetry: Arc<Telemetry>,
    /// The clock every target's time is measured on.
    pub epoch: Instant,
    pub limits: Limits,
    /// Where serve mode writes the activator into a Service's path, if anywhere.
    pub paths: Option<Arc<dyn super::path::PathWriter>>,
    /// The pace serve mode's probes keep together, across every trigger.
    pub probes: Arc<super::path::Probes>,
    /// Where each target's learned memory is kept across restarts, if anywhere.
    pub state_dir: Option<Arc<std::path::PathBuf>>,
}

impl Shared {
    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
}

/// What the scrape task found in one round.
enum Round {
    /// The pods are not known: why.
    NoPods(String),
    Scraped {
        started_at: f64,
        pods: Vec<PodEndpoint>,
        /// When each pod still starting was created, on the collector's clock.
        starting_since: Vec<f64>,
        /// The Ready pods' starts, for the learned cold start.
        starts: Vec<PodStart>,
        /// Each pod's page, read as it arrived (no page is kept past its scrape).
        pages: Vec<(Result<PageRead, ScrapeError>, Duration)>,
    },
}

/// The pods as last scraped, kept for every evaluation until the next round.
enum Pods {
    Unknown(String),
    Read(Scraped),
}

struct Scraped {
    /// Every ready pod's outcome, and the replicas that vote.
    fleet: Fleet,
    /// The pods scraped, as listed.
    pods: Vec<PodEndpoint>,
    first_error: Option<String>,
    started_at: f64,
    starting_since: Vec<f64>,
}

impl Pods {
    /// The ready replicas: read awake, or unread (a replica read asleep is not ready).
    fn ready(&self) -> Option<usize> {
        match self {
            Pods::Unknown(_) => None,
            Pods::Read(s) => Some(s.fleet.replicas.len() + s.fleet.unread() as usize),
        }
    }

    /// The ready replicas and those read asleep: the pods there are, for timing a start from
    /// zero (a sleeping replica woken is a wake, not a cold start).
    fn present(&self) -> Option<usize> {
        match self {
            Pods::Unknown(_) => None,
            Pods::Read(s) => Some(s.fleet.asleep.len() + self.ready().unwrap_or(0)),
        }
    }
}

/// Starts a trigger's collector; it publishes on `tx` until aborted or no one listens.
pub fn spawn(
    shared: Shared,
    spec: TargetSpec,
    tx: watch::Sender<Reading>,
) -> tokio::task::JoinHandle<()> {
    let span = tracing::info_span!("collector", trigger = %spec.key.replace('\n', " "));
    tokio::spawn(run(shared, spec, tx).instrument(span))
}

async fn run(shared: Shared, spec: TargetSpec, tx: watch::Sender<Reading>) {
    let series = TriggerSeries::new(&shared.telemetry, spec.series_labels());
    let (mut counts, _follower) = match &spec.activator {
        Some(a) => {
            let (rx, task) = activators::follow(
                shared.scraper.http.clone(),
                shared.discovery.client.clone(),
                a.members.clone(),
                a.host.clone(),
                spec.serve_mode.is_none(),
                shared.limits,
                shared.scraper.budget.clone(),
            );
            (Some(rx), Some(AbortOnDrop(task)))
        }
        None => (None, None),
    };
    let (rounds_tx, mut rounds) = mpsc::channel(1);
    let _scrapes = AbortOnDrop(tokio::spawn(
        scrape_rounds(shared.clone(), spec.clone(), rounds_tx).in_current_span(),
    ));
    let mut memory = shared
        .state_dir
        .as_deref()
        .map(|dir| MemoryFile::new(dir, &spec.key));
    let mut state = memory
        .as_ref()
        .and_then(|m| match m.load(shared.now(), wall_clock_s()) {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::warn!(error = %e, "the target's saved memory is not used; it starts fresh");
                None
            }
        })
        .unwrap_or_default();
    let mut pods = Pods::Unknown("waiting for the first pod list".to_owned());
    let mut log = ScrapeLog::default();
    // KEDA's side of the loop is KEDA's; the collector keeps the loop's rule on when to evaluate.
    let mut cycle = Cycle::new(false);
    let mut follower_alive = counts.is_some();
    // The cold start learned from the pods' starts (`lookaheadSeconds: auto`).
    let mut cold = ColdStarts::default();
    let mut wake = HoldTimer::default();
    // The wakes of sleeping replicas, learned apart.
    let mut wakes = ColdStarts::wakes();
    let mut sleepers = WakeTimer::default();
    if spec.policy.lookahead_auto {
        series.cold_start(spec.policy.lookahead_s);
    }
    let mut costs = spec
        .policy
        .deletion_cost
        .then(|| {
            let (ok, failed) = (series.write_counter("ok"), series.write_counter("failed"));
            CostWriter::start(&shared.discovery, &spec.namespace, &spec.policy, move |w| {
                match w {
                    Written::Ok => ok.inc(),
                    Written::Failed => failed.inc(),
                };
            })
        })
        .flatten();
    let mut path = serve_path(&shared, &spec);
    loop {
        let answering_changed = async {
            match path.as_mut().and_then(|p| p.handle.as_mut()) {
                Some(h) => tokio::select! {
                    a = h.answering.changed() => a.is_ok(),
                    m = h.missing.changed() => m.is_ok(),
                },
                None => std::future::pending().await,
            }
        };
        let counts_changed = async {
            match counts.as_mut() {
                Some(rx) if follower_alive => rx.changed().await.is_ok(),
                _ => std::future::pending().await,
            }
        };
        let scraped = tokio::select! {
            round = rounds.recv() => {
                let Some(round) = round else { return };
                learn(&mut cold, &round, &series);
                pods = read_round(&spec, &series, &mut log, round, &mut state.counters);
                true
            }
            alive = counts_changed => {
                follower_alive = alive;
                if let Some(rx) = &counts {
                    series.activator_up(matches!(&*rx.borrow(), Counts::Seen(_)));
                }
                false
            }
            alive = answering_changed => {
                if !alive {
                    // The path task ended: the activator is never seen answering again, and the
                    // target never goes idle.
                    if let Some(p) = path.as_mut() {
                        p.handle = None;
                    }
                }
                // The activator now answers through the Service (or no longer): `IsActive` may
                // change.
                cycle.forget_evaluation();
                false
            }
        };
        let held = held_demand(
            counts.as_ref(),
            follower_alive,
            pods.ready(),
            spec.policy.activation,
        );
        // Pod times are wall-clock times: a wake is timed on the same clock.
        if let Some((name, from, ready)) = wake.note(pods.present(), held, wall_clock_s()) {
            take(&mut cold, [(name.as_str(), from, ready)], &series);
        }
        if let (true, Pods::Read(s)) = (scraped, &pods) {
            let woke = sleepers.note(&s.fleet, held, s.started_at);
            let woke = woke.iter().map(|(n, from, at)| (n.as_str(), *from, *at));
            take(&mut wakes, woke, &series);
        }
        if !cycle.wants_evaluation(scraped, held) {
            continue;
        }
        let mut report = conclude(
            &shared,
            &spec,
            &pods,
            held,
            counts.as_ref(),
            &mut state,
            cold.learned(),
        );
        if let Some(Err(e)) = memory
            .as_mut()
            .and_then(|m| m.save_due(shared.now(), wall_clock_s(), &state))
        {
            tracing::warn!(error = %e, "the target's memory was not saved");
        }
        if let Some(p) = path.as_mut() {
            p.apply(shared.now(), pods.ready(), held, &mut report);
            series.activator_route(
                p.handle
                    .as_ref()
                    .is_some_and(|h| h.route_missing().is_none()),
            );
        }
        series.report(report.value.clone().ok(), report.active.clone().ok());
        if let (Some(writer), true, Pods::Read(s)) = (costs.as_mut(), scraped, &pods) {
            let values = metric_values(&spec.policy, report.value.clone().ok(), &state);
            writer.after(&s.pods, &s.fleet, &values, shared.now());
        }
        publish(&tx, &spec, report);
        if tx.is_closed() {
            return;
        }
    }
}

/// A serve-mode trigger's path: the rule, and the task that writes what it decides (none when
/// the scaler has nowhere to write: then the activator is never seen answering, and the target
/// never goes idle).
struct ServePath {
    rule: PathRule,
    handle: Option<PathHandle>,
}

fn serve_path(shared: &Shared, spec: &TargetSpec) -> Option<ServePath> {
    let mode = spec.serve_mode.clone()?;
    let handle = match &shared.paths {
        Some(writer) => Some(super::path::start(
            writer.clone(),
            mode.clone(),
            spec.activator.as_ref().map(|a| a.members.clone()),
            shared.probes.clone(),
            super::telemetry::PathSeries::new(&shared.telemetry, spec.series_labels()),
        )),
        None => {
            tracing::error!(service = %mode.service, "serve mode needs the Kubernetes API to put the activator in the Service's path; the target will not go idle");
            None
        }
    };
    Some(ServePath {
        rule: PathRule::new(mode.settle_s),
        handle,
    })
}

impl ServePath {
    /// Decides the path for what is known now, asks the task for it, and keeps `IsActive` true
    /// while the evaluation says idle but the activator is not yet seen answering; when no
    /// activator holds the model at all, an idle target's `IsActive` is that error instead
    /// (KEDA logs it and records it on the ScaledObject; the target is never read idle).
    fn apply(&mut self, now: f64, ready: Option<usize>, held: Option<f64>, report: &mut Report) {
        let answering = self.handle.as_ref().is_some_and(PathHandle::is_answering);
        let d = self.rule.decide(PathFacts {
            now,
            ready,
            held,
            idle: report.active == Ok(false),
            answering,
        });
        if let Some(h) = &self.handle {
            if d.in_path != h.wanted() {
                tracing::info!(
                    in_path = d.in_path,
                    ?ready,
                    ?held,
                    idle = report.active == Ok(false),
                    "serve mode: the activator's place changes"
                );
            }
            h.want(d.in_path);
        }
        let missing = self.handle.as_ref().and_then(PathHandle::route_missing);
        match (d.hold_active, missing) {
            (true, Some(why)) => {
                report.active = Err(format!(
                    "idle, but the activator cannot take this model's requests, so it may not go \
                     to zero: {why}"
                ));
            }
            (true, None) => {
                tracing::debug!(
                    "idle, but the activator is not yet seen answering through the Service: active"
                );
                report.active = Ok(true);
            }
            (false, _) => {}
        }
    }
}

/// Takes the round's new pod starts into the learned cold start, and exports it when it moved.
fn learn(cold: &mut ColdStarts, round: &Round, series: &TriggerSeries) {
    let Round::Scraped { starts, .. } = round else {
        return;
    };
    let starts = starts
        .iter()
        .map(|s| (s.pod.as_str(), s.created_s, s.ready_s));
    take(cold, starts, series);
}

/// Takes starts `(name, from, ready)` into the learned cold start (or, for
/// [`ColdStarts::wakes`], the learned wake); logs and exports it when one was new.
fn take<'a>(
    cold: &mut ColdStarts,
    starts: impl IntoIterator<Item = (&'a str, f64, f64)>,
    series: &TriggerSeries,
) {
    let mut taken = false;
    for (name, from, ready) in starts {
        taken |= cold.observe(name, from, ready);
    }
    let (true, Some(learned)) = (taken, cold.learned()) else {
        return;
    };
    if cold.is_wakes() {
        tracing::info!(wake_s = learned, wakes = cold.len(), "learned wake");
        series.wake(learned);
    } else {
        tracing::info!(
            cold_start_s = learned,
            starts = cold.len(),
            "learned cold start"
        );
        series.cold_start(learned);
    }
}

/// Discovers and scrapes every `scrapeIntervalSeconds`, handing each round to the collector.
async fn scrape_rounds(shared: Shared, spec: TargetSpec, out: mpsc::Sender<Round>) {
    let mut discovery: Option<Discovery> = None;
    let mut ticker = tokio::time::interval(spec.scrape_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let round = one_round(&shared, &spec, &mut discovery).await;
        if out.send(round).await.is_err() {
            return;
        }
    }
}

async fn one_round(shared: &Shared, spec: &TargetSpec, discovery: &mut Option<Discovery>) -> Round {
    if discovery.is_none() {
        // Bounded as the API probe is: a read the API server accepted and never answered would
        // otherwise hold this target's rounds for good (kube sets no read timeout), and the
        // target would stay unknown long after the API answers again.
        let bound = shared.limits.api_probe_every();
        let started = tokio::time::timeout(bound, Discovery::start(&shared.discovery, spec)).await;
        match started {
            Ok(Ok(d)) => *discovery = Some(d),
            Ok(Err(e)) => return Round::NoPods(e.to_string()),
            Err(_) => {
                return Round::NoPods(format!(
                    "the Kubernetes API did not answer within {bound:?} (finding the pods)"
                ))
            }
        }
    }
    let Some(d) = discovery.as_ref() else {
        return Round::NoPods("no discovery".to_owned());
    };
    // A pod watch that has not listed yet: look again shortly rather than a whole round later.
    let retry = shared.limits.unsynced_retry;
    let give_up = Instant::now() + spec.scrape_interval;
    let pods = loop {
        match d.pods(&shared.discovery) {
            Err(DiscoveryError::NotSynced) if Instant::now() + retry < give_up => {
                tokio::time::sleep(retry).await;
            }
            other => break other,
        }
    };
    let listed = match pods {
        Ok(listed) => listed,
        Err(e) => return Round::NoPods(e.to_string()),
    };
    let started_at = shared.now();
    let starting_since = listed
        .starting_ages
        .iter()
        .map(|age| started_at - age)
        .collect();
    let starts = listed.starts;
    let pods = listed.endpoints;
    let server = spec.server;
    let pages = shared
        .scraper
        .scrape_each(&pods, spec.scrape_timeout, server)
        .await;
    Round::Scraped {
        started_at,
        pods,
        starting_since,
        starts,
        pages,
    }
}

/// What was last logged per pod, so a failure is logged when it starts or changes, not on every
/// scrape, and a wrong `server` once per trigger.
#[derive(Default)]
struct ScrapeLog {
    failing: HashMap<String, String>,
    wrong_server: bool,
    no_pods: Option<String>,
}

fn read_round(
    spec: &TargetSpec,
    series: &TriggerSeries,
    log: &mut ScrapeLog,
    round: Round,
    counters: &mut BTreeMap<String, Snapshot>,
) -> Pods {
    let (started_at, pods, starting_since, pages) = match round {
        Round::NoPods(e) => {
            if log.no_pods.as_ref() != Some(&e) {
                tracing::warn!(error = %e, "the target's pods are not known");
                log.no_pods = Some(e.clone());
            }
            return Pods::Unknown(e);
        }
        Round::Scraped {
            started_at,
            pods,
            starting_since,
            pages,
            ..
        } => (started_at, pods, starting_since, pages),
    };
    log.no_pods = None;
    let inputs = pods.iter().zip(pages).map(|(pod, (page, took))| {
        series.scraped(took.as_secs_f64());
        let fetched = match page {
            // Nothing listens at a static URL: no replica runs there (at zero), not a fault.
            Err(ScrapeError::Transport(c)) if !pod.vouched && c.kind == "refused" => {
                Fetched::Absent
            }
            Err(e) => {
                series.scrape_failed(e.reason());
                Fetched::Failed(e.to_string())
            }
            Ok(read) => Fetched::Read(read),
        };
        Input {
            name: pod.name.clone(),
            fetched,
            earlier: counters.get(&pod.name),
            cpu_request_cores: pod.cpu_request_cores,
        }
    });
    let mut fleet = fleet::read(inputs, spec.server, started_at);
    fleet.remember(counters);
    let mut first_error = None;
    for outcome in &fleet.outcomes {
        let pod = &outcome.name;
        let error = match &outcome.vote {
            None => continue,
            Some(Ok(_)) => {
                if log.failing.remove(pod).is_some() {
                    tracing::info!(pod = %pod, "scrape recovered; the pod votes again");
                }
                continue;
            }
            Some(Err(Unread::Page(ProfileError::WrongServer { configured, seen }))) => {
                series.config_error("server", &seen.to_string());
                if !log.wrong_server {
                    log.wrong_server = true;
                    tracing::error!(
                        pod = %pod, configured = %configured, seen = %seen,
                        "configuration: trigger metadata server is {configured}, but the pods serve {seen}'s page; they do not vote until it is fixed"
                    );
                }
                first_error.get_or_insert(format!(
                    "{pod}: configured as {configured}, the page is {seen}'s"
                ));
                continue;
            }
            Some(Err(e)) => {
                if matches!(e, Unread::Page(_)) {
                    series.scrape_failed("unreadable");
                }
                e.to_string()
            }
        };
        if log.failing.get(pod) != Some(&error) {
            tracing::warn!(pod = %pod, error = %error, "scrape failed; the pod does not vote");
            log.failing.insert(pod.clone(), error.clone());
        }
        first_error.get_or_insert(format!("{pod}: {error}"));
    }
    counters.retain(|name, _| pods.iter().any(|p| &p.name == name));
    log.failing
        .retain(|name, _| pods.iter().any(|p| &p.name == name));
    Pods::Read(Scraped {
        fleet,
        pods,
        first_error,
        started_at,
        starting_since,
    })
}

/// The held requests to count (0 without an activator), or `None` when the activator's count is
/// not read ([`Counts::held_demand`], the rule the simulator runs too).
fn held_demand(
    counts: Option<&watch::Receiver<Counts>>,
    follower_alive: bool,
    ready: Option<usize>,
    activation: f64,
) -> Option<f64> {
    let Some(rx) = counts else { return Some(0.0) };
    if !follower_alive {
        return None;
    }
    let held = rx.borrow().held_demand(ready.unwrap_or(0), activation);
    held
}

/// Why the activator's count is not read, for the answer's error.
fn held_error(counts: Option<&watch::Receiver<Counts>>) -> String {
    match counts.map(|rx| rx.borrow().clone()) {
        Some(Counts::Failed(e)) => format!("the activator cannot be read: {e}"),
        Some(Counts::Partial { failed, .. }) => {
            format!("some activator pods cannot be read: {failed}")
        }
        Some(Counts::Unknown) => "the activator's counts are not read yet".to_owned(),
        _ => "the activator follower stopped".to_owned(),
    }
}

/// The report for what is known now.
fn conclude(
    shared: &Shared,
    spec: &TargetSpec,
    pods: &Pods,
    held: Option<f64>,
    counts: Option<&watch::Receiver<Counts>>,
    state: &mut ScalerState,
    learned_cold_start: Option<f64>,
) -> Report {
    let empty = Fleet::default();
    let (fleet, scraped_at, starting) = match pods {
        Pods::Unknown(_) => (&empty, None, &[][..]),
        Pods::Read(s) => (&s.fleet, Some(s.started_at), &s.starting_since[..]),
    };
    let ready = fleet.replicas.len() as u32 + fleet.unread();
    let obs = Observation {
        starting_since: starting,
        ..fleet.observation(shared.now(), ready, Some(ready), held, scraped_at)
    };
    let eval = evaluate(&spec.policy.with_horizon(learned_cold_start), &obs, state);
    tracing::debug!(value = ?eval.value, activity = ?eval.activity, reasons = ?eval.lines, "evaluated");
    // Say why, with the cause underneath: the pods' or the activator's error.
    let because = || {
        let mut why = Vec::new();
        match pods {
            Pods::Unknown(e) => why.push(format!("pods not known: {e}")),
            Pods::Read(s) => why.extend(s.first_error.clone()),
        }
        if held.is_none() {
            why.push(held_error(counts));
        }
        why.join("; ")
    };
    let value = match eval.value {
        // No NaN, no infinity, no negative value ever leaves the scaler.
        Some(v) if v.is_finite() => Ok(infscale_core::limits::metric_value(v)),
        Some(_) => Err("the metric came out non-finite".to_owned()),
        None => Err(with_cause(
            &no_value_text(eval.no_value.as_ref()),
            &because(),
        )),
    };
    let active = match eval.activity {
        Activity::Active => Ok(true),
        Activity::Idle => Ok(false),
        Activity::Unknown => Err(with_cause(&eval.activity_cause.to_string(), &because())),
    };
    let others = state
        .others
        .iter()
        .map(|o| match o.value {
            Some(v) if v.is_finite() => Ok(infscale_core::limits::metric_value(v)),
            Some(_) => Err("the metric came out non-finite".to_owned()),
            None => Err(with_cause(&no_value_text(o.no_value.as_ref()), &because())),
        })
        .collect();
    Report {
        value,
        active,
        others,
    }
}

fn with_cause(why: &str, cause: &str) -> String {
    if cause.is_empty() {
        why.to_owned()
    } else {
        format!("{why} ({cause})")
    }
}

/// Publishes a report, waking the calls and streams that wait only when it changed.
fn publish(tx: &watch::Sender<Reading>, spec: &TargetSpec, report: Report) {
    tx.send_if_modified(|current| {
        let reading = Reading::Ready(report);
        let changed = *current != reading;
        if changed {
            if let Reading::Ready(Report {
                value: Err(v),
                active: Err(a),
                ..
            }) = &reading
            {
                tracing::warn!(target_name = %spec.label(), value = %v, active = %a, "the trigger has no reading");
            }
        }
        *current = reading;
        changed
    });
}
