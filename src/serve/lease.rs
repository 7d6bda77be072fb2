//! Serve mode's one writer per Service: a `coordination.k8s.io/v1` Lease decides which trigger
//! writes a model Service's slice.
//!
//! Two `serve` replicas, or two ScaledObjects naming one Service, each run a collector for that
//! Service; were both to write and delete its `SERVICE-infscale` EndpointSlice, the activator
//! would flap in and out of the Service's path. So each trigger keeps a [`Lease`] per Service in
//! serve's own namespace (not the model's: serve's RBAC on leases stays in its own namespace),
//! named by the Service ([`lease_name`]), and only its holder writes. The holder renews it every
//! [`LeaseSettings::renew`]; the others observe.
//!
//! The takeover rule is client-go's leader election, which trusts no clock across machines: an
//! observer remembers the record it last saw (holder, renew time, resource version) and when,
//! by its own clock, that record last changed; once it has not changed for the lease's duration,
//! the observer replaces it, naming itself (the resource version it read makes that write fail
//! if the holder renewed meanwhile). A lease with no holder has been released: taken at once. A
//! holder that cannot renew stops calling itself the writer `duration - renew` after its last
//! successful write, before any observer may take over. Dropping a [`Keeper`] releases its lease
//! (best effort, bounded), so a planned stop fails over at once.
//!
//! The fallback: where the API serves no Lease (a 404 on the group), refuses this scaler (a
//! 403), or has never answered a Lease request in three turns (an API that drops them), the
//! trigger writes without one, as before leases ([`Role::Uncoordinated`], logged once at warn),
//! and keeps asking so that an RBAC fix takes effect without a restart. Once the API has
//! answered, a failure is no such fallback: a writer that cannot renew stops writing.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The label every lease infscale writes carries.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "infscale");

/// Failed turns, with the API never having answered a Lease request, after which the trigger
/// writes without one ([`Role::Uncoordinated`]).
const NEVER_ANSWERED: u32 = 3;

/// How long a release may take once its [`Keeper`] is dropped.
const RELEASE_WITHIN: Duration = Duration::from_secs(2);

/// Releases under way in this process, and their end: a scaler shutting down waits for them
/// ([`releases_done`]), so a rolling update fails over at once rather than after a lease.
static RELEASING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static RELEASED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Waits, at most `within`, until no release is under way.
pub async fn releases_done(within: Duration) {
    let end = Instant::now() + within;
    loop {
        let notified = RELEASED.notified();
        if RELEASING.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return;
        }
        if tokio::time::timeout_at(end, notified).await.is_err() {
            return;
        }
    }
}

/// Who writes one Service's serve-mode slice, as this trigger's lease keeper knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not known yet, or the lease could not be renewed for long: do not write.
    Unknown(String),
    /// This trigger holds the lease: it writes.
    Writer,
    /// Another holder (its identity) holds it: this trigger only observes.
    Observer { holder: String },
    /// The API has no Lease resource here or refuses this scaler (404 on the group, 403): write
    /// without one, as before leases (the reason is logged once at warn).
    Uncoordinated(String),
}

impl Role {
    /// Whether this trigger may write the slice: it holds the lease, or there is none to hold.
    pub fn writes(&self) -> bool {
        matches!(self, Role::Writer | Role::Uncoordinated(_))
    }

    /// Whether `other` is the same role, reasons aside (a new reason is no new role).
    fn same(&self, other: &Role) -> bool {
        match (self, other) {
            (Role::Unknown(_), Role::Unknown(_))
            | (Role::Writer, Role::Writer)
            | (Role::Uncoordinated(_), Role::Uncoordinated(_)) => true,
            (Role::Observer { holder: a }, Role::Observer { holder: b }) => a == b,
            _ => false,
        }
    }
}

