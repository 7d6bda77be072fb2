//! The emulated GPU: one simulated replica stepped on the wall clock.
//!
//! The [`Engine`] owns a ready [`SimReplica`] and serves it in fixed steps of `dt` simulated
//! seconds, exactly as the simulator does; the only difference is that a step runs once the wall
//! clock (times the speed) has passed its end, so what a client sees comes no earlier than the
//! model says. Requests beyond the batch wait in the replica's own queue. After each step the
//! engine tells every request's handler how far it got ([`Progress`], on a `watch` channel so a
//! slow client costs no memory) and publishes the counters a `/metrics` page shows ([`Stats`]).

use infscale_core::sim::gpu::GpuModel;
use infscale_core::sim::replica::{
    Finished, FirstToken, Hardware, Phase, SimReplica, TTFT_BUCKETS,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// How far one request got, as its handler sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Output tokens generated so far (the first token included).
    pub tokens: u32,
    pub done: bool,
}

/// A request handed to the engine.
#[derive(Debug)]
pub struct Submit {
    /// Simulated seconds since the start.
    pub arrival: f64,
    pub prompt: u32,
    pub output: u32,
    pub progress: watch::Sender<Progress>,
}

/// Simulated time: wall time since the start, times the speed.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    speed: f64,
}

impl Clock {
    pub fn new(speed: f64) -> Clock {
        Clock {
            start: Instant::now(),
            speed,
        }
    }

    /// Simulated seconds since the start.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * self.speed
    }
}

/// What a `/metrics` page shows, published after every step. Durations are wall seconds (what a
/// client of this process measures), so the rate of a duration counter is an occupancy and the
/// rate of the CPU counter is cores, whatever the speed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub running: usize,
    pub waiting: usize,
    /// KV-cache usage, 0..1.
    pub kv_usage: f64,
    /// Requests received.
    pub requests: u64,
    /// Requests finished (all of them succeed: every one generates its length).
    pub success: u64,
    /// Prompt tokens of requests past their prefill.
    pub prompt_tokens: u64,
    /// Output tokens generated, counted as they are generated.
    pub generation_tokens: f64,
    /// Output tokens of finished requests (llama.cpp counts them only at the end).
    pub finished_output_tokens: u64,
    /// Prompt and output lengths of finished requests, summed.
    pub finished_prompt_tokens: u64,
    /// Finished requests per prompt and per output length bucket (not cumulative; the last is
    /// +Inf) on [`Stats::length_bounds`], as vLLM's `vllm:request_prompt_tokens` and
    /// `vllm:request_generation_tokens` histograms count them.
    pub prompt_len_counts: Vec<u64>,
    pub output_len_counts: Vec<u64>,
    /// vLLM's length buckets: 1, 2, 5, 10, 20, 50, ... up to the model's length.
    pub length_bounds: Vec<f64>,
    /// TTFT bucket counts (not cumulative; the last is +Inf) on [`TTFT_BUCKETS`], wall seconds.
    pub ttft_counts: Vec<u64>,
    pub ttft_sum_s: f64,
    /// Request latency, summed over finished requests, wall seconds.
    pub e2e_sum_s: f64,
    pub cpu_seconds: f64,
    /// Triton's cumulative microseconds: in the server, queued, computing.
    pub request_us: f64,
    pub queue_us: f64,
    pub compute_us: f64,
    /// Steps with a running batch, and the batch sizes summed over them.
    pub decode_steps: u64,
    pub busy_slots: u64,
}

/// vLLM's `build_1_2_5_buckets(max_model_len)`: 1, 2, 5, 10, 20, 50, ... while at most `max`.
pub fn buckets_1_2_5(max: u32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut scale = 1.0;
    loop {
        for m in [1.0, 2.0, 5.0] {
            let b = m * scale;
            if b > f64::from(max) {
                return out;
            }
            out.push(b);
        }
        scale *= 10.0;
    }
}

impl Stats {
    /// The length histograms on vLLM's buckets for a model of `max` tokens, emptied.
    pub fn with_max_model_len(mut self, max: u32) -> Stats {
        self.length_bounds = buckets_1_2_5(max);
        self.prompt_len_counts = vec![0; self.length_bounds.len() + 1];
        self.output_len_counts = vec![0; self.length_bounds.len() + 1];
        self
    }
}

