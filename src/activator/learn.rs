//! Models learned from the cluster: the slices `serve` writes name every model the activator
//! holds requests for, so a model is declared once, in its ScaledObject.
//!
//! In serve mode `serve` puts the activator into a model Service's path with an EndpointSlice
//! of its own (labelled `endpointslice.kubernetes.io/managed-by: infscale.io`), listing the
//! activator pods at a port of the model's own. The activator watches those slices in the
//! namespaces it serves (`--namespaces`), and each one becomes a route: held for that
//! Service whatever name the client used, placed by its port, sent to the ready pods of the
//! Service's own slices at the slice's port name, within the bounds the slice's annotations
//! carry from the trigger (`maxHeld`, `holdTimeoutSeconds`), capped by the activator's own.
//! Adding a model is applying its ScaledObject; nothing restarts.
//!
//! A model whose slice goes (its replicas carry the traffic again) lingers for
//! `--model-linger-seconds` with its port, so connections kube-proxy still sends there are
//! served and the next time it goes to zero it is already known. A port is the model's that
//! first claimed it: another slice naming the same port (two writers that raced, or a slice
//! written by hand) gets no port, and `serve`'s check at that port, answered with the owner's
//! name, tells it to move. Past `--max-models`, outside the served namespaces or outside the
//! port range, a slice is refused, counted and logged (bounded: once per model and reason).

use super::routes::{Learned, Model};
use super::table::{LearnedModel, Routing};
use super::telemetry::Telemetry;
use crate::edge::slices::{
    self, HOLD_TIMEOUT_ANNOTATION, INFSCALE, MANAGED_BY, MAX_HELD_ANNOTATION, SERVICE_NAME,
};
use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The ports models are given by default: far from the usual service ports, below the
/// kernel's ephemeral range.
pub const DEFAULT_MODEL_PORTS: RangeInclusive<u16> = 20000..=29999;

/// Which namespaces' slices are learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespaces {
    All,
    Only(BTreeSet<String>),
}

impl Namespaces {
    pub fn allows(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Only(set) => set.contains(ns),
        }
    }
}

impl std::str::FromStr for Namespaces {
    type Err = String;

    /// `all` (or `*`), or namespaces separated by commas.
    fn from_str(s: &str) -> Result<Namespaces, String> {
        let s = s.trim();
        if s == "all" || s == "*" {
            return Ok(Namespaces::All);
        }
        let mut set = BTreeSet::new();
        for ns in s.split(',').map(str::trim) {
            let ok = !ns.is_empty()
                && ns.len() <= 63
                && ns
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !ns.starts_with('-')
                && !ns.ends_with('-');
            if !ok {
                return Err(format!("{ns:?} is not a namespace name"));
            }
            set.insert(ns.to_owned());
        }
        Ok(Namespaces::Only(set))
    }
}

/// What the activator learns, and within which bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnConfig {
    pub namespaces: Namespaces,
    /// The cluster's DNS domain, the end of a Service's FQDN.
    pub domain: String,
    /// The ports a model may be placed by.
    pub ports: RangeInclusive<u16>,
    /// The shared port: a slice naming it is a model placed by its names (no port of its own).
    pub shared_port: u16,
    pub max_models: usize,
    pub linger: Duration,
    /// A model's `maxHeld` when its slice says none, and the most it may say.
    pub max_held: usize,
    /// A model's hold timeout when its slice says none, and the longest it may say.
    pub hold_timeout: Duration,
    pub keep_alive: Option<Duration>,
}

/// Why a slice is not (wholly) taken: a fixed set, the metric's `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// Its namespace is not among those served.
    Namespace,
    /// `--max-models` are learned already.
    TooMany,
    /// Its port is another model's.
    PortTaken,
    /// Its port is outside the range (and not the shared port).
    PortOutside,
}

impl Refusal {
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Namespace => "namespace",
            Refusal::TooMany => "max_models",
            Refusal::PortTaken => "port_taken",
            Refusal::PortOutside => "port_outside_range",
        }
    }
}

/// What one slice says of its model, read without judging it yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub model: Model,
    /// The slice's first port: its name and number.
    pub port_name: Option<String>,
    pub port: Option<u16>,
    /// Whether any of its endpoints is ready (serve has put the activator in the path).
    pub ready: bool,
    /// When the slice was created (RFC 3339 text sorts as time), and its name: who came first.
    pub created: String,
    pub name: String,
    pub max_held: Option<String>,
    pub hold_timeout: Option<String>,
}

