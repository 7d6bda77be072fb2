//! What each model server calls its load, and one page read into [`Signals`].
//!
//! vLLM, llama.cpp, SGLang, TGI, TensorRT-LLM and Triton export the same few quantities under different names:
//! requests in the running batch, requests waiting for a slot, KV-cache pressure, and counters
//! that only mean something as rates. A [`Profile`] maps those names; [`read_page`] makes a single
//! pass over the page with every wanted name decided before labels are touched, sums running and
//! waiting across label sets (a vLLM pod with data parallelism reports one `engine` per engine),
//! and takes the maximum KV usage (the fullest engine preempts first). With [`ServerChoice::Auto`]
//! the first profile whose queue series appear on the page wins. A name may carry one label
//! selector, `name{label="value"}`, for servers that put several quantities under one name
//! (Triton's TensorRT-LLM backend: `nv_trt_llm_request_metrics{request_type="active"}`).

use super::exposition::{self, Sample, Scan, Visitor};
use super::histogram::Histogram;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The model servers infscale knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    Vllm,
    LlamaCpp,
    Sglang,
    /// Archived upstream (March 2026); kept for the servers still running it.
    Tgi,
    Triton,
    /// TensorRT-LLM: `trtllm-serve` (`/prometheus/metrics`) and Triton's TensorRT-LLM backend.
    Trtllm,
}

impl Server {
    /// In the order `auto` tries them: TensorRT-LLM before Triton, since Triton's TensorRT-LLM
    /// backend pages carry Triton's own queue series too.
    pub const ALL: [Server; 6] = [
        Server::Vllm,
        Server::LlamaCpp,
        Server::Sglang,
        Server::Tgi,
        Server::Trtllm,
        Server::Triton,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Server::Vllm => "vllm",
            Server::LlamaCpp => "llamacpp",
            Server::Sglang => "sglang",
            Server::Tgi => "tgi",
            Server::Triton => "triton",
            Server::Trtllm => "trtllm",
        }
    }

    pub fn profile(self) -> &'static Profile {
        &PROFILES[self as usize]
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A server named by the user, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ServerChoice {
    #[default]
    Auto,
    Is(Server),
}

impl FromStr for ServerChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(ServerChoice::Auto),
            "vllm" => Ok(ServerChoice::Is(Server::Vllm)),
            "llamacpp" | "llama.cpp" | "llama-cpp" => Ok(ServerChoice::Is(Server::LlamaCpp)),
            "sglang" => Ok(ServerChoice::Is(Server::Sglang)),
            "tgi" => Ok(ServerChoice::Is(Server::Tgi)),
            "triton" => Ok(ServerChoice::Is(Server::Triton)),
            "trtllm" | "tensorrt-llm" | "tensorrt_llm" => Ok(ServerChoice::Is(Server::Trtllm)),
            _ => Err(format!(
                "unknown server {s:?}: expected auto, vllm, llamacpp, sglang, tgi, triton or trtllm"
            )),
        }
    }
}

impl fmt::Display for ServerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerChoice::Auto => f.write_str("auto"),
            ServerChoice::Is(server) => server.fmt(f),
        }
    }
}

/// The series names of one server.
#[derive(Debug)]
pub struct Profile {
    pub server: Server,
    /// Requests in the running batch, summed over label sets. Empty where it must be derived
    /// (Triton: from its compute-duration counter, so only with two scrapes).
    pub running: &'static [&'static str],
    /// Requests waiting for a slot, summed.
    pub waiting: &'static [&'static str],
    /// KV-cache usage 0..1, maximum over label sets; the first name present wins (newest first).
    pub kv: &'static [&'static str],
    /// Output tokens generated, a counter, summed.
    pub output_tokens: &'static [&'static str],
    /// Prompt tokens prefilled, a counter, summed (empty where the server exports none).
    pub prompt_tokens: &'static [&'static str],
    /// Time-to-first-token histogram buckets, and the factor from its unit to seconds.
    pub ttft_buckets: Option<(&'static str, f64)>,
    /// Triton's cumulative microsecond counters: request, queue, compute.
    pub durations: Option<[&'static str; 3]>,
    /// Whether the server's page carries the process collector's [`CPU_SECONDS`] (Python's
    /// Prometheus client exports it by default; llama.cpp, TGI and Triton do not).
    pub process_cpu: bool,
    /// A gauge that reads 1 while the engine is awake and 0 while it sleeps, per label set (one
    /// per engine); the replica is asleep when any engine's reads 0. Empty where the page
    /// carries no sleep state (llama.cpp says it on `/props`: [`super::props`]).
    pub awake: &'static [&'static str],
}

