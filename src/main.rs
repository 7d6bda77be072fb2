//! The `infscale` binary: every subcommand, over the library.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
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
