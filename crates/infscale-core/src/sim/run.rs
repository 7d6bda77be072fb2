//! One policy over one trace: the time-stepped engine under a control loop.
//!
//! Two loops. `hpa` is the standalone loop: every 15 s the whole decision (`control::decision::decide`) runs on a
//! scrape of the ready replicas. `keda` is how infscale is deployed: `serve`'s collector scrapes
//! every `scrape_interval` (`scrape_offset` past its multiples, [`super::phases`]) and evaluates
//! (`control::decision::evaluate`: the value for `GetMetrics` and the
//! answer to `IsActive`); KEDA's operator polls every `pollingInterval` and owns 0 <-> 1 and the
//! cooldown (`control::keda::poll`); with `external-push` a held request activates at once; and
//! KEDA's HPA syncs every 15 s on the latest value (`control::decision::hpa_sync`). Both loops call the
//! very functions `serve` and `decide` call, and so apply the same fault rules: with
//! `unreadable` above zero, each replica's scrape fails with that chance, and a replica not read
//! keeps the target active and counts as the HPA counts a missing pod; a release reads as active
//! until a scrape after it. The timeline carries the evaluation's reasons.

use super::bound::{clairvoyant, Bound};
use super::cluster::{Cluster, RequestOutcome};
use super::replica::Hardware;
use super::rng::Rng;
use super::standby::Pool;
use super::trace::Trace;
use crate::control::cycle::{self, Action, Cycle};
use crate::control::decision::{evaluate, ScalerState};
use crate::control::deletion_cost;
use crate::observe::counts::{Counts, HostCounts};
use crate::observe::metrics::rates::Snapshot;
use crate::observe::metrics::ServerChoice;
use crate::policy::{HoldRule, Policy};
use crate::project::cold_start::{ColdStarts, HoldTimer};
use crate::project::demand::Observation;
use crate::project::fleet::{self, Fetched, Fleet, Input};
use crate::reasons::Wake;
use serde::Serialize;
use std::collections::BTreeMap;

pub use super::settings::{Mode, Settings, Start, Trigger, DEFAULT_DRAIN_S};

impl Settings {
    /// These settings with a warm start from the bound resolved to its count.
    pub fn resolved(&self, bound: &Bound) -> Settings {
        let mut s = self.clone();
        if s.start == Start::Bound {
            s.start = Start::Replicas(bound.initial);
        }
        s
    }

    /// The replicas Ready at time 0 for `policy` on `trace` (the bound's first count is computed
    /// here when the start was not [`Settings::resolved`]).
    fn start_for(&self, policy: &Policy, trace: &Trace, hw: &Hardware) -> u32 {
        let n = match self.start {
            Start::Policy => 1,
            Start::Replicas(n) => n,
            Start::Bound => clairvoyant(trace, hw, self, BOUND_CAP).initial,
        };
        n.max(policy.min).max(1)
    }
}

/// The most replicas the clairvoyant bound may plan.
pub const BOUND_CAP: u32 = 64;

/// One decision or KEDA action, for `--timeline`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    pub t: f64,
    /// `decide` (hpa mode), `hpa`, `keda` or `push`.
    pub by: &'static str,
    pub from: u32,
    pub to: u32,
    pub why: String,
    pub lines: Vec<String>,
}

impl TimelineEntry {
    /// The control loop's action at `t`, taken from `from` replicas, with its reasons in words.
    pub fn of(action: &Action, from: u32, t: f64) -> TimelineEntry {
        TimelineEntry {
            t,
            by: action.by.name(),
            from,
            to: action.to,
            why: action.cause.name().to_owned(),
            lines: action.lines.render(),
        }
    }
}

/// Replicas and demand at one moment, for plots.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeriesPoint {
    pub t: f64,
    /// Replicas billed (starting, ready, draining).
    pub replicas: u32,
    pub ready: u32,
    /// Requests running, waiting or held.
    pub in_flight: u32,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Run {
    pub outcomes: Vec<RequestOutcome>,
    /// Replica-seconds billed: every replica that existed (starting, ready, draining) in full,
    /// and the standby pool's time asleep at its price.
    pub replica_seconds: f64,
    /// Replica-seconds asleep in the standby pool, not priced (in `replica_seconds` at the
    /// pool's price).
    pub standby_seconds: f64,
    pub scale_events: u32,
    pub peak: u32,
    /// Deletion-cost annotations written.
    pub cost_writes: u32,
    pub timeline: Vec<TimelineEntry>,
    pub series: Vec<SeriesPoint>,
    /// The replica-seconds billed by the end of each `ledger_every_s` (the settings'), in order.
    pub ledger: Vec<f64>,
    /// The decision's memory at the run's end.
    pub learned: ScalerState,
}