/// The CPU counter a server's process collector exports (where it has one: `process_cpu`).
pub const CPU_SECONDS: &str = "process_cpu_seconds_total";

static PROFILES: [Profile; 6] = [
    Profile {
        server: Server::Vllm,
        running: &["vllm:num_requests_running"],
        waiting: &["vllm:num_requests_waiting"],
        kv: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        output_tokens: &["vllm:generation_tokens_total"],
        prompt_tokens: &["vllm:prompt_tokens_total"],
        ttft_buckets: Some(("vllm:time_to_first_token_seconds_bucket", 1.0)),
        durations: None,
        process_cpu: true,
        // vllm/v1/metrics/loggers.py: one series per engine and `sleep_state` (awake,
        // weights_offloaded, discard_all), 1 on the current one; always exported.
        awake: &["vllm:engine_sleep_state{sleep_state=\"awake\"}"],
    },
    Profile {
        server: Server::LlamaCpp,
        running: &["llamacpp:requests_processing"],
        waiting: &["llamacpp:requests_deferred"],
        // Its KV ratio gauge (`llamacpp:kv_cache_usage_ratio`) was removed upstream.
        kv: &[],
        output_tokens: &["llamacpp:tokens_predicted_total"],
        prompt_tokens: &["llamacpp:prompt_tokens_total"],
        ttft_buckets: None,
        durations: None,
        process_cpu: false,
        awake: &[],
    },
    Profile {
        server: Server::Sglang,
        running: &["sglang:num_running_reqs"],
        waiting: &["sglang:num_queue_reqs"],
        kv: &["sglang:token_usage"],
        output_tokens: &["sglang:generation_tokens_total"],
        prompt_tokens: &["sglang:prompt_tokens_total"],
        ttft_buckets: Some(("sglang:time_to_first_token_seconds_bucket", 1.0)),
        durations: None,
        process_cpu: true,
        awake: &[],
    },
    Profile {
        server: Server::Tgi,
        running: &["tgi_batch_current_size"],
        waiting: &["tgi_queue_size"],
        kv: &[],
        output_tokens: &["tgi_request_generated_tokens_sum"],
        prompt_tokens: &["tgi_request_input_length_sum"],
        ttft_buckets: None,
        durations: None,
        process_cpu: false,
        awake: &[],
    },
    Profile {
        server: Server::Triton,
        running: &[],
        waiting: &["nv_inference_pending_request_count"],
        kv: &[],
        output_tokens: &[],
        prompt_tokens: &[],
        ttft_buckets: Some(("nv_inference_first_response_histogram_ms_bucket", 1e-3)),
        durations: Some([
            "nv_inference_request_duration_us",
            "nv_inference_queue_duration_us",
            "nv_inference_compute_infer_duration_us",
        ]),
        process_cpu: false,
        awake: &[],
    },
    // trtllm-serve's names (tensorrt_llm/metrics/collector.py), then the Triton TensorRT-LLM
    // backend's (its README, "Triton Metrics"): "active" is the in-flight batch, "waiting" the
    // queue (backends before the "waiting" type have no queue series and read as missing).
    Profile {
        server: Server::Trtllm,
        running: &[
            "trtllm_num_requests_running",
            "nv_trt_llm_request_metrics{request_type=\"active\"}",
        ],
        waiting: &[
            "trtllm_num_requests_waiting",
            "nv_trt_llm_request_metrics{request_type=\"waiting\"}",
        ],
        kv: &[
            "trtllm_kv_cache_utilization",
            "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\"}",
        ],
        output_tokens: &["trtllm_generation_tokens_total"],
        prompt_tokens: &["trtllm_prompt_tokens_total"],
        ttft_buckets: Some(("trtllm_time_to_first_token_seconds_bucket", 1.0)),
        durations: None,
        process_cpu: true,
        awake: &[],
    },
];

