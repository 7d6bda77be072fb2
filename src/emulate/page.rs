//! The `/metrics` page in each server's dialect, from the engine's [`Stats`].
//!
//! The series names, types and labels are the ones vLLM, llama.cpp, SGLang, TGI, Triton and
//! trtllm-serve export
//! (see the profiles in [`infscale_core::observe::metrics::profile`], which read these pages back): running and
//! waiting (or queue) gauges, KV usage where the server has one, a TTFT histogram where it has
//! one, prompt and output token counters, a success counter, and the process CPU counter where the
//! server's process collector exports it.

use super::engine::Stats;
use super::Dialect;
use infscale_core::sim::replica::TTFT_BUCKETS;
use std::fmt::Write;

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes metric families with one label set.
struct Page {
    out: String,
    labels: String,
}

impl Page {
    fn new(labels: &[(&str, &str)]) -> Page {
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect::<Vec<_>>()
            .join(",");
        Page {
            out: String::new(),
            labels,
        }
    }

    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, extra: &str, value: f64) {
        let sep = if self.labels.is_empty() || extra.is_empty() {
            ""
        } else {
            ","
        };
        if self.labels.is_empty() && extra.is_empty() {
            let _ = writeln!(self.out, "{name} {value}");
        } else {
            let _ = writeln!(self.out, "{name}{{{}{sep}{extra}}} {value}", self.labels);
        }
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.head(name, kind, help);
        self.sample(name, "", value);
    }

    /// A histogram from per-bucket counts on `bounds` (the last count is +Inf), scaled by `unit`.
    fn histogram(
        &mut self,
        name: &str,
        help: &str,
        bounds: &[f64],
        unit: f64,
        counts: &[u64],
        sum: f64,
    ) {
        self.head(name, "histogram", help);
        let mut cumulative = 0;
        for (i, count) in counts.iter().enumerate() {
            cumulative += count;
            let le = match bounds.get(i) {
                Some(b) => format!("{}", b * unit),
                None => "+Inf".to_owned(),
            };
            self.sample(
                &format!("{name}_bucket"),
                &format!("le=\"{le}\""),
                cumulative as f64,
            );
        }
        self.sample(&format!("{name}_sum"), "", sum * unit);
        self.sample(&format!("{name}_count"), "", cumulative as f64);
    }
}

fn cpu(p: &mut Page, s: &Stats) {
    // The process collector's series carries no labels.
    let labels = std::mem::take(&mut p.labels);
    p.one(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        s.cpu_seconds,
    );
    p.labels = labels;
}

fn vllm(s: &Stats, model: &str) -> String {
    let mut p = Page::new(&[("engine", "0"), ("model_name", model)]);
    p.one(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        s.running as f64,
    );
    p.one(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        s.waiting as f64,
    );
    p.one(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        s.kv_usage,
    );
    p.one(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens as f64,
    );
    p.one(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        s.generation_tokens.floor(),
    );
    p.head(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
    );
    p.sample(
        "vllm:request_success_total",
        "finished_reason=\"length\"",
        s.success as f64,
    );
    p.histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &TTFT_BUCKETS,
        1.0,
        &s.ttft_counts,
        s.ttft_sum_s,
    );
    p.histogram(
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        &s.length_bounds,
        1.0,
        &s.prompt_len_counts,
        s.finished_prompt_tokens as f64,
    );
    p.histogram(
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        &s.length_bounds,
        1.0,
        &s.output_len_counts,
        s.finished_output_tokens as f64,
    );
    cpu(&mut p, s);
    p.out
}

fn llamacpp(s: &Stats) -> String {
    let mut p = Page::new(&[]);
    let per_decode = if s.decode_steps == 0 {
        0.0
    } else {
        s.busy_slots as f64 / s.decode_steps as f64
    };
    p.one(
        "llamacpp:prompt_tokens_total",
        "counter",
        "Number of prompt tokens processed.",
        s.prompt_tokens as f64,
    );
    p.one(
        "llamacpp:tokens_predicted_total",
        "counter",
        "Number of generation tokens processed.",
        s.finished_output_tokens as f64,
    );
    p.one(
        "llamacpp:n_decode_total",
        "counter",
        "Total number of llama_decode() calls",
        s.decode_steps as f64,
    );
    p.one(
        "llamacpp:n_busy_slots_per_decode",
        "counter",
        "Average number of busy slots per llama_decode() call",
        per_decode,
    );
    p.one(
        "llamacpp:requests_processing",
        "gauge",
        "Number of requests processing.",
        s.running as f64,
    );
    p.one(
        "llamacpp:requests_deferred",
        "gauge",
        "Number of requests deferred.",
        s.waiting as f64,
    );
    p.out
}