impl Claim {
    /// The claim an infscale slice makes, or `None` for a slice that is not one.
    pub fn of(slice: &EndpointSlice) -> Option<Claim> {
        if !slices::infscales(slice) {
            return None;
        }
        let meta = &slice.metadata;
        let service = meta.labels.as_ref()?.get(SERVICE_NAME)?.clone();
        let namespace = meta.namespace.clone()?;
        let first = slice.ports.as_ref().and_then(|p| p.first());
        let note = |key: &str| meta.annotations.as_ref()?.get(key).cloned();
        Some(Claim {
            model: Model { namespace, service },
            port_name: first.and_then(|p| p.name.clone()),
            port: first
                .and_then(|p| p.port)
                .and_then(|p| u16::try_from(p).ok()),
            ready: slice.endpoints.iter().flatten().any(slices::endpoint_ready),
            created: meta
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            max_held: note(MAX_HELD_ANNOTATION),
            hold_timeout: note(HOLD_TIMEOUT_ANNOTATION),
        })
    }
}

/// The learner's memory: who owns each port, and the models lingering after their slice went.
#[derive(Debug, Default)]
pub struct Memory {
    owners: BTreeMap<u16, Model>,
    /// Each model seen, as last taken, and since when its slice is gone (`None`: present).
    seen: BTreeMap<Model, (LearnedModel, Option<Instant>)>,
    /// The refusals last reported, so each is logged and counted once.
    refused: BTreeMap<Model, Refusal>,
}

/// The models to route for `claims` at `now`, and the refusals (model, why) made now.
pub fn models(
    cfg: &LearnConfig,
    memory: &mut Memory,
    claims: &[Claim],
    now: Instant,
) -> (Vec<LearnedModel>, Vec<(Model, Refusal)>) {
    // Models whose linger is over are forgotten first, with their ports.
    let Memory { owners, seen, .. } = memory;
    seen.retain(|model, (m, gone)| {
        let over = gone.is_some_and(|since| now.duration_since(since) >= cfg.linger);
        if over {
            if let Some(p) = m.port {
                if owners.get(&p) == Some(model) {
                    owners.remove(&p);
                }
            }
        }
        !over
    });
    let mut claims: Vec<&Claim> = claims.iter().collect();
    // Who came first: a slice in the path before one that is not, then the older, then by name.
    claims.sort_by(|a, b| {
        (!a.ready, &a.created, &a.model, &a.name).cmp(&(!b.ready, &b.created, &b.model, &b.name))
    });
    let mut refusals = Vec::new();
    let mut present: BTreeMap<Model, LearnedModel> = BTreeMap::new();
    for c in claims {
        if present.contains_key(&c.model) {
            continue;
        }
        if !cfg.namespaces.allows(&c.model.namespace) {
            refusals.push((c.model.clone(), Refusal::Namespace));
            continue;
        }
        let known = memory.seen.contains_key(&c.model);
        let lingering = memory
            .seen
            .values()
            .filter(|(_, gone)| gone.is_some())
            .count();
        if !known && present.len() + lingering >= cfg.max_models {
            refusals.push((c.model.clone(), Refusal::TooMany));
            continue;
        }
        let port = match c.port {
            Some(p) if cfg.ports.contains(&p) => match memory.owners.get(&p) {
                Some(owner) if *owner != c.model && owned(memory, &present, owner) => {
                    refusals.push((c.model.clone(), Refusal::PortTaken));
                    None
                }
                _ => Some(p),
            },
            Some(p) if p == cfg.shared_port => None,
            Some(_) => {
                refusals.push((c.model.clone(), Refusal::PortOutside));
                None
            }
            None => None,
        };
        if let Some(p) = port {
            memory.owners.insert(p, c.model.clone());
        }
        let learned = Learned {
            model: c.model.clone(),
            port_name: c.port_name.clone(),
            max_held: bounded_held(c.max_held.as_deref(), cfg.max_held),
            hold_timeout: bounded_timeout(c.hold_timeout.as_deref(), cfg.hold_timeout),
            keep_alive: cfg.keep_alive,
        };
        present.insert(c.model.clone(), LearnedModel { learned, port });
    }
    // Models whose slice went linger, then are forgotten with their ports.
    let mut out: Vec<LearnedModel> = present.values().cloned().collect();
    let mut seen = BTreeMap::new();
    for (model, (m, gone)) in std::mem::take(&mut memory.seen) {
        if present.contains_key(&model) {
            continue;
        }
        let since = gone.unwrap_or(now);
        if now.duration_since(since) < cfg.linger {
            out.push(m.clone());
            seen.insert(model, (m, Some(since)));
        } else if let Some(p) = m.port {
            if memory.owners.get(&p) == Some(&model) {
                memory.owners.remove(&p);
            }
        }
    }
    for (model, m) in present {
        seen.insert(model, (m, None));
    }
    memory.seen = seen;
    // A port's owner that is neither present nor lingering owns it no more.
    let alive: BTreeSet<&Model> = memory.seen.keys().collect();
    memory.owners.retain(|_, m| alive.contains(m));
    // Each refusal once, until it changes.
    let now_refused: BTreeMap<Model, Refusal> = refusals.iter().cloned().collect();
    let fresh: Vec<(Model, Refusal)> = refusals
        .into_iter()
        .filter(|(m, r)| memory.refused.get(m) != Some(r))
        .collect();
    memory.refused = now_refused;
    (out, fresh)
}