/// One scrape of the ready replicas: those read, those that could not be, and when.
#[derive(Debug)]
struct Scrape {
    fleet: Fleet,
    at: f64,
}

/// `serve`'s collector, simulated: scrapes the ready replicas through the same
/// [`fleet::read`] as `serve`, each one's last counters kept in `counters` (the decision
/// state's) for rates; each scrape fails with the `unreadable` chance.
fn scrape(
    cluster: &Cluster,
    counters: &mut BTreeMap<String, Snapshot>,
    now: f64,
    cpu_request_cores: f64,
    faults: &mut Faults,
) -> Scrape {
    let kv = cluster.hw.kv_capacity;
    let inputs: Vec<Input> = cluster
        .replicas
        .iter()
        .filter(|r| r.is_ready())
        .map(|r| {
            let name = r.id.to_string();
            let fetched = if faults.fails() {
                Fetched::Failed("the scrape failed (simulated)".to_owned())
            } else {
                Fetched::Signals(r.signals(kv))
            };
            Input {
                earlier: counters.get(&name),
                name,
                fetched,
                cpu_request_cores,
            }
        })
        .collect();
    let mut fleet = fleet::read(inputs, ServerChoice::Auto, now);
    fleet.remember(counters);
    counters.retain(|name, _| cluster.replicas.iter().any(|r| r.id.to_string() == *name));
    Scrape { fleet, at: now }
}

/// Scrape failures drawn from their own stream, so a run without them is the run it always was.
struct Faults {
    chance: f64,
    rng: Rng,
}

impl Faults {
    fn fails(&mut self) -> bool {
        self.chance > 0.0 && self.rng.uniform() < self.chance
    }
}

fn every(period_s: f64, dt: f64) -> u64 {
    ((period_s / dt).round() as u64).max(1)
}

/// Runs `policy` over `trace`.
pub fn run(trace: &Trace, hw: &Hardware, policy: &Policy, settings: &Settings) -> Run {
    run_learned(trace, hw, policy, settings, ScalerState::default())
}

/// Runs `policy` over `trace` after the days `before` (oldest first): a policy that learns
/// across days (`reserve=auto`, `hold=auto`) first runs them in turn, each starting with what
/// outlasted the one before ([`ScalerState::after_a_day`], its times a day's length earlier), and
/// starts the day with what outlasts the last; any other policy just runs the day.
pub fn run_after(
    before: &[&Trace],
    trace: &Trace,
    hw: &Hardware,
    policy: &Policy,
    settings: &Settings,
) -> Run {
    if !(policy.reserve || policy.hold != HoldRule::Off) {
        return run(trace, hw, policy, settings);
    }
    let quiet = Settings {
        record_timeline: false,
        series_every_s: 0.0,
        ledger_every_s: 0.0,
        ..settings.clone()
    };
    let learned = before.iter().fold(ScalerState::default(), |learned, day| {
        run_learned(day, hw, policy, &quiet, learned)
            .learned
            .after_a_day(day.duration)
    });
    run_learned(trace, hw, policy, settings, learned)
}