/// Where the leases live and how long one lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// Serve's own namespace, where its leases are (env `POD_NAMESPACE`, else `infscale`).
    pub namespace: String,
    /// How long a lease holds without a renewal before an observer may take it over (15 s, as
    /// client-go's leader election).
    pub duration: Duration,
    /// How often the lease is read and, by its holder, renewed (5 s); also each API call's
    /// timeout. Well under `duration`: a holder stops writing `duration - renew` after its last
    /// renewal.
    pub renew: Duration,
    /// This scaler replica's name in a holder's identity (env `POD_NAME`, else `HOSTNAME`, else
    /// `serve`).
    pub pod: String,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        let namespace = std::env::var("POD_NAMESPACE")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "infscale".to_owned());
        let pod = ["POD_NAME", "HOSTNAME"]
            .into_iter()
            .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()))
            .unwrap_or_else(|| "serve".to_owned());
        LeaseSettings {
            namespace,
            duration: Duration::from_secs(15),
            renew: Duration::from_secs(5),
            pod,
        }
    }
}

/// The lease for Service `service` in namespace `namespace`. Both are DNS labels, so this is a
/// valid Lease name (a DNS subdomain).
pub fn lease_name(namespace: &str, service: &str) -> String {
    format!("infscale-path.{namespace}.{service}")
}

impl LeaseSettings {
    /// A trigger's identity as a lease holder: `{pod}/{ns}/{scaled object}/{trigger}`.
    pub fn identity(&self, scaled_object_ns: &str, scaled_object: &str, trigger: &str) -> String {
        identity_of(&self.pod, scaled_object_ns, scaled_object, trigger)
    }
}

fn identity_of(pod: &str, scaled_object_ns: &str, scaled_object: &str, trigger: &str) -> String {
    format!("{pod}/{scaled_object_ns}/{scaled_object}/{trigger}")
}

/// One lease kept in the background: [`Keeper::role`] follows who writes. Dropping it stops the
/// keeping and releases the lease if this trigger holds it.
pub struct Keeper {
    /// The role, updated on every change.
    pub role: watch::Receiver<Role>,
    publish: Arc<watch::Sender<Role>>,
    task: Option<tokio::task::JoinHandle<()>>,
    release: Option<Release>,
}

impl Keeper {
    /// Stops keeping without releasing the lease, as a crash would: the lease stays held until
    /// it expires.
    pub fn abandon(mut self) {
        self.release = None;
        self.stop("the lease keeper was abandoned");
    }

    /// Ends the keeping (once) and says so: from now on nobody here writes.
    fn stop(&mut self, why: &str) {
        if let Some(task) = self.task.take() {
            task.abort();
            self.publish.send_replace(Role::Unknown(why.to_owned()));
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop("the lease keeper stopped");
        let Some(release) = self.release.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            RELEASING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            runtime.spawn(async move {
                release.run().await;
                RELEASING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                RELEASED.notify_waiters();
            });
        }
    }
}

/// Keeps lease `name` in `settings.namespace` for `holder` (see [`LeaseSettings::identity`]), with
/// `annotations` on it while this holder holds it, until the returned [`Keeper`] is dropped.
/// Must be called within a tokio runtime.
pub fn keep(
    client: kube::Client,
    mut settings: LeaseSettings,
    name: String,
    holder: String,
    annotations: BTreeMap<String, String>,
) -> Keeper {
    if settings.renew.is_zero() || settings.renew >= settings.duration {
        let renew = settings.duration / 3;
        tracing::warn!(lease = %name, holder = %holder, renew = ?settings.renew,
            duration = ?settings.duration, fixed = ?renew,
            "serve mode: a lease's renewal period must be under its duration");
        settings.renew = renew.max(Duration::from_millis(1));
    }
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let (tx, rx) = watch::channel(Role::Unknown("the lease has not been read yet".to_owned()));
    let publish = Arc::new(tx);
    let release = Release {
        api: api.clone(),
        name: name.clone(),
        holder: holder.clone(),
    };
    let keeping = Keeping {
        api,
        name,
        holder,
        annotations,
        settings,
        observed: None,
    };
    let task = tokio::spawn(keeping.run(publish.clone()));
    Keeper {
        role: rx,
        publish,
        task: Some(task),
        release: Some(release),
    }
}

