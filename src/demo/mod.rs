//! `infscale demo`: the whole loop on one machine, on loopback, over real sockets.
//!
//! A Deployment of `emulate` replicas ([`deployment`]) behind a Service ([`service`]), the real
//! activator in front of it, the real `serve` scraping the replicas and following the activator,
//! a driver that acts as KEDA and its HPA over gRPC ([`driver`]), and real HTTP clients replaying
//! the scenario through the activator ([`clients`]), all on a compressed clock ([`clock`]). The
//! report is the simulator's own summary over what the clients saw and what the Deployment
//! billed, beside the simulator's runs of the same scenario, seed and policy (the one in the
//! middle of those at every offset of the scrapes against the HPA's syncs, which the demo's
//! processes fall on as they happen to: [`infscale_core::sim::phases`]), with how far the
//! compressed clock lagged the wall clock ([`lag`]): a run that could not keep time says so
//! rather than report misses the policy did not cause.

pub(crate) mod clients;
pub(crate) mod clock;
pub(crate) mod deployment;
pub(crate) mod driver;
pub(crate) mod lag;
pub(crate) mod service;

use crate::activator::routes::{GivenEndpoints, Readiness, RouteSpec};
use crate::emulate::{Dialect, EmulateConfig};
use crate::serve::metadata::{TargetKind, TARGET_KEYS};
use crate::serve::proto::ScaledObjectRef;
use anyhow::Context;
use clock::SimClock;
use infscale_core::control::cycle::HPA_SYNC_PERIOD_S;
use infscale_core::policy::{keys, Policy};
use infscale_core::sim::gpu::GpuModel;
use infscale_core::sim::phases;
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::report::{summarize, Summary};
use infscale_core::sim::run::{Run, Settings};
use infscale_core::sim::trace::{Scenario, Trace};
use lag::{ClockLag, Meter, Seen};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a demo runs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    pub scenario: Scenario,
    /// Simulated seconds per wall second.
    pub speed: f64,
    pub policy: Policy,
    /// The policy as the user wrote it, for the report.
    pub label: String,
    pub gpu: GpuModel,
    pub dialect: Dialect,
    pub slo_ttft_s: f64,
    /// The SVG timeline's path, if any.
    pub svg: Option<std::path::PathBuf>,
    /// A fault for tests: the Service answers every this many requests 500 (0: none).
    pub fail_every: usize,
    /// Serve mode: clients call the Service, and the activator joins it only while needed.
    /// Otherwise (proxy mode) clients call the activator, which forwards through the Service.
    pub serve_mode: bool,
}

/// The demo's summary beside the simulator's.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    pub demo: Summary,
    pub lost: usize,
    /// Lost requests by why.
    pub lost_by: std::collections::BTreeMap<String, usize>,
    pub min_replicas_seen: u32,
    pub held_after_zero: usize,
    /// Client requests the Service sent to the activator, and straight to a replica (serve
    /// mode; in proxy mode every request goes through the activator).
    pub via_activator: usize,
    pub direct_to_pods: usize,
    /// The simulator's run in the middle of [`DemoReport::simulated_phases`].
    pub simulated: Summary,
    pub simulated_phases: SimulatedPhases,
    /// How far the clock lagged, and whether the run kept time.
    pub clock_lag: ClockLag,
    #[serde(skip)]
    pub timeline: Vec<infscale_core::sim::run::TimelineEntry>,
}

/// The simulator's runs of the day, one per offset of `serve`'s scrapes against the HPA's syncs
/// ([`infscale_core::sim::phases`]): how many, their replica-minutes from the cheapest to the
/// dearest, their SLO misses from the fewest to the most (a policy's misses can move with the
/// offset too), and the offset of the one in the middle by cost (the summary's `simulated`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SimulatedPhases {
    pub runs: usize,
    pub low: f64,
    pub high: f64,
    pub miss_low_pct: f64,
    pub miss_high_pct: f64,
    pub median_offset_s: f64,
}