/// Runs `policy` over `trace` from the decision memory `learned` (empty for a first day).
fn run_learned(
    trace: &Trace,
    hw: &Hardware,
    policy: &Policy,
    settings: &Settings,
    learned: ScalerState,
) -> Run {
    let requests = &trace.requests;
    let dt = settings.dt;
    let cold_start = hw.gpu.cold_start_s();
    let start = settings.start_for(policy, trace, hw);
    let mut cluster = Cluster::new(hw.clone(), start, settings.hold_timeout_s);
    cluster.drain_s = settings.drain_s;
    cluster.pre_stop_s = settings.pre_stop_s;
    cluster.cold_spread = settings.cold_start_spread;
    cluster.balancer = settings.balancer;
    cluster.pool = Pool::full(settings.standby);
    let mut cost_budget = deletion_cost::Budget::new(policy.deletion_cost_writes);
    let mut cost_writes = 0_u32;
    let mut outcomes = vec![RequestOutcome::default(); requests.len()];
    let mut fate = |i: u32, f| outcomes[i as usize].record(f);
    let mut state = ScalerState {
        last_active: Some(0.0),
        ..learned
    };
    let cpu_request_cores = hw.gpu.cpu_request_cores;
    let mut faults = Faults {
        chance: settings.unreadable,
        rng: Rng::new(0xfa17),
    };
    // Nothing scraped yet: the pods are not known, as at a collector's first instant.
    let mut last_scrape: Option<Scrape> = None;
    // KEDA and its HPA, and the collector's rule on when to evaluate: the activator's watch
    // starts at nothing held, and reasons are kept only for the timeline.
    let mut cycle = Cycle::new(settings.record_timeline).having_seen_held(Some(0.0));
    let mut timeline = Vec::new();
    let mut series = Vec::new();
    let (hpa_every, poll_every, scrape_every) = (
        every(settings.hpa_period_s, dt),
        every(settings.polling_interval_s, dt),
        every(settings.scrape_interval_s, dt),
    );
    // The step within each scrape interval that `serve` scrapes in.
    let scrape_at = (settings.scrape_offset_s / dt).round().max(0.0) as u64 % scrape_every;
    let series_every = (settings.series_every_s > 0.0).then(|| every(settings.series_every_s, dt));
    let ledger_every = (settings.ledger_every_s > 0.0).then(|| every(settings.ledger_every_s, dt));
    let mut ledger = Vec::new();
    let steps = (trace.duration / dt).ceil() as u64;
    let mut next = 0;
    // `lookahead=auto`: the horizon is learned as `serve` learns it, from the starts seen (each
    // replica from its order to Ready, those running at time 0 included) and the wakes from
    // zero; the prior until the first is seen.
    let mut cold_starts = ColdStarts::default();
    let mut wake = HoldTimer::default();
    let mut starts_seen = 0_u64;
    let mut learned_policy: Option<Policy> = None;
    let mut apply = |cluster: &mut Cluster, action: Action, now: f64| {
        let from = cluster.current();
        cluster.resize(action.to, now, cold_start);
        if settings.record_timeline {
            timeline.push(TimelineEntry::of(&action, from, now));
        }
    };
    for k in 0..steps {
        let t = k as f64 * dt;
        while next < requests.len() && requests[next].arrival < t + dt {
            cluster.arrive(next as u32, &requests[next]);
            next += 1;
        }
        cluster.step(t, dt, requests, &mut fate);
        let now = t + dt;
        if policy.lookahead_auto || policy.reserve {
            // The starts of the replicas that became Ready, and a wake from zero timed from
            // the first held request, as `serve` takes them.
            let mut taken = false;
            for (created, ready) in cluster.became_ready.drain(..) {
                starts_seen += 1;
                taken |= cold_starts.observe(&format!("r{starts_seen}"), created, ready);
            }
            let ready = cluster.ready() as usize;
            if let Some((name, from, at)) =
                wake.note(Some(ready), Some(cluster.held.len() as f64), now)
            {
                taken |= cold_starts.observe(&name, from, at);
            }
            if taken {
                learned_policy = Some(policy.with_horizon(cold_starts.learned()).into_owned());
            }
        } else {
            cluster.became_ready.clear();
        }
        let policy = learned_policy.as_ref().unwrap_or(policy);
        let tick = k + 1;
        match settings.mode {
            Mode::Hpa => {
                if tick % hpa_every == 0 {
                    let scraped = scrape(
                        &cluster,
                        &mut state.counters,
                        now,
                        cpu_request_cores,
                        &mut faults,
                    );
                    let starting = cluster.starting_since();
                    let obs = observation(&cluster, Some(&scraped), &starting, now);
                    let (d, action) = cycle::standalone(policy, &obs, &mut state);
                    if policy.deletion_cost {
                        let values = deletion_cost::metric_values(policy, d.value, &state);
                        cost_writes += annotate(&mut cluster, &scraped, &values, &mut cost_budget);
                    }
                    apply(&mut cluster, action, now);
                }
            }
            Mode::Keda => {
                // `serve` evaluates after every scrape, and again on the last scrape whenever the
                // activator's held count changes (its `/queue/watch` stream).
                let scraped = tick % scrape_every == scrape_at;
                if scraped {
                    last_scrape = Some(scrape(
                        &cluster,
                        &mut state.counters,
                        now,
                        cpu_request_cores,
                        &mut faults,
                    ));
                }
                let held = cluster.held.len();
                let ready = cluster.ready() as usize;
                let held_demand = Counts::Seen(HostCounts {
                    concurrency: held as u64,
                    request_count: 0,
                    held: Some(held as u64),
                })
                .held_demand(ready, policy.activation);
                if cycle.wants_evaluation(scraped, held_demand) {
                    let starting = cluster.starting_since();
                    let obs = observation(&cluster, last_scrape.as_ref(), &starting, now);
                    let eval = evaluate(policy, &obs, &mut state);
                    if let (true, true, Some(round)) =
                        (policy.deletion_cost, scraped, last_scrape.as_ref())
                    {
                        let values = deletion_cost::metric_values(policy, eval.value, &state);
                        cost_writes += annotate(&mut cluster, round, &values, &mut cost_budget);
                    }
                    // StreamIsActive sends a change of the answer; KEDA acts on `true` at once.
                    let turned_active = cycle.evaluated(&eval);
                    if settings.trigger == Trigger::ExternalPush && turned_active {
                        let current = cluster.current();
                        if let Some(action) =
                            cycle.push(policy, &mut state, current, Wake::Held { held }, now)
                        {
                            apply(&mut cluster, action, now);
                        }
                    }
                }
                if tick % poll_every == 0 {
                    let (current, activity) = (cluster.current(), cycle.activity());
                    if let Some(action) = cycle.poll(
                        policy,
                        &mut state,
                        current,
                        activity,
                        Wake::Held { held },
                        now,
                    ) {
                        apply(&mut cluster, action, now);
                    }
                }
                if tick % hpa_every == 0 {
                    let (current, value) = (cluster.current(), cycle.value());
                    if let Some(action) = cycle.sync(policy, &mut state, current, value, None, now)
                    {
                        apply(&mut cluster, action, now);
                    }
                }
            }
        }
        if series_every.is_some_and(|e| tick % e == 0) {
            series.push(SeriesPoint {
                t: now,
                replicas: cluster.replicas.len() as u32,
                ready: cluster.ready(),
                in_flight: cluster.in_flight() as u32,
            });
        }
        if ledger_every.is_some_and(|e| tick % e == 0) {
            ledger.push(cluster.replica_seconds + cluster.pool.cost_seconds());
        }
    }
    Run {
        outcomes,
        replica_seconds: cluster.replica_seconds + cluster.pool.cost_seconds(),
        standby_seconds: cluster.pool.asleep_seconds,
        scale_events: cluster.scale_events,
        cost_writes,
        peak: cluster.peak,
        timeline,
        series,
        ledger,
        learned: state,
    }
}

