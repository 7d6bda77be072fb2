//! One simulated model-server replica: a queue, a running batch, and the counters a real server
//! would export on `/metrics`.
//!
//! Each step a replica admits waiting requests while it has batch slots and KV space; prefill of
//! the newly admitted uses part of the step (compute-bound, it stalls decode, as without chunked
//! prefill) and yields each request's first token; the rest of the step decodes every running
//! sequence at the bandwidth-bound step time. The replica keeps vLLM's counters (generation
//! tokens, CPU seconds, the TTFT histogram) so the control loop reads it exactly as it reads a
//! real pod: running is what the engine has begun (decoding, or part-way through its prefill),
//! waiting what it has not (no batch slot or KV space, or a prefill backlog), as vLLM's
//! scheduler reports them.

use super::gpu::GpuModel;
use crate::observe::metrics::histogram::Histogram;
use crate::observe::metrics::{Counters, Server, Signals};
use std::collections::{BinaryHeap, VecDeque};

/// vLLM's TTFT bucket bounds, seconds.
pub const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// The replica model with its derived numbers computed once.
#[derive(Debug, Clone)]
pub struct Hardware {
    pub gpu: GpuModel,
    pub kv_capacity: f64,
    pub prefill_rate: f64,
}

impl Hardware {
    pub fn new(gpu: GpuModel) -> Hardware {
        Hardware {
            kv_capacity: gpu.kv_capacity_tokens() as f64,
            prefill_rate: gpu.prefill_tokens_per_s(),
            gpu,
        }
    }
}

/// Where a replica is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// Pulling the image, loading weights, warming up (or, `warm`, waking from the standby
    /// pool); Ready at `ready_at`.
    Starting {
        ready_at: f64,
        warm: bool,
    },
    Ready,
    /// Removed from the Service: through its `preStop` pause (until `stop_at`) it is billed
    /// even when idle, then it stops when it has finished what it holds; what it still holds
    /// at `kill_at` (the end of its drain) is cut.
    Draining {
        stop_at: f64,
        kill_at: f64,
    },
}

/// A sequence in the batch still prefilling its prompt.
#[derive(Debug, Clone, Copy)]
pub struct Seq {
    /// Index into the trace.
    pub request: u32,
    pub prompt: u32,
    pub output: u32,
    /// Prompt tokens still to prefill.
    pub prefill_left: f64,
}

/// A sequence past its prefill. Every decoding sequence gains the same tokens in a step, so each
/// keeps only where it started on the replica's token clock: it has generated `offset - base`
/// tokens and finishes when the clock reaches `end` (`base` plus its output length). A step then
/// costs the sequences that finish, not the whole batch.
#[derive(Debug, Clone, Copy)]
struct Decoding {
    end: f64,
    base: f64,
    prompt: u32,
    /// Index into the trace.
    request: u32,
}

impl PartialEq for Decoding {
    fn eq(&self, other: &Self) -> bool {
        self.end.total_cmp(&other.end).is_eq()
    }
}

impl Eq for Decoding {}

impl PartialOrd for Decoding {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decoding {
    /// Reversed, so the max-heap pops the sequence that finishes first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.end.total_cmp(&self.end)
    }
}

/// The decoding part of the batch on its token clock.
#[derive(Debug, Clone, Default)]
struct DecodeBatch {
    heap: BinaryHeap<Decoding>,
    /// Tokens every decoding sequence has gained since the batch was last empty.
    offset: f64,
    prompt_sum: f64,
    base_sum: f64,
}

impl DecodeBatch {
    fn len(&self) -> usize {
        self.heap.len()
    }

    /// A sequence whose prefill just gave its first token.
    fn push(&mut self, request: u32, prompt: u32, output: u32) {
        let base = self.offset - 1.0;
        self.prompt_sum += f64::from(prompt);
        self.base_sum += base;
        self.heap.push(Decoding {
            end: base + f64::from(output),
            base,
            prompt,
            request,
        });
    }

    /// KV tokens of the decoding sequences: prompts plus what each generated.
    fn context(&self) -> f64 {
        self.prompt_sum + self.len() as f64 * self.offset - self.base_sum
    }

    /// Every sequence gains `tokens`; those that reach their output length finish part-way
    /// (each, with the tokens it still needed, goes to `finished` when given).
    /// Returns the tokens produced and the change in KV tokens.
    fn advance(&mut self, tokens: f64, mut finished: Option<&mut Vec<(u32, f64)>>) -> (f64, f64) {
        let (mut produced, mut kv_delta) = (0.0, 0.0);
        while let Some(done) = self.heap.peek().copied() {
            let need = (done.end - self.offset).max(0.0);
            if need > tokens {
                break;
            }
            self.heap.pop();
            if let Some(out) = finished.as_deref_mut() {
                out.push((done.request, need));
            }
            produced += need;
            kv_delta -= f64::from(done.prompt) + (self.offset - done.base);
            self.prompt_sum -= f64::from(done.prompt);
            self.base_sum -= done.base;
        }
        let left = self.len() as f64;
        produced += tokens * left;
        kv_delta += tokens * left;
        if self.heap.is_empty() {
            *self = DecodeBatch::default();
        } else {
            self.offset += tokens;
        }
        (produced, kv_delta)
    }
}