/// The trigger metadata for `policy`, as a ScaledObject carries it, with its times in wall
/// seconds and its token rates per wall second at `speed` (`serve` runs on the wall clock, and
/// the emulated replicas count tokens `speed` times faster), plus where the pods and the
/// activator are. Which values are times and rates is the key tables' unit: every policy key in
/// seconds or per second, written or at its default, and every target key in seconds.
fn metadata(
    policy: &Policy,
    cold_start_s: f64,
    admin: SocketAddr,
    speed: f64,
    service: Option<SocketAddr>,
) -> HashMap<String, String> {
    let mut m: HashMap<String, String> =
        infscale_core::policy::scaled_object::trigger_metadata(policy, cold_start_s)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
    m.insert("deployment".into(), "model".into());
    m.insert("activatorUrl".into(), format!("http://{admin}"));
    m.insert("activatorHost".into(), "model".into());
    if let Some(svc) = service {
        m.insert("serveMode".into(), "true".into());
        m.insert("service".into(), "model".into());
        m.insert("serviceUrl".into(), format!("http://{svc}"));
    }
    time_scaled(&mut m, speed);
    m
}

/// Trigger metadata `m` with its times compressed `speed` times: every policy key in seconds
/// or per second and every target key in seconds, written or at its default (a default is a
/// time too), as the key tables' units say; the scrape timeout at least 0.2 wall seconds. What
/// the demo runs a day by, and what a test runs a shipped ScaledObject by in seconds.
pub fn time_scaled(m: &mut HashMap<String, String>, speed: f64) {
    let serve_mode = m.get("serveMode").map(String::as_str) == Some("true");
    let policy_keys = infscale_core::policy::keys::KEYS.iter().filter_map(|k| {
        let factor = match k.unit {
            keys::SECONDS => 1.0 / speed,
            keys::PER_SECOND => speed,
            _ => return None,
        };
        Some((k.metadata()?, k.default, factor))
    });
    let target_keys = TARGET_KEYS.iter().filter_map(|k| match k.kind {
        TargetKind::Seconds { min, .. } => Some((k.name, k.default, 1.0 / speed, min)),
        _ => None,
    });
    let timed = policy_keys
        .map(|(name, default, factor)| (name, default, factor, 0.0))
        .chain(target_keys);
    for (name, default, factor, min) in timed {
        // A key left out is at its default, which is in simulated time too. The serve mode keys
        // only outside serve mode are left out.
        let serve_mode_only = name.starts_with("serveMode") && !serve_mode;
        let value = m.get(name).map_or(default, String::as_str);
        if let (Ok(v), false) = (value.trim().parse::<f64>(), serve_mode_only) {
            let scaled = (v * factor).max(min);
            m.insert(name.to_owned(), infscale_core::policy::keys::num(scaled));
        }
    }
    // The scrape timeout: at least 0.2 wall seconds, however fast the clock.
    if let Some(t) = m.get_mut("scrapeTimeoutSeconds") {
        if let Ok(v) = t.parse::<f64>() {
            *t = v.max(0.2).to_string();
        }
    }
}

/// Tokens per streamed event from the replicas. One machine carries every replica's streams
/// through the Service and the activator to the clients at up to 30x real time; an event per
/// token would spend the CPU that times the first tokens. Production servers batch the same way
/// (`--stream-interval 20` is common with vLLM); TTFT is unchanged, the first token goes at once.
const STREAM_INTERVAL: u32 = 20;

/// The emulated replicas' engine step, simulated seconds: the simulator's, so the comparison
/// runs one replica model at one grain. The step decides how often a scrape finds a request
/// waiting (the prompts that arrived within a step overrunning its prefill, or a backlog), and
/// a reading with one waiting neither counts toward the learned safe rate per replica nor lets
/// `work` ask for fewer than the current count. At 0.05 s (the emulator's default) the demo's
/// scrapes found one waiting about twice as often as at 0.25 s, its days cost more and spread
/// wider (docs/demo.md has the runs). A first token leaves at the end of its step, up to a step
/// later than the model's time within it, which the simulator reports.
const ENGINE_STEP_S: f64 = infscale_core::sim::settings::DEFAULT_STEP_S;