/// A request the engine holds.
#[derive(Debug)]
struct Pending {
    arrival: f64,
    prompt: u32,
    output: u32,
    progress: watch::Sender<Progress>,
}

/// One replica on the emulator's clock.
#[derive(Debug)]
pub struct Engine {
    replica: SimReplica,
    hw: Hardware,
    dt: f64,
    speed: f64,
    /// Steps served: the next one is `[steps * dt, (steps + 1) * dt)`.
    steps: u64,
    next_id: u32,
    pending: HashMap<u32, Pending>,
    /// Received, arriving after the start of the next step to serve (id, arrival).
    incoming: Vec<(u32, f64)>,
    stats: Stats,
    first: Vec<FirstToken>,
    finished: Vec<Finished>,
    /// Handlers are woken at the first token, every this many tokens after, and at the end.
    notify_every: u32,
}

impl Engine {
    pub fn new(gpu: GpuModel, dt: f64, speed: f64) -> Engine {
        Engine {
            replica: SimReplica::new(0, Phase::Ready),
            hw: Hardware::new(gpu),
            dt,
            speed,
            steps: 0,
            next_id: 0,
            pending: HashMap::new(),
            incoming: Vec::new(),
            stats: Stats {
                ttft_counts: vec![0; TTFT_BUCKETS.len() + 1],
                ..Stats::default()
            }
            .with_max_model_len(super::Limits::default().max_model_len),
            first: Vec::new(),
            finished: Vec::new(),
            notify_every: 1,
        }
    }

    /// Wakes a request's handler only at its first token, every `tokens` tokens after and at its
    /// end (vLLM's and SGLang's `--stream-interval`); the progress it reads is always current.
    pub fn with_stream_interval(mut self, tokens: u32) -> Engine {
        self.notify_every = tokens.max(1);
        self
    }