/// What the takeover rule reads of a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    /// `None` when the lease names no holder (released, or never held).
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    resource_version: Option<String>,
    /// `leaseDurationSeconds`, when positive.
    duration: Option<Duration>,
}

impl Record {
    fn of(lease: &Lease) -> Record {
        let spec = lease.spec.as_ref();
        Record {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renew_time: spec.and_then(|s| s.renew_time.clone()),
            resource_version: lease.metadata.resource_version.clone(),
            duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map(Duration::from_secs),
        }
    }
}

/// The record last seen to change, and when, by this process's clock.
#[derive(Debug, Clone)]
struct Observed {
    record: Record,
    since: Instant,
}

/// What to do with a lease just read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// This holder holds it: renew.
    Renew,
    /// No one holds it (released, or never held): take it.
    Take,
    /// Its holder has not renewed it for its duration, by this clock: take it over.
    TakeOver { from: String },
    /// Another holder holds it: observe.
    Held { holder: String },
}

/// The takeover rule (client-go's leader election): `record`, read at `now` by holder `me`,
/// against what was observed `last`. A record unchanged for its duration (`default` when it
/// names none) since this clock first saw it is taken over; the clocks of other machines (the
/// renew time's value) are never compared with this one.
fn judge(
    me: &str,
    last: Option<Observed>,
    record: Record,
    now: Instant,
    default: Duration,
) -> (Verdict, Observed) {
    let since = match last {
        Some(o) if o.record == record => o.since,
        _ => now,
    };
    let verdict = match &record.holder {
        None => Verdict::Take,
        Some(h) if h == me => Verdict::Renew,
        Some(h) if now.saturating_duration_since(since) >= record.duration.unwrap_or(default) => {
            Verdict::TakeOver { from: h.clone() }
        }
        Some(h) => Verdict::Held { holder: h.clone() },
    };
    (verdict, Observed { record, since })
}

/// Now, as a lease's times are written.
fn now_micro() -> MicroTime {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_micros()).ok())
        .and_then(|us| k8s_openapi::jiff::Timestamp::from_microsecond(us).ok());
    MicroTime(micros.unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
}

/// `d` in whole seconds, rounded up, at least 1: a lease's `leaseDurationSeconds`.
fn whole_seconds(d: Duration) -> i32 {
    let secs = d.as_millis().div_ceil(1000).max(1);
    i32::try_from(secs).unwrap_or(i32::MAX)
}

/// How the API answered one call, as the keeper reads it.
#[derive(Debug)]
enum Answer<T> {
    Done(T),
    /// 404 `NotFound`: the object (or, on a create, its namespace) is not there.
    Absent,
    /// 409: a create of a name taken, or a replace of a version moved on.
    Conflict,
    /// No Lease resource here (another 404: the group is not served) or 403: write without.
    Unserved(String),
    /// Anything else: an API error, a refused write, no answer in time.
    Failed(String),
}

fn answer_of<T>(what: &str, result: kube::Result<T>) -> Answer<T> {
    match result {
        Ok(v) => Answer::Done(v),
        Err(kube::Error::Api(s)) if s.code == 404 && s.reason == "NotFound" => Answer::Absent,
        Err(kube::Error::Api(s)) if s.code == 404 => Answer::Unserved(format!(
            "{what}: the API serves no coordination.k8s.io/v1 Lease (404: {})",
            s.message
        )),
        Err(kube::Error::Api(s)) if s.code == 403 => Answer::Unserved(format!(
            "{what}: this scaler may not use Leases (403: {}); grant get, create and update on \
             leases in its namespace",
            s.message
        )),
        Err(kube::Error::Api(s)) if s.code == 409 => Answer::Conflict,
        Err(e) => Answer::Failed(format!("{what}: {e}")),
    }
}

