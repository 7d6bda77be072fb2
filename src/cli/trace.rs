//! `infscale trace`: a trace for `simulate --trace` built from a Prometheus range query of the
//! servers' request counters and token histograms, for a fleet that logs no requests.
//!
//! The shell asks Prometheus (`/api/v1/query_range`, bounded in time and size), hands the series
//! to [`infscale_core::sim::trace::from_prometheus`], writes the CSV and says on stderr what the counts
//! could not tell.

use super::checks::positive_seconds;
use crate::edge::source::Reader;
use anyhow::{bail, Context};
use infscale_core::sim::trace::from_prometheus::{
    self, increases, parse_matrix, Exported, Lengths, Seen, Series, Window,
};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Prometheus' base URL (http://prometheus:9090); /api/v1/query_range is asked.
    #[arg(long, value_name = "URL")]
    pub prometheus: String,
    /// Whose metric names to query: vllm, sglang or llamacpp.
    #[arg(long, default_value = "vllm", value_parser = ["vllm", "sglang", "llamacpp"])]
    pub server: String,
    /// Label matchers of the series to sum (every pod they match counts), as PromQL writes them
    /// inside braces: namespace="prod",model_name="llama".
    #[arg(long, value_name = "MATCHERS", default_value = "")]
    pub selector: String,
    /// The window's start: unix seconds or UTC (2026-12-01T09:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub start: String,
    /// The window's end: unix seconds or UTC (the last step reaches past it when the window is
    /// not a whole number of steps).
    #[arg(long, value_name = "TIME")]
    pub end: String,
    /// Seconds between samples: requests are counted per step and spread within it. At least
    /// the scrape interval.
    #[arg(long, value_name = "SECONDS", default_value_t = 15.0)]
    pub step: f64,
    /// The request counter to count arrivals by [default: the server's finished-request
    /// counter; llama.cpp exports none, so give one, e.g. your ingress's].
    #[arg(long, value_name = "METRIC")]
    pub requests: Option<String>,
    /// Lengths from the per-request token histograms, or only the token counters (a mean per
    /// step) [default: histograms for vllm and sglang, counters for llamacpp].
    #[arg(long, value_parser = ["histograms", "counters"])]
    pub lengths: Option<String>,
    /// The seed of the arrival times and lengths drawn.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds one query may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
    /// Where to write the CSV (`time_s,prompt_tokens,output_tokens`); - for stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: String,
}