/// A request's first token, during a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstToken {
    pub request: u32,
    pub at: f64,
}

/// A request's last token, during a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finished {
    pub request: u32,
    pub at: f64,
}

#[derive(Debug, Clone)]
pub struct SimReplica {
    pub id: u32,
    pub phase: Phase,
    /// Requests routed here, not yet admitted (index, prompt, output).
    pub waiting: VecDeque<(u32, u32, u32)>,
    /// Admitted and still prefilling, in admission order.
    pub prefilling: VecDeque<Seq>,
    decoding: DecodeBatch,
    /// KV tokens held by the running batch.
    pub kv_tokens: f64,
    // Counters, as on /metrics.
    pub generation_tokens: f64,
    /// Prompt tokens prefilled, counted when a request's prefill ends (as vLLM counts them).
    pub prompt_tokens: f64,
    pub cpu_seconds: f64,
    pub ttft_counts: [u64; TTFT_BUCKETS.len() + 1],
    /// When it was ordered, and when it became Ready (its Ready condition's time).
    pub created_at: f64,
    pub ready_since: f64,
    /// Its `controller.kubernetes.io/pod-deletion-cost`, as last written.
    pub deletion_cost: Option<i32>,
}

impl SimReplica {
    pub fn new(id: u32, phase: Phase) -> SimReplica {
        SimReplica {
            id,
            phase,
            waiting: VecDeque::new(),
            prefilling: VecDeque::new(),
            decoding: DecodeBatch::default(),
            kv_tokens: 0.0,
            generation_tokens: 0.0,
            prompt_tokens: 0.0,
            cpu_seconds: 0.0,
            ttft_counts: [0; TTFT_BUCKETS.len() + 1],
            created_at: 0.0,
            ready_since: 0.0,
            deletion_cost: None,
        }
    }

