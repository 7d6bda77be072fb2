//! One GPU replica from first principles: memory bandwidth, FLOPs and memory.
//!
//! There is no GPU here, so the simulator derives a replica from a few facts about the card and
//! the model. Decode is bound by memory bandwidth: each step reads every weight once plus the KV
//! cache of every running sequence, so its time is bytes over bandwidth. Prefill is bound by
//! compute, about 2 FLOPs per parameter per token. KV capacity is what memory is left after the
//! weights. The defaults are an 8B model in FP16 on one 80 GB H100-class card.

use crate::limits;
use crate::table::{Align, Table};
use serde::{Deserialize, Serialize};

/// GPUs one replica holds. The model describes one card per replica (no tensor parallelism), so
/// a replica-hour is a GPU-hour; goodput per GPU-hour divides by this.
pub const GPUS_PER_REPLICA: f64 = 1.0;

/// The replica model's parameters; every one is a flag and a YAML field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuModel {
    /// Model parameters, billions.
    pub params_billion: f64,
    /// Bytes per parameter (2 for FP16/BF16).
    pub bytes_per_param: f64,
    /// GPU memory, GB (1e9 bytes).
    pub gpu_memory_gb: f64,
    /// Share of GPU memory the server may use (vLLM's --gpu-memory-utilization).
    pub memory_utilization: f64,
    /// Memory kept back for activations and the CUDA context, GB.
    pub reserve_gb: f64,
    /// Memory bandwidth, GB/s.
    pub hbm_gb_per_s: f64,
    /// Share of peak bandwidth a decode step achieves.
    pub bandwidth_efficiency: f64,
    /// Dense BF16 peak, TFLOPS.
    pub peak_tflops: f64,
    /// Model FLOPs utilisation during prefill.
    pub mfu: f64,
    /// KV-cache layers, KV heads and head dimension (Llama-3-8B: 32, 8, 128).
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Bytes per KV element.
    pub kv_bytes: f64,
    /// Most sequences in one batch (vLLM's --max-num-seqs).
    pub max_batch: u32,
    /// Cold start: image pull, weights at a load rate, warm-up.
    pub image_pull_s: f64,
    pub load_gb_per_s: f64,
    pub warmup_s: f64,
    /// The whole start, seconds, when it is measured rather than derived: replaces the image
    /// pull, load and warm-up above (a snapshot restore that makes every start 10 s, say).
    #[serde(rename = "cold_start_s", skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    /// Pod CPU: cores busy when idle, the engine loop's core whenever anything runs, and a small
    /// cost per running sequence; waiting requests cost nothing.
    pub cpu_idle_cores: f64,
    pub cpu_engine_cores: f64,
    pub cpu_per_sequence_cores: f64,
    /// The pod's CPU request, cores.
    pub cpu_request_cores: f64,
}

impl Default for GpuModel {
    fn default() -> Self {
        GpuModel {
            params_billion: 8.0,
            bytes_per_param: 2.0,
            gpu_memory_gb: 80.0,
            memory_utilization: 0.9,
            reserve_gb: 4.0,
            hbm_gb_per_s: 3350.0,
            bandwidth_efficiency: 0.7,
            peak_tflops: 990.0,
            mfu: 0.4,
            layers: 32,
            kv_heads: 8,
            head_dim: 128,
            kv_bytes: 2.0,
            max_batch: 256,
            image_pull_s: 45.0,
            load_gb_per_s: 1.0,
            warmup_s: 30.0,
            start_s: None,
            cpu_idle_cores: 0.2,
            cpu_engine_cores: 1.0,
            cpu_per_sequence_cores: 0.0025,
            cpu_request_cores: 4.0,
        }
    }
}

/// A model that cannot work, naming the parameter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct GpuError(pub String);

impl GpuModel {
    pub fn weights_bytes(&self) -> f64 {
        self.params_billion * 1e9 * self.bytes_per_param
    }

    /// KV bytes per token: K and V for every layer and KV head.
    pub fn kv_bytes_per_token(&self) -> f64 {
        2.0 * f64::from(self.layers)
            * f64::from(self.kv_heads)
            * f64::from(self.head_dim)
            * self.kv_bytes
    }

