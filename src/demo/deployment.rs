//! The demo's Deployment: `emulate` replicas whose count KEDA and the HPA change, each new one
//! paying the cold start, each removed one draining what it holds.
//!
//! Pods live on fixed loopback slots (127.0.0.2, 127.0.0.3, ... on one port), as pods of one
//! Deployment share a port on different IPs. A pod ordered now binds its slot only when its cold
//! start is over: until then nothing listens there, so `serve` (which scrapes every slot) finds
//! no replica, as it would not scrape a pod that is not Ready. Removal follows the simulator:
//! pods still starting go first (newest first), then the ready ones the ReplicaSet controller
//! ranks first ([`infscale_core::sim::replicaset`]; the demo writes no deletion cost, so a
//! recent one by chance). Those leave the Service at once and, after the `preStop` pause the
//! docs give model servers ([`PRE_STOP_S`]), shut down as a server does on SIGTERM: they stop
//! accepting and go when the last request they hold ends, whoever sent it (the Service, or the
//! activator straight to the pod in serve mode), as the simulator's `--drain inf` does. Every pod
//! that exists is billed, starting and draining ones included.

use super::service::{Backend, Endpoints};
use crate::emulate::{self, EmulateConfig, Emulator};
use infscale_core::sim::replicaset::{self, Candidate};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

enum Phase {
    /// Loading; Ready at this simulated time.
    Starting {
        ready_at: f64,
    },
    Ready,
    /// Out of the Service; its server stops accepting at this simulated time (the `preStop`
    /// pause the docs give every model server), then goes when its last answer ends.
    Draining {
        stop_at: f64,
    },
}

/// The `preStop` pause, simulated seconds: the time the shipped manifests give an endpoint's
/// removal to reach every client before the server stops accepting (docs/operate.md). A client
/// that picked the pod just before it left (the activator, straight to the pod in serve mode)
/// still finds it serving. The comparison simulates the same pause.
pub const PRE_STOP_S: f64 = infscale_core::sim::settings::SHIPPED_PRE_STOP_S;

struct Pod {
    slot: usize,
    /// Its number, in order of creation (the ranking's stand-in for a UID).
    id: u32,
    /// When it became Ready, in simulated seconds.
    ready_since: f64,
    phase: Phase,
    emulator: Option<Emulator>,
    backend: Option<Arc<Backend>>,
}

/// The pods of the emulated Deployment and what they cost.
pub struct Deployment {
    slots: Vec<SocketAddr>,
    pods: Vec<Pod>,
    endpoints: Arc<Endpoints>,
    emulate: EmulateConfig,
    cold_start_s: f64,
    /// Simulated replica-seconds billed so far.
    pub replica_seconds: f64,
    /// Changes of the desired count, and the most pods at once.
    pub scale_events: u32,
    pub peak: u32,
    billed_to: f64,
    next_id: u32,
}

/// The slot addresses for `max` pods on `port`.
pub fn slots(max: u32, port: u16) -> Vec<SocketAddr> {
    (0..max)
        .map(|i| {
            let last = 2 + (i % 250) as u8;
            let second = (i / 250) as u8;
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, second, last)), port)
        })
        .collect()
}

impl Deployment {
    pub fn new(
        slots: Vec<SocketAddr>,
        endpoints: Arc<Endpoints>,
        emulate: EmulateConfig,
        cold_start_s: f64,
    ) -> Deployment {
        Deployment {
            slots,
            pods: Vec::new(),
            endpoints,
            emulate,
            cold_start_s,
            replica_seconds: 0.0,
            scale_events: 0,
            peak: 0,
            billed_to: 0.0,
            next_id: 0,
        }
    }

    /// Pods that count toward `spec.replicas`: starting or ready.
    pub fn current(&self) -> u32 {
        self.pods
            .iter()
            .filter(|p| !matches!(p.phase, Phase::Draining { .. }))
            .count() as u32
    }

