//! The `infscale` binary: every subcommand, over the library. Called by the name `infscale-sim`
//! (a hard link or symlink, as in the image) it is the tuning CLI, so one copy serves both names.

use clap::Parser;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

/// Whether argv[0]'s file name is `infscale-sim` (with or without an `.exe` suffix).
fn called_as_sim(argv0: Option<&OsString>) -> bool {
    argv0
        .and_then(|a| Path::new(a).file_stem())
        .is_some_and(|stem| stem == "infscale-sim")
}

fn main() -> ExitCode {
    if called_as_sim(std::env::args_os().next().as_ref()) {
        let cli = infscale::cli::SimCli::parse();
        return match infscale::cli::run_tuning(cli.command) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("infscale-sim: {e:#}");
                ExitCode::from(infscale::cli::EXIT_BAD_INPUT)
            }
        };
    }
    // One process-wide TLS crypto provider for reqwest, kube and tonic (all rustls on ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = infscale::cli::Cli::parse();
    match infscale::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("infscale: {e:#}");
            ExitCode::from(infscale::cli::EXIT_BAD_INPUT)
        }
    }
}