fn sglang(s: &Stats, model: &str) -> String {
    let mut p = Page::new(&[("model_name", model)]);
    p.one(
        "sglang:num_running_reqs",
        "gauge",
        "The number of running requests.",
        s.running as f64,
    );
    p.one(
        "sglang:num_queue_reqs",
        "gauge",
        "The number of requests in the waiting queue.",
        s.waiting as f64,
    );
    p.one(
        "sglang:token_usage",
        "gauge",
        "The token usage.",
        s.kv_usage,
    );
    p.one(
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens as f64,
    );
    p.one(
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        s.generation_tokens.floor(),
    );
    p.one(
        "sglang:num_requests_total",
        "counter",
        "Number of requests processed.",
        s.success as f64,
    );
    p.histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &TTFT_BUCKETS,
        1.0,
        &s.ttft_counts,
        s.ttft_sum_s,
    );
    cpu(&mut p, s);
    p.out
}

fn tgi(s: &Stats) -> String {
    let mut p = Page::new(&[]);
    p.one(
        "tgi_batch_current_size",
        "gauge",
        "Current batch size",
        s.running as f64,
    );
    p.one(
        "tgi_queue_size",
        "gauge",
        "Current queue size",
        s.waiting as f64,
    );
    p.one(
        "tgi_request_count",
        "counter",
        "Total number of requests",
        s.requests as f64,
    );
    p.one(
        "tgi_request_success",
        "counter",
        "Number of successful requests",
        s.success as f64,
    );
    // Histograms without buckets beyond +Inf: their sums and counts are what is read.
    p.histogram(
        "tgi_request_input_length",
        "Input tokens per request",
        &[],
        1.0,
        &[s.success],
        s.finished_prompt_tokens as f64,
    );
    p.histogram(
        "tgi_request_generated_tokens",
        "Generated tokens per request",
        &[],
        1.0,
        &[s.success],
        s.finished_output_tokens as f64,
    );
    p.histogram(
        "tgi_request_duration",
        "Request duration, seconds",
        &[],
        1.0,
        &[s.success],
        s.e2e_sum_s,
    );
    p.out
}

fn triton(s: &Stats, model: &str) -> String {
    let mut p = Page::new(&[("model", model), ("version", "1")]);
    let counters = [
        (
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            s.success as f64,
        ),
        (
            "nv_inference_request_failure",
            "Number of failed inference requests, all batch sizes",
            0.0,
        ),
        (
            "nv_inference_count",
            "Number of inferences performed (does not include cached requests)",
            s.success as f64,
        ),
        (
            "nv_inference_exec_count",
            "Number of model executions performed (does not include cached requests)",
            s.decode_steps as f64,
        ),
        (
            "nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds (includes cached requests)",
            s.request_us.floor(),
        ),
        (
            "nv_inference_queue_duration_us",
            "Cumulative inference queuing duration in microseconds (includes cached requests)",
            s.queue_us.floor(),
        ),
        (
            "nv_inference_compute_input_duration_us",
            "Cumulative compute input duration in microseconds (does not include cached requests)",
            0.0,
        ),
        (
            "nv_inference_compute_infer_duration_us",
            "Cumulative compute inference duration in microseconds (does not include cached requests)",
            s.compute_us.floor(),
        ),
        (
            "nv_inference_compute_output_duration_us",
            "Cumulative inference compute output duration in microseconds (does not include cached requests)",
            0.0,
        ),
    ];
    for (name, help, value) in counters {
        p.one(name, "counter", help, value);
    }
    p.one(
        "nv_inference_pending_request_count",
        "gauge",
        "Instantaneous number of pending requests awaiting execution per-model.",
        s.waiting as f64,
    );
    p.histogram(
        "nv_inference_first_response_histogram_ms",
        "Duration from request to first response in milliseconds",
        &TTFT_BUCKETS,
        1e3,
        &s.ttft_counts,
        s.ttft_sum_s,
    );
    p.out
}

