//! `infscale parse FILE|URL...`: each source's server and load signals, then every skipped line.

use super::read::{read_all, SourceArgs};
use super::table;
use super::EXIT_BAD_INPUT;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// /metrics pages: files, or http(s):// URLs.
    #[arg(required = true, value_name = "FILE|URL")]
    pub sources: Vec<String>,
    #[command(flatten)]
    pub read: SourceArgs,
}

/// Prints a row per source, then `source:line: what is wrong` for each skipped line and why any
/// source gave no signals. Exit status 2 when any source had a bad line or no signals.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let fleet = read_all(&args.sources, &args.read, None, 0.0).await?;
    print!("{}", table::render(&fleet.outcomes));
    let mut bad = false;
    for read in &fleet.outcomes {
        if let Some(scan) = &read.scan {
            for error in &scan.errors {
                println!("{}", error.at(&read.name));
                bad = true;
            }
            let unlisted = scan.skipped - scan.errors.len();
            if unlisted > 0 {
                println!("{}: {unlisted} more bad line(s) not listed", read.name);
            }
        }
        if let Some(Err(e)) = &read.vote {
            println!("{}: {e}", read.name);
            bad = true;
        }
    }
    Ok(if bad {
        ExitCode::from(EXIT_BAD_INPUT)
    } else {
        ExitCode::SUCCESS
    })
}