    /// Memory left for the KV cache, bytes.
    pub fn kv_free_bytes(&self) -> f64 {
        self.gpu_memory_gb * 1e9 * self.memory_utilization
            - self.weights_bytes()
            - self.reserve_gb * 1e9
    }

    /// Tokens the KV cache holds.
    pub fn kv_capacity_tokens(&self) -> u64 {
        (self.kv_free_bytes() / self.kv_bytes_per_token())
            .floor()
            .max(0.0) as u64
    }

    /// Prompt tokens per second: compute-bound at 2 FLOPs per parameter per token.
    pub fn prefill_tokens_per_s(&self) -> f64 {
        self.peak_tflops * 1e12 * self.mfu / (2.0 * self.params_billion * 1e9)
    }

    /// One decode step (one token for every running sequence) over `context_tokens` of KV.
    pub fn decode_step_s(&self, context_tokens: f64) -> f64 {
        (self.weights_bytes() + context_tokens * self.kv_bytes_per_token())
            / (self.hbm_gb_per_s * 1e9 * self.bandwidth_efficiency)
    }

    /// Seconds from ordering a replica to its being Ready: [`GpuModel::start_s`] when set,
    /// else the image pull, the weights at the load rate and the warm-up.
    pub fn cold_start_s(&self) -> f64 {
        self.start_s.unwrap_or_else(|| {
            self.image_pull_s + self.weights_bytes() / 1e9 / self.load_gb_per_s + self.warmup_s
        })
    }

    /// Cores in use with `running` sequences in the batch.
    pub fn cpu_cores(&self, running: usize) -> f64 {
        if running == 0 {
            self.cpu_idle_cores
        } else {
            self.cpu_idle_cores
                + self.cpu_engine_cores
                + self.cpu_per_sequence_cores * running as f64
        }
    }

