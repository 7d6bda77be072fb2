//! The `infscale` command line: argument parsing and printing, nothing else.
//!
//! Each subcommand lives in its own file and calls the library; errors reach `main` as one line
//! and exit with status 2.

mod decide;
mod parse;
mod read;
mod table;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Scale LLM model servers on Kubernetes by requests running plus waiting, not CPU.
#[derive(Debug, Parser)]
#[command(name = "infscale", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read /metrics pages (files or URLs) and print each replica's load signals.
    Parse(parse::Args),
    /// Decide a replica count from /metrics pages, held requests and a policy, with reasons.
    Decide(Box<decide::Args>),
}

/// Exit status for bad input, an invalid policy, or a page with bad lines.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Parse(args) => runtime.block_on(parse::run(args)),
        Command::Decide(args) => runtime.block_on(decide::run(*args)),
    }
}
