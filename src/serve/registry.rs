//! The scale targets KEDA asks about, each with its collector.
//!
//! A target is keyed by its namespace and the metadata that matters (two ScaledObjects with the
//! same trigger share one collector). The first call for a target starts its collector; every
//! call marks it used; a reaper stops collectors no call has asked about for a while. Calls only
//! ever read the latest published reading: nothing in a gRPC call waits on a scrape.
//!
//! How many are followed is bounded twice, so that one namespace cannot lock another out: at
//! most `max_targets_per_namespace` per namespace, and `max_targets` in all. A collector that
//! only `GetMetricSpec` asked for (KEDA reconciled a ScaledObject, which may be gone since) is
//! only a head start: it stops after `spec_only_stop` without a call, and gives way at once to a
//! target a reading call needs. A collector KEDA reads gives way only once no call has asked
//! about it for `evict_after`, the least recently asked first. A `GetMetricSpec` never makes
//! another give way: it starts a collector only where there is room.
//!
//! When the scaler is full of collectors KEDA reads, shares are fair between the namespaces
//! present: a namespace holding fewer than `max_targets / namespaces` (counting the asking one)
//! takes its room from the namespace holding the most, if that one holds more than the share,
//! whose least recently asked collector gives way. So 1,000 live triggers in 5 namespaces (200
//! each) leave a sixth room: the fair share is then 166, and each new namespace is given room
//! until every namespace present is within one of it. (Many namespaces mean small shares: each
//! namespace is created by a cluster admin, and a share of one still wakes a model.)

use super::collector::{self, Reading, Shared};
use super::limits::Limits;
use super::metadata::TargetSpec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// One registered target.
pub struct Target {
    pub spec: TargetSpec,
    pub reading: watch::Receiver<Reading>,
    /// When its collector started (a call in its first moments may wait for a first reading).
    pub started: tokio::time::Instant,
    /// Milliseconds since the registry's epoch at the last call.
    last_call_ms: AtomicU64,
    /// Whether a call other than `GetMetricSpec` has asked about it.
    read: AtomicBool,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Target {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a call wants of its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `GetMetricSpec`: answered from the metadata; a collector is only a head start.
    Spec,
    /// `IsActive`, `GetMetrics`, `StreamIsActive`: the collector's reading is the answer.
    Read,
}

/// Why a new target is not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    #[error(
        "namespace {namespace} has {max} triggers followed, the most one namespace may have \
         (--max-targets-per-namespace), and none has gone {idle:?} without a call"
    )]
    Namespace {
        namespace: String,
        max: usize,
        idle: Duration,
    },
    #[error(
        "{max} triggers are being followed, the most this scaler takes (--max-targets), and \
         none has gone {idle:?} without a call"
    )]
    Scaler { max: usize, idle: Duration },
}

/// Every target with a running collector.
pub struct Registry {
    targets: Mutex<HashMap<String, Arc<Target>>>,
    shared: Shared,
    /// The most targets followed at once, in all and per namespace.
    max: usize,
    per_namespace: usize,
    /// A target KEDA reads gives way to a new one after this long without a call.
    evict_after: Duration,
}

impl Registry {
    pub fn new(shared: Shared, limits: &Limits) -> Registry {
        Registry {
            targets: Mutex::new(HashMap::new()),
            shared,
            max: limits.max_targets.max(1),
            per_namespace: limits.max_targets_per_namespace.max(1),
            evict_after: limits.evict_after,
        }
    }

    fn now_ms(&self) -> u64 {
        self.shared.epoch.elapsed().as_millis() as u64
    }

