//! `infscale emulate`: an OpenAI-compatible model server on CPU, timed by the replica model.

use super::gpu::GpuArgs;
use super::serve::{init_logging, shutdown_signal};
use crate::emulate::{self, Dialect, EmulateConfig, Limits};
use anyhow::Context;
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where clients send requests and scrapers read /metrics.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Whose /metrics names to export: vllm, llamacpp, sglang, tgi, triton or trtllm (also at
    /// /prometheus/metrics, where trtllm-serve serves it).
    #[arg(long, default_value = "vllm", value_parser = parse_dialect)]
    pub dialect: Dialect,
    /// Simulated seconds per wall second (2 serves twice as fast as the modelled GPU).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Simulated seconds before the server answers; until then every route answers 503.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub cold_start: f64,
    /// The model name /v1/models lists and answers carry.
    #[arg(long, value_name = "NAME", default_value = "infscale-emulated")]
    pub model: String,
    /// The engine's step, simulated seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.05)]
    pub step: f64,
    /// Output tokens gathered before a streamed answer sends them, as vLLM's and SGLang's
    /// --stream-interval (the first and the last token go at once).
    #[arg(long, value_name = "TOKENS", default_value_t = 1)]
    pub stream_interval: u32,
    /// Generation requests in flight before new ones are answered 503.
    #[arg(long, default_value_t = Limits::default().max_in_flight)]
    pub max_in_flight: usize,
    /// Prompt plus output tokens of one request (vLLM's --max-model-len).
    #[arg(long, default_value_t = Limits::default().max_model_len)]
    pub max_model_len: u32,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    pub log_format: String,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

fn parse_dialect(s: &str) -> Result<Dialect, String> {
    s.parse()
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logging(&args.log_format);
    let cfg = EmulateConfig {
        gpu: args.gpu.model()?,
        dialect: args.dialect,
        speed: args.speed,
        cold_start_s: args.cold_start,
        model: args.model,
        dt_s: args.step,
        stream_interval: args.stream_interval,
        limits: Limits {
            max_in_flight: args.max_in_flight,
            max_model_len: args.max_model_len,
            ..Limits::default()
        },
    };
    cfg.validate()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(
        dialect = %cfg.dialect,
        speed = cfg.speed,
        max_batch = cfg.gpu.max_batch,
        cold_start_s = cfg.cold_start_s,
        "emulating a model server"
    );
    let server = emulate::spawn(listener, cfg).await?;
    shutdown_signal().await;
    server.stop().await;
    Ok(ExitCode::SUCCESS)
}
