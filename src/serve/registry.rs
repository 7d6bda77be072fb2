//! The scale targets KEDA asks about, each with its collector.
//!
//! A target is keyed by its namespace and the metadata that matters (two ScaledObjects with the
//! same trigger share one collector). The first call for a target starts its collector; every
//! call marks it used; a reaper stops collectors no call has asked about for a while. Calls only
//! ever read the latest published reading: nothing in a gRPC call waits on a scrape.

use super::collector::{self, Reading, Shared};
use super::metadata::TargetSpec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Target {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every target with a running collector.
pub struct Registry {
    targets: Mutex<HashMap<String, Arc<Target>>>,
    shared: Shared,
    /// The most targets followed at once.
    max: usize,
}

impl Registry {
    pub fn new(shared: Shared, max: usize) -> Registry {
        Registry {
            targets: Mutex::new(HashMap::new()),
            shared,
            max,
        }
    }

    fn now_ms(&self) -> u64 {
        self.shared.epoch.elapsed().as_millis() as u64
    }

    /// The target for `spec`, its collector started on first use, marked used now; `Err(max)`
    /// when it is new and `max` targets are followed already.
    pub fn target(&self, spec: TargetSpec) -> Result<Arc<Target>, usize> {
        let now = self.now_ms();
        let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = targets.get(&spec.key) {
            t.last_call_ms.store(now, Ordering::Relaxed);
            return Ok(t.clone());
        }
        if targets.len() >= self.max {
            return Err(self.max);
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
            task,
        });
        targets.insert(spec.key, target.clone());
        Ok(target)
    }

    /// Marks a target used (a long-lived stream keeps its collector alive).
    pub fn touch(&self, target: &Target) {
        target.last_call_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Stops the collectors of targets not asked about for `idle`; returns how many.
    pub fn reap(&self, idle: Duration) -> usize {
        let now = self.now_ms();
        let idle_ms = idle.as_millis() as u64;
        let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        let before = targets.len();
        targets.retain(|_, t| {
            let keep = now.saturating_sub(t.last_call_ms.load(Ordering::Relaxed)) < idle_ms;
            if !keep {
                tracing::info!(target_name = %t.spec.label(), "stopping an idle collector");
            }
            keep
        });
        before - targets.len()
    }

    pub fn len(&self) -> usize {
        self.targets.lock().map(|t| t.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