/// `call`, given up after `limit` (kube sets no read timeout).
async fn bounded<T>(
    limit: Duration,
    what: &str,
    call: impl Future<Output = kube::Result<T>>,
) -> Answer<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => answer_of(what, result),
        Err(_) => Answer::Failed(format!("{what}: no answer within {limit:?}")),
    }
}

/// What one turn concluded.
#[derive(Debug)]
enum Turn {
    /// A role; for [`Role::Writer`], when the write that made it began.
    Role(Role, Instant),
    Unserved(String),
    Failed(String),
}

/// The keeper task's state between turns.
struct Keeping {
    api: Api<Lease>,
    name: String,
    holder: String,
    annotations: BTreeMap<String, String>,
    settings: LeaseSettings,
    observed: Option<Observed>,
}

impl Keeping {
    /// Reads the lease every `renew` and publishes the role it concludes, until aborted.
    async fn run(mut self, publish: Arc<watch::Sender<Role>>) {
        let (name, holder) = (self.name.clone(), self.holder.clone());
        // A writer that cannot renew stops writing this long after its last renewal began; an
        // observer that cannot read stops knowing who writes.
        let margin = self.settings.duration.saturating_sub(self.settings.renew);
        let renew = self.settings.renew;
        let mut deadline: Option<Instant> = None;
        let mut failing: Option<String> = None;
        let mut warned_unserved = false;
        // Whether the API ever answered a Lease request, and how many turns failed before it
        // did: an API that never does (a stand-in without the group, a proxy that drops it) is
        // one without Leases, after `NEVER_ANSWERED` turns.
        let mut answered = false;
        let mut failed_unanswered = 0;
        loop {
            let turn = watched(self.turn(), &mut deadline, || {
                set(&publish, lapsed(margin, &failing), &name, &holder);
            })
            .await;
            let turn = match turn {
                Turn::Failed(why) if !answered => {
                    failed_unanswered += 1;
                    if failed_unanswered >= NEVER_ANSWERED {
                        Turn::Unserved(format!("the API never answered a Lease request: {why}"))
                    } else {
                        Turn::Failed(why)
                    }
                }
                Turn::Failed(why) => Turn::Failed(why),
                other => {
                    answered = !matches!(other, Turn::Unserved(_)) || answered;
                    other
                }
            };
            match turn {
                Turn::Role(role, at) => {
                    if failing.take().is_some() {
                        tracing::info!(lease = %name, holder = %holder,
                            "serve mode: the lease answers again");
                    }
                    deadline = Some(at + margin);
                    set(&publish, role, &name, &holder);
                }
                Turn::Unserved(why) => {
                    failing = None;
                    deadline = None;
                    if !warned_unserved {
                        warned_unserved = true;
                        tracing::warn!(lease = %name, holder = %holder, reason = %why,
                            "serve mode: no lease to decide the Service's one writer; writing \
                             without one");
                    }
                    set(&publish, Role::Uncoordinated(why), &name, &holder);
                }
                Turn::Failed(why) => {
                    if failing.is_none() {
                        tracing::warn!(lease = %name, holder = %holder, error = %why,
                            "serve mode: cannot keep the lease");
                    } else {
                        tracing::debug!(lease = %name, holder = %holder, error = %why,
                            "serve mode: cannot keep the lease, still");
                    }
                    failing = Some(why);
                }
            }
            watched(tokio::time::sleep(renew), &mut deadline, || {
                set(&publish, lapsed(margin, &failing), &name, &holder);
            })
            .await;
        }
    }

