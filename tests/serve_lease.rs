//! Serve mode's one writer per Service, end to end against the Kubernetes API stand-in: two
//! lease keepers on one Service's Lease agree on one writer and keep to it; a keeper dropped
//! releases the lease and the other takes it at once; a keeper that crashed is taken over only
//! once its lease went unrenewed for its duration; a writer that cannot renew stops calling
//! itself one; and without the Lease API each trigger writes uncoordinated, as before leases.

mod common;

use common::kube::{Cluster, Kube};
use infscale::serve::lease::{self, Keeper, LeaseSettings, Role};
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long anything awaited may take: generous, the tests pass in a few seconds.
const WAIT: Duration = Duration::from_secs(10);

const NS: &str = "infscale";
const A: &str = "serve-a/llm/chat/queue";
const B: &str = "serve-b/llm/chat/queue";

fn name() -> String {
    lease::lease_name("llm", "chat")
}

fn settings(duration: Duration) -> LeaseSettings {
    LeaseSettings {
        namespace: NS.to_owned(),
        duration,
        renew: Duration::from_millis(200),
        pod: "serve-0".to_owned(),
    }
}

async fn client(kube: &Kube) -> kube::Client {
    let uri: http::Uri = kube.url().parse().unwrap();
    kube::Client::try_from(kube::Config::new(uri)).unwrap()
}

async fn keeper(kube: &Kube, holder: &str, duration: Duration) -> Keeper {
    let annotations = BTreeMap::from([("infscale.io/trigger".to_owned(), holder.to_owned())]);
    lease::keep(
        client(kube).await,
        settings(duration),
        name(),
        holder.to_owned(),
        annotations,
    )
}

fn role(k: &Keeper) -> Role {
    k.role.borrow().clone()
}

/// Waits up to [`WAIT`] for `done`, polling.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < end, "{what}: not within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every role `k` publishes from now on, in order.
fn roles_seen(k: &Keeper) -> Arc<Mutex<Vec<Role>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (mut rx, log) = (k.role.clone(), seen.clone());
    tokio::spawn(async move {
        log.lock().unwrap().push(rx.borrow_and_update().clone());
        while rx.changed().await.is_ok() {
            log.lock().unwrap().push(rx.borrow_and_update().clone());
        }
    });
    seen
}

/// Which of `a` and `b` writes, once one does and the other observes it: (writer, observer).
async fn settled(a: Keeper, b: Keeper) -> (Keeper, Keeper) {
    eventually("one writer, one observer of it", || {
        matches!((role(&a), role(&b)),
            (Role::Writer, Role::Observer { holder }) if holder == A)
            || matches!((role(&a), role(&b)),
            (Role::Observer { holder }, Role::Writer) if holder == B)
    })
    .await;
    if role(&a) == Role::Writer {
        (a, b)
    } else {
        (b, a)
    }
}

/// The holder an observer names.
fn observed_holder(k: &Keeper) -> String {
    match role(k) {
        Role::Observer { holder } => holder,
        other => panic!("not an observer: {other:?}"),
    }
}

fn holder_of(lease: &serde_json::Value) -> &str {
    lease["spec"]["holderIdentity"].as_str().unwrap_or("")
}

fn transitions(lease: &serde_json::Value) -> u64 {
    lease["spec"]["leaseTransitions"].as_u64().unwrap_or(0)
}

