//! `infscale emulate`: an OpenAI-compatible model server on CPU whose timing is the simulator's.
//!
//! The scaler, the activator and a demo need a model server to scale, and a GPU is not always at
//! hand. The emulator answers `/v1/completions` and `/v1/chat/completions` (whole or streamed)
//! with first tokens and completions timed by one simulated replica ([`infscale_core::sim::replica`]),
//! and exports `/metrics` in the dialect of vLLM, llama.cpp, SGLang, TGI or Triton, so `infscale
//! parse` and `serve` read it as they read the real server.
//!
//! # Layout
//! - [`engine`]: the replica stepped on the wall clock (times `speed`), its queue, and the
//!   progress it reports to each request's handler.
//! - [`openai`]: request bodies read into token counts; answers, chunks and errors.
//! - [`page`]: the `/metrics` page in each dialect.
//! - [`server`]: the HTTP server, its bounds, cold start and shutdown.

pub(crate) mod engine;
pub(crate) mod openai;
pub(crate) mod page;
pub(crate) mod server;

pub use server::{spawn, Emulator};

use infscale_core::limits;
use infscale_core::observe::metrics::Server;
use infscale_core::sim::gpu::GpuModel;
use std::fmt;
use std::str::FromStr;

/// Whose `/metrics` names the emulator exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    Vllm,
    Llamacpp,
    Sglang,
    Tgi,
    Triton,
    Trtllm,
}

impl Dialect {
    pub const ALL: [Dialect; 6] = [
        Dialect::Vllm,
        Dialect::Llamacpp,
        Dialect::Sglang,
        Dialect::Tgi,
        Dialect::Triton,
        Dialect::Trtllm,
    ];

    /// The server whose profile reads this dialect's page.
    pub fn server(self) -> Server {
        match self {
            Dialect::Vllm => Server::Vllm,
            Dialect::Llamacpp => Server::LlamaCpp,
            Dialect::Sglang => Server::Sglang,
            Dialect::Tgi => Server::Tgi,
            Dialect::Triton => Server::Triton,
            Dialect::Trtllm => Server::Trtllm,
        }
    }
}

impl FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "vllm" => Ok(Dialect::Vllm),
            "llamacpp" | "llama.cpp" | "llama-cpp" => Ok(Dialect::Llamacpp),
            "sglang" => Ok(Dialect::Sglang),
            "tgi" => Ok(Dialect::Tgi),
            "triton" => Ok(Dialect::Triton),
            "trtllm" | "tensorrt-llm" | "tensorrt_llm" => Ok(Dialect::Trtllm),
            _ => Err(format!(
                "unknown dialect {s:?}: expected vllm, llamacpp, sglang, tgi, triton or trtllm"
            )),
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.server().name())
    }
}

/// The emulator's bounds on what comes from outside.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The largest request body, bytes; a larger one is answered 413.
    pub max_body_bytes: usize,
    /// Generation requests in flight (queued, running or streaming); beyond it, 503.
    pub max_in_flight: usize,
    /// Prompt plus output tokens of one request (vLLM's max_model_len); beyond it, 400.
    pub max_model_len: u32,
    /// Connections served at once; at the cap a newcomer takes the place of a connection of the
    /// client address holding the most, or is refused when its own address holds the most.
    pub max_connections: usize,
    /// Time allowed for a connection's first byte and for a request head, wall seconds.
    pub header_timeout_s: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 8 << 20,
            max_in_flight: 10_000,
            max_model_len: 131_072,
            max_connections: 20_000,
            header_timeout_s: 10.0,
        }
    }
}

/// How to run an emulated server.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulateConfig {
    pub gpu: GpuModel,
    pub dialect: Dialect,
    /// Simulated seconds per wall second.
    pub speed: f64,
    /// Simulated seconds before the server answers (503 until then).
    pub cold_start_s: f64,
    /// The name `/v1/models` lists and answers carry.
    pub model: String,
    /// The engine's step, simulated seconds.
    pub dt_s: f64,
    /// Output tokens gathered before a streamed answer sends them (vLLM's and SGLang's
    /// `--stream-interval`); the first token and the last are sent at once whatever it is.
    pub stream_interval: u32,
    pub limits: Limits,
}

impl Default for EmulateConfig {
    fn default() -> Self {
        EmulateConfig {
            gpu: GpuModel::default(),
            dialect: Dialect::Vllm,
            speed: 1.0,
            cold_start_s: 0.0,
            model: "infscale-emulated".to_owned(),
            dt_s: 0.05,
            stream_interval: 1,
            limits: Limits::default(),
        }
    }
}

/// A configuration that cannot run, naming the setting.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl EmulateConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.gpu.validate().map_err(|e| ConfigError(e.0))?;
        let bad = |m: String| Err(ConfigError(m));
        let (slow, fast) = limits::SPEED;
        if !(self.speed.is_finite() && (slow..=fast).contains(&self.speed)) {
            return bad(format!(
                "speed {} must be a number from {slow} to {fast}",
                limits::show(self.speed)
            ));
        }
        let (short, long) = limits::STEP_SECONDS;
        if !(self.dt_s.is_finite() && (short..=long).contains(&self.dt_s)) {
            return bad(format!(
                "step {} s must be a number from {short} to {long}",
                limits::show(self.dt_s)
            ));
        }
        if !(self.cold_start_s.is_finite()
            && (0.0..=limits::MAX_SECONDS).contains(&self.cold_start_s))
        {
            return bad(format!(
                "cold start {} s must be a number from 0 to {}",
                limits::show(self.cold_start_s),
                limits::MAX_SECONDS
            ));
        }
        if !(1..=limits::MAX_TOKENS).contains(&self.stream_interval) {
            return bad(format!(
                "stream interval {} must be from 1 to {} tokens",
                self.stream_interval,
                limits::MAX_TOKENS
            ));
        }
        if !(1..=limits::MAX_IN_FLIGHT).contains(&self.limits.max_in_flight) {
            return bad(format!(
                "max_in_flight {} must be from 1 to {}",
                self.limits.max_in_flight,
                limits::MAX_IN_FLIGHT
            ));
        }
        if !(1..=limits::MAX_MODEL_LEN).contains(&self.limits.max_model_len) {
            return bad(format!(
                "max_model_len {} must be from 1 to {} tokens",
                self.limits.max_model_len,
                limits::MAX_MODEL_LEN
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_round_trip() {
        for d in Dialect::ALL {
            assert_eq!(d.to_string().parse::<Dialect>(), Ok(d));
        }
        assert_eq!("llama.cpp".parse::<Dialect>(), Ok(Dialect::Llamacpp));
        assert!("ollama"
            .parse::<Dialect>()
            .unwrap_err()
            .contains("expected"));
    }

    #[test]
    fn bad_settings_are_named() {
        let c = EmulateConfig {
            speed: 0.0,
            ..EmulateConfig::default()
        };
        assert!(c.validate().unwrap_err().0.contains("speed"));
        let c = EmulateConfig {
            stream_interval: 0,
            ..EmulateConfig::default()
        };
        assert!(c.validate().unwrap_err().0.contains("stream interval"));
        assert!(EmulateConfig::default().validate().is_ok());
    }
}