    /// One read of the lease, and the write it calls for: create, renew or take over. A
    /// conflict (someone else wrote first) is read again at once, once.
    async fn turn(&mut self) -> Turn {
        let limit = self.settings.renew;
        for _ in 0..2 {
            let read = bounded(limit, "reading the lease", self.api.get(&self.name)).await;
            let lease = match read {
                Answer::Done(lease) => lease,
                Answer::Absent => {
                    let at = Instant::now();
                    let fresh = self.fresh();
                    let pp = PostParams::default();
                    match bounded(limit, "creating the lease", self.api.create(&pp, &fresh)).await {
                        Answer::Done(_) => return Turn::Role(Role::Writer, at),
                        Answer::Conflict => continue,
                        Answer::Absent => {
                            return Turn::Unserved(format!(
                                "creating the lease: no namespace {}",
                                self.settings.namespace
                            ))
                        }
                        Answer::Unserved(why) => return Turn::Unserved(why),
                        Answer::Failed(why) => return Turn::Failed(why),
                    }
                }
                Answer::Conflict => return Turn::Failed("reading the lease: 409".to_owned()),
                Answer::Unserved(why) => return Turn::Unserved(why),
                Answer::Failed(why) => return Turn::Failed(why),
            };
            let at = Instant::now();
            let (verdict, observed) = judge(
                &self.holder,
                self.observed.take(),
                Record::of(&lease),
                at,
                self.settings.duration,
            );
            self.observed = Some(observed);
            let (what, next) = match verdict {
                Verdict::Held { holder } => return Turn::Role(Role::Observer { holder }, at),
                Verdict::Renew => ("renewing the lease", self.renewed(lease)),
                Verdict::Take => ("taking the released lease", self.taken(lease)),
                Verdict::TakeOver { from } => {
                    tracing::info!(lease = %self.name, holder = %self.holder, from = %from,
                        "serve mode: the lease went unrenewed for its duration; taking it over");
                    ("taking the lease over", self.taken(lease))
                }
            };
            let pp = PostParams::default();
            match bounded(limit, what, self.api.replace(&self.name, &pp, &next)).await {
                Answer::Done(_) => return Turn::Role(Role::Writer, at),
                // Changed or deleted under this holder: read it again.
                Answer::Conflict | Answer::Absent => continue,
                Answer::Unserved(why) => return Turn::Unserved(why),
                Answer::Failed(why) => return Turn::Failed(why),
            }
        }
        Turn::Failed("the lease changed under this keeper twice in a row".to_owned())
    }

    fn duration_seconds(&self) -> i32 {
        whole_seconds(self.settings.duration)
    }

    /// A new lease, held by this holder.
    fn fresh(&self) -> Lease {
        let now = now_micro();
        let mut lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.settings.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.holder.clone()),
                lease_duration_seconds: Some(self.duration_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        self.mark(&mut lease);
        lease
    }

    /// `lease` (held by this holder) renewed now.
    fn renewed(&self, mut lease: Lease) -> Lease {
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.holder.clone());
        spec.lease_duration_seconds = Some(self.duration_seconds());
        spec.renew_time = Some(now_micro());
        self.mark(&mut lease);
        lease
    }

    /// `lease` (released, or unrenewed for its duration) taken by this holder: one transition
    /// more.
    fn taken(&self, mut lease: Lease) -> Lease {
        let now = now_micro();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.holder.clone());
        spec.lease_duration_seconds = Some(self.duration_seconds());
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        self.mark(&mut lease);
        lease
    }

    /// This holder's annotations and infscale's label on `lease`.
    fn mark(&self, lease: &mut Lease) {
        let meta = &mut lease.metadata;
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned());
        if !self.annotations.is_empty() {
            let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
            annotations.extend(self.annotations.clone());
        }
    }
}

/// The role once the lease has gone unconfirmed for `margin`, `failing` the last failure.
fn lapsed(margin: Duration, failing: &Option<String>) -> Role {
    let why = failing.as_deref().unwrap_or("no answer yet");
    Role::Unknown(format!("the lease not confirmed for {margin:?}: {why}"))
}