/// A profile name split into the metric name and its label selector, if any:
/// `a{b="c"}` is `("a", Some(("b", "c")))`.
fn selector(name: &'static str) -> (&'static str, Option<(&'static str, &'static str)>) {
    let Some((metric, rest)) = name.split_once('{') else {
        return (name, None);
    };
    let inner = rest.trim_end_matches('}');
    let label = inner.split_once('=').map(|(l, v)| (l, v.trim_matches('"')));
    (metric, label)
}

impl Profile {
    /// The series whose presence identifies this server.
    pub fn queue_series(&self) -> impl Iterator<Item = &'static str> {
        self.running.iter().chain(self.waiting.iter()).copied()
    }
}

/// Cumulative counters of one scrape: only their change between two scrapes means anything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub output_tokens: Option<f64>,
    /// Prompt tokens prefilled (counted when a request's prefill ends).
    #[serde(default)]
    pub prompt_tokens: Option<f64>,
    pub cpu_seconds: Option<f64>,
    /// Triton: cumulative microseconds spent by requests in the server, queued, and computing.
    pub request_us: Option<f64>,
    pub queue_us: Option<f64>,
    pub compute_us: Option<f64>,
    /// Time-to-first-token buckets, in seconds.
    pub ttft: Option<Histogram>,
}

/// The load of one replica as one page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    pub server: Server,
    /// `None` where the server has no running gauge (Triton derives it from two scrapes).
    pub running: Option<f64>,
    pub waiting: f64,
    /// KV-cache usage 0..1, where the server exports it.
    pub kv: Option<f64>,
    /// Whether the server says it sleeps (its weights or KV cache released, nothing served
    /// until woken); `None` where it does not say.
    #[serde(default)]
    pub asleep: Option<bool>,
    pub counters: Counters,
}

/// A page that yields no signals.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProfileError {
    #[error("no known model server's queue series on the page (looked for {looked_for})")]
    NoServer { looked_for: String },
    #[error("{server} page has no {missing} series")]
    MissingSeries {
        server: Server,
        missing: &'static str,
    },
    #[error("every line of the page is malformed ({skipped} skipped)")]
    Unusable { skipped: usize },
    /// A histogram with more distinct bucket bounds than any real one has.
    #[error("{server} page's {series} has over {max} distinct buckets")]
    TooManyBuckets {
        server: Server,
        series: &'static str,
        max: usize,
    },
    /// The page is another server's: a configuration error, not a failed scrape.
    #[error("configured as a {configured} page, but the page is {seen}'s (set the server to {seen} or auto)")]
    WrongServer { configured: Server, seen: Server },
}

/// The most distinct bucket bounds read from one histogram: real ones have 10 to 30.
pub const MAX_BUCKETS: usize = 256;

/// A page read through a profile: the signals (or why there are none) and what the scan saw.
#[derive(Debug, Clone)]
pub struct PageRead {
    pub signals: Result<Signals, ProfileError>,
    pub scan: Scan,
}

/// Reads one `/metrics` page with the chosen server's profile (or every profile, for `auto`).
pub fn read_page(page: &[u8], choice: ServerChoice) -> PageRead {
    let mut acc = Accumulator::new(choice);
    let scan = exposition::scan(page, &mut acc);
    let signals = if scan.unusable() {
        Err(ProfileError::Unusable {
            skipped: scan.skipped,
        })
    } else {
        acc.finish(choice)
    };
    // A page that is not the configured server's: say whose it is (read again for every
    // server, on this failure path only).
    let signals = match (signals, choice) {
        (Err(e @ ProfileError::MissingSeries { .. }), ServerChoice::Is(configured)) => {
            match read_page(page, ServerChoice::Auto).signals {
                Ok(other) if other.server != configured => Err(ProfileError::WrongServer {
                    configured,
                    seen: other.server,
                }),
                _ => Err(e),
            }
        }
        (signals, _) => signals,
    };
    PageRead { signals, scan }
}