    /// Every request routed here and not finished: waiting, prefilling, decoding.
    pub fn requests(&self) -> impl Iterator<Item = u32> + '_ {
        self.waiting
            .iter()
            .map(|w| w.0)
            .chain(self.prefilling.iter().map(|s| s.request))
            .chain(self.decoding.heap.iter().map(|d| d.request))
    }

    /// Requests in the batch: prefilling or decoding.
    pub fn running(&self) -> usize {
        self.prefilling.len() + self.decoding.len()
    }

    /// Requests routed here and not finished.
    pub fn outstanding(&self) -> usize {
        self.waiting.len() + self.running()
    }

    /// Requests the engine has begun: decoding, or with part of their prompt prefilled. This is
    /// what a server's running gauge counts (vLLM's scheduler moves a request from waiting to
    /// running when it schedules its first chunk of prefill).
    pub fn scheduled(&self) -> usize {
        let started = self
            .prefilling
            .iter()
            .take_while(|s| s.prefill_left < f64::from(s.prompt))
            .count();
        self.decoding.len() + started
    }

    /// Requests not begun: waiting for a batch slot or KV space, or admitted with none of their
    /// prompt prefilled yet (a prefill backlog). What a server's waiting gauge counts.
    pub fn unscheduled(&self) -> usize {
        self.outstanding() - self.scheduled()
    }

    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    fn record_ttft(&mut self, ttft: f64) {
        let bucket = TTFT_BUCKETS.partition_point(|&le| le < ttft);
        self.ttft_counts[bucket] += 1;
    }

    /// Output tokens each decoding request has generated so far (its first token included),
    /// in no particular order. It visits the whole batch: for the emulator, not the simulator's
    /// step.
    pub fn decoding_progress(&self) -> impl Iterator<Item = (u32, f64)> + '_ {
        let offset = self.decoding.offset;
        self.decoding
            .heap
            .iter()
            .map(move |d| (d.request, offset - d.base))
    }

    /// Serves one step `[t, t + dt)`; `arrival` gives a request's arrival time for its TTFT.
    pub fn step(
        &mut self,
        hw: &Hardware,
        t: f64,
        dt: f64,
        arrival: impl Fn(u32) -> f64,
        events: &mut Vec<FirstToken>,
    ) {
        self.serve(hw, t, dt, arrival, events, None);
    }

    /// [`SimReplica::step`], also reporting the requests that finish in the step.
    pub fn step_reporting(
        &mut self,
        hw: &Hardware,
        t: f64,
        dt: f64,
        arrival: impl Fn(u32) -> f64,
        events: &mut Vec<FirstToken>,
        finished: &mut Vec<Finished>,
    ) {
        self.serve(hw, t, dt, arrival, events, Some(finished));
    }

    fn serve(
        &mut self,
        hw: &Hardware,
        t: f64,
        dt: f64,
        arrival: impl Fn(u32) -> f64,
        events: &mut Vec<FirstToken>,
        finished: Option<&mut Vec<Finished>>,
    ) {
        let (gpu, kv_capacity, prefill_rate) = (&hw.gpu, hw.kv_capacity, hw.prefill_rate);
        self.cpu_seconds += dt * gpu.cpu_cores(self.running());
        // Admission: free batch slots and KV space for the prompt.
        while self.running() < gpu.max_batch as usize {
            let Some(&(request, prompt, output)) = self.waiting.front() else {
                break;
            };
            if self.kv_tokens + f64::from(prompt) > kv_capacity && self.running() > 0 {
                break;
            }
            self.waiting.pop_front();
            self.kv_tokens += f64::from(prompt);
            self.prefilling.push_back(Seq {
                request,
                prompt,
                output,
                prefill_left: f64::from(prompt),
            });
        }
        // Prefill, in admission order, takes its share of the step's time (decode runs in the
        // rest, before and after); a first token comes no earlier than its prefill after the
        // request arrived. A sequence whose prefill ends joins this step's decode.
        let end = t + dt;
        let mut used = 0.0;
        let first = events.len();
        while let Some(seq) = self.prefilling.front_mut() {
            if used >= dt {
                break;
            }
            let need = seq.prefill_left / prefill_rate;
            if used + need <= dt {
                used += need;
                let at = (arrival(seq.request) + need).max(t + used).min(end);
                events.push(FirstToken {
                    request: seq.request,
                    at,
                });
                let (request, prompt, output) = (seq.request, seq.prompt, seq.output);
                self.prompt_tokens += f64::from(prompt);
                self.prefilling.pop_front();
                self.decoding.push(request, prompt, output);
            } else {
                seq.prefill_left -= (dt - used) * prefill_rate;
                used = dt;
            }
        }
        let budget = dt - used;
        let mut produced = (events.len() - first) as f64;
        self.kv_tokens += produced;
        for e in &events[first..] {
            self.record_ttft(e.at - arrival(e.request));
        }
        // Decode every sequence past its prefill with what is left of the step; a sequence
        // that reaches its output length finishes part-way through.
        if self.decoding.len() > 0 {
            let step_s = gpu.decode_step_s(self.decoding.context());
            let (made, kv_delta) = match finished {
                None => self.decoding.advance(budget / step_s, None),
                Some(out) => {
                    // A sequence finishes once decode, after the step's prefill, has made the
                    // tokens it still needed.
                    let mut ends = Vec::new();
                    let r = self.decoding.advance(budget / step_s, Some(&mut ends));
                    out.extend(ends.into_iter().map(|(request, need)| Finished {
                        request,
                        at: (t + used + need * step_s).min(end),
                    }));
                    r
                }
            };
            produced += made;
            self.kv_tokens = (self.kv_tokens + kv_delta).max(0.0);
        }
        self.generation_tokens += produced;
    }

    /// The replica as a scrape of its `/metrics` page shows it.
    pub fn signals(&self, kv_capacity: f64) -> Signals {
        let mut ttft = Histogram::default();
        let mut cumulative = 0;
        for (i, count) in self.ttft_counts.iter().enumerate() {
            cumulative += count;
            let le = TTFT_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY);
            ttft.add(le, cumulative as f64);
        }
        Signals {
            server: Server::Vllm,
            running: Some(self.scheduled() as f64),
            waiting: self.unscheduled() as f64,
            kv: Some((self.kv_tokens / kv_capacity).min(1.0)),
            asleep: None,
            counters: Counters {
                output_tokens: Some(self.generation_tokens),
                prompt_tokens: Some(self.prompt_tokens),
                cpu_seconds: Some(self.cpu_seconds),
                ttft: Some(ttft),
                ..Counters::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reporting_the_finished_changes_nothing_else() {
        let hw = Hardware::new(GpuModel {
            max_batch: 3,
            ..GpuModel::default()
        });
        let (mut plain, mut told) = (
            SimReplica::new(0, Phase::Ready),
            SimReplica::new(1, Phase::Ready),
        );
        for (i, output) in [(0, 5), (1, 40), (2, 1), (3, 12)] {
            plain.waiting.push_back((i, 300, output));
            told.waiting.push_back((i, 300, output));
        }
        let (mut a, mut b, mut done) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..100 {
            let t = f64::from(k) * 0.05;
            plain.step(&hw, t, 0.05, |_| 0.0, &mut a);
            told.step_reporting(&hw, t, 0.05, |_| 0.0, &mut b, &mut done);
            assert!(told
                .decoding_progress()
                .all(|(_, made)| (1.0..40.0).contains(&made)));
        }
        assert_eq!(a, b);
        assert_eq!(plain.generation_tokens, told.generation_tokens);
        assert_eq!(plain.kv_tokens, told.kv_tokens);
        let mut order: Vec<u32> = done.iter().map(|f| f.request).collect();
        order.sort_unstable();
        assert_eq!(order, [0, 1, 2, 3]);
        for f in &done {
            let first = b.iter().find(|e| e.request == f.request).map(|e| e.at);
            assert!(first.is_some_and(|at| at <= f.at), "{f:?}");
        }
        assert_eq!(told.outstanding(), 0);
    }
}