    pub fn ready(&self) -> u32 {
        self.pods
            .iter()
            .filter(|p| matches!(p.phase, Phase::Ready))
            .count() as u32
    }

    pub fn starting(&self) -> u32 {
        self.pods
            .iter()
            .filter(|p| matches!(p.phase, Phase::Starting { .. }))
            .count() as u32
    }

    /// Requests running and waiting on the pods that serve.
    pub fn load(&self) -> (usize, usize) {
        self.pods
            .iter()
            .filter_map(|p| p.emulator.as_ref())
            .map(Emulator::load)
            .fold((0, 0), |(r, w), (a, b)| (r + a, w + b))
    }

    /// Every pod that exists (billed).
    pub fn billed(&self) -> u32 {
        self.pods.len() as u32
    }

    /// Sets `spec.replicas` at simulated time `now` (capped by the slots).
    pub fn scale(&mut self, desired: u32, now: f64) {
        let current = self.current();
        if desired == current {
            return;
        }
        self.scale_events += 1;
        if desired > current {
            for _ in current..desired {
                let Some(slot) =
                    (0..self.slots.len()).find(|s| self.pods.iter().all(|p| p.slot != *s))
                else {
                    break;
                };
                self.next_id += 1;
                self.pods.push(Pod {
                    slot,
                    id: self.next_id,
                    ready_since: f64::NAN,
                    phase: Phase::Starting {
                        ready_at: now + self.cold_start_s,
                    },
                    emulator: None,
                    backend: None,
                });
            }
        } else {
            for _ in desired..current {
                self.remove_one(now);
            }
        }
        self.peak = self.peak.max(self.billed());
    }