    /// Checks that the model can run; every message names the parameter.
    pub fn validate(&self) -> Result<(), GpuError> {
        let positive = [
            ("params_billion", self.params_billion),
            ("bytes_per_param", self.bytes_per_param),
            ("gpu_memory_gb", self.gpu_memory_gb),
            ("memory_utilization", self.memory_utilization),
            ("hbm_gb_per_s", self.hbm_gb_per_s),
            ("bandwidth_efficiency", self.bandwidth_efficiency),
            ("peak_tflops", self.peak_tflops),
            ("mfu", self.mfu),
            ("kv_bytes", self.kv_bytes),
            ("load_gb_per_s", self.load_gb_per_s),
            ("cpu_request_cores", self.cpu_request_cores),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(GpuError(format!(
                    "{name} {} must be a positive number",
                    limits::show(v)
                )));
            }
        }
        let non_negative = [
            ("reserve_gb", self.reserve_gb),
            ("image_pull_s", self.image_pull_s),
            ("warmup_s", self.warmup_s),
            ("cpu_idle_cores", self.cpu_idle_cores),
            ("cpu_engine_cores", self.cpu_engine_cores),
            ("cpu_per_sequence_cores", self.cpu_per_sequence_cores),
            ("cold_start_s", self.start_s.unwrap_or(0.0)),
        ];
        for (name, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err(GpuError(format!(
                    "{name} {} must be a number >= 0",
                    limits::show(v)
                )));
            }
        }
        for (name, v) in [
            ("memory_utilization", self.memory_utilization),
            ("mfu", self.mfu),
            ("bandwidth_efficiency", self.bandwidth_efficiency),
        ] {
            if v > 1.0 {
                return Err(GpuError(format!(
                    "{name} {} is a fraction and must be at most 1",
                    limits::show(v)
                )));
            }
        }
        for (name, v) in [
            ("layers", self.layers),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("max_batch", self.max_batch),
        ] {
            if v == 0 {
                return Err(GpuError(format!("{name} must be at least 1")));
            }
        }
        self.within_limits()?;
        if self.kv_free_bytes() <= 0.0 {
            return Err(GpuError(format!(
                "the weights ({:.1} GB) and reserve ({} GB) do not fit in {} GB x {}",
                self.weights_bytes() / 1e9,
                self.reserve_gb,
                self.gpu_memory_gb,
                self.memory_utilization
            )));
        }
        Ok(())
    }

    /// The bounds of [`crate::limits`]: no field past [`limits::MAX_GPU_NUMBER`] (or
    /// [`limits::MAX_GPU_WHOLE`]), and the derived cold start, decode step and prefill rate in
    /// reach of a run.
    fn within_limits(&self) -> Result<(), GpuError> {
        let floats = [
            ("params_billion", self.params_billion),
            ("bytes_per_param", self.bytes_per_param),
            ("gpu_memory_gb", self.gpu_memory_gb),
            ("reserve_gb", self.reserve_gb),
            ("hbm_gb_per_s", self.hbm_gb_per_s),
            ("peak_tflops", self.peak_tflops),
            ("kv_bytes", self.kv_bytes),
            ("image_pull_s", self.image_pull_s),
            ("load_gb_per_s", self.load_gb_per_s),
            ("warmup_s", self.warmup_s),
            ("cpu_idle_cores", self.cpu_idle_cores),
            ("cpu_engine_cores", self.cpu_engine_cores),
            ("cpu_per_sequence_cores", self.cpu_per_sequence_cores),
            ("cpu_request_cores", self.cpu_request_cores),
        ];
        for (name, v) in floats {
            if v > limits::MAX_GPU_NUMBER {
                return Err(GpuError(format!(
                    "{name} {} is above {}",
                    limits::show(v),
                    limits::MAX_GPU_NUMBER
                )));
            }
        }
        for (name, v) in [
            ("layers", self.layers),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("max_batch", self.max_batch),
        ] {
            if v > limits::MAX_GPU_WHOLE {
                return Err(GpuError(format!(
                    "{name} {v} is above {}",
                    limits::MAX_GPU_WHOLE
                )));
            }
        }
        let cold = self.cold_start_s();
        if let Some(start) = self.start_s.filter(|&s| s > limits::MAX_SECONDS) {
            return Err(GpuError(format!(
                "cold_start_s {} is above {} s",
                limits::show(start),
                limits::MAX_SECONDS
            )));
        }
        if !(cold.is_finite() && cold <= limits::MAX_SECONDS) {
            return Err(GpuError(format!(
                "the cold start (image_pull_s + weights / load_gb_per_s + warmup_s) is {} s, above {} s: raise load_gb_per_s",
                limits::show(cold),
                limits::MAX_SECONDS
            )));
        }
        let step = self.decode_step_s(0.0);
        if !(step.is_finite() && step <= limits::GPU_MAX_STEP_SECONDS) {
            return Err(GpuError(format!(
                "a decode step (weights / (hbm_gb_per_s x bandwidth_efficiency)) takes {} s, above {} s: raise hbm_gb_per_s",
                limits::show(step),
                limits::GPU_MAX_STEP_SECONDS
            )));
        }
        let prefill = self.prefill_tokens_per_s();
        if !(prefill.is_finite() && prefill >= limits::GPU_MIN_PREFILL_TOKENS_PER_S) {
            return Err(GpuError(format!(
                "prefill (peak_tflops x mfu / 2 FLOPs per parameter) runs {} tokens per second, below {}: raise peak_tflops",
                limits::show(prefill),
                limits::GPU_MIN_PREFILL_TOKENS_PER_S
            )));
        }
        Ok(())
    }

    /// What `infscale gpu` prints: the derived numbers and where they come from, with the
    /// caller's `more` lines (name, text) in the same columns.
    pub fn report(&self, more: &[(&str, String)]) -> String {
        let ctx = 1000.0;
        let step1 = self.decode_step_s(ctx);
        let batch = f64::from(self.max_batch);
        let step_full = self.decode_step_s(ctx * batch);
        let cpu = |running| 100.0 * self.cpu_cores(running) / self.cpu_request_cores;
        let title = format!(
            "replica model: {}B model, {} bytes per parameter, one {} GB GPU\n",
            num(self.params_billion),
            num(self.bytes_per_param),
            num(self.gpu_memory_gb)
        );
        let mut t = Table::headless(&[Align::Left, Align::Left]);
        t.row([
            "weights".to_owned(),
            format!(
                "{:.1} GB ({}B parameters x {} bytes)",
                self.weights_bytes() / 1e9,
                num(self.params_billion),
                num(self.bytes_per_param)
            ),
        ]);
        t.row([
            "KV cache".to_owned(),
            format!(
                "{:.1} GB free = {} tokens at {} bytes per token",
                self.kv_free_bytes() / 1e9,
                self.kv_capacity_tokens(),
                num(self.kv_bytes_per_token())
            ),
        ]);
        t.row([
            "prefill".to_owned(),
            format!(
                "{:.0} tokens/s ({} TFLOPS x {} MFU / {} GFLOP per token)",
                self.prefill_tokens_per_s(),
                num(self.peak_tflops),
                num(self.mfu),
                num(2.0 * self.params_billion)
            ),
        ]);
        t.row([
            "decode step".to_owned(),
            format!(
                "{:.1} ms at batch 1, {:.1} ms at batch {} ({}-token contexts): {:.0} output tokens/s at full batch",
                step1 * 1e3,
                step_full * 1e3,
                self.max_batch,
                num(ctx),
                batch / step_full
            ),
        ]);
        let start = match self.start_s {
            Some(start) => format!(
                "{} s, as set (cold_start_s: the image, weights and warm-up not used)",
                num(start)
            ),
            None => format!(
                "{:.0} s = image {} s + weights {} s at {} GB/s + warm-up {} s",
                self.cold_start_s(),
                num(self.image_pull_s),
                num(self.weights_bytes() / 1e9 / self.load_gb_per_s),
                num(self.load_gb_per_s),
                num(self.warmup_s)
            ),
        };
        t.row(["cold start".to_owned(), start]);
        t.row([
            "pod CPU".to_owned(),
            format!(
                "idle {:.0}%, batch 1 {:.0}%, batch {} {:.0}% of {} requested cores, whatever the queue",
                cpu(0),
                cpu(1),
                self.max_batch,
                cpu(self.max_batch as usize),
                num(self.cpu_request_cores)
            ),
        ]);
        for (name, text) in more {
            t.row([name.to_string(), text.clone()]);
        }
        title + &t.render()
    }
}