/// A lease version's renew (or acquire) time, in microseconds since the epoch.
fn micros(lease: &serde_json::Value, field: &str) -> i64 {
    let lease: Lease = serde_json::from_value(lease.clone()).unwrap();
    let spec = lease.spec.unwrap();
    let time = match field {
        "acquireTime" => spec.acquire_time,
        _ => spec.renew_time,
    };
    time.unwrap().0.as_microsecond()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_keepers_agree_on_one_writer_and_keep_to_it() {
    let kube = Kube::serve(Cluster::default());
    let a = keeper(&kube, A, Duration::from_secs(2)).await;
    let b = keeper(&kube, B, Duration::from_secs(2)).await;
    let (seen_a, seen_b) = (roles_seen(&a), roles_seen(&b));
    let (w, o) = settled(a, b).await;
    let writer = observed_holder(&o);
    // Over a few seconds (many renewals, more than one lease duration), nothing moves.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(role(&w), Role::Writer);
    assert_eq!(observed_holder(&o), writer);
    let stored = kube.cluster.lease(NS, &name()).unwrap();
    assert_eq!(holder_of(&stored), writer);
    assert_eq!(transitions(&stored), 0, "{stored}");
    assert_eq!(
        stored["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "infscale"
    );
    assert_eq!(
        stored["metadata"]["annotations"]["infscale.io/trigger"],
        writer.as_str()
    );
    assert_eq!(stored["spec"]["leaseDurationSeconds"], 2);
    // Renewed all along: many versions, every one naming the writer.
    let versions = kube.cluster.history("Lease", NS, &name());
    assert!(versions.len() > 5, "{} versions", versions.len());
    assert!(versions.iter().all(|v| holder_of(v) == writer));
    // The writer became one once, the observer never: no flapping.
    let writer_turns = |seen: &Arc<Mutex<Vec<Role>>>| {
        let seen = seen.lock().unwrap();
        (
            seen.iter().filter(|r| **r == Role::Writer).count(),
            format!("{seen:?}"),
        )
    };
    let (a_turns, b_turns) = (writer_turns(&seen_a), writer_turns(&seen_b));
    let want = |holder: &str| usize::from(writer == holder);
    assert_eq!(a_turns.0, want(A), "{}", a_turns.1);
    assert_eq!(b_turns.0, want(B), "{}", b_turns.1);
    // The calls are those RBAC must grant on leases, and no more.
    let rbac: BTreeSet<(String, String, String)> =
        kube.lease_calls().iter().filter_map(|c| c.rbac()).collect();
    let grant = |verb: &str| {
        (
            "coordination.k8s.io".to_owned(),
            "leases".to_owned(),
            verb.to_owned(),
        )
    };
    assert_eq!(
        rbac,
        BTreeSet::from([grant("get"), grant("create"), grant("update")])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_writer_releases_the_lease_and_the_other_takes_it_at_once() {
    let kube = Kube::serve(Cluster::default());
    // A lease of 60 s: within the 10 s waited, only a release lets the other take it.
    let long = Duration::from_secs(60);
    let a = keeper(&kube, A, long).await;
    let b = keeper(&kube, B, long).await;
    let (writer, observer) = settled(a, b).await;
    let was = observed_holder(&observer);
    let next = if was == A { B } else { A };
    let before = kube.cluster.history("Lease", NS, &name()).len();
    drop(writer);
    eventually("the observer writes", || role(&observer) == Role::Writer).await;
    let versions = kube.cluster.history("Lease", NS, &name());
    // The release cleared the holder; the next version names the other, one transition on.
    let released = (before..versions.len())
        .find(|i| holder_of(&versions[*i]).is_empty())
        .unwrap_or_else(|| panic!("no release in {:?}", &versions[before..]));
    assert_eq!(holder_of(&versions[released - 1]), was);
    let taken = &versions[released + 1];
    assert_eq!(holder_of(taken), next);
    assert_eq!(transitions(taken), 1, "{taken}");
    assert_eq!(holder_of(&kube.cluster.lease(NS, &name()).unwrap()), next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_writer_is_taken_over_once_its_lease_went_unrenewed() {
    let kube = Kube::serve(Cluster::default());
    let duration = Duration::from_secs(1);
    let a = keeper(&kube, A, duration).await;
    let b = keeper(&kube, B, duration).await;
    let (writer, observer) = settled(a, b).await;
    let next = if observed_holder(&observer) == A {
        B
    } else {
        A
    };
    let before = transitions(&kube.cluster.lease(NS, &name()).unwrap());
    writer.abandon();
    eventually("the observer writes", || role(&observer) == Role::Writer).await;
    let versions = kube.cluster.history("Lease", NS, &name());
    let took = versions.iter().position(|v| holder_of(v) == next).unwrap();
    let (last, taken) = (&versions[took - 1], &versions[took]);
    // No release: the crashed writer's last renewal, then the other's takeover.
    assert_ne!(holder_of(last), "", "{last}");
    assert_ne!(holder_of(last), next);
    assert_eq!(transitions(taken), before + 1, "{taken}");
    // Taken only once unrenewed for the lease's duration (both stamped on this machine).
    let unrenewed = micros(taken, "acquireTime") - micros(last, "renewTime");
    assert!(
        unrenewed >= duration.as_micros() as i64,
        "taken over {unrenewed} µs after the last renewal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_cannot_renew_stops_writing_and_one_writes_again_once_it_can() {
    let kube = Kube::serve(Cluster::default());
    let duration = Duration::from_secs(1);
    let a = keeper(&kube, A, duration).await;
    let b = keeper(&kube, B, duration).await;
    let (writer, observer) = settled(a, b).await;
    kube.cluster.refuse_writes(true);
    eventually("the writer stops writing", || {
        matches!(role(&writer), Role::Unknown(_))
    })
    .await;
    // Neither may write: the observer cannot take the lease over either.
    assert!(!role(&writer).writes() && !role(&observer).writes());
    kube.cluster.refuse_writes(false);
    eventually("one writes again, the other observes it", || {
        matches!(
            (role(&writer), role(&observer)),
            (Role::Writer, Role::Observer { .. }) | (Role::Observer { .. }, Role::Writer)
        )
    })
    .await;
    let holder = holder_of(&kube.cluster.lease(NS, &name()).unwrap()).to_owned();
    let observing = match (role(&writer), role(&observer)) {
        (Role::Observer { holder }, _) | (_, Role::Observer { holder }) => holder,
        _ => unreachable!(),
    };
    assert_eq!(observing, holder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_lease_api_each_trigger_writes_uncoordinated_until_it_is_there() {
    let kube = Kube::serve(Cluster::default());
    kube.cluster.no_leases(true);
    let a = keeper(&kube, A, Duration::from_secs(1)).await;
    eventually("uncoordinated", || {
        matches!(role(&a), Role::Uncoordinated(_))
    })
    .await;
    assert!(role(&a).writes());
    assert!(kube.cluster.lease(NS, &name()).is_none());
    // The group served again (as an RBAC fix would be): the lease is kept, no restart.
    kube.cluster.no_leases(false);
    eventually("the writer", || role(&a) == Role::Writer).await;
    assert_eq!(holder_of(&kube.cluster.lease(NS, &name()).unwrap()), A);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_that_never_answers_a_lease_request_is_one_without_leases() {
    let kube = Kube::serve(Cluster::default());
    // Every write answered 500 from the start: no lease can ever be made.
    kube.cluster.refuse_writes(true);
    let a = keeper(&kube, A, Duration::from_secs(1)).await;
    eventually(
        "uncoordinated",
        || matches!(role(&a), Role::Uncoordinated(ref why) if why.contains("never answered")),
    )
    .await;
    // Once the API answers, the lease is kept.
    kube.cluster.refuse_writes(false);
    eventually("the writer", || role(&a) == Role::Writer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_in_creates_and_replaces_leases_as_the_api_server_does() {
    use kube::api::{Api, PostParams};
    let kube = Kube::serve(Cluster::default());
    let leases: Api<Lease> = Api::namespaced(client(&kube).await, NS);
    let pp = PostParams::default();
    let mut lease: Lease = serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}))
    .unwrap();
    let code = |r: kube::Result<Lease>| match r {
        Ok(_) => (200, String::new()),
        Err(kube::Error::Api(s)) => (s.code, s.reason),
        Err(e) => panic!("{e}"),
    };
    // A replace of what is not there; a create; a create of a name taken.
    assert_eq!(code(leases.replace("l", &pp, &lease).await).0, 404);
    let created = leases.create(&pp, &lease).await.unwrap();
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some(NS));
    assert_eq!(
        code(leases.create(&pp, &lease).await),
        (409, "AlreadyExists".into())
    );
    // A replace at the version read; then one at that version again, moved on since.
    lease.metadata.resource_version = created.metadata.resource_version.clone();
    let replaced = leases.replace("l", &pp, &lease).await.unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    assert_eq!(
        code(leases.replace("l", &pp, &lease).await),
        (409, "Conflict".into())
    );
    // No version sent: the last write wins. A name not the path's is refused.
    lease.metadata.resource_version = None;
    assert_eq!(code(leases.replace("l", &pp, &lease).await).0, 200);
    assert_eq!(code(leases.replace("m", &pp, &lease).await).0, 422);
    // Writes refused; the group missing (a plain-text 404, as an API server without it).
    kube.cluster.refuse_writes(true);
    assert_eq!(code(leases.create(&pp, &lease).await).0, 500);
    assert_eq!(code(leases.replace("l", &pp, &lease).await).0, 500);
    kube.cluster.refuse_writes(false);
    kube.cluster.no_leases(true);
    assert_eq!(
        code(leases.get("l").await),
        (404, "Failed to parse error data".into())
    );
    let rbac: BTreeSet<String> = kube
        .calls()
        .iter()
        .filter_map(|c| c.rbac())
        .map(|r| r.2)
        .collect();
    assert_eq!(
        rbac,
        BTreeSet::from(["create", "get", "update"].map(str::to_owned))
    );
}