/// `work`, calling `expired` once if `deadline` passes first (and then clearing it).
async fn watched<T>(
    work: impl Future<Output = T>,
    deadline: &mut Option<Instant>,
    mut expired: impl FnMut(),
) -> T {
    tokio::pin!(work);
    loop {
        let Some(at) = *deadline else {
            return work.await;
        };
        tokio::select! {
            done = &mut work => return done,
            () = tokio::time::sleep_until(at) => {
                *deadline = None;
                expired();
            }
        }
    }
}

/// Publishes `role` if it is a new one, and says so.
fn set(publish: &watch::Sender<Role>, role: Role, name: &str, holder: &str) {
    let changed = publish.send_if_modified(|now| {
        if now.same(&role) {
            return false;
        }
        *now = role.clone();
        true
    });
    if !changed {
        return;
    }
    match role {
        Role::Writer => tracing::info!(lease = %name, holder = %holder,
            "serve mode: this trigger holds the lease and writes the Service's slice"),
        Role::Observer { holder: by } => tracing::info!(lease = %name, holder = %holder,
            writer = %by, "serve mode: another trigger holds the lease; observing"),
        Role::Unknown(why) => tracing::warn!(lease = %name, holder = %holder, reason = %why,
            "serve mode: who holds the lease is not known; not writing"),
        Role::Uncoordinated(why) => tracing::debug!(lease = %name, holder = %holder,
            reason = %why, "serve mode: writing without a lease"),
    }
}

/// A dropped keeper's last act: clearing the holder of the lease if it still names this one.
struct Release {
    api: Api<Lease>,
    name: String,
    holder: String,
}

impl Release {
    async fn run(self) {
        let (name, holder) = (self.name.clone(), self.holder.clone());
        match tokio::time::timeout(RELEASE_WITHIN, self.release()).await {
            Ok(Ok(true)) => {
                tracing::info!(lease = %name, holder = %holder, "serve mode: the lease released");
            }
            Ok(Ok(false)) => {}
            Ok(Err(why)) => tracing::warn!(lease = %name, holder = %holder, error = %why,
                "serve mode: could not release the lease; it expires unrenewed"),
            Err(_) => tracing::warn!(lease = %name, holder = %holder, within = ?RELEASE_WITHIN,
                "serve mode: could not release the lease in time; it expires unrenewed"),
        }
    }