fn num(v: f64) -> String {
    crate::reasons::fmt(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_replica() {
        let g = GpuModel::default();
        assert_eq!(g.weights_bytes(), 16e9);
        assert_eq!(g.kv_bytes_per_token(), 131072.0);
        assert_eq!(g.kv_capacity_tokens(), 396728);
        assert_eq!(g.prefill_tokens_per_s(), 24750.0);
        assert_eq!(format!("{:.1}", g.decode_step_s(1000.0) * 1e3), "6.9");
        assert_eq!(format!("{:.1}", g.decode_step_s(64_000.0) * 1e3), "10.4");
        assert_eq!(format!("{:.0}", 64.0 / g.decode_step_s(64_000.0)), "6154");
        assert_eq!(g.cold_start_s(), 91.0);
        assert_eq!(format!("{:.0}", 100.0 * g.cpu_cores(0) / 4.0), "5");
        assert_eq!(format!("{:.0}", 100.0 * g.cpu_cores(1) / 4.0), "30");
        assert_eq!(format!("{:.0}", 100.0 * g.cpu_cores(256) / 4.0), "46");
    }

    #[test]
    fn the_report_shows_the_derived_numbers() {
        let report = GpuModel::default().report(&[("capacity", "2 req/s".into())]);
        for needle in [
            "396728 tokens",
            "24750 tokens/s",
            "6.9 ms at batch 1",
            "21.1 ms at batch 256",
            "cold start   91 s",
            "46% of 4",
            "capacity     2 req/s",
        ] {
            assert!(report.contains(needle), "{needle} in {report}");
        }
    }

    #[test]
    fn a_model_that_does_not_fit_is_refused() {
        let g = GpuModel {
            params_billion: 70.0,
            ..GpuModel::default()
        };
        assert!(g.validate().unwrap_err().to_string().contains("do not fit"));
        let g = GpuModel {
            mfu: 1.5,
            ..GpuModel::default()
        };
        assert!(g.validate().unwrap_err().to_string().contains("mfu"));
    }
}