    fn remove_one(&mut self, now: f64) {
        // The newest pod still starting simply stops.
        if let Some(i) = self
            .pods
            .iter()
            .rposition(|p| matches!(p.phase, Phase::Starting { .. }))
        {
            self.pods.remove(i);
            return;
        }
        let ready = self
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.phase, Phase::Ready));
        let victim = replicaset::pick(
            ready.map(|(index, p)| Candidate {
                index,
                cost: None,
                ready_since: p.ready_since,
                id: p.id,
            }),
            now,
        );
        if let Some(p) = victim.and_then(|i| self.pods.get_mut(i)) {
            p.phase = Phase::Draining {
                stop_at: now + PRE_STOP_S,
            };
            if let Some(b) = &p.backend {
                self.endpoints.remove(b.addr);
            }
        }
    }

    /// At simulated time `now`: bills the time since the last tick, starts the pods whose cold
    /// start is over (an error names the slot that could not be bound), stops drained ones.
    pub async fn tick(&mut self, now: f64) -> anyhow::Result<()> {
        let dt = (now - self.billed_to).max(0.0);
        self.replica_seconds += dt * f64::from(self.billed());
        self.billed_to = now;
        for pod in &mut self.pods {
            if let Phase::Starting { ready_at } = pod.phase {
                if ready_at <= now {
                    let addr = self.slots[pod.slot];
                    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                        anyhow::anyhow!("pod slot {addr}: cannot listen ({e}); is the port free?")
                    })?;
                    let emulator = emulate::spawn(listener, self.emulate.clone()).await?;
                    let backend = Backend::new(addr);
                    self.endpoints.add(backend.clone());
                    pod.backend = Some(backend);
                    pod.emulator = Some(emulator);
                    pod.phase = Phase::Ready;
                    pod.ready_since = ready_at;
                }
            }
        }
        for pod in &mut self.pods {
            if let (Phase::Draining { stop_at }, Some(e)) = (&pod.phase, &mut pod.emulator) {
                if *stop_at <= now {
                    e.drain();
                }
            }
        }
        let mut i = 0;
        while i < self.pods.len() {
            let pod = &self.pods[i];
            let drained = matches!(pod.phase, Phase::Draining { .. })
                && pod.backend.as_ref().is_none_or(|b| b.outstanding() == 0)
                && pod.emulator.as_ref().is_none_or(Emulator::drained);
            if drained {
                let pod = self.pods.remove(i);
                if let Some(e) = pod.emulator {
                    e.stop().await;
                }
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Stops every pod.
    pub async fn shutdown(&mut self) {
        for pod in self.pods.drain(..) {
            if let Some(b) = &pod.backend {
                self.endpoints.remove(b.addr);
            }
            if let Some(e) = pod.emulator {
                e.stop().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infscale_core::sim::gpu::GpuModel;

    /// In serve mode the activator sends to a pod straight, past the Service's count: a pod scaled
    /// away while it streams such an answer finishes it before it goes.
    /// A client that picked the pod just before it left the Service (the activator, which
    /// reads the endpoints a moment late) is still answered during the `preStop` pause; after
    /// it the pod refuses new connections and goes.
    #[tokio::test]
    async fn a_pod_scaled_away_answers_through_its_pre_stop_pause_then_goes() {
        let port = super::super::slot_port().expect("a free port on 127.0.0.2");
        let endpoints = Arc::new(Endpoints::default());
        let mut d = Deployment::new(slots(1, port), endpoints.clone(), fast(), 0.0);
        d.scale(1, 0.0);
        d.tick(0.0).await.expect("the pod starts");
        let addr = slots(1, port)[0];
        let client = reqwest::Client::new();
        let ask = || {
            client
                .post(format!("http://{addr}/v1/completions"))
                .json(&serde_json::json!({"prompt": "a b", "max_tokens": 2}))
                .send()
        };
        assert!(ask().await.expect("served").status().is_success());
        d.scale(0, 1.0);
        assert_eq!(endpoints.replicas(), 0, "the pod left the Service at once");
        d.tick(1.0 + PRE_STOP_S / 2.0).await.expect("tick");
        let late = ask().await.expect("answered within the pause");
        assert!(late.status().is_success(), "{}", late.status());
        for i in 0..200 {
            d.tick(1.0 + PRE_STOP_S + f64::from(i)).await.expect("tick");
            if d.billed() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(d.billed(), 0, "the pod went after its pause");
        assert!(ask().await.is_err(), "a gone pod refuses connections");
    }

    fn fast() -> EmulateConfig {
        EmulateConfig {
            gpu: GpuModel {
                peak_tflops: 20.0,
                hbm_gb_per_s: 335.0,
                ..GpuModel::default()
            },
            ..EmulateConfig::default()
        }
    }

    #[tokio::test]
    async fn a_pod_scaled_away_finishes_an_answer_the_service_did_not_send() {
        let port = super::super::slot_port().expect("a free port on 127.0.0.2");
        let endpoints = Arc::new(Endpoints::default());
        let mut d = Deployment::new(slots(1, port), endpoints.clone(), fast(), 0.0);
        d.scale(1, 0.0);
        d.tick(0.0).await.expect("the pod starts");
        assert_eq!(d.ready(), 1);
        let addr = slots(1, port)[0];
        let mut r = reqwest::Client::new()
            .post(format!("http://{addr}/v1/completions"))
            .json(&serde_json::json!({"prompt": "a b c", "max_tokens": 40, "stream": true}))
            .send()
            .await
            .expect("send");
        let mut text = String::new();
        let first = r.chunk().await.expect("a chunk").expect("a first chunk");
        text.push_str(&String::from_utf8_lossy(&first));
        d.scale(0, 1.0);
        assert_eq!(endpoints.replicas(), 0, "the pod left the Service at once");
        let ticks = tokio::spawn(async move {
            for i in 0..2000 {
                d.tick(1.0 + f64::from(i) * 0.1).await.expect("tick");
                if d.billed() == 0 {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            false
        });
        while let Some(bytes) = r.chunk().await.expect("the answer is not cut") {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(ticks.await.expect("ticks"), "the pod never went");
    }
}
