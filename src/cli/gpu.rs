//! `infscale gpu`: the replica model's derived numbers, and the flags every tuning command shares
//! to change it (each parameter is a flag and a field of `--gpu-file FILE.yaml`).

use crate::edge::files::read_text;
use anyhow::Context;
use infscale_core::limits;
use infscale_core::sim::capacity;
use infscale_core::sim::gpu::GpuModel;
use infscale_core::sim::trace::Scenario;
use std::path::PathBuf;

/// The heading the GPU model's flags stand under in every command's help, and the section of
/// docs/cli.md that lists them once.
pub const HEADING: &str = "GPU model";

/// The GPU replica model: a YAML file of fields, then flags over it.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = HEADING)]
pub struct GpuArgs {
    /// YAML file with any of the fields below (snake_case names, e.g. `hbm_gb_per_s: 2000`).
    #[arg(long, value_name = "FILE")]
    pub gpu_file: Option<PathBuf>,
    /// Model parameters, billions [default: 8].
    #[arg(long)]
    pub params_billion: Option<f64>,
    /// Bytes per parameter [default: 2].
    #[arg(long)]
    pub bytes_per_param: Option<f64>,
    /// GPU memory, GB [default: 80].
    #[arg(long)]
    pub gpu_memory_gb: Option<f64>,
    /// Share of GPU memory the server uses [default: 0.9].
    #[arg(long)]
    pub memory_utilization: Option<f64>,
    /// Memory kept back, GB [default: 4].
    #[arg(long)]
    pub reserve_gb: Option<f64>,
    /// Memory bandwidth, GB/s [default: 3350].
    #[arg(long)]
    pub hbm_gb_per_s: Option<f64>,
    /// Share of peak bandwidth a decode step achieves [default: 0.7].
    #[arg(long)]
    pub bandwidth_efficiency: Option<f64>,
    /// Dense peak, TFLOPS [default: 990].
    #[arg(long)]
    pub peak_tflops: Option<f64>,
    /// Model FLOPs utilisation in prefill [default: 0.4].
    #[arg(long)]
    pub mfu: Option<f64>,
    /// Transformer layers [default: 32].
    #[arg(long)]
    pub layers: Option<u32>,
    /// KV heads [default: 8].
    #[arg(long)]
    pub kv_heads: Option<u32>,
    /// Head dimension [default: 128].
    #[arg(long)]
    pub head_dim: Option<u32>,
    /// Bytes per KV element [default: 2].
    #[arg(long)]
    pub kv_bytes: Option<f64>,
    /// Most sequences in one batch, vLLM's --max-num-seqs [default: 256].
    #[arg(long)]
    pub max_batch: Option<u32>,
    /// Image pull, seconds [default: 45].
    #[arg(long, value_name = "SECONDS")]
    pub image_pull_s: Option<f64>,
    /// Weight load rate, GB/s [default: 1].
    #[arg(long)]
    pub load_gb_per_s: Option<f64>,
    /// Warm-up, seconds [default: 30].
    #[arg(long, value_name = "SECONDS")]
    pub warmup_s: Option<f64>,
    /// The whole cold start, seconds, in place of the image pull, load and warm-up (a snapshot
    /// restore that makes every start 10 s, say) [default: derived, 91].
    #[arg(long, value_name = "SECONDS")]
    pub cold_start_s: Option<f64>,
    /// Cores busy when idle [default: 0.2].
    #[arg(long)]
    pub cpu_idle_cores: Option<f64>,
    /// The engine loop's core whenever anything runs [default: 1].
    #[arg(long)]
    pub cpu_engine_cores: Option<f64>,
    /// Cores per running sequence [default: 0.0025: a full batch of 256 at 46% of 4 cores].
    #[arg(long)]
    pub cpu_per_sequence_cores: Option<f64>,
    /// The pod's CPU request, cores [default: 4].
    #[arg(long)]
    pub cpu_request_cores: Option<f64>,
}

impl GpuArgs {
    /// The model: defaults, then the YAML file, then the flags; validated.
    pub fn model(&self) -> anyhow::Result<GpuModel> {
        let mut g = match &self.gpu_file {
            Some(path) => {
                let text = read_text(path, limits::MAX_CONFIG_FILE_BYTES)?;
                serde_yaml::from_str(&text).with_context(|| format!("{}", path.display()))?
            }
            None => GpuModel::default(),
        };
        let floats = [
            (self.params_billion, &mut g.params_billion),
            (self.bytes_per_param, &mut g.bytes_per_param),
            (self.gpu_memory_gb, &mut g.gpu_memory_gb),
            (self.memory_utilization, &mut g.memory_utilization),
            (self.reserve_gb, &mut g.reserve_gb),
            (self.hbm_gb_per_s, &mut g.hbm_gb_per_s),
            (self.bandwidth_efficiency, &mut g.bandwidth_efficiency),
            (self.peak_tflops, &mut g.peak_tflops),
            (self.mfu, &mut g.mfu),
            (self.kv_bytes, &mut g.kv_bytes),
            (self.image_pull_s, &mut g.image_pull_s),
            (self.load_gb_per_s, &mut g.load_gb_per_s),
            (self.warmup_s, &mut g.warmup_s),
            (self.cpu_idle_cores, &mut g.cpu_idle_cores),
            (self.cpu_engine_cores, &mut g.cpu_engine_cores),
            (self.cpu_per_sequence_cores, &mut g.cpu_per_sequence_cores),
            (self.cpu_request_cores, &mut g.cpu_request_cores),
        ];
        for (flag, field) in floats {
            if let Some(v) = flag {
                *field = v;
            }
        }
        let whole = [
            (self.layers, &mut g.layers),
            (self.kv_heads, &mut g.kv_heads),
            (self.head_dim, &mut g.head_dim),
            (self.max_batch, &mut g.max_batch),
        ];
        if let Some(v) = self.cold_start_s {
            g.start_s = Some(v);
        }
        for (flag, field) in whole {
            if let Some(v) = flag {
                *field = v;
            }
        }
        g.validate().with_context(|| match &self.gpu_file {
            Some(path) => format!("the GPU model (flags over {})", path.display()),
            None => "the GPU model".to_owned(),
        })?;
        Ok(g)
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the model's parameters as YAML (a starting point for --gpu-file).
    #[arg(long)]
    pub yaml: bool,
    /// A YAML scenario whose request lengths the capacity line uses [default: the built-in day's].
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    // Last: the flags after it would stand under its help heading.
    #[command(flatten)]
    pub gpu: GpuArgs,
}

pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let model = args.gpu.model()?;
    if args.yaml {
        print!("{}", serde_yaml::to_string(&model)?);
    } else {
        let scenario = match &args.scenario {
            None => Scenario::default_day(),
            Some(path) => {
                let name = path.display().to_string();
                let text = read_text(path, limits::MAX_CONFIG_FILE_BYTES)?;
                let s: Scenario = serde_yaml::from_str(&text).with_context(|| name.clone())?;
                s.validate().with_context(|| name.clone())?;
                s
            }
        };
        let capacity = format!(
            "{:.1} req/s per replica at saturation, measured by the engine (scenario {}: prompts {}, outputs {})",
            capacity::saturated_rate(&model, &scenario)?,
            scenario.name,
            scenario.prompt,
            scenario.output
        );
        print!("{}", model.report(&[("capacity", capacity)]));
    }
    Ok(std::process::ExitCode::SUCCESS)
}
