//! `infscale-sim`: the tuning subcommands (`gpu`, `simulate`, `tune`) alone, parsed by the same
//! code as `infscale gpu|simulate|tune`.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = infscale::cli::SimCli::parse();
    match infscale::cli::run_tuning(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("infscale-sim: {e:#}");
            ExitCode::from(infscale::cli::EXIT_BAD_INPUT)
        }
    }
}