    /// Whether a lease held by this holder was released. A conflict (a renewal of the keeper
    /// just stopped landing first) is read again.
    async fn release(&self) -> Result<bool, String> {
        for _ in 0..3 {
            let mut lease = match answer_of("reading the lease", self.api.get(&self.name).await) {
                Answer::Done(lease) => lease,
                Answer::Absent | Answer::Unserved(_) => return Ok(false),
                Answer::Conflict => return Err("reading the lease: 409".to_owned()),
                Answer::Failed(why) => return Err(why),
            };
            if Record::of(&lease).holder.as_deref() != Some(self.holder.as_str()) {
                return Ok(false);
            }
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = None;
            spec.renew_time = Some(now_micro());
            let pp = PostParams::default();
            match answer_of(
                "releasing the lease",
                self.api.replace(&self.name, &pp, &lease).await,
            ) {
                Answer::Done(_) => return Ok(true),
                Answer::Conflict => continue,
                Answer::Absent | Answer::Unserved(_) => return Ok(false),
                Answer::Failed(why) => return Err(why),
            }
        }
        Err("the lease kept changing".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    const D: Duration = Duration::from_secs(15);

    fn record(holder: Option<&str>, rv: &str) -> Record {
        Record {
            holder: holder.map(str::to_owned),
            renew_time: None,
            resource_version: Some(rv.to_owned()),
            duration: None,
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_lease_is_named_by_the_services_namespace_and_name() {
        assert_eq!(lease_name("llm", "chat"), "infscale-path.llm.chat");
        assert_eq!(
            identity_of("serve-7d9f-x2", "llm", "chat", "queue"),
            "serve-7d9f-x2/llm/chat/queue"
        );
    }

    #[test]
    fn my_lease_is_renewed_and_a_released_one_taken_at_once() {
        let t0 = Instant::now();
        let (v, _) = judge("me", None, record(Some("me"), "1"), t0, D);
        assert_eq!(v, Verdict::Renew);
        let (v, _) = judge("me", None, record(None, "1"), t0, D);
        assert_eq!(v, Verdict::Take);
        let empty = Record {
            holder: Record::of(&Lease {
                spec: Some(LeaseSpec {
                    holder_identity: Some(String::new()),
                    ..LeaseSpec::default()
                }),
                ..Lease::default()
            })
            .holder,
            ..record(None, "1")
        };
        assert_eq!(judge("me", None, empty, t0, D).0, Verdict::Take);
    }

    #[test]
    fn anothers_lease_is_taken_over_only_once_unchanged_for_its_duration_by_this_clock() {
        let t0 = Instant::now();
        let held = Verdict::Held {
            holder: "them".into(),
        };
        // First seen at t0: the clock starts there, whatever its renew time says.
        let (v, o) = judge("me", None, record(Some("them"), "1"), t0, D);
        assert_eq!(v, held);
        let (v, o) = judge("me", Some(o), record(Some("them"), "1"), t0 + secs(14), D);
        assert_eq!(v, held);
        assert_eq!(o.since, t0);
        // A renewal (a new version) starts the clock again.
        let (v, o) = judge("me", Some(o), record(Some("them"), "2"), t0 + secs(14), D);
        assert_eq!(v, held);
        assert_eq!(o.since, t0 + secs(14));
        let (v, o) = judge("me", Some(o), record(Some("them"), "2"), t0 + secs(28), D);
        assert_eq!(v, held);
        let (v, _) = judge("me", Some(o), record(Some("them"), "2"), t0 + secs(29), D);
        assert_eq!(
            v,
            Verdict::TakeOver {
                from: "them".into()
            }
        );
    }

    #[test]
    fn the_records_own_duration_rules_over_the_default() {
        let t0 = Instant::now();
        let short = Record {
            duration: Some(secs(2)),
            ..record(Some("them"), "1")
        };
        let (_, o) = judge("me", None, short.clone(), t0, D);
        let (v, _) = judge("me", Some(o), short, t0 + secs(2), D);
        assert_eq!(
            v,
            Verdict::TakeOver {
                from: "them".into()
            }
        );
    }

    #[test]
    fn a_new_holder_or_renew_time_is_a_change_too() {
        let t0 = Instant::now();
        let (_, o) = judge("me", None, record(Some("a"), "1"), t0, D);
        let (v, o) = judge("me", Some(o), record(Some("b"), "1"), t0 + secs(20), D);
        assert_eq!(v, Verdict::Held { holder: "b".into() });
        assert_eq!(o.since, t0 + secs(20));
        let renewed = Record {
            renew_time: Some(now_micro()),
            ..record(Some("b"), "1")
        };
        let (v, o) = judge("me", Some(o), renewed, t0 + secs(40), D);
        assert_eq!(v, Verdict::Held { holder: "b".into() });
        assert_eq!(o.since, t0 + secs(40));
    }

    #[test]
    fn durations_are_whole_seconds_rounded_up() {
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(secs(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(whole_seconds(secs(15)), 15);
        assert_eq!(whole_seconds(Duration::MAX), i32::MAX);
    }

    fn api_error(code: u16, reason: &str) -> kube::Result<()> {
        Err(kube::Error::Api(
            Status::failure("m", reason).with_code(code).boxed(),
        ))
    }

    #[test]
    fn a_missing_group_or_a_refusal_is_unserved_a_missing_object_absent() {
        assert!(matches!(
            answer_of("x", api_error(404, "NotFound")),
            Answer::Absent
        ));
        // What kube makes of a plain-text 404: the API serves no such group.
        assert!(matches!(
            answer_of("x", api_error(404, "Failed to parse error data")),
            Answer::Unserved(_)
        ));
        assert!(matches!(
            answer_of("x", api_error(403, "Forbidden")),
            Answer::Unserved(_)
        ));
        assert!(matches!(
            answer_of("x", api_error(409, "AlreadyExists")),
            Answer::Conflict
        ));
        assert!(matches!(
            answer_of("x", api_error(409, "Conflict")),
            Answer::Conflict
        ));
        assert!(matches!(
            answer_of("x", api_error(500, "InternalError")),
            Answer::Failed(_)
        ));
    }

    #[test]
    fn a_new_reason_is_no_new_role() {
        assert!(Role::Unknown("a".into()).same(&Role::Unknown("b".into())));
        assert!(!Role::Writer.same(&Role::Unknown("b".into())));
        assert!(!Role::Observer { holder: "a".into() }.same(&Role::Observer { holder: "b".into() }));
        assert!(Role::Writer.writes() && Role::Uncoordinated("x".into()).writes());
        assert!(!Role::Unknown("x".into()).writes());
        assert!(!Role::Observer { holder: "a".into() }.writes());
    }

    fn keeping(annotations: &[(&str, &str)]) -> Option<Keeping> {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().ok()?)).ok()?;
        Some(Keeping {
            api: Api::namespaced(client, "infscale"),
            name: lease_name("llm", "chat"),
            holder: "me".into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            settings: LeaseSettings {
                namespace: "infscale".into(),
                duration: Duration::from_millis(1500),
                renew: Duration::from_millis(500),
                pod: "serve-0".into(),
            },
            observed: None,
        })
    }

    #[tokio::test]
    async fn a_fresh_lease_names_me_and_a_taken_one_counts_a_transition() {
        let k = keeping(&[("infscale.io/scaled-object", "llm/chat")]).unwrap();
        let fresh = k.fresh();
        let spec = fresh.spec.clone().unwrap();
        assert_eq!(
            fresh.metadata.name.as_deref(),
            Some("infscale-path.llm.chat")
        );
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_duration_seconds, Some(2));
        assert_eq!(spec.lease_transitions, Some(0));
        assert!(spec.acquire_time.is_some() && spec.renew_time == spec.acquire_time);
        let labels = fresh.metadata.labels.clone().unwrap();
        assert_eq!(labels["app.kubernetes.io/managed-by"], "infscale");
        let annotations = fresh.metadata.annotations.clone().unwrap();
        assert_eq!(annotations["infscale.io/scaled-object"], "llm/chat");

        let mut theirs = fresh.clone();
        let s = theirs.spec.as_mut().unwrap();
        s.holder_identity = Some("them".into());
        s.lease_transitions = Some(3);
        theirs.metadata.resource_version = Some("7".into());
        let taken = k.taken(theirs);
        let s = taken.spec.unwrap();
        assert_eq!(s.holder_identity.as_deref(), Some("me"));
        assert_eq!(s.lease_transitions, Some(4));
        // The version read goes back with the write: it fails if the lease moved on.
        assert_eq!(taken.metadata.resource_version.as_deref(), Some("7"));

        let renewed = k.renewed(fresh);
        assert_eq!(renewed.spec.unwrap().lease_transitions, Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_passed_deadline_is_called_once_while_the_work_goes_on() {
        let t0 = Instant::now();
        let mut deadline = Some(t0 + secs(1));
        let mut expired = 0;
        let done = watched(
            async {
                tokio::time::sleep(secs(3)).await;
                7
            },
            &mut deadline,
            || expired += 1,
        )
        .await;
        assert_eq!((done, expired, deadline), (7, 1, None));
        assert_eq!(Instant::now(), t0 + secs(3));
        // Without a deadline, the work alone.
        let done = watched(async { 8 }, &mut deadline, || expired += 1).await;
        assert_eq!((done, expired), (8, 1));
    }
}