/// A free port on 127.0.0.2 for the pod slots (bound, then let go).
pub(crate) fn slot_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.2:0")?;
    Ok(l.local_addr()?.port())
}

/// Runs the demo; `live` gets one line per HPA period.
pub async fn run(
    cfg: DemoConfig,
    live: impl Fn(String) + Send + 'static,
) -> anyhow::Result<DemoReport> {
    let trace = cfg.scenario.generate()?;
    let speed = cfg.speed;
    let cold_start = cfg.gpu.cold_start_s();
    // The Service and the Deployment.
    let endpoints = Arc::new(service::Endpoints::default());
    endpoints.fail_every(cfg.fail_every);
    let svc_address = service::Address::hold()?;
    let svc_addr = svc_address.addr();
    let svc_task = tokio::spawn(service::serve(svc_address, endpoints.clone()));
    let port = slot_port()?;
    let slots = deployment::slots(cfg.policy.max, port);
    let emulate = EmulateConfig {
        gpu: cfg.gpu.clone(),
        dialect: cfg.dialect,
        speed,
        cold_start_s: 0.0,
        model: "model".into(),
        dt_s: ENGINE_STEP_S,
        stream_interval: STREAM_INTERVAL,
        ..EmulateConfig::default()
    };
    let mut deployment =
        deployment::Deployment::new(slots.clone(), endpoints.clone(), emulate, cold_start);
    // The activator: in proxy mode in front of the Service, forwarding through it; in serve mode
    // beside it, sending to the replicas the Service names.
    let mut route = RouteSpec {
        health_path: Some("/health".into()),
        max_held: 100_000,
        hold_timeout_seconds: 300.0 / speed,
        counts_host: Some("model".into()),
        ..RouteSpec::to_upstream(&format!("http://{svc_addr}"))
    }
    .check(0, "demo")?;
    if cfg.serve_mode {
        route.readiness = Readiness::Given(GivenEndpoints(endpoints.pods()));
        route.direct = true;
    }
    let act = crate::activator::server::bind(crate::activator::server::Config {
        listen: "127.0.0.1:0".parse()?,
        admin_listen: "127.0.0.1:0".parse()?,
        routes: vec![route],
        reload: None,
        learn: None,
        namespace_cap: None,
        kube_api: None,
        limits: crate::activator::limits::Limits::default(),
    })
    .await?;
    let (proxy, admin) = (act.proxy_addr()?, act.admin_addr()?);
    let paths = cfg.serve_mode.then(|| {
        crate::serve::server::Paths(Arc::new(service::DemoPaths {
            endpoints: endpoints.clone(),
            activator: proxy,
            service: svc_addr,
        }))
    });
    let act_task = tokio::spawn(act.run(std::future::pending()));
    // The scaler, scraping every pod slot and following the activator.
    let urls = slots
        .iter()
        .map(|s| format!("http://{s}/metrics"))
        .collect();
    let scaler = crate::serve::server::bind(crate::serve::server::Config {
        listen: "127.0.0.1:0".parse()?,
        metrics_listen: None,
        tls: None,
        statics: HashMap::from([("model".to_owned(), urls)]),
        allowed_activators: vec![format!("http://{admin}")],
        kube_api: None,
        use_kube: false,
        scrape_via: None,
        paths,
        serve_mode: Default::default(),
        limits: crate::serve::limits::Limits::default(),
        state_dir: None,
    })
    .await?;
    let grpc = scaler.grpc_addr()?;
    let scaler_task = tokio::spawn(scaler.run(std::future::pending()));
    let so = ScaledObjectRef {
        name: "model".into(),
        namespace: "demo".into(),
        scaler_metadata: metadata(
            &cfg.policy,
            cold_start,
            admin,
            speed,
            cfg.serve_mode.then_some(svc_addr),
        ),
    };
    // One replica ready at the start, as the simulator's runs begin.
    deployment.scale(cfg.policy.min.max(1), -cold_start);
    deployment.scale_events = 0;
    deployment.tick(0.0).await?;
    let mut driver =
        driver::Driver::connect(format!("http://{grpc}"), so, cfg.policy.clone()).await?;
    let clock = SimClock::new(speed);
    let meter = Meter::new(clock);
    let (stop_probe, probe_stop) = tokio::sync::watch::channel(false);
    let probe = tokio::spawn(meter.clone().probe(probe_stop));
    let outcomes: clients::Outcomes = Arc::new(Mutex::new(vec![
        clients::Outcome::default();
        trace.requests.len()
    ]));
    let in_flight = Arc::new(AtomicUsize::new(0));
    // Clients call the model's Service in serve mode, the activator in proxy mode.
    let entry = if cfg.serve_mode { svc_addr } else { proxy };
    let replay = tokio::spawn(clients::replay(
        trace.requests.clone(),
        entry,
        "model".into(),
        clock,
        endpoints.clone(),
        clients::Tally {
            outcomes: outcomes.clone(),
            in_flight: in_flight.clone(),
            meter: meter.clone(),
        },
    ));
    let tick = clock.wall(0.25).max(Duration::from_millis(5));
    let mut due = tokio::time::Instant::now();
    let admin_client = reqwest::Client::new();
    let mut next_line = 0.0;
    let mut shown = 0;
    loop {
        let now = clock.now();
        deployment.tick(now).await?;
        let flight = in_flight.load(Ordering::Relaxed) as u32;
        driver.step(&mut deployment, &clock, flight).await;
        if now >= next_line {
            next_line = now + HPA_SYNC_PERIOD_S;
            let rate = trace
                .requests
                .iter()
                .filter(|r| r.arrival <= now && r.arrival > now - HPA_SYNC_PERIOD_S)
                .count() as f64
                / HPA_SYNC_PERIOD_S;
            let (running, waiting) = deployment.load();
            let held = held_now(&admin_client, admin).await;
            let mut line = format!(
                "{:>6.0}s  {:>5.1} req/s  ready {:>2}  starting {:>2}  running {:>4}  waiting {:>4}  held {:>4}  value {:>8}",
                now,
                rate,
                deployment.ready(),
                deployment.starting(),
                running,
                waiting,
                held.map_or("?".to_owned(), |h| h.to_string()),
                driver.latest.value.map_or("-".to_owned(), |v| format!("{v:.1}")),
            );
            for e in &driver.record.timeline[shown..] {
                line.push_str(&format!("  | {} {} -> {} ({})", e.by, e.from, e.to, e.why));
            }
            shown = driver.record.timeline.len();
            live(line);
        }
        if now >= trace.duration && replay.is_finished() {
            break;
        }
        // The next tick is planned a tick after the last; it comes late when this pass ran past
        // it or the runtime wakes the loop late.
        let planned = due + tick;
        due = planned.max(tokio::time::Instant::now());
        tokio::time::sleep_until(due).await;
        meter.tick(clock.sim(tokio::time::Instant::now().saturating_duration_since(planned)));
    }
    let _ = replay.await;
    stop_probe.send_replace(true);
    let _ = probe.await;
    for late in &driver.record.hpa_late {
        meter.hpa(*late);
    }
    deployment.tick(clock.now()).await?;
    deployment.shutdown().await;
    svc_task.abort();
    act_task.abort();
    scaler_task.abort();
    let outcomes = outcomes.lock().map(|o| o.clone()).unwrap_or_default();
    let seen: Vec<Seen> = outcomes
        .iter()
        .filter(|o| o.lost.is_none())
        .map(|o| Seen {
            sent_at: o.sent_at,
            ttft: f64::from(o.outcome.ttft),
        })
        .collect();
    let clock_lag = meter.verdict(&seen, outcomes.len(), cfg.slo_ttft_s);
    let routed = if cfg.serve_mode {
        (
            endpoints.to_activator.load(Ordering::Relaxed),
            endpoints.to_pods.load(Ordering::Relaxed),
        )
    } else {
        (outcomes.len(), 0)
    };
    report(
        &cfg,
        &trace,
        outcomes,
        deployment,
        driver.record,
        clock_lag,
        routed,
    )
}

