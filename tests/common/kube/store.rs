//! The objects a Kubernetes API stand-in serves: every kind in one store, each change numbered
//! by a resource version and kept as a watch event, so lists and watches see one history.
//! Creates and replaces check what the API server checks: a create of a name taken is refused,
//! and so is a replace of a missing object or one whose resource version has moved on.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Where an object lives: `base` is `/api/v1` or `/apis/GROUP/VERSION`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub base: String,
    pub ns: String,
    pub resource: String,
    pub name: String,
}

/// `(base, resource)` of the kinds the stand-in knows.
pub fn kind_home(kind: &str) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        "Pod" => ("/api/v1", "pods"),
        "Service" => ("/api/v1", "services"),
        "Deployment" => ("/apis/apps/v1", "deployments"),
        "EndpointSlice" => ("/apis/discovery.k8s.io/v1", "endpointslices"),
        "Lease" => ("/apis/coordination.k8s.io/v1", "leases"),
        _ => return None,
    })
}

/// Every kind the stand-in knows.
const KINDS: [&str; 5] = ["Pod", "Service", "Deployment", "EndpointSlice", "Lease"];

/// The kind stored at `(base, resource)`: [`kind_home`] read backwards.
pub fn kind_at(base: &str, resource: &str) -> Option<&'static str> {
    KINDS
        .into_iter()
        .find(|k| kind_home(k) == Some((base, resource)))
}

/// Why a create or a replace was refused, as the API server says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A create of a name taken (409 `AlreadyExists`).
    AlreadyExists,
    /// A replace of an object that is not there (404 `NotFound`).
    NotFound,
    /// A replace whose resource version is not the stored one (409 `Conflict`).
    Conflict { stored: String, sent: String },
}

