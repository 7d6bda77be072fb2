//! `infscale load`: a load generator for any OpenAI-compatible server, and the knee finder that
//! turns a concurrency sweep into a per-replica queue target.
//!
//! # Layout
//!
//! - [`config`]: what a run is asked to do ([`Config`], [`Mode`]) and every bound it runs
//!   within ([`Limits`]).
//! - [`request`]: the completions or chat body with a prompt of exactly the asked words.
//! - [`response`]: reading an answer into a [`Sample`] (TTFT, inter-token gaps, E2E, tokens),
//!   streamed or whole; [`outcome`]: the sample or the [`ErrorKind`] a request failed with.
//! - [`closed_loop`] and [`open_loop`]: the two ways requests arrive (N workers back to back,
//!   or Poisson arrivals at a rate).
//! - [`histogram`] and [`recorder`]: latencies in constant memory; [`report`]: the numbers a
//!   user reads, as a table or JSON.
//! - [`sweep`] and [`knee`]: a closed-loop run per concurrency and the rule that picks the knee.
//!
//! ```no_run
//! # async fn example() -> Result<(), infscale::load::Error> {
//! use infscale::load::{run, sweep, Config};
//! use std::time::Duration;
//! let config = Config::closed("http://127.0.0.1:8000", 8, Duration::from_secs(30));
//! let report = run(config.clone()).await?;
//! println!("{}", report.render());
//! let sweep = sweep(&config, &[1, 2, 4, 8, 16, 32]).await?;
//! println!("{}", sweep.verdict());
//! # Ok(()) }
//! ```

pub(crate) mod closed_loop;
pub(crate) mod config;
pub(crate) mod histogram;
pub(crate) mod knee;
pub mod open_loop;
pub(crate) mod outcome;
pub(crate) mod recorder;
pub(crate) mod report;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod sweep;

pub use config::{Config, Limits, Mode};
pub use knee::Knee;
pub use outcome::{ErrorKind, Sample};
pub use report::Report;
pub use sweep::{sweep, Sweep};

use request::Template;
use std::sync::Arc;
use std::time::Instant;

/// Why a run could not start (a request that fails is counted in the report, never this).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// The HTTP client a run uses: pooled keep-alive connections, no Nagle delay, and the limits'
/// connect and total timeouts.
pub fn client(limits: &Limits) -> Result<reqwest::Client, Error> {
    Ok(reqwest::Client::builder()
        .connect_timeout(limits.connect_timeout)
        .timeout(limits.timeout)
        .tcp_nodelay(true)
        .build()?)
}

/// Runs `config` to its end (the duration, plus at most the timeout for the requests still in
/// flight) and reports.
pub async fn run(config: Config) -> Result<Report, Error> {
    config.check().map_err(Error::Config)?;
    let client = client(&config.limits)?;
    let template = Arc::new(Template::new(&config));
    let started = Instant::now();
    let recorder = match config.mode {
        Mode::Closed { concurrency } => {
            closed_loop::run(
                &client,
                template,
                concurrency,
                config.duration,
                config.limits,
            )
            .await
        }
        Mode::Open { rate, seed } => {
            open_loop::run(
                &client,
                template,
                rate,
                seed,
                config.duration,
                config.limits,
            )
            .await
        }
    };
    Ok(Report::new(
        config.mode,
        config.duration.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        config.stream,
        &recorder,
    ))
}
