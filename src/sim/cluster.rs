//! The replicas of one Deployment behind a least-request load balancer and an activator.
//!
//! Arrivals go to the ready replica with the fewest outstanding requests, or wait at the
//! activator while none is ready (and are released in arrival order the moment one is, or
//! rejected after the hold timeout). New replicas become Ready after the cold start; removed ones
//! (those still starting first, then the least loaded) drain what they hold before they stop.
//! Every replica that exists, starting and draining included, is billed.

use super::replica::{FirstToken, Hardware, Phase, SimReplica};
use super::trace::Request;
use std::collections::VecDeque;

/// What happens to a request that ends its wait: a first token after `ttft` seconds, or the
/// activator's timeout answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fate {
    FirstToken { ttft: f64 },
    Rejected,
}

/// What became of one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestOutcome {
    /// Seconds from arrival to first token; NaN while it has none.
    pub ttft: f32,
    /// Answered by the activator's hold timeout instead of a replica.
    pub rejected: bool,
}

impl Default for RequestOutcome {
    fn default() -> Self {
        RequestOutcome {
            ttft: f32::NAN,
            rejected: false,
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
}

impl Cluster {
    /// A cluster with `ready` replicas already serving.
    pub fn new(hw: Hardware, ready: u32, hold_timeout_s: f64) -> Cluster {
        let replicas = (0..ready)
            .map(|id| SimReplica::new(id, Phase::Ready))
            .collect();
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
        }
    }

    /// Replicas that count toward the Deployment's `spec.replicas`: starting or ready.
    pub fn current(&self) -> u32 {
        self.replicas
            .iter()
            .filter(|r| r.phase != Phase::Draining)
            .count() as u32
    }

    pub fn ready(&self) -> u32 {
        self.replicas.iter().filter(|r| r.is_ready()).count() as u32
    }

    /// When each replica still starting was ordered.
    pub fn starting_since(&self) -> Vec<f64> {
        let cold = self.hw.gpu.cold_start_s();
        self.replicas
            .iter()
            .filter_map(|r| match r.phase {
                Phase::Starting { ready_at } => Some(ready_at - cold),
                _ => None,
            })
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

    /// A request arrives (or is released by the activator): to the least loaded ready replica,
    /// or held.
    pub fn arrive(&mut self, index: u32, request: &Request) {
        let target = self
            .replicas
            .iter_mut()
            .filter(|r| r.is_ready())
            .min_by_key(|r| (r.outstanding(), r.id));
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
            if let Phase::Starting { ready_at } = r.phase {
                if ready_at <= t {
                    r.phase = Phase::Ready;
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
        self.replicas
            .retain(|r| r.phase != Phase::Draining || r.outstanding() > 0);
        self.replica_seconds += self.replicas.len() as f64 * dt;
    }

    /// Sets the desired count at `now`: new replicas start (Ready after `cold_start_s`), removed
    /// ones are those still starting (newest first), then the least loaded, which drain.
    pub fn resize(&mut self, desired: u32, now: f64, cold_start_s: f64) {
        let current = self.current();
        if desired == current {
            return;
        }
        self.scale_events += 1;
        self.peak = self.peak.max(desired);
        if desired > current {
            for _ in current..desired {
                let phase = if cold_start_s <= 0.0 {
                    Phase::Ready
                } else {
                    Phase::Starting {
                        ready_at: now + cold_start_s,
                    }
                };
                self.replicas.push(SimReplica::new(self.next_id, phase));
                self.next_id += 1;
            }
            return;
        }
        let mut remove = current - desired;
        // Starting replicas go first, newest first, and simply stop.
        while remove > 0 {
            let Some(i) = self
                .replicas
                .iter()
                .rposition(|r| matches!(r.phase, Phase::Starting { .. }))
            else {
                break;
            };
            self.replicas.remove(i);
            remove -= 1;
        }
        for _ in 0..remove {
            let victim = self
                .replicas
                .iter_mut()
                .filter(|r| r.is_ready())
                .min_by_key(|r| (r.outstanding(), std::cmp::Reverse(r.id)));
            if let Some(r) = victim {
                r.phase = Phase::Draining;
            }
        }
        self.replicas
            .retain(|r| r.phase != Phase::Draining || r.outstanding() > 0);
    }
}