/// `serve`'s deletion-cost writes after a scrape round's evaluation: the same round and plan,
/// each write landing on the replica's annotation. Returns the writes made.
fn annotate(
    cluster: &mut Cluster,
    scrape: &Scrape,
    values: &[(Option<f64>, f64)],
    budget: &mut deletion_cost::Budget,
) -> u32 {
    let (pods, near) = deletion_cost::round(&scrape.fleet, values, |name| {
        let r = cluster.replicas.iter().find(|r| r.id.to_string() == name)?;
        Some(r.deletion_cost)
    });
    let writes = deletion_cost::plan(&pods, near, budget, scrape.at);
    for (pod, cost) in &writes {
        if let Some(r) = cluster
            .replicas
            .iter_mut()
            .find(|r| r.id.to_string() == *pod)
        {
            r.deletion_cost = Some(*cost);
        }
    }
    writes.len() as u32
}

fn observation<'a>(
    cluster: &Cluster,
    scrape: Option<&'a Scrape>,
    starting: &'a [f64],
    now: f64,
) -> Observation<'a> {
    static NO_SCRAPE: Fleet = Fleet::empty();
    let fleet = scrape.map_or(&NO_SCRAPE, |s| &s.fleet);
    let current = cluster.current();
    Observation {
        starting_since: starting,
        ..fleet.observation(
            now,
            current,
            Some(current),
            Some(cluster.held.len() as f64),
            scrape.map(|s| s.at),
        )
    }
}