/// Which quantity a wanted name feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Running,
    Waiting,
    /// Index into the profile's KV names (0 = newest).
    Kv(usize),
    OutputTokens,
    PromptTokens,
    Ttft,
    Duration(usize),
    Awake,
}

/// Where a wanted series goes: the shared CPU counter, or one field of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Cpu,
    Of(Server, Field),
}

/// Sums for one server while the page is scanned.
#[derive(Debug, Default, Clone)]
struct Tally {
    running: Option<f64>,
    waiting: Option<f64>,
    kv: [Option<f64>; 2],
    output_tokens: Option<f64>,
    prompt_tokens: Option<f64>,
    ttft: Option<Histogram>,
    /// A bucket past [`MAX_BUCKETS`] was refused: the histogram is not read.
    ttft_overflow: bool,
    durations: [Option<f64>; 3],
    /// The lowest awake gauge over the label sets.
    awake: Option<f64>,
}

/// One series looked for: its metric name, the label it must carry (if any), and where it goes.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    name: &'static str,
    label: Option<(&'static str, &'static str)>,
    slot: Slot,
}

struct Accumulator {
    /// Every series looked for.
    names: Vec<Wanted>,
    tallies: [Tally; 6],
    cpu: Option<f64>,
    /// The first entry of `names` for the sample just accepted by `wants`.
    current: Option<usize>,
}

fn add(slot: &mut Option<f64>, value: f64) {
    *slot = Some(slot.unwrap_or(0.0) + value);
}

impl Accumulator {
    fn new(choice: ServerChoice) -> Self {
        let wanted = |n: &'static str, slot| {
            let (name, label) = selector(n);
            Wanted { name, label, slot }
        };
        let mut names = vec![wanted(CPU_SECONDS, Slot::Cpu)];
        for profile in &PROFILES {
            if matches!(choice, ServerChoice::Is(s) if s != profile.server) {
                continue;
            }
            let slot = |field| Slot::Of(profile.server, field);
            let fields = [
                (profile.running, Field::Running),
                (profile.waiting, Field::Waiting),
                (profile.output_tokens, Field::OutputTokens),
                (profile.prompt_tokens, Field::PromptTokens),
                (profile.awake, Field::Awake),
            ];
            for (list, field) in fields {
                names.extend(list.iter().map(|n| wanted(n, slot(field))));
            }
            names.extend(
                profile
                    .kv
                    .iter()
                    .enumerate()
                    .map(|(i, n)| wanted(n, slot(Field::Kv(i)))),
            );
            if let Some((name, _)) = profile.ttft_buckets {
                names.push(wanted(name, slot(Field::Ttft)));
            }
            if let Some(list) = profile.durations {
                names.extend(
                    list.iter()
                        .enumerate()
                        .map(|(i, n)| wanted(n, slot(Field::Duration(i)))),
                );
            }
        }
        Accumulator {
            names,
            tallies: Default::default(),
            cpu: None,
            current: None,
        }
    }

    fn finish(self, choice: ServerChoice) -> Result<Signals, ProfileError> {
        let found = match choice {
            ServerChoice::Is(server) => Some(server),
            // The first server whose queue series are all on the page, else the first with any
            // (an old Triton TensorRT-LLM backend has "active" but no "waiting": Triton's own
            // pending count reads it).
            ServerChoice::Auto => {
                let tally = |s: &Server| &self.tallies[*s as usize];
                let complete = |s: &Server| {
                    let t = tally(s);
                    t.waiting.is_some() && (s.profile().running.is_empty() || t.running.is_some())
                };
                let any = |s: &Server| tally(s).running.is_some() || tally(s).waiting.is_some();
                Server::ALL
                    .into_iter()
                    .find(complete)
                    .or_else(|| Server::ALL.into_iter().find(any))
            }
        };
        let Some(server) = found else {
            let looked_for: Vec<String> = Server::ALL
                .iter()
                .map(|s| {
                    let names: Vec<&str> = s.profile().queue_series().collect();
                    format!("{s}: {}", names.join(", "))
                })
                .collect();
            return Err(ProfileError::NoServer {
                looked_for: looked_for.join("; "),
            });
        };
        let profile = server.profile();
        let tally = &self.tallies[server as usize];
        let missing = |names: &'static [&'static str]| ProfileError::MissingSeries {
            server,
            missing: names.first().copied().unwrap_or("queue"),
        };
        let waiting = tally.waiting.ok_or_else(|| missing(profile.waiting))?;
        if !profile.running.is_empty() && tally.running.is_none() {
            return Err(missing(profile.running));
        }
        if let (true, Some((series, _))) = (tally.ttft_overflow, profile.ttft_buckets) {
            return Err(ProfileError::TooManyBuckets {
                server,
                series,
                max: MAX_BUCKETS,
            });
        }
        let unit = profile.ttft_buckets.map_or(1.0, |(_, unit)| unit);
        let ttft = tally.ttft.clone().map(|mut h| {
            for b in &mut h.buckets {
                b.le *= unit;
            }
            h
        });
        Ok(Signals {
            server,
            running: tally.running,
            waiting,
            kv: tally.kv[0].or(tally.kv[1]),
            asleep: tally.awake.map(|awake| awake < 0.5),
            counters: Counters {
                output_tokens: tally.output_tokens,
                prompt_tokens: tally.prompt_tokens,
                cpu_seconds: self.cpu,
                request_us: tally.durations[0],
                queue_us: tally.durations[1],
                compute_us: tally.durations[2],
                ttft,
            },
        })
    }
}

