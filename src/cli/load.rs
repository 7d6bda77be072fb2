//! `infscale load`: drive an OpenAI-compatible server in a closed or open loop and print what
//! its users would see; `--sweep` finds the concurrency it saturates at.

use super::checks::positive_seconds;
use crate::load::knee;
use crate::load::report::ms;
use crate::load::{Config, Limits, Mode, Report, Sweep};
use anyhow::bail;
use infscale_core::limits;
use infscale_core::table::Align::*;
use infscale_core::table::Table;
use std::fmt::Write;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server's base URL (http://127.0.0.1:8000) or its full completions URL.
    #[arg(long)]
    pub url: String,
    /// Closed loop: workers, each sending its next request when the last ends [default: 1].
    #[arg(long, conflicts_with = "rate")]
    pub concurrency: Option<u32>,
    /// Open loop: Poisson arrivals at this many requests per second.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds to start requests for (each row's, with --sweep).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub duration: f64,
    /// Words in every prompt.
    #[arg(long, default_value_t = 128)]
    pub prompt_tokens: u32,
    /// max_tokens of every request, sent with ignore_eos.
    #[arg(long, default_value_t = 128)]
    pub output_tokens: u32,
    /// Stream the answer (SSE), so TTFT is the first token and inter-token gaps are measured.
    #[arg(long)]
    pub stream: bool,
    /// /v1/chat/completions with a user message instead of /v1/completions.
    #[arg(long)]
    pub chat: bool,
    /// The model field [default: left out; a server with one model uses it].
    #[arg(long)]
    pub model: Option<String>,
    /// Closed-loop runs at each of these concurrencies, and the knee among them.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["rate", "concurrency"], value_name = "N,N,...")]
    pub sweep: Vec<u32>,
    /// Seconds one request may take, from connecting to its last byte.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// Open loop: the seed of the arrival times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Open loop: requests in flight at once; arrivals past it count as `overflow` errors.
    #[arg(long, default_value_t = Limits::default().max_in_flight)]
    pub max_in_flight: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn seconds(flag: &str, s: f64) -> anyhow::Result<Duration> {
    positive_seconds(&format!("--{flag}"), s)
}

impl Args {
    /// Every number within [`infscale_core::limits`], each error naming its flag.
    fn check_numbers(&self) -> anyhow::Result<()> {
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0 && rate <= limits::MAX_RATE) {
                bail!(
                    "--rate {}: expected requests per second above 0, at most {}",
                    limits::show(rate),
                    limits::MAX_RATE
                );
            }
        }
        let most = limits::MAX_CONCURRENCY;
        let levels = self.concurrency.iter().map(|&c| ("--concurrency", c));
        for (flag, c) in levels.chain(self.sweep.iter().map(|&c| ("--sweep", c))) {
            if !(1..=most).contains(&c) {
                bail!("{flag} {c}: expected 1 to {most} concurrent requests");
            }
        }
        for (flag, tokens) in [
            ("--prompt-tokens", self.prompt_tokens),
            ("--output-tokens", self.output_tokens),
        ] {
            if !(1..=limits::MAX_TOKENS).contains(&tokens) {
                bail!(
                    "{flag} {tokens}: expected 1 to {} tokens",
                    limits::MAX_TOKENS
                );
            }
        }
        if !(1..=limits::MAX_IN_FLIGHT).contains(&self.max_in_flight) {
            bail!(
                "--max-in-flight {}: expected 1 to {}",
                self.max_in_flight,
                limits::MAX_IN_FLIGHT
            );
        }
        Ok(())
    }

    fn config(&self) -> anyhow::Result<Config> {
        self.check_numbers()?;
        let mode = match self.rate {
            Some(rate) => Mode::Open {
                rate,
                seed: self.seed,
            },
            None => Mode::Closed {
                concurrency: self.concurrency.unwrap_or(1),
            },
        };
        let config = Config {
            url: self.url.clone(),
            mode,
            duration: seconds("duration", self.duration)?,
            prompt_tokens: self.prompt_tokens,
            output_tokens: self.output_tokens,
            stream: self.stream,
            chat: self.chat,
            model: self.model.clone(),
            limits: Limits {
                timeout: seconds("timeout", self.timeout)?,
                max_in_flight: self.max_in_flight,
                ..Limits::default()
            },
        };
        config.check().map_err(anyhow::Error::msg)?;
        Ok(config)
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    if !args.sweep.is_empty() {
        let mut levels = args.sweep.clone();
        levels.sort_unstable();
        levels.dedup();
        eprintln!(
            "sweeping concurrency {levels:?}, {} s each, against {}",
            args.duration,
            config.endpoint()
        );
        let mut rows = Vec::with_capacity(levels.len());
        for concurrency in levels {
            let run = Config {
                mode: Mode::Closed { concurrency },
                ..config.clone()
            };
            let report = crate::load::run(run).await?;
            eprintln!(
                "  concurrency {concurrency}: {} ok, {} failed, TTFT p50 {}",
                report.ok,
                report.failed(),
                report.ttft_s.map_or("-".to_owned(), |p| ms(p.p50))
            );
            rows.push(report);
        }
        let sweep = Sweep::judge(rows);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&sweep)?);
        } else {
            print!("{}", sweep_table(&sweep));
        }
        let answered = sweep.rows.iter().any(|r| r.ok > 0);
        return Ok(exit(answered));
    }
    eprintln!("{} s against {}", args.duration, config.endpoint());
    let report = crate::load::run(config).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(exit(report.ok > 0))
}

/// Exit status 1 when not one request was answered.
fn exit(answered: bool) -> ExitCode {
    if answered {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

const HEADER: [&str; 10] = [
    "concurrency",
    "requests",
    "ok",
    "req/s",
    "tok/s",
    "ttft_p50",
    "ttft_p95",
    "itl_p50",
    "e2e_p50",
    "errors",
];

fn row(r: &Report) -> [String; 10] {
    let p = |v: Option<f64>| v.map_or("-".to_owned(), ms);
    [
        r.concurrency.unwrap_or(0).to_string(),
        r.requests.to_string(),
        r.ok.to_string(),
        format!("{:.2}", r.requests_per_s),
        format!("{:.1}", r.output_tokens_per_s),
        p(r.ttft_s.map(|p| p.p50)),
        p(r.ttft_s.map(|p| p.p95)),
        p(r.itl_s.map(|p| p.p50)),
        p(r.e2e_s.map(|p| p.p50)),
        r.errors_line(),
    ]
}

/// A row per concurrency, the rule, and the verdict.
pub fn sweep_table(sweep: &Sweep) -> String {
    let last = HEADER.len() - 1;
    let mut t = Table::new(
        HEADER
            .iter()
            .enumerate()
            .map(|(i, h)| (*h, if i == last { Left } else { Right })),
    );
    for r in &sweep.rows {
        t.row(row(r));
    }
    let mut out = t.render();
    if sweep.rows.iter().any(|r| !r.stream) {
        out.push_str("(not streamed: TTFT is the whole response)\n");
    }
    let _ = writeln!(out, "{}", knee::RULE);
    let _ = writeln!(out, "{}", sweep.verdict());
    out
}