    /// Length histograms on vLLM's buckets for a model of `max` tokens (before any request).
    pub fn with_max_model_len(mut self, max: u32) -> Engine {
        self.stats = std::mem::take(&mut self.stats).with_max_model_len(max);
        self
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Takes a request; it joins the replica's queue before the step its arrival falls in.
    pub fn submit(&mut self, s: Submit) {
        let mut id = self.next_id;
        while self.pending.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_id = id.wrapping_add(1);
        self.stats.requests += 1;
        self.incoming.push((id, s.arrival));
        self.pending.insert(
            id,
            Pending {
                arrival: s.arrival,
                prompt: s.prompt,
                output: s.output,
                progress: s.progress,
            },
        );
    }

    /// Serves every step that ends by `now` (simulated seconds); returns how many.
    pub fn advance_to(&mut self, now: f64) -> u64 {
        let mut served = 0;
        // A step ends at (steps + 1) * dt; the tolerance keeps a tick that lands on the end
        // from waiting a whole step.
        while (self.steps + 1) as f64 * self.dt <= now + 1e-9 * self.dt.max(1.0) {
            self.step();
            served += 1;
        }
        served
    }

    fn step(&mut self) {
        let (t, dt) = (self.steps as f64 * self.dt, self.dt);
        let end = t + dt;
        self.forget_abandoned();
        // Arrivals in [.., t + dt) join the queue in arrival order, as the simulator routes them.
        self.incoming
            .sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let due = self.incoming.partition_point(|&(_, at)| at < end);
        for (id, _) in self.incoming.drain(..due) {
            if let Some(p) = self.pending.get(&id) {
                self.replica.waiting.push_back((id, p.prompt, p.output));
            }
        }
        let pending = &self.pending;
        let arrival = |i: u32| pending.get(&i).map_or(t, |p| p.arrival);
        self.first.clear();
        self.finished.clear();
        let cpu_before = self.replica.cpu_seconds;
        self.replica.step_reporting(
            &self.hw,
            t,
            dt,
            arrival,
            &mut self.first,
            &mut self.finished,
        );
        self.steps += 1;
        self.account(dt, cpu_before);
        self.publish();
    }

    /// Drops the queued requests whose client went away (their handler dropped its receiver),
    /// as a server aborts them; a request already in the batch runs to its end, since the
    /// replica model has no way to take a sequence out of the batch.
    fn forget_abandoned(&mut self) {
        let pending = &mut self.pending;
        let mut keep = |id: u32| {
            let gone = pending.get(&id).is_none_or(|p| p.progress.is_closed());
            if gone {
                pending.remove(&id);
            }
            !gone
        };
        self.incoming.retain(|&(id, _)| keep(id));
        self.replica.waiting.retain(|&(id, _, _)| keep(id));
    }

    /// The counters of the step just served.
    fn account(&mut self, dt: f64, cpu_before: f64) {
        let wall = dt / self.speed;
        let s = &mut self.stats;
        let (running, waiting) = (self.replica.scheduled(), self.replica.unscheduled());
        s.running = running;
        s.waiting = waiting;
        s.kv_usage = (self.replica.kv_tokens / self.hw.kv_capacity).clamp(0.0, 1.0);
        s.generation_tokens = self.replica.generation_tokens;
        s.cpu_seconds += (self.replica.cpu_seconds - cpu_before) / self.speed;
        s.request_us += (running + waiting) as f64 * wall * 1e6;
        s.queue_us += waiting as f64 * wall * 1e6;
        s.compute_us += running as f64 * wall * 1e6;
        if running > 0 {
            s.decode_steps += 1;
            s.busy_slots += running as u64;
        }
        for e in &self.first {
            if let Some(p) = self.pending.get(&e.request) {
                let ttft = (e.at - p.arrival).max(0.0) / self.speed;
                let bucket = TTFT_BUCKETS.partition_point(|&le| le < ttft);
                if let Some(c) = s.ttft_counts.get_mut(bucket) {
                    *c += 1;
                }
                s.ttft_sum_s += ttft;
                s.prompt_tokens += u64::from(p.prompt);
            }
        }
        for f in &self.finished {
            if let Some(p) = self.pending.get(&f.request) {
                s.success += 1;
                let bucket = |n: u32| s.length_bounds.partition_point(|&le| le < f64::from(n));
                let (pb, ob) = (bucket(p.prompt), bucket(p.output));
                if let Some(c) = s.prompt_len_counts.get_mut(pb) {
                    *c += 1;
                }
                if let Some(c) = s.output_len_counts.get_mut(ob) {
                    *c += 1;
                }
                s.finished_output_tokens += u64::from(p.output);
                s.finished_prompt_tokens += u64::from(p.prompt);
                s.e2e_sum_s += (f.at - p.arrival).max(0.0) / self.speed;
            }
        }
    }

    /// Tells each handler what its request gained in the step just served.
    fn publish(&mut self) {
        let every = self.notify_every;
        let tell = |p: &Pending, tokens: u32, done: bool| {
            p.progress.send_if_modified(|now| {
                let next = Progress {
                    tokens: tokens.max(now.tokens).min(p.output),
                    done,
                };
                let wake = next.done != now.done
                    || (now.tokens == 0 && next.tokens > 0)
                    || next.tokens / every > now.tokens / every;
                *now = next;
                wake
            });
        };
        for e in &self.first {
            if let Some(p) = self.pending.get(&e.request) {
                tell(p, 1, false);
            }
        }
        for (request, generated) in self.replica.decoding_progress() {
            if let Some(p) = self.pending.get(&request) {
                tell(p, generated.floor().max(1.0) as u32, false);
            }
        }
        for f in &self.finished {
            if let Some(p) = self.pending.remove(&f.request) {
                tell(&p, p.output, true);
            }
        }
    }

    /// Steps on the wall clock until `submissions` closes; publishes [`Stats`] to `shared`.
    pub async fn run(
        mut self,
        clock: Clock,
        mut submissions: mpsc::UnboundedReceiver<Submit>,
        shared: Arc<Mutex<Stats>>,
    ) {
        // At least a millisecond between ticks: a tick serves every step that has ended.
        let period = Duration::from_secs_f64((self.dt / self.speed).max(1e-3));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            loop {
                match submissions.try_recv() {
                    Ok(s) => self.submit(s),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => return,
                }
            }
            if self.advance_to(clock.now()) > 0 {
                if let Ok(mut stats) = shared.lock() {
                    stats.clone_from(&self.stats);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submit(
        engine: &mut Engine,
        arrival: f64,
        prompt: u32,
        output: u32,
    ) -> watch::Receiver<Progress> {
        let (tx, rx) = watch::channel(Progress::default());
        engine.submit(Submit {
            arrival,
            prompt,
            output,
            progress: tx,
        });
        rx
    }

    fn small() -> GpuModel {
        GpuModel {
            max_batch: 2,
            ..GpuModel::default()
        }
    }

    #[test]
    fn requests_beyond_the_batch_wait_and_all_finish() {
        let mut e = Engine::new(small(), 0.05, 1.0);
        let rx: Vec<_> = (0..5).map(|_| submit(&mut e, 0.0, 100, 50)).collect();
        e.advance_to(0.05);
        assert_eq!((e.stats.running, e.stats.waiting), (2, 3));
        assert!(rx[0].borrow().tokens >= 1);
        assert_eq!(rx[4].borrow().tokens, 0);
        e.advance_to(60.0);
        for r in &rx {
            assert_eq!(
                *r.borrow(),
                Progress {
                    tokens: 50,
                    done: true
                }
            );
        }
        assert_eq!(e.stats.success, 5);
        assert_eq!(e.stats.finished_output_tokens, 250);
        assert_eq!(e.stats.prompt_tokens, 500);
        assert_eq!(e.stats.ttft_counts.iter().sum::<u64>(), 5);
        assert!(e.pending.is_empty());
    }

    #[test]
    fn a_request_joins_the_step_its_arrival_falls_in() {
        let mut e = Engine::new(small(), 0.05, 1.0);
        let rx = submit(&mut e, 0.12, 10, 3);
        e.advance_to(0.1);
        assert_eq!((e.stats.running, e.stats.waiting), (0, 0));
        assert_eq!(rx.borrow().tokens, 0);
        e.advance_to(0.15);
        assert_eq!(rx.borrow().tokens, 3);
        assert!(rx.borrow().done);
    }

    #[test]
    fn a_queued_request_whose_client_left_is_dropped() {
        let mut e = Engine::new(small(), 0.05, 1.0);
        let rx: Vec<_> = (0..4).map(|_| submit(&mut e, 0.0, 100, 1000)).collect();
        e.advance_to(0.05);
        assert_eq!((e.stats.running, e.stats.waiting), (2, 2));
        let mut rx = rx.into_iter();
        let kept = [rx.next(), rx.next(), rx.next()];
        drop(rx);
        e.advance_to(0.1);
        assert_eq!((e.stats.running, e.stats.waiting), (2, 1));
        assert_eq!(e.pending.len(), 3);
        drop(kept);
    }

    #[test]
    fn the_tokens_grow_step_by_step() {
        let mut e = Engine::new(small(), 0.05, 1.0);
        let rx = submit(&mut e, 0.0, 10, 100);
        let mut last = 0;
        let mut growing = 0;
        for k in 1..=200 {
            e.advance_to(f64::from(k) * 0.05);
            let now = *rx.borrow();
            assert!(now.tokens >= last);
            growing += usize::from(now.tokens > last);
            last = now.tokens;
        }
        assert_eq!(last, 100);
        assert!(growing > 5, "{growing} steps gained tokens");
    }

    #[test]
    fn a_stream_interval_wakes_the_handler_at_the_first_token_every_interval_and_the_end() {
        let mut e = Engine::new(small(), 0.05, 1.0).with_stream_interval(20);
        let mut rx = submit(&mut e, 0.0, 10, 100);
        let mut seen = Vec::new();
        for k in 1..=400 {
            e.advance_to(f64::from(k) * 0.05);
            match rx.has_changed() {
                Ok(true) => seen.push(*rx.borrow_and_update()),
                Ok(false) => {}
                // The engine let go of the request: its last value is the end.
                Err(_) => {
                    seen.push(*rx.borrow_and_update());
                    break;
                }
            }
        }
        let first = seen.first().copied().unwrap_or_default();
        assert!(first.tokens >= 1 && first.tokens < 20, "{seen:?}");
        assert!(
            seen.last().is_some_and(|p| p.done && p.tokens == 100),
            "{seen:?}"
        );
        // Between the first and the end, one wake per 20 tokens, each with the current count.
        assert!(seen.len() <= 2 + 100 / 20, "{seen:?}");
        for w in seen.windows(2) {
            assert!(w[1].done || w[1].tokens / 20 > w[0].tokens / 20, "{seen:?}");
        }
    }
}
