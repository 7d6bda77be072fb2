//! The routes the proxy places requests by, and how they change without a restart.
//!
//! Two sources feed one table: the routes file (read at start, and again whenever it changes,
//! [`super::reload`]) and the models learned from the slices `serve` writes
//! ([`super::learn`]). A route that stays the same across a change keeps its state (its queue,
//! its counts, its readiness task); a route that changes or goes is *retired*: it places no new
//! request, but keeps its readiness task until everything it holds has been released or has
//! timed out ([`Routing::reap`]), so a change never drops a held request. A learned model whose
//! Service a file route names joins that route (its port places requests there) rather than
//! make one of its own: the file's bounds and counts key win.
//!
//! A model's port places a request whatever its `Host` says: `serve`'s slice sends the
//! Service's traffic to the activator at that port, so the port names the model. The shared
//! port places by host and path ([`super::routes::pick`]).

use super::hold::RouteState;
use super::limits::Limits;
use super::ports::PortSet;
use super::readiness;
use super::routes::{Learned, Model, Route};
use super::telemetry::Telemetry;
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{watch, Semaphore};

/// The hosts a 404 names at most.
const HOSTS_SHOWN: usize = 16;

/// The routes placing requests now.
#[derive(Default)]
pub struct Table {
    /// In pick order: the file's routes, then the learned models not in the file.
    pub routes: Vec<Arc<RouteState>>,
    /// Each model port's route.
    pub ports: BTreeMap<u16, Arc<RouteState>>,
    /// How many of `routes` come from the file.
    pub from_file: usize,
}

impl Table {
    /// The route a request on the shared port takes, by its host and path.
    pub fn pick(&self, headers: &http::HeaderMap, uri: &http::Uri) -> Option<Arc<RouteState>> {
        super::routes::pick(self.routes.iter().map(|s| &s.route), headers, uri)
            .and_then(|i| self.routes.get(i).cloned())
    }

    /// The route of a model port.
    pub fn at_port(&self, port: u16) -> Option<Arc<RouteState>> {
        self.ports.get(&port).cloned()
    }

    /// The port a model is placed by, if it has one.
    pub fn port_of(&self, model: &Model) -> Option<u16> {
        self.ports
            .iter()
            .find(|(_, s)| s.route.model.as_ref() == Some(model))
            .map(|(p, _)| *p)
    }

    /// Whether some route holds requests for `model`.
    pub fn serves(&self, model: &Model) -> bool {
        self.routes
            .iter()
            .any(|s| s.route.model.as_ref() == Some(model))
    }

    /// What a request that no route placed is told the activator serves: each route's first
    /// name (or its path prefix), at most [`HOSTS_SHOWN`].
    pub fn hosts(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.routes {
            let r = &s.route;
            let name = match (r.names.first(), &r.path_prefix) {
                (Some(n), _) => n.clone(),
                (None, Some(p)) => format!("any host, {p}"),
                (None, None) => "any host".to_owned(),
            };
            if !out.contains(&name) {
                out.push(name);
            }
            if out.len() == HOSTS_SHOWN {
                break;
            }
        }
        out
    }
}

/// A learned model as the table takes it: what its slice says, and its port (none when another
/// model's slice holds the port, or it is outside the range the activator takes).
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedModel {
    pub learned: Learned,
    pub port: Option<u16>,
}

/// What starts a route's readiness task.
pub struct Starter {
    pub kube: Option<kube::Client>,
    pub probe_client: Client<HttpConnector, Empty<Bytes>>,
    pub limits: Limits,
}

/// One state's readiness task, aborted when the state is gone for good.
struct Live {
    state: Arc<RouteState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Default)]
struct Inner {
    file: Vec<Arc<RouteState>>,
    /// The learned models by Service, each with its own state, or none when a file route
    /// holds its requests.
    learned: BTreeMap<Model, (LearnedModel, Option<Arc<RouteState>>)>,
    /// Every state with a task: those in the table and the retired ones.
    live: Vec<Live>,
    /// States that place no request any more, kept while they hold some.
    retired: Vec<Arc<RouteState>>,
    /// Each namespace's bound on what its routes hold at once.
    pools: BTreeMap<String, Arc<Semaphore>>,
}

/// The route table and everything that changes it.
pub struct Routing {
    current: RwLock<Arc<Table>>,
    inner: Mutex<Inner>,
    changes: Arc<watch::Sender<u64>>,
    telemetry: Arc<Telemetry>,
    starter: Starter,
    /// Requests held at once per namespace, over all its routes; `None`: no bound.
    namespace_cap: Option<usize>,
    ports: Arc<PortSet>,
    domain: String,
}

impl Routing {
    pub fn new(
        changes: Arc<watch::Sender<u64>>,
        telemetry: Arc<Telemetry>,
        starter: Starter,
        namespace_cap: Option<usize>,
        ports: Arc<PortSet>,
        domain: String,
    ) -> Routing {
        Routing {
            current: RwLock::new(Arc::new(Table::default())),
            inner: Mutex::new(Inner::default()),
            changes,
            telemetry,
            starter,
            namespace_cap,
            ports,
            domain,
        }
    }

    /// The table now (a cheap clone: it is replaced whole, never changed in place).
    pub fn table(&self) -> Arc<Table> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every state that counts: the table's and the retired ones still holding.
    pub fn states(&self) -> Vec<Arc<RouteState>> {
        self.lock().live.iter().map(|l| l.state.clone()).collect()
    }