    /// The target for `spec`, its collector started on first use (making room by the rules
    /// above), marked used now.
    pub fn target(&self, spec: TargetSpec, call: Call) -> Result<Arc<Target>, Full> {
        let now = self.now_ms();
        let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = targets.get(&spec.key) {
            t.last_call_ms.store(now, Ordering::Relaxed);
            if call == Call::Read {
                t.read.store(true, Ordering::Relaxed);
            }
            return Ok(t.clone());
        }
        let in_namespace = targets
            .values()
            .filter(|t| t.spec.namespace == spec.namespace)
            .count();
        if in_namespace >= self.per_namespace {
            let full = Full::Namespace {
                namespace: spec.namespace.clone(),
                max: self.per_namespace,
                idle: self.evict_after,
            };
            self.make_room(&mut targets, call, Some(&spec.namespace), now)
                .ok_or(full)?;
        } else if targets.len() >= self.max {
            let full = Full::Scaler {
                max: self.max,
                idle: self.evict_after,
            };
            self.make_room(&mut targets, call, None, now)
                .or_else(|| self.give_fair_share(&mut targets, call, &spec.namespace, now))
                .ok_or(full)?;
        }
        let (tx, rx) = watch::channel(Reading::Pending);
        tracing::info!(
            target_name = %spec.label(),
            trigger = %spec.trigger_id(),
            key = %spec.key.replace('\n', " "),
            "starting a collector"
        );
        let task = collector::spawn(self.shared.clone(), spec.clone(), tx);
        let target = Arc::new(Target {
            spec: spec.clone(),
            reading: rx,
            started: tokio::time::Instant::now(),
            last_call_ms: AtomicU64::new(now),
            read: AtomicBool::new(call == Call::Read),
            task,
        });
        targets.insert(spec.key, target.clone());
        Ok(target)
    }

    /// Stops one collector (in `namespace`, or any) to make room for a target `call` needs:
    /// the least recently asked of those only a spec asked for, else of those no call has
    /// asked about for `evict_after`. `None` when none may go, or the call is a spec's.
    fn make_room(
        &self,
        targets: &mut HashMap<String, Arc<Target>>,
        call: Call,
        namespace: Option<&str>,
        now: u64,
    ) -> Option<()> {
        if call == Call::Spec {
            return None;
        }
        let evictable_ms = self.evict_after.as_millis() as u64;
        let idle = |t: &Target| now.saturating_sub(t.last_call_ms.load(Ordering::Relaxed));
        let candidates = targets
            .values()
            .filter(|t| namespace.is_none_or(|ns| t.spec.namespace == ns));
        let spec_only = candidates
            .clone()
            .filter(|t| !t.read.load(Ordering::Relaxed))
            .max_by_key(|t| idle(t));
        let quiet = || {
            candidates
                .filter(|t| idle(t) >= evictable_ms)
                .max_by_key(|t| idle(t))
        };
        let victim = spec_only.or_else(quiet)?.spec.key.clone();
        if let Some(t) = targets.remove(&victim) {
            tracing::info!(
                target_name = %t.spec.label(),
                trigger = %t.spec.trigger_id(),
                idle_ms = idle(&t),
                "stopping a collector to make room for a new trigger"
            );
        }
        Some(())
    }

    /// Stops the least recently asked collector of the namespace holding the most, to make room
    /// for `namespace` while it holds less than its fair share of `max` and that one more
    /// (see the module's doc). `None` when no namespace is over its share, or the call is a
    /// spec's.
    fn give_fair_share(
        &self,
        targets: &mut HashMap<String, Arc<Target>>,
        call: Call,
        namespace: &str,
        now: u64,
    ) -> Option<()> {
        if call == Call::Spec {
            return None;
        }
        let idle = |t: &Target| now.saturating_sub(t.last_call_ms.load(Ordering::Relaxed));
        let held: Vec<(&str, &str, u64)> = targets
            .values()
            .map(|t| (t.spec.namespace.as_str(), t.spec.key.as_str(), idle(t)))
            .collect();
        let victim = fair_share_victim(&held, namespace, self.max)?.to_owned();
        let t = targets.remove(&victim)?;
        tracing::info!(
            target_name = %t.spec.label(),
            trigger = %t.spec.trigger_id(),
            idle_ms = idle(&t),
            for_namespace = %namespace,
            "stopping a collector of a namespace over its fair share to make room for another namespace"
        );
        Some(())
    }