/// Requests held at the activator now, from its `/queue` (the count `serve` follows).
async fn held_now(client: &reqwest::Client, admin: SocketAddr) -> Option<u64> {
    let counts: infscale_core::observe::counts::QueueCounts = client
        .get(format!("http://{admin}/queue"))
        .timeout(Duration::from_millis(500))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    Some(counts.values().map(|c| c.held.unwrap_or(0)).sum())
}

fn report(
    cfg: &DemoConfig,
    trace: &Trace,
    outcomes: Vec<clients::Outcome>,
    deployment: deployment::Deployment,
    record: driver::Record,
    clock_lag: ClockLag,
    (via_activator, direct_to_pods): (usize, usize),
) -> anyhow::Result<DemoReport> {
    let mut lost_by = std::collections::BTreeMap::new();
    for why in outcomes.iter().filter_map(|o| o.lost.as_ref()) {
        *lost_by.entry(why.clone()).or_insert(0) += 1;
    }
    let lost = lost_by.values().sum();
    let held_after_zero = outcomes
        .iter()
        .filter(|o| o.at_zero && o.lost.is_none())
        .count();
    let label = format!("demo {}", cfg.label);
    let demo_run = Run {
        outcomes: outcomes.iter().map(|o| o.outcome).collect(),
        replica_seconds: deployment.replica_seconds,
        standby_seconds: 0.0,
        scale_events: deployment.scale_events,
        peak: deployment.peak,
        cost_writes: 0,
        timeline: record.timeline.clone(),
        series: record.series.clone(),
        ledger: Vec::new(),
        learned: Default::default(),
    };
    let settings = Settings {
        slo_ttft_s: cfg.slo_ttft_s,
        series_every_s: HPA_SYNC_PERIOD_S,
        // The demo's pods pause as the shipped manifests do, then drain what they hold.
        pre_stop_s: deployment::PRE_STOP_S,
        drain_s: f64::INFINITY,
        dt: ENGINE_STEP_S,
        ..Settings::default()
    };
    // The demo's scrapes fall wherever they fall against its HPA's syncs: the simulator's figure
    // is its run in the middle of every offset.
    let spread = phases::spread(
        trace,
        &Hardware::new(cfg.gpu.clone()),
        &cfg.policy,
        &settings,
    );
    let (Some(median), Some(range)) = (spread.median(), spread.range_minutes()) else {
        anyhow::bail!("the simulator ran no phase of the scrapes");
    };
    let sim_run = &median.run;
    let misses: Vec<f64> = spread
        .runs
        .iter()
        .map(|p| summarize("", &p.run, cfg.slo_ttft_s).slo_miss_pct)
        .collect();
    let demo = summarize(&label, &demo_run, cfg.slo_ttft_s);
    let simulated = summarize(&format!("simulated {}", cfg.label), sim_run, cfg.slo_ttft_s);
    if let Some(path) = &cfg.svg {
        let panels = [
            infscale_core::sim::plot::Panel {
                title: "demo",
                policy: &cfg.label,
                run: &demo_run,
            },
            infscale_core::sim::plot::Panel {
                title: "simulated",
                policy: &cfg.label,
                run: sim_run,
            },
        ];
        let svg = infscale_core::sim::plot::render(trace, &panels, cfg.slo_ttft_s)
            .map_err(anyhow::Error::msg)?;
        std::fs::write(path, svg).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(DemoReport {
        demo,
        lost,
        lost_by,
        min_replicas_seen: record.min_replicas_seen.unwrap_or(0),
        held_after_zero,
        via_activator,
        direct_to_pods,
        simulated,
        simulated_phases: SimulatedPhases {
            runs: spread.runs.len(),
            low: range.0,
            high: range.1,
            miss_low_pct: misses.iter().copied().fold(f64::INFINITY, f64::min),
            miss_high_pct: misses.iter().copied().fold(0.0, f64::max),
            median_offset_s: median.scrape_offset_s,
        },
        clock_lag,
        timeline: record.timeline,
    })
}
