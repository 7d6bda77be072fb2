//! The replicas of one Deployment behind a least-request load balancer and an activator.
//!
//! Arrivals go to the ready replica with the fewest outstanding requests, or wait at the
//! activator while none is ready (and are released in arrival order the moment one is, or
//! rejected after the hold timeout). New replicas wake from the standby pool
//! ([`super::standby`]) while it holds any, Ready after the wake time, and the rest become Ready
//! after the cold start (each drawn around the GPU model's when a spread is set). Removed ones
//! are those still starting first (a woken one goes back to sleep), then the Ready replicas the
//! ReplicaSet controller ranks first ([`super::replicaset`]: the lowest deletion cost, else a
//! recent one by chance); each leaves the Service at once, stays through its `preStop` pause
//! (`--pre-stop`) even when idle, serves what it holds for the drain time after it (`--drain`),
//! and what it still holds then is cut; then it sleeps if the pool has room. Every replica that
//! exists, starting and draining included, is billed in full; sleepers at the pool's price,
//! apart.

use super::replica::{FirstToken, Hardware, Phase, SimReplica};
use super::replicaset;
use super::rng::Rng;
use super::standby::Pool;
use super::trace::Request;
use std::collections::VecDeque;

/// How arrivals are spread over the ready replicas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balancer {
    /// The replica with the fewest outstanding requests (a gateway, an inference extension).
    #[default]
    LeastRequest,
    /// Any ready replica, by chance (a plain Service: kube-proxy picks per connection).
    Random,
}

/// What happens to a request that ends its wait: a first token after `ttft` seconds, or the
/// activator's timeout answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fate {
    FirstToken {
        ttft: f64,
    },
    Rejected,
    /// Its replica was stopped at the end of its drain with the request unfinished.
    Cut,
}

/// What became of one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestOutcome {
    /// Seconds from arrival to first token; NaN while it has none.
    pub ttft: f32,
    /// Answered by the activator's hold timeout instead of a replica.
    pub rejected: bool,
    /// Cut by a scale-down: its replica stopped before it finished.
    pub cut: bool,
}

impl Default for RequestOutcome {
    fn default() -> Self {
        RequestOutcome {
            ttft: f32::NAN,
            rejected: false,
            cut: false,
        }
    }
}

impl RequestOutcome {
    /// Seconds to the first token, if one came (not rejected, not still waiting).
    pub fn first_token_s(&self) -> Option<f64> {
        (!self.rejected && !self.ttft.is_nan()).then(|| f64::from(self.ttft))
    }