/// trtllm-serve's `/prometheus/metrics` (tensorrt_llm/metrics/collector.py).
fn trtllm(s: &Stats, model: &str) -> String {
    let mut p = Page::new(&[("model_name", model), ("engine_type", "trtllm")]);
    p.one(
        "trtllm_num_requests_running",
        "gauge",
        "Number of active requests",
        s.running as f64,
    );
    p.one(
        "trtllm_num_requests_waiting",
        "gauge",
        "Number of queued requests",
        s.waiting as f64,
    );
    p.one(
        "trtllm_kv_cache_utilization",
        "gauge",
        "KV cache utilization",
        s.kv_usage,
    );
    p.one(
        "trtllm_prompt_tokens_total",
        "counter",
        "Cumulative number of prompt (input) tokens processed.",
        s.prompt_tokens as f64,
    );
    p.one(
        "trtllm_generation_tokens_total",
        "counter",
        "Cumulative number of generation (output) tokens produced.",
        s.generation_tokens.floor(),
    );
    p.head(
        "trtllm_request_success_total",
        "counter",
        "Count of successfully processed requests.",
    );
    p.sample(
        "trtllm_request_success_total",
        "finished_reason=\"length\"",
        s.success as f64,
    );
    p.histogram(
        "trtllm_time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &TTFT_BUCKETS,
        1.0,
        &s.ttft_counts,
        s.ttft_sum_s,
    );
    // Its prometheus_client registry carries the process collector.
    cpu(&mut p, s);
    p.out
}

/// The page for `dialect`.
pub fn render(dialect: Dialect, stats: &Stats, model: &str) -> String {
    match dialect {
        Dialect::Vllm => vllm(stats, model),
        Dialect::Llamacpp => llamacpp(stats),
        Dialect::Sglang => sglang(stats, model),
        Dialect::Tgi => tgi(stats),
        Dialect::Triton => triton(stats, model),
        Dialect::Trtllm => trtllm(stats, model),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infscale_core::observe::metrics::{read_page, ServerChoice};

    fn busy() -> Stats {
        Stats {
            running: 4,
            waiting: 6,
            kv_usage: 0.25,
            prompt_tokens: 100,
            generation_tokens: 50.5,
            cpu_seconds: 3.0,
            ttft_counts: vec![1; TTFT_BUCKETS.len() + 1],
            request_us: 1e6,
            queue_us: 6e5,
            compute_us: 4e5,
            ..Stats::default()
        }
        .with_max_model_len(4096)
    }

    #[test]
    fn vllm_pages_carry_the_length_histograms_on_vllms_buckets() {
        let mut s = busy();
        s.prompt_len_counts[7] = 3; // (100, 200]
        s.output_len_counts[4] = 3; // (10, 20]
        s.finished_prompt_tokens = 384;
        s.finished_output_tokens = 48;
        let page = render(Dialect::Vllm, &s, "m");
        let want = [
            "vllm:request_prompt_tokens_bucket{engine=\"0\",model_name=\"m\",le=\"100\"} 0",
            "vllm:request_prompt_tokens_bucket{engine=\"0\",model_name=\"m\",le=\"200\"} 3",
            "vllm:request_prompt_tokens_bucket{engine=\"0\",model_name=\"m\",le=\"2000\"} 3",
            "vllm:request_prompt_tokens_bucket{engine=\"0\",model_name=\"m\",le=\"+Inf\"} 3",
            "vllm:request_prompt_tokens_sum{engine=\"0\",model_name=\"m\"} 384",
            "vllm:request_generation_tokens_bucket{engine=\"0\",model_name=\"m\",le=\"20\"} 3",
            "vllm:request_generation_tokens_count{engine=\"0\",model_name=\"m\"} 3",
        ];
        for w in want {
            assert!(page.contains(w), "{w} not in {page}");
        }
        assert!(!page.contains("le=\"5000\""), "4096 tokens at most: {page}");
    }

    #[test]
    fn every_dialect_reads_back_as_its_server() {
        for dialect in Dialect::ALL {
            let page = render(dialect, &busy(), "a \"quoted\" model");
            let read = read_page(page.as_bytes(), ServerChoice::Auto);
            assert_eq!(read.scan.skipped, 0, "{dialect}: {page}");
            let s = read.signals.unwrap_or_else(|e| panic!("{dialect}: {e}"));
            assert_eq!(s.server, dialect.server(), "{page}");
            assert_eq!(s.waiting, 6.0, "{dialect}");
            if dialect != Dialect::Triton {
                assert_eq!(s.running, Some(4.0), "{dialect}");
            }
            if matches!(dialect, Dialect::Vllm | Dialect::Sglang | Dialect::Trtllm) {
                assert_eq!(s.kv, Some(0.25));
                assert_eq!(s.counters.cpu_seconds, Some(3.0));
                assert_eq!(s.counters.output_tokens, Some(50.0));
            }
            if matches!(dialect, Dialect::Vllm | Dialect::Sglang | Dialect::Triton) {
                let ttft = s.counters.ttft.expect("a TTFT histogram");
                assert_eq!(ttft.buckets.len(), TTFT_BUCKETS.len() + 1, "{dialect}");
            }
        }
    }
}