/// Whether `owner` holds its port still: present now, or lingering.
fn owned(memory: &Memory, present: &BTreeMap<Model, LearnedModel>, owner: &Model) -> bool {
    present.contains_key(owner) || memory.seen.contains_key(owner)
}

fn bounded_held(said: Option<&str>, cap: usize) -> usize {
    said.and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .map_or(cap, |n| n.min(cap))
}

fn bounded_timeout(said: Option<&str>, cap: Duration) -> Duration {
    said.and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(cap, |s| Duration::from_secs_f64(s).min(cap))
}

/// The learner's state a `/routes` reader sees: the refusals in force.
#[derive(Debug, Default)]
pub struct Status {
    pub refused: Mutex<BTreeMap<Model, Refusal>>,
}

/// How often lingering models are looked at when no slice changes.
const TICK: Duration = Duration::from_secs(1);

/// Follows the infscale slices of the served namespaces and keeps `routing`'s learned models
/// as they say. Runs until aborted.
pub async fn follow(
    client: kube::Client,
    cfg: LearnConfig,
    routing: Arc<Routing>,
    telemetry: Arc<Telemetry>,
    status: Arc<Status>,
) {
    let selector = format!("{MANAGED_BY}={INFSCALE}");
    let apis: Vec<Api<EndpointSlice>> = match &cfg.namespaces {
        Namespaces::All => vec![Api::all(client)],
        Namespaces::Only(set) => set
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect(),
    };
    let mut stores: Vec<Store<EndpointSlice>> = Vec::new();
    let mut streams = Vec::new();
    for api in apis {
        let (store, writer) = reflector::store();
        let config = watcher::Config::default().labels(&selector);
        stores.push(store);
        streams.push(reflector::reflector(writer, watcher(api, config).default_backoff()).boxed());
    }
    let mut events = futures::stream::select_all(streams);
    let mut memory = Memory::default();
    let mut last: Option<Vec<LearnedModel>> = None;
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            event = events.next() => match event {
                None => return,
                Some(Ok(watcher::Event::InitApply(_) | watcher::Event::Init)) => continue,
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "the infscale EndpointSlice watch failed; retrying (does the activator's role list and watch endpointslices in the namespaces it serves?)");
                    continue;
                }
            },
            _ = tick.tick() => {}
        }
        let claims: Vec<Claim> = stores
            .iter()
            .flat_map(|s| s.state())
            .filter_map(|s| Claim::of(&s))
            .collect();
        let (learned, refusals) = models(&cfg, &mut memory, &claims, Instant::now());
        for (model, why) in &refusals {
            tracing::warn!(model = %model, reason = why.reason(), "a slice names a model the activator does not take");
            telemetry.refused_model(why.reason());
        }
        *status.refused.lock().unwrap_or_else(|e| e.into_inner()) = memory.refused.clone();
        if last.as_ref() != Some(&learned) {
            let names: Vec<String> = learned
                .iter()
                .map(|m| match m.port {
                    Some(p) => format!("{}:{p}", m.learned.model),
                    None => m.learned.model.to_string(),
                })
                .collect();
            tracing::info!(models = ?names, "learned models");
            routing.set_learned(learned.clone());
            last = Some(learned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LearnConfig {
        LearnConfig {
            namespaces: Namespaces::All,
            domain: "cluster.local".into(),
            ports: 20000..=20009,
            shared_port: 8080,
            max_models: 3,
            linger: Duration::from_secs(60),
            max_held: 1000,
            hold_timeout: Duration::from_secs(300),
            keep_alive: None,
        }
    }

    fn claim(ns: &str, svc: &str, port: u16, created: &str) -> Claim {
        Claim {
            model: Model {
                namespace: ns.into(),
                service: svc.into(),
            },
            port_name: Some("http".into()),
            port: Some(port),
            ready: false,
            created: created.into(),
            name: format!("{svc}-infscale"),
            max_held: None,
            hold_timeout: None,
        }
    }

    fn ports(out: &[LearnedModel]) -> Vec<(String, Option<u16>)> {
        out.iter()
            .map(|m| (m.learned.model.to_string(), m.port))
            .collect()
    }

    #[test]
    fn each_slice_is_a_model_placed_by_its_port_with_its_bounds_capped() {
        let mut m = Memory::default();
        let mut a = claim("llm", "chat", 20001, "2026-01-01T00:00:00Z");
        a.max_held = Some("50".into());
        a.hold_timeout = Some("9000".into());
        let b = claim("other", "embed", 20002, "2026-01-01T00:00:01Z");
        let (out, refused) = models(&cfg(), &mut m, &[a, b], Instant::now());
        assert!(refused.is_empty());
        assert_eq!(
            ports(&out),
            [
                ("llm/chat".to_owned(), Some(20001)),
                ("other/embed".to_owned(), Some(20002))
            ]
        );
        assert_eq!(out[0].learned.max_held, 50);
        assert_eq!(out[0].learned.hold_timeout, Duration::from_secs(300));
        assert_eq!(out[1].learned.max_held, 1000);
    }

    #[test]
    fn a_port_stays_its_first_owners_and_a_second_claim_gets_none() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        let first = claim("llm", "chat", 20001, "2026-01-01T00:00:05Z");
        let (out, _) = models(&cfg(), &mut m, std::slice::from_ref(&first), t0);
        assert_eq!(ports(&out), [("llm/chat".to_owned(), Some(20001))]);
        // An older slice for another model, seen later, does not take the port.
        let rival = claim("ab", "rival", 20001, "2026-01-01T00:00:00Z");
        let (out, refused) = models(&cfg(), &mut m, &[first.clone(), rival.clone()], t0);
        assert_eq!(
            ports(&out),
            [
                ("ab/rival".to_owned(), None),
                ("llm/chat".to_owned(), Some(20001))
            ]
        );
        assert_eq!(refused.len(), 1);
        // Reported once, not on every evaluation.
        let (_, again) = models(&cfg(), &mut m, &[first, rival], t0);
        assert!(again.is_empty());
    }

    #[test]
    fn at_first_sight_the_slice_in_the_path_wins_a_port() {
        let mut m = Memory::default();
        let mut in_path = claim("llm", "b", 20003, "2026-01-01T00:00:09Z");
        in_path.ready = true;
        let older = claim("llm", "a", 20003, "2026-01-01T00:00:00Z");
        let (out, _) = models(&cfg(), &mut m, &[older, in_path], Instant::now());
        assert_eq!(
            ports(&out),
            [
                ("llm/a".to_owned(), None),
                ("llm/b".to_owned(), Some(20003))
            ]
        );
    }

    #[test]
    fn a_gone_slice_lingers_with_its_port_then_frees_it() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        let chat = claim("llm", "chat", 20001, "t");
        models(&cfg(), &mut m, &[chat], t0);
        let (out, _) = models(&cfg(), &mut m, &[], t0 + Duration::from_secs(59));
        assert_eq!(ports(&out), [("llm/chat".to_owned(), Some(20001))]);
        // While it lingers its port is still its own.
        let other = claim("llm", "other", 20001, "u");
        let (out, _) = models(
            &cfg(),
            &mut m,
            std::slice::from_ref(&other),
            t0 + Duration::from_secs(59),
        );
        assert_eq!(
            ports(&out),
            [
                ("llm/other".to_owned(), None),
                ("llm/chat".to_owned(), Some(20001))
            ]
        );
        // Gone since t0 + 59 s: forgotten a linger later, and its port goes to the next claim.
        let (out, _) = models(&cfg(), &mut m, &[other], t0 + Duration::from_secs(59 + 60));
        assert_eq!(ports(&out), [("llm/other".to_owned(), Some(20001))]);
    }

    #[test]
    fn namespaces_caps_and_ranges_refuse_and_say_why() {
        let mut c = cfg();
        c.namespaces = "llm,team-b".parse().unwrap();
        let mut m = Memory::default();
        let claims = [
            claim("llm", "a", 20001, "1"),
            claim("kube-system", "x", 20002, "2"),
            claim("llm", "b", 30000, "3"),
            claim("llm", "shared", 8080, "4"),
            claim("team-b", "c", 20004, "5"),
            claim("team-b", "d", 20005, "6"),
        ];
        let (out, refused) = models(&c, &mut m, &claims, Instant::now());
        assert_eq!(
            ports(&out),
            [
                ("llm/a".to_owned(), Some(20001)),
                ("llm/b".to_owned(), None),
                ("llm/shared".to_owned(), None)
            ]
        );
        let reasons: Vec<(String, &str)> = refused
            .iter()
            .map(|(m, r)| (m.to_string(), r.reason()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("kube-system/x".to_owned(), "namespace"),
                ("llm/b".to_owned(), "port_outside_range"),
                ("team-b/c".to_owned(), "max_models"),
                ("team-b/d".to_owned(), "max_models")
            ]
        );
        assert!("Bad_NS".parse::<Namespaces>().is_err());
        assert_eq!("*".parse::<Namespaces>(), Ok(Namespaces::All));
    }
}