    pub fn record(&mut self, fate: Fate) {
        match fate {
            Fate::FirstToken { ttft } => self.ttft = ttft as f32,
            Fate::Rejected => self.rejected = true,
            Fate::Cut => self.cut = true,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Cluster {
    pub hw: Hardware,
    pub replicas: Vec<SimReplica>,
    next_id: u32,
    /// Requests held at the activator, in arrival order.
    pub held: VecDeque<u32>,
    pub hold_timeout_s: f64,
    /// Replica-seconds billed so far.
    pub replica_seconds: f64,
    /// Changes of the desired count, and its highest value.
    pub scale_events: u32,
    pub peak: u32,
    events: Vec<FirstToken>,
    /// How long a removed replica serves what it holds before what is left is cut (infinite:
    /// until it is done), counted from the end of its `preStop` pause.
    pub drain_s: f64,
    /// The `preStop` pause of a removed replica: billed through it even when idle.
    pub pre_stop_s: f64,
    /// Cold starts vary around the configured one by this log-normal sigma (0: all equal).
    pub cold_spread: f64,
    cold_rng: Rng,
    pub balancer: Balancer,
    route_rng: Rng,
    /// Each replica that became Ready after a cold start since last taken: when it was
    /// ordered, when it was Ready (a wake from the pool is not a cold start, and a real pod that
    /// wakes is not created anew).
    pub became_ready: Vec<(f64, f64)>,
    /// Replicas asleep in the standby pool, and their bill (an empty pool of size 0 unless set).
    pub pool: Pool,
}

impl Cluster {
    /// A cluster with `ready` replicas already serving, each started one cold start before
    /// time 0 (so a scaler watching the pods sees their starts at once, as `serve` does).
    pub fn new(hw: Hardware, ready: u32, hold_timeout_s: f64) -> Cluster {
        let cold = hw.gpu.cold_start_s();
        let replicas: Vec<SimReplica> = (0..ready)
            .map(|id| {
                let mut r = SimReplica::new(id, Phase::Ready);
                r.created_at = -cold;
                r
            })
            .collect();
        let became_ready = replicas.iter().map(|r| (r.created_at, 0.0)).collect();
        Cluster {
            hw,
            replicas,
            next_id: ready,
            held: VecDeque::new(),
            hold_timeout_s,
            replica_seconds: 0.0,
            scale_events: 0,
            peak: ready,
            events: Vec::new(),
            drain_s: f64::INFINITY,
            pre_stop_s: 0.0,
            cold_spread: 0.0,
            cold_rng: Rng::new(0xc01d),
            balancer: Balancer::LeastRequest,
            route_rng: Rng::new(0x10ad),
            became_ready,
            pool: Pool::default(),
        }
    }

    /// Replicas that count toward the Deployment's `spec.replicas`: starting or ready.
    pub fn current(&self) -> u32 {
        self.replicas
            .iter()
            .filter(|r| !matches!(r.phase, Phase::Draining { .. }))
            .count() as u32
    }

    pub fn ready(&self) -> u32 {
        self.replicas.iter().filter(|r| r.is_ready()).count() as u32
    }

    /// When each replica still starting (or waking) was ordered.
    pub fn starting_since(&self) -> Vec<f64> {
        self.replicas
            .iter()
            .filter(|r| matches!(r.phase, Phase::Starting { .. }))
            .map(|r| r.created_at)
            .collect()
    }

    /// Requests running or waiting on any replica, plus those held.
    pub fn in_flight(&self) -> usize {
        self.replicas
            .iter()
            .map(SimReplica::outstanding)
            .sum::<usize>()
            + self.held.len()
    }

    /// A request arrives (or is released by the activator): to a ready replica as the balancer
    /// picks, or held.
    pub fn arrive(&mut self, index: u32, request: &Request) {
        let target = match self.balancer {
            Balancer::LeastRequest => self
                .replicas
                .iter_mut()
                .filter(|r| r.is_ready())
                .min_by_key(|r| (r.outstanding(), r.id)),
            Balancer::Random => {
                let ready = self.ready() as usize;
                let pick = (self.route_rng.uniform() * ready as f64) as usize;
                self.replicas
                    .iter_mut()
                    .filter(|r| r.is_ready())
                    .nth(pick.min(ready.saturating_sub(1)))
            }
        };
        match target {
            Some(replica) => replica
                .waiting
                .push_back((index, request.prompt, request.output)),
            None => self.held.push_back(index),
        }
    }

    /// Advances `[t, t + dt)`: readiness, the activator, every replica, then billing. Each
    /// request that gets its first token or is rejected is reported to `fate`.
    pub fn step(
        &mut self,
        t: f64,
        dt: f64,
        requests: &[Request],
        fate: &mut impl FnMut(u32, Fate),
    ) {
        for r in &mut self.replicas {
            if let Phase::Starting { ready_at, warm } = r.phase {
                if ready_at <= t {
                    r.phase = Phase::Ready;
                    r.ready_since = ready_at;
                    if !warm {
                        self.became_ready.push((r.created_at, ready_at));
                    }
                }
            }
        }
        if !self.held.is_empty() && self.ready() > 0 {
            while let Some(index) = self.held.pop_front() {
                let request = requests[index as usize];
                self.arrive(index, &request);
            }
        }
        while let Some(&index) = self.held.front() {
            if t - requests[index as usize].arrival < self.hold_timeout_s {
                break;
            }
            self.held.pop_front();
            fate(index, Fate::Rejected);
        }
        let arrival = |i: u32| requests[i as usize].arrival;
        let mut events = std::mem::take(&mut self.events);
        for r in &mut self.replicas {
            if !matches!(r.phase, Phase::Starting { .. }) {
                r.step(&self.hw, t, dt, arrival, &mut events);
            }
        }
        for FirstToken { request, at } in events.drain(..) {
            let ttft = at - requests[request as usize].arrival;
            fate(request, Fate::FirstToken { ttft });
        }
        self.events = events;
        let end = t + dt;
        for r in &self.replicas {
            if matches!(r.phase, Phase::Draining { kill_at, .. } if kill_at <= end) {
                r.requests().for_each(|i| fate(i, Fate::Cut));
            }
        }
        self.retain_and_sleep(|r| match r.phase {
            // Billed for this step while any of it is within the pause.
            Phase::Draining { stop_at, kill_at } => {
                kill_at > end && (stop_at > t || r.outstanding() > 0)
            }
            _ => true,
        });
        self.replica_seconds += self.replicas.len() as f64 * dt;
        self.pool.bill(dt);
    }

    /// Keeps the replicas `keep` keeps; each draining one it lets go sleeps if the pool has room.
    fn retain_and_sleep(&mut self, keep: impl Fn(&SimReplica) -> bool) {
        let before = self.replicas.len();
        self.replicas.retain(|r| keep(r));
        for _ in self.replicas.len()..before {
            self.pool.put_to_sleep();
        }
    }

    /// Sets the desired count at `now`: new replicas wake from the pool while it holds any
    /// (Ready after its wake time), the rest start (Ready after a cold start drawn around
    /// `cold_start_s`); removed ones are those still starting (newest first; a woken one goes
    /// back to sleep), then those the ReplicaSet ranks first, which pause for `pre_stop_s` and
    /// drain for `drain_s` after it.
    pub fn resize(&mut self, desired: u32, now: f64, cold_start_s: f64) {
        let current = self.current();
        if desired == current {
            return;
        }
        self.scale_events += 1;
        self.peak = self.peak.max(desired);
        if desired > current {
            let woken = self.pool.wake(desired - current);
            for k in current..desired {
                let warm = k - current < woken;
                let start = if warm {
                    self.pool.standby.wake_s
                } else {
                    self.draw_cold_start(cold_start_s)
                };
                let mut replica = SimReplica::new(self.next_id, Phase::Ready);
                replica.created_at = now;
                replica.ready_since = now;
                if start > 0.0 {
                    replica.phase = Phase::Starting {
                        ready_at: now + start,
                        warm,
                    };
                } else if !warm {
                    self.became_ready.push((now, now));
                }
                self.replicas.push(replica);
                self.next_id += 1;
            }
            return;
        }
        let mut remove = current - desired;
        // Starting replicas go first, newest first, and simply stop (a woken one sleeps again).
        while remove > 0 {
            let Some(i) = self
                .replicas
                .iter()
                .rposition(|r| matches!(r.phase, Phase::Starting { .. }))
            else {
                break;
            };
            if matches!(self.replicas[i].phase, Phase::Starting { warm: true, .. }) {
                self.pool.put_to_sleep();
            }
            self.replicas.remove(i);
            remove -= 1;
        }
        for _ in 0..remove {
            let Some(i) = replicaset::victim(&self.replicas, now) else {
                break;
            };
            let stop_at = now + self.pre_stop_s;
            self.replicas[i].phase = Phase::Draining {
                stop_at,
                kill_at: stop_at + self.drain_s,
            };
        }
        self.retain_and_sleep(|r| match r.phase {
            Phase::Draining { stop_at, .. } => stop_at > now || r.outstanding() > 0,
            _ => true,
        });
    }

    /// One replica's cold start: `cold_start_s`, or with a spread a log-normal draw whose median
    /// it is.
    fn draw_cold_start(&mut self, cold_start_s: f64) -> f64 {
        if self.cold_spread > 0.0 && cold_start_s > 0.0 {
            cold_start_s * (self.cold_spread * self.cold_rng.normal()).exp()
        } else {
            cold_start_s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::gpu::GpuModel;

    /// Steps `cluster` from `from` to `to` seconds with `requests` arriving at their times,
    /// returning each request's fate.
    fn play(cluster: &mut Cluster, requests: &[Request], from: f64, to: f64) -> Vec<(u32, Fate)> {
        let mut fates = Vec::new();
        let mut t = from;
        while t < to - 1e-9 {
            for (i, r) in requests.iter().enumerate() {
                if (t..t + 0.25).contains(&r.arrival) {
                    cluster.arrive(i as u32, r);
                }
            }
            cluster.step(t, 0.25, requests, &mut |i, f| fates.push((i, f)));
            t += 0.25;
        }
        fates
    }

    fn cluster(ready: u32, pre_stop_s: f64, drain_s: f64) -> Cluster {
        let mut c = Cluster::new(Hardware::new(GpuModel::default()), ready, 300.0);
        c.pre_stop_s = pre_stop_s;
        c.drain_s = drain_s;
        c
    }

    /// Without a pause an idle replica removed is gone at once; with the shipped 10 s it is
    /// billed through the pause, then goes, and serves no new arrival meanwhile.
    #[test]
    fn an_idle_replica_removed_is_billed_through_its_pre_stop_pause() {
        let mut at_once = cluster(2, 0.0, f64::INFINITY);
        at_once.resize(1, 0.0, 91.0);
        assert_eq!(at_once.replicas.len(), 1, "gone at once");
        play(&mut at_once, &[], 0.0, 20.0);
        assert_eq!(at_once.replica_seconds, 20.0);

        let mut paused = cluster(2, 10.0, f64::INFINITY);
        paused.resize(1, 0.0, 91.0);
        assert_eq!((paused.replicas.len(), paused.current()), (2, 1));
        let late = [Request {
            arrival: 5.0,
            prompt: 100,
            output: 10,
        }];
        play(&mut paused, &late, 0.0, 9.75);
        assert_eq!(paused.replicas.len(), 2, "still there within the pause");
        let pausing = paused
            .replicas
            .iter()
            .find(|r| matches!(r.phase, Phase::Draining { .. }))
            .expect("the removed replica");
        assert_eq!(pausing.outstanding(), 0, "it takes no new arrival");
        play(&mut paused, &[], 9.75, 20.0);
        assert_eq!(paused.replicas.len(), 1, "gone when the pause ended");
        assert_eq!(paused.replica_seconds, 20.0 + 10.0);
    }

    /// A replica removed while it streams serves through the pause, and its drain starts only
    /// after it: with no drain (vLLM's default), what it holds is cut when the pause ends.
    #[test]
    fn the_drain_starts_when_the_pause_ends() {
        let long = [Request {
            arrival: 0.0,
            prompt: 100,
            output: 4000,
        }];
        let mut c = cluster(1, 10.0, 0.0);
        let first = play(&mut c, &long, 0.0, 1.0);
        assert!(
            matches!(first[..], [(0, Fate::FirstToken { .. })]),
            "{first:?}"
        );
        c.resize(0, 1.0, 91.0);
        let within = play(&mut c, &[], 1.0, 10.75);
        assert!(within.is_empty(), "not cut within the pause: {within:?}");
        assert_eq!(c.replicas.len(), 1);
        let after = play(&mut c, &[], 10.75, 11.5);
        assert_eq!(after, [(0, Fate::Cut)]);
        assert!(c.replicas.is_empty());
    }
}