impl Key {
    /// The key of `object`, from its kind, namespace (`llm` when none) and name.
    pub fn of(object: &serde_json::Value) -> Key {
        let kind = object["kind"].as_str().unwrap_or_default();
        let (base, resource) = kind_home(kind).unwrap_or_else(|| panic!("unknown kind {kind}"));
        Key {
            base: base.to_owned(),
            ns: object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("llm")
                .to_owned(),
            resource: resource.to_owned(),
            name: object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

/// One change: its resource version, `ADDED`/`MODIFIED`/`DELETED`, where and what.
pub type Event = (u64, &'static str, Key, serde_json::Value);

#[derive(Default)]
pub struct State {
    pub rv: u64,
    pub objects: BTreeMap<Key, serde_json::Value>,
    pub events: Vec<Event>,
    /// Every write is answered 500 (an API server that cannot write: etcd down).
    pub refuse_writes: bool,
    /// Lists wait unanswered (an API server slow to list), until released.
    pub hold_lists: bool,
    /// Every request under `/apis/coordination.k8s.io/` is answered 404 (an API server that
    /// does not serve the group).
    pub no_leases: bool,
    /// Every write of an EndpointSlice is answered 403 (RBAC without the grant).
    pub forbid_slice_writes: bool,
}

/// Now, in RFC 3339 to the second, as the API server stamps `creationTimestamp`.
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

impl State {
    /// Creates or replaces `object`, stamping its resource version (and a uid if it has none).
    pub fn put(&mut self, mut object: serde_json::Value) -> serde_json::Value {
        let key = Key::of(&object);
        self.rv += 1;
        object["metadata"]["namespace"] = serde_json::json!(key.ns);
        object["metadata"]["resourceVersion"] = serde_json::json!(self.rv.to_string());
        if object["metadata"]["uid"].is_null() {
            object["metadata"]["uid"] = serde_json::json!(format!("uid-{}", key.name));
        }
        let kind = if self.objects.contains_key(&key) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        self.objects.insert(key.clone(), object.clone());
        self.events.push((self.rv, kind, key, object.clone()));
        object
    }

    /// Creates `object` (a `creationTimestamp` stamped if it has none), unless one with its key
    /// is stored.
    pub fn create(&mut self, mut object: serde_json::Value) -> Result<serde_json::Value, Refused> {
        if self.objects.contains_key(&Key::of(&object)) {
            return Err(Refused::AlreadyExists);
        }
        if object["metadata"]["creationTimestamp"].is_null() {
            object["metadata"]["creationTimestamp"] = serde_json::json!(now_rfc3339());
        }
        Ok(self.put(object))
    }

    /// Replaces the stored object with `object`'s key by `object`, as an update does: refused
    /// when none is stored, or when `object` carries a resource version that is not the stored
    /// one (optimistic concurrency); uid and `creationTimestamp` are kept from the stored one.
    pub fn replace(&mut self, mut object: serde_json::Value) -> Result<serde_json::Value, Refused> {
        let Some(stored) = self.objects.get(&Key::of(&object)) else {
            return Err(Refused::NotFound);
        };
        let at = &stored["metadata"]["resourceVersion"];
        let sent = &object["metadata"]["resourceVersion"];
        if !sent.is_null() && sent != at {
            return Err(Refused::Conflict {
                stored: at.as_str().unwrap_or_default().to_owned(),
                sent: sent
                    .as_str()
                    .map_or_else(|| sent.to_string(), str::to_owned),
            });
        }
        for kept in ["uid", "creationTimestamp"] {
            if !stored["metadata"][kept].is_null() {
                object["metadata"][kept] = stored["metadata"][kept].clone();
            }
        }
        Ok(self.put(object))
    }

    /// Removes the object at `key`; false when there was none.
    pub fn delete(&mut self, key: &Key) -> bool {
        let Some(mut gone) = self.objects.remove(key) else {
            return false;
        };
        self.rv += 1;
        gone["metadata"]["resourceVersion"] = serde_json::json!(self.rv.to_string());
        self.events.push((self.rv, "DELETED", key.clone(), gone));
        true
    }
}

/// The store, shared by the API server's threads and the test.
#[derive(Clone, Default)]
pub struct Cluster(pub(super) Arc<(Mutex<State>, Condvar)>);

impl Cluster {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.0 .0.lock().unwrap()
    }

    /// Waits up to `d` for a change after resource version `rv`.
    pub(super) fn wait_past<'a>(
        &'a self,
        s: MutexGuard<'a, State>,
        rv: u64,
        d: Duration,
    ) -> MutexGuard<'a, State> {
        if s.rv > rv {
            return s;
        }
        self.0 .1.wait_timeout(s, d).unwrap().0
    }

    /// Creates or replaces an object (by its kind, namespace and name); returns it as stored.
    pub fn put(&self, object: serde_json::Value) -> serde_json::Value {
        let stored = self.state().put(object);
        self.0 .1.notify_all();
        stored
    }

    /// Deletes `kind`/`name` in namespace `ns`; false when there was none.
    pub fn delete(&self, kind: &str, ns: &str, name: &str) -> bool {
        let (base, resource) = kind_home(kind).unwrap_or_else(|| panic!("unknown kind {kind}"));
        let key = Key {
            base: base.into(),
            ns: ns.into(),
            resource: resource.into(),
            name: name.into(),
        };
        let gone = self.state().delete(&key);
        self.0 .1.notify_all();
        gone
    }

    /// The object `kind`/`name` in namespace `ns`.
    pub fn get(&self, kind: &str, ns: &str, name: &str) -> Option<serde_json::Value> {
        let (base, resource) = kind_home(kind)?;
        let key = Key {
            base: base.into(),
            ns: ns.into(),
            resource: resource.into(),
            name: name.into(),
        };
        self.state().objects.get(&key).cloned()
    }

    /// Every version the object `kind`/`name` in namespace `ns` was stored as, oldest first:
    /// what a test reads when a version may not last long enough to be polled.
    pub fn history(&self, kind: &str, ns: &str, name: &str) -> Vec<serde_json::Value> {
        let Some((base, resource)) = kind_home(kind) else {
            return Vec::new();
        };
        self.state()
            .events
            .iter()
            .filter(|(_, change, k, _)| {
                *change != "DELETED"
                    && k.base == base
                    && k.resource == resource
                    && k.ns == ns
                    && k.name == name
            })
            .map(|(_, _, _, v)| v.clone())
            .collect()
    }

    /// Changes the object `kind`/`name` in `ns` in place (a new resource version); false when
    /// there is none.
    pub fn edit(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        change: impl FnOnce(&mut serde_json::Value),
    ) -> bool {
        let Some(mut object) = self.get(kind, ns, name) else {
            return false;
        };
        change(&mut object);
        self.put(object);
        true
    }

    /// Every object of `kind`, in every namespace.
    pub fn all(&self, kind: &str) -> Vec<serde_json::Value> {
        let Some((base, resource)) = kind_home(kind) else {
            return Vec::new();
        };
        self.state()
            .objects
            .iter()
            .filter(|(k, _)| k.base == base && k.resource == resource)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// From now on the API answers every write 500 (an API server that cannot write: etcd
    /// down), or again writes.
    pub fn refuse_writes(&self, refuse: bool) {
        self.state().refuse_writes = refuse;
    }

    /// From now on every EndpointSlice write is answered 403 Forbidden, or served again.
    pub fn forbid_slice_writes(&self, forbid: bool) {
        self.state().forbid_slice_writes = forbid;
    }

    /// From now on the API answers 404 to everything under `/apis/coordination.k8s.io/` (as an
    /// API server without the group does: a plain-text 404, no Status), or serves leases again.
    pub fn no_leases(&self, missing: bool) {
        self.state().no_leases = missing;
    }

    /// The Lease `name` in namespace `ns`.
    pub fn lease(&self, ns: &str, name: &str) -> Option<serde_json::Value> {
        self.get("Lease", ns, name)
    }

    /// From now on every list waits unanswered (for up to 60 s), or lists are answered again:
    /// a test can tell what the code does before any list has been answered.
    pub fn hold_lists(&self, hold: bool) {
        self.state().hold_lists = hold;
        self.0 .1.notify_all();
    }
}