    /// The model sockets.
    pub fn ports(&self) -> &Arc<PortSet> {
        &self.ports
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new state for `route`, with its series, its namespace's bound and its readiness task.
    fn start(&self, inner: &mut Inner, route: Route) -> Result<Arc<RouteState>, String> {
        let pool = match (&route.model, self.namespace_cap) {
            (Some(m), Some(cap)) => Some(
                inner
                    .pools
                    .entry(m.namespace.clone())
                    .or_insert_with(|| Arc::new(Semaphore::new(cap)))
                    .clone(),
            ),
            _ => None,
        };
        let counters = self.telemetry.for_route(&route.counts_host);
        let state = RouteState::with(route, self.changes.clone(), counters, pool);
        let task = readiness::start(
            state.clone(),
            self.starter.kube.clone(),
            self.starter.probe_client.clone(),
            self.starter.limits,
        )?;
        inner.live.push(Live {
            state: state.clone(),
            task,
        });
        Ok(state)
    }

    /// The state for `route`: `kept`'s if one has the very same route, else a new one.
    fn reuse_or_start(
        &self,
        inner: &mut Inner,
        kept: &mut Vec<Arc<RouteState>>,
        route: Route,
    ) -> Result<Arc<RouteState>, String> {
        match kept.iter().position(|s| s.route == route) {
            Some(i) => Ok(kept.remove(i)),
            None => self.start(inner, route),
        }
    }

    /// Takes the routes file's routes (at start, or after a reload). Routes the same as before
    /// keep their state; the others are retired, their held requests kept. Refused as a whole
    /// (the routes in use stay) when a route cannot start, e.g. one that watches EndpointSlices
    /// without a Kubernetes API.
    pub fn set_file(&self, routes: Vec<Route>) -> Result<(), String> {
        let mut inner = self.lock();
        let mut kept = inner.file.clone();
        let mut file = Vec::with_capacity(routes.len());
        let mut fresh: Vec<Arc<RouteState>> = Vec::new();
        for route in routes {
            if let Some(i) = kept.iter().position(|s| s.route == route) {
                file.push(kept.remove(i));
                continue;
            }
            match self.start(&mut inner, route) {
                Ok(s) => {
                    fresh.push(s.clone());
                    file.push(s);
                }
                Err(e) => {
                    inner
                        .live
                        .retain(|l| !fresh.iter().any(|f| Arc::ptr_eq(f, &l.state)));
                    return Err(e);
                }
            }
        }
        inner.retired.extend(kept);
        inner.file = file;
        // Learned models may now join (or leave) a file route.
        let learned: Vec<LearnedModel> = inner.learned.values().map(|(m, _)| m.clone()).collect();
        self.place_learned(&mut inner, learned);
        self.publish(&inner);
        Ok(())
    }

    /// Takes the models learned from the slices, all of them (a model not in `models` is gone).
    pub fn set_learned(&self, models: Vec<LearnedModel>) {
        let mut inner = self.lock();
        self.place_learned(&mut inner, models);
        self.publish(&inner);
    }

    fn place_learned(&self, inner: &mut Inner, models: Vec<LearnedModel>) {
        let mut kept: Vec<Arc<RouteState>> = std::mem::take(&mut inner.learned)
            .into_values()
            .filter_map(|(_, s)| s)
            .collect();
        for m in models {
            let model = m.learned.model.clone();
            let in_file = inner
                .file
                .iter()
                .any(|s| s.route.model.as_ref() == Some(&model));
            let state = if in_file {
                None
            } else {
                let route = Route::learned(&m.learned, &self.domain);
                match self.reuse_or_start(inner, &mut kept, route) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::error!(model = %model, error = %e, "cannot start a learned model's route");
                        None
                    }
                }
            };
            inner.learned.insert(model, (m, state));
        }
        inner.retired.extend(kept);
    }

    /// Builds the table from the file's routes and the learned models, binds their ports, and
    /// tells `/queue/watch`.
    fn publish(&self, inner: &Inner) {
        let mut table = Table {
            routes: inner.file.clone(),
            from_file: inner.file.len(),
            ..Table::default()
        };
        for (model, (m, state)) in &inner.learned {
            let state = match state {
                Some(s) => {
                    table.routes.push(s.clone());
                    s.clone()
                }
                None => match inner
                    .file
                    .iter()
                    .find(|s| s.route.model.as_ref() == Some(model))
                {
                    Some(s) => s.clone(),
                    None => continue,
                },
            };
            if let Some(port) = m.port {
                table.ports.insert(port, state);
            }
        }
        self.telemetry
            .routes_in_use(table.from_file, table.routes.len() - table.from_file);
        let wanted: BTreeSet<u16> = table.ports.keys().copied().collect();
        self.ports.sync(&wanted);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(table);
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Lets retired states that hold nothing go (their readiness tasks end); true when one
    /// went, and `/queue/watch` is told.
    pub fn reap(&self) -> bool {
        let mut inner = self.lock();
        let before = inner.retired.len();
        inner.retired.retain(|s| !s.is_drained());
        let gone = before - inner.retired.len();
        if gone == 0 {
            return false;
        }
        let table = self.table();
        let Inner { live, retired, .. } = &mut *inner;
        live.retain(|l| {
            table.routes.iter().any(|s| Arc::ptr_eq(s, &l.state))
                || retired.iter().any(|s| Arc::ptr_eq(s, &l.state))
        });
        drop(inner);
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
        true
    }

    /// Answers every held request of every state (shutdown), and holds nothing more.
    pub fn shut_down(&self) {
        for s in self.states() {
            s.shut_down();
        }
    }
}