impl Visitor for Accumulator {
    fn wants(&mut self, name: &str) -> bool {
        self.current = self.names.iter().position(|w| w.name == name);
        self.current.is_some()
    }

    fn sample(&mut self, sample: &Sample<'_>) {
        // A negative or non-finite count of requests, tokens or seconds is not a reading.
        if !sample.value.is_finite() || sample.value < 0.0 {
            return;
        }
        let Some(first) = self.current else {
            return;
        };
        // The first entry for this name whose label selector the sample meets.
        let name = self.names[first].name;
        let slot = self.names[first..]
            .iter()
            .filter(|w| w.name == name)
            .find(|w| {
                w.label
                    .is_none_or(|(label, want)| sample.label(label).is_some_and(|v| v == want))
            })
            .map(|w| w.slot);
        let value = sample.value;
        let (server, field) = match slot {
            None => return,
            Some(Slot::Cpu) => return add(&mut self.cpu, value),
            Some(Slot::Of(server, field)) => (server, field),
        };
        let tally = &mut self.tallies[server as usize];
        match field {
            Field::Running => add(&mut tally.running, value),
            Field::Waiting => add(&mut tally.waiting, value),
            Field::Kv(i) => {
                let slot = &mut tally.kv[i.min(1)];
                *slot = Some(slot.map_or(value, |v: f64| v.max(value)));
            }
            Field::OutputTokens => add(&mut tally.output_tokens, value),
            Field::PromptTokens => add(&mut tally.prompt_tokens, value),
            Field::Duration(i) => add(&mut tally.durations[i.min(2)], value),
            Field::Awake => tally.awake = Some(tally.awake.map_or(value, |a| a.min(value))),
            Field::Ttft => {
                let le = sample
                    .label("le")
                    .and_then(|le| exposition::parse_float(&le));
                if let Some(le) = le.filter(|le| !le.is_nan()) {
                    let within = tally
                        .ttft
                        .get_or_insert_with(Histogram::default)
                        .add_within(le, value, MAX_BUCKETS);
                    tally.ttft_overflow |= !within;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