/// A server's metric names: its request counter, length histograms and token counters.
struct Names {
    requests: Option<&'static str>,
    histograms: Option<[&'static str; 2]>,
    counters: [&'static str; 2],
}

fn names(server: &str) -> Names {
    match server {
        "sglang" => Names {
            requests: Some("sglang:num_requests_total"),
            histograms: Some([
                "sglang:prompt_tokens_histogram",
                "sglang:generation_tokens_histogram",
            ]),
            counters: [
                "sglang:prompt_tokens_total",
                "sglang:generation_tokens_total",
            ],
        },
        "llamacpp" => Names {
            requests: None,
            histograms: None,
            counters: [
                "llamacpp:prompt_tokens_total",
                "llamacpp:tokens_predicted_total",
            ],
        },
        _ => Names {
            requests: Some("vllm:request_success_total"),
            histograms: Some([
                "vllm:request_prompt_tokens",
                "vllm:request_generation_tokens",
            ]),
            counters: ["vllm:prompt_tokens_total", "vllm:generation_tokens_total"],
        },
    }
}

/// The largest answer read from Prometheus (a day of 15 s steps for a few hundred series).
const MAX_ANSWER_BYTES: usize = 256 << 20;

/// Asks one range query at a time over the window.
struct Prometheus {
    reader: Reader,
    base: url::Url,
    window: Window,
    selector: String,
}

impl Prometheus {
    async fn series(&self, metric: &str) -> anyhow::Result<Vec<Series>> {
        let w = &self.window;
        let query = if self.selector.is_empty() {
            metric.to_owned()
        } else {
            format!("{metric}{{{}}}", self.selector)
        };
        let mut url = self
            .base
            .join("api/v1/query_range")
            .context("--prometheus: not a base URL")?;
        url.query_pairs_mut()
            .append_pair("query", &query)
            .append_pair("start", &w.start.to_string())
            .append_pair("end", &(w.start + w.steps as f64 * w.step).to_string())
            .append_pair("step", &w.step.to_string());
        let body = self
            .reader
            .read(url.as_str())
            .await
            .with_context(|| format!("Prometheus at {}, query {query}", self.base))?;
        let body = String::from_utf8_lossy(&body);
        parse_matrix(&body)
            .map_err(|e| anyhow::anyhow!("Prometheus at {}, query {query}: {e}", self.base))
    }

    async fn counter(&self, metric: &str, seen: &mut Seen) -> anyhow::Result<Vec<f64>> {
        let series = self.series(metric).await?;
        if series.is_empty() {
            bail!(
                "Prometheus at {}: no series {metric}{{{}}} over the window (check --server, --selector and the times)",
                self.base,
                self.selector
            );
        }
        Ok(increases(&series, &self.window, seen))
    }

    async fn histogram(&self, base: &str, seen: &mut Seen) -> anyhow::Result<Lengths> {
        let bucket = self.series(&format!("{base}_bucket")).await?;
        if bucket.is_empty() {
            bail!(
                "Prometheus at {}: no series {base}_bucket{{{}}} over the window (is the histogram exported? --lengths counters reads the token counters instead)",
                self.base,
                self.selector
            );
        }
        let sum = self.series(&format!("{base}_sum")).await?;
        let count = self.series(&format!("{base}_count")).await?;
        Lengths::histogram(&bucket, &sum, &count, &self.window, seen)
            .map_err(|e| anyhow::anyhow!("Prometheus at {}, {base}: {e}", self.base))
    }
}

fn window(args: &Args) -> anyhow::Result<Window> {
    positive_seconds("--step", args.step)?;
    let start =
        from_prometheus::unix_seconds(&args.start).map_err(|e| anyhow::anyhow!("--start {e}"))?;
    let end = from_prometheus::unix_seconds(&args.end).map_err(|e| anyhow::anyhow!("--end {e}"))?;
    if end <= start {
        bail!("--end {} is not after --start {}", args.end, args.start);
    }
    Window::new(start, end, args.step).map_err(|e| anyhow::anyhow!("--start/--end/--step: {e}"))
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let w = window(&args)?;
    let timeout = positive_seconds("--timeout", args.timeout)?;
    let base = format!("{}/", args.prometheus.trim_end_matches('/'));
    let base = url::Url::parse(&base)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--prometheus {}: expected an http(s):// URL",
                args.prometheus
            )
        })?;
    let selector = args.selector.trim();
    let selector = selector
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(selector)
        .to_owned();
    let prom = Prometheus {
        reader: Reader::new(timeout, MAX_ANSWER_BYTES)?,
        base,
        window: w,
        selector,
    };
    let n = names(&args.server);
    let requests_metric = match (&args.requests, n.requests) {
        (Some(m), _) => m.clone(),
        (None, Some(m)) => m.to_owned(),
        (None, None) => bail!(
            "--server {} exports no request counter: give one with --requests METRIC (a counter of requests to these servers, e.g. your ingress's)",
            args.server
        ),
    };
    let mut seen = Seen::default();
    let requests = prom.counter(&requests_metric, &mut seen).await?;
    let by_histogram = match args.lengths.as_deref() {
        Some("counters") => false,
        Some(_) => true,
        None => n.histograms.is_some(),
    };
    let [prompt, output] = match (by_histogram, n.histograms) {
        (true, Some([p, o])) => [
            prom.histogram(p, &mut seen).await?,
            prom.histogram(o, &mut seen).await?,
        ],
        (true, None) => bail!(
            "--server {} exports no length histograms: use --lengths counters",
            args.server
        ),
        (false, _) => {
            let mean = |tokens| Lengths::Mean {
                tokens,
                requests: requests.clone(),
            };
            let p = prom.counter(n.counters[0], &mut seen).await?;
            let o = prom.counter(n.counters[1], &mut seen).await?;
            [mean(p), mean(o)]
        }
    };
    let exported = Exported {
        window: w,
        requests,
        prompt,
        output,
    };
    let built = from_prometheus::build(&exported, args.seed)
        .map_err(|e| anyhow::anyhow!("Prometheus at {}: {e}", prom.base))?;
    let csv = built.trace.to_csv();
    if args.output == "-" {
        print!("{csv}");
    } else {
        std::fs::write(&args.output, csv).with_context(|| format!("-o {}", args.output))?;
    }
    eprint!(
        "{}",
        summary(&args, &built, &seen, by_histogram, &requests_metric)
    );
    Ok(ExitCode::SUCCESS)
}

/// What was built, and what the counts could not tell.
fn summary(
    args: &Args,
    b: &from_prometheus::Built,
    seen: &Seen,
    by_histogram: bool,
    requests: &str,
) -> String {
    let steps = (b.trace.duration / args.step).round();
    let mut out = format!(
        "infscale trace: {} requests over {} s ({steps} steps of {} s) from {requests} -> {}\n",
        b.trace.requests.len(),
        b.trace.duration,
        args.step,
        args.output
    );
    out += &format!(
        "  mean prompt {:.1} tokens, mean output {:.1} tokens; steps without a request: {}\n",
        b.mean_prompt, b.mean_output, b.quiet_steps
    );
    if seen.resets > 0 || seen.gaps > 0 {
        out += &format!(
            "  counter restarts {}, missed samples {} (filled evenly across the gap)\n",
            seen.resets, seen.gaps
        );
    }
    out += "  not in the data, so drawn (seed ";
    out += &format!("{}):\n", args.seed);
    out += &format!(
        "  - arrivals within each {} s step: spread uniformly at random; shorter bursts are not seen\n",
        args.step
    );
    out += if by_histogram {
        "  - each request's lengths: drawn within the step's histogram buckets (+Inf to twice the last bound), scaled to the step's mean (_sum / _count)\n"
    } else {
        "  - each request's lengths: every request of a step gets its mean (token counter / request counter); the spread is unknown\n"
    };
    out
}
