//! The `infscale` binary: every subcommand, over the library.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = infscale::cli::Cli::parse();
    match infscale::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("infscale: {e:#}");
            ExitCode::from(infscale::cli::EXIT_BAD_INPUT)
        }
    }
}
