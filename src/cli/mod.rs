//! The `infscale` command line: argument parsing and printing, nothing else.
//!
//! Each subcommand lives in its own file and calls the library; errors reach `main` as one line
//! and exit with status 2.

mod activator;
mod anchors;
pub mod chart_values;
mod checks;
pub mod color;
mod decide;
mod demo;
mod emulate;
mod gpu;
mod kube;
mod load;
mod markdown;
mod parse;
mod policy_args;
mod read;
pub mod reference;
mod seeds;
pub(crate) mod serve;
pub mod simulate;
mod state_file;
mod suite;
mod table;
mod trace;
mod trigger_reference;
mod tune;
mod tune_suite;
mod weeks;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Scale LLM model servers on Kubernetes by requests running plus waiting, not CPU.
#[derive(Debug, Parser)]
#[command(name = "infscale", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Colour in the logs: auto (only on a terminal, and not with NO_COLOR set), always or never.
    #[arg(long, global = true, value_enum, default_value_t = color::Color::Auto, value_name = "WHEN")]
    pub color: color::Color,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read /metrics pages (files or URLs) and print each replica's load signals.
    #[command(after_help = "Example:\n  infscale parse http://10.0.0.12:8000/metrics")]
    Parse(parse::Args),
    /// Decide a replica count from /metrics pages, held requests and a policy, with reasons.
    #[command(
        after_help = "Example:\n  infscale decide http://10.0.0.12:8000/metrics --policy queue:192,lookahead=45 --current 2"
    )]
    Decide(Box<decide::Args>),
    /// Serve KEDA's external scaler protocol (gRPC): scale model servers on running + waiting.
    #[command(
        after_help = "Example:\n  infscale serve --listen 0.0.0.0:9090 --metrics-listen 0.0.0.0:9091"
    )]
    Serve(Box<serve::Args>),
    /// Decide for a Deployment in a cluster (and with --apply, scale it), without KEDA.
    #[command(
        after_help = "Example:\n  infscale kube -n llm --deployment chat --policy queue:192,min=1,max=8"
    )]
    Kube(Box<kube::Args>),
    /// Proxy requests to model Services, holding them while no replica is ready.
    #[command(
        after_help = "Example:\n  infscale activator --listen 127.0.0.1:8080 --upstream http://127.0.0.1:8000"
    )]
    Activator(Box<activator::Args>),
    /// Drive an OpenAI-compatible server with load; --sweep finds the concurrency it saturates at.
    #[command(
        after_help = "Example:\n  infscale load --url http://127.0.0.1:8000 --stream --sweep 2,8,32"
    )]
    Load(Box<load::Args>),
    /// Serve an OpenAI-compatible model server on CPU, timed by the GPU replica model.
    #[command(
        after_help = "Example:\n  infscale emulate --listen 127.0.0.1:8000 --dialect vllm --speed 10"
    )]
    Emulate(Box<emulate::Args>),
    /// The whole loop on this machine: emulated replicas, the activator, serve, KEDA and its HPA.
    #[command(after_help = "Example:\n  infscale demo --quick")]
    Demo(Box<demo::Args>),
    /// Build a trace for `simulate --trace` from Prometheus: request counters and token histograms.
    #[command(
        after_help = "Example:\n  infscale trace --prometheus http://prom:9090 --start 1764547200 --end 1764568800 -o day.csv"
    )]
    Trace(Box<trace::Args>),
    #[command(flatten)]
    Tuning(Tuning),
}

/// The offline tuning subcommands, which `infscale-sim` carries alone.
#[derive(Debug, Subcommand)]
pub enum Tuning {
    /// Print the GPU replica model's derived numbers.
    #[command(after_help = "Example:\n  infscale gpu --params-billion 70 --gpu-memory-gb 80")]
    Gpu(Box<gpu::Args>),
    /// Replay a trace through simulated GPU replicas under the KEDA + HPA loop.
    #[command(
        after_help = "Example:\n  infscale simulate queue:192 queue+work:192,1.0,lookahead=45,min=0"
    )]
    Simulate(Box<simulate::Args>),
    /// Search policies on a trace: the Pareto frontier and a ready-to-apply ScaledObject.
    #[command(after_help = "Example:\n  infscale tune --trace my-day.csv --max-miss 1")]
    Tune(Box<tune::Args>),
}

/// `infscale-sim`: the simulator and tuner for people who only tune offline.
#[derive(Debug, Parser)]
#[command(name = "infscale-sim", version, about = "Simulate and tune infscale policies offline.", long_about = None)]
pub struct SimCli {
    #[command(subcommand)]
    pub command: Tuning,
}

/// Exit status for bad input, an invalid policy, or a page with bad lines.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    color::choose(cli.color);
    if !matches!(cli.command, Command::Serve(_) | Command::Activator(_)) {
        crate::edge::broken_pipe::end_quietly();
    }
    match cli.command {
        Command::Parse(args) => runtime()?.block_on(parse::run(args)),
        Command::Decide(args) => runtime()?.block_on(decide::run(*args)),
        Command::Serve(args) => runtime()?.block_on(serve::run(*args)),
        Command::Kube(args) => runtime()?.block_on(kube::run(*args)),
        Command::Activator(args) => runtime()?.block_on(activator::run(*args)),
        Command::Load(args) => runtime()?.block_on(load::run(*args)),
        Command::Emulate(args) => runtime()?.block_on(emulate::run(*args)),
        Command::Demo(args) => runtime()?.block_on(demo::run(*args)),
        Command::Trace(args) => runtime()?.block_on(trace::run(*args)),
        Command::Tuning(command) => run_tuning(command),
    }
}

/// Runs a tuning subcommand (both binaries).
pub fn run_tuning(command: Tuning) -> anyhow::Result<ExitCode> {
    crate::edge::broken_pipe::end_quietly();
    match command {
        Tuning::Gpu(args) => gpu::run(*args),
        // The suite and the seeds are the day table's siblings: each reads `simulate`'s flags.
        Tuning::Simulate(args) if args.suite => suite::simulate(&args, &simulate::specs(&args)),
        Tuning::Simulate(args) if args.weeks => weeks::simulate(&args, &simulate::specs(&args)),
        Tuning::Simulate(args) => match args.seeds {
            Some(n) => seeds::simulate(&args, n, &simulate::specs(&args)),
            None => simulate::run(*args),
        },
        Tuning::Tune(args) if args.suite => {
            tune::check_numbers(&args)?;
            tune_suite::run(&args)
        }
        Tuning::Tune(args) => tune::run(*args),
    }
}

/// What `infscale ARGS` would run: the configuration of `serve` or the activator, from `args`
/// as a Deployment's container gives them (`["serve", "--listen", ...]`). A test starts the
/// shipped scaler and activator from their shipped arguments with this.
pub enum Configured {
    Serve(Box<crate::serve::server::Config>),
    Activator(Box<crate::activator::server::Config>),
}

/// The configuration `infscale ARGS` would run `serve` or the activator with (neither for any
/// other command: an error).
pub fn configured<I, T>(args: I) -> anyhow::Result<Configured>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(
        std::iter::once("infscale".into()).chain(args.into_iter().map(Into::into)),
    )?;
    match cli.command {
        Command::Serve(a) => Ok(Configured::Serve(Box::new(serve::config(&a)?))),
        Command::Activator(a) => Ok(Configured::Activator(Box::new(activator::config(&a)?))),
        _ => anyhow::bail!("not serve or activator"),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