    /// Marks a target used (a long-lived stream keeps its collector alive).
    pub fn touch(&self, target: &Target) {
        target.last_call_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Stops every collector (shutdown): each lets go of what it holds (its Service's lease).
    pub fn stop_all(&self) {
        self.targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Stops the collectors of targets not asked about for `idle`, and of those only a spec
    /// asked for after `spec_only`; returns how many.
    pub fn reap(&self, idle: Duration, spec_only: Duration) -> usize {
        let now = self.now_ms();
        let (idle_ms, spec_only_ms) = (idle.as_millis() as u64, spec_only.as_millis() as u64);
        let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        let before = targets.len();
        targets.retain(|_, t| {
            let quiet = now.saturating_sub(t.last_call_ms.load(Ordering::Relaxed));
            let limit = if t.read.load(Ordering::Relaxed) {
                idle_ms
            } else {
                spec_only_ms.min(idle_ms)
            };
            let keep = quiet < limit;
            if !keep {
                tracing::info!(target_name = %t.spec.label(), trigger = %t.spec.trigger_id(), "stopping an idle collector");
            }
            keep
        });
        before - targets.len()
    }
}

/// Of `held` (each collector's namespace, key and milliseconds since its last call), the one
/// that gives way so that `asking` gets room within its fair share of `max`: the least recently
/// asked of the namespace holding the most, when `asking` holds less than
/// `max / namespaces present` (counting `asking`) and that namespace more. Ties between
/// namespaces go to the first by name, so the choice does not depend on map order.
fn fair_share_victim<'a>(
    held: &[(&str, &'a str, u64)],
    asking: &str,
    max: usize,
) -> Option<&'a str> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (ns, _, _) in held {
        *counts.entry(ns).or_default() += 1;
    }
    let mine = counts.get(asking).copied().unwrap_or(0);
    let present = counts.len() + usize::from(mine == 0);
    let fair = (max / present.max(1)).max(1);
    if mine >= fair {
        return None;
    }
    let (richest, most) = counts
        .iter()
        .fold(None, |best: Option<(&str, usize)>, (ns, n)| match best {
            Some((_, m)) if m >= *n => best,
            _ => Some((ns, *n)),
        })?;
    if most <= fair || richest == asking {
        return None;
    }
    held.iter()
        .filter(|(ns, _, _)| *ns == richest)
        .max_by_key(|(_, key, idle)| (*idle, std::cmp::Reverse(*key)))
        .map(|(_, key, _)| *key)
}

#[cfg(test)]
mod tests {
    use super::fair_share_victim;

    /// 1,000 live collectors in 5 namespaces: a sixth namespace takes its room from one over
    /// the fair share (here every one holds 200 of a 166 share), the least recently asked first,
    /// and keeps getting room until it reaches its share; then it is refused.
    #[test]
    fn a_sixth_namespace_gets_room_up_to_its_fair_share() {
        let mut held: Vec<(String, String, u64)> = Vec::new();
        for ns in 0..5 {
            for i in 0..200u64 {
                // The collector asked longest ago in each namespace is i = 0 (idle 1,000 ms).
                held.push((format!("ns-{ns}"), format!("ns-{ns}/t-{i}"), 1000 - i));
            }
        }
        let view = |held: &[(String, String, u64)]| -> Vec<(String, String, u64)> { held.to_vec() };
        let mut taken = 0;
        loop {
            let snapshot = view(&held);
            let refs: Vec<(&str, &str, u64)> = snapshot
                .iter()
                .map(|(n, k, i)| (n.as_str(), k.as_str(), *i))
                .collect();
            let Some(victim) = fair_share_victim(&refs, "sixth", 1000) else {
                break;
            };
            if taken == 0 {
                assert_eq!(
                    victim, "ns-0/t-0",
                    "the least recently asked of the richest"
                );
            }
            let victim = victim.to_owned();
            held.retain(|(_, k, _)| *k != victim);
            held.push(("sixth".into(), format!("sixth/t-{taken}"), 0));
            taken += 1;
            assert!(taken <= 1000, "bounded");
        }
        assert_eq!(
            taken, 166,
            "the sixth namespace reaches its fair share, 1000 / 6"
        );
        let mut counts = std::collections::BTreeMap::new();
        for (ns, _, _) in &held {
            *counts.entry(ns.clone()).or_insert(0usize) += 1;
        }
        assert_eq!(held.len(), 1000);
        assert!(
            counts.values().all(|n| (166..=167).contains(n)),
            "{counts:?}"
        );
    }

    #[test]
    fn a_namespace_within_its_share_or_none_over_it_takes_nothing() {
        let held = [
            ("a", "a/1", 5),
            ("a", "a/2", 9),
            ("a", "a/3", 2),
            ("b", "b/1", 1),
        ];
        assert_eq!(
            fair_share_victim(&held, "a", 4),
            None,
            "a is over its share"
        );
        assert_eq!(fair_share_victim(&held, "b", 4), Some("a/2"));
        let even = [("a", "a/1", 5), ("b", "b/1", 1)];
        assert_eq!(
            fair_share_victim(&even, "c", 2),
            None,
            "none over a share of 1"
        );
    }
}
