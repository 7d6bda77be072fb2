//! Fetching the sources named on the command line, then [`infscale_core::project::fleet::read`] turns
//! them into replicas, with rates where an earlier page exists (`--previous`, a second scrape
//! `--interval` seconds later, or the state file), and llama.cpp's sleep state from its
//! `/props` (`--props`, or beside a URL source).

use super::checks::positive_seconds;
use crate::edge::source::{Reader, DEFAULT_MAX_BYTES};
use anyhow::{bail, Context};
use infscale_core::limits::{MAX_CORES, MAX_PAGE_BYTES};
use infscale_core::observe::metrics::rates::Snapshot;
use infscale_core::observe::metrics::{props, read_page, ServerChoice};
use infscale_core::project::fleet::{self, Fetched, Fleet, Input};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where pages come from and how to read them; shared by `parse` and `decide`.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Which server's series to read: auto, vllm, llamacpp, sglang, tgi (archived upstream,
    /// March 2026), triton or trtllm (trtllm-serve and Triton's TensorRT-LLM backend).
    #[arg(long, default_value = "auto", value_parser = parse_server)]
    pub server: ServerChoice,
    /// An earlier page of the same replica, for rates; repeat it once per source, in order.
    #[arg(long, value_name = "FILE|URL")]
    pub previous: Vec<String>,
    /// llama.cpp's `/props` answer of the same replica, for its sleep state (its page does not
    /// carry it); repeat it once per source, in order. Without it, a URL source whose page is
    /// llama.cpp's has the `/props` beside it fetched.
    #[arg(long, value_name = "FILE|URL")]
    pub props: Vec<String>,
    /// Seconds between the earlier page and the current one (default 15 with --previous).
    /// Without --previous, URL sources are scraped twice this many seconds apart.
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// The pod's CPU request in cores, for CPU as a percentage of it.
    #[arg(long, value_name = "CORES", default_value_t = infscale_core::observe::metrics::replica::DEFAULT_CPU_REQUEST_CORES)]
    pub cpu_request: f64,
    /// Seconds allowed for each fetch.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub timeout: f64,
    /// The largest page accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BYTES)]
    pub max_bytes: usize,
}

fn parse_server(s: &str) -> Result<ServerChoice, String> {
    s.parse()
}

/// Reads every source. `counters` is the state file's memory of earlier scrapes, updated here;
/// `now` is the time of this read on the same clock.
pub async fn read_all(
    sources: &[String],
    args: &SourceArgs,
    counters: Option<&mut BTreeMap<String, Snapshot>>,
    now: f64,
) -> anyhow::Result<Fleet> {
    if !args.previous.is_empty() && args.previous.len() != sources.len() {
        bail!(
            "--previous was given {} time(s) for {} source(s): give one earlier page per source",
            args.previous.len(),
            sources.len()
        );
    }
    if !args.props.is_empty() && args.props.len() != sources.len() {
        bail!(
            "--props was given {} time(s) for {} source(s): give one per source",
            args.props.len(),
            sources.len()
        );
    }
    if let Some(interval) = args.interval {
        positive_seconds("--interval", interval)?;
    }
    if !(args.cpu_request.is_finite() && args.cpu_request > 0.0 && args.cpu_request <= MAX_CORES) {
        bail!(
            "--cpu-request {}: expected a number of cores above 0, at most {MAX_CORES}",
            infscale_core::limits::show(args.cpu_request)
        );
    }
    if !(1..=MAX_PAGE_BYTES).contains(&args.max_bytes) {
        bail!(
            "--max-bytes {}: expected 1 to {MAX_PAGE_BYTES} bytes",
            args.max_bytes
        );
    }
    let timeout = positive_seconds("--timeout", args.timeout)?;
    let reader = Reader::new(timeout, args.max_bytes).context("cannot build the HTTP client")?;

    // Each source's earlier scrape: a --previous page, a first scrape, or the state file.
    let mut earlier: Vec<Option<Snapshot>> = vec![None; sources.len()];
    let snapshot = |counters, interval: f64| Snapshot {
        at: now - interval,
        counters,
    };
    if !args.previous.is_empty() {
        let interval = args
            .interval
            .unwrap_or(infscale_core::control::cycle::HPA_SYNC_PERIOD_S);
        for (slot, previous) in earlier.iter_mut().zip(&args.previous) {
            let page = reader.read(previous).await?;
            let read = read_page(&page, args.server);
            let signals = read
                .signals
                .map_err(|e| anyhow::anyhow!("{previous}: {e}"))?;
            *slot = Some(snapshot(signals.counters, interval));
        }
    } else if let Some(interval) = args.interval {
        let mut any_url = false;
        for (slot, source) in earlier.iter_mut().zip(sources) {
            if Reader::is_url(source) {
                any_url = true;
                if let Ok(page) = reader.read(source).await {
                    if let Ok(signals) = read_page(&page, args.server).signals {
                        *slot = Some(snapshot(signals.counters, interval));
                    }
                }
            }
        }
        if any_url {
            tokio::time::sleep(Duration::from_secs_f64(interval)).await;
        }
    } else if let Some(map) = counters.as_deref() {
        for (slot, source) in earlier.iter_mut().zip(sources) {
            *slot = map.get(source).cloned();
        }
    }

    // Fetch every page first; a file that cannot be read is an error, a URL one an unread replica.
    let mut pages = Vec::with_capacity(sources.len());
    for source in sources {
        pages.push(match reader.read(source).await {
            Ok(page) => Ok(page),
            Err(e) if Reader::is_url(source) => Err(e.detail()),
            Err(e) => return Err(e.into()),
        });
    }
    // Each page read, with llama.cpp's sleep state from its /props.
    let mut fetched = Vec::with_capacity(sources.len());
    for (i, (source, page)) in sources.iter().zip(&pages).enumerate() {
        fetched.push(match page {
            Ok(bytes) => {
                let mut read = read_page(bytes, args.server);
                if let Some(signals) = read.signals.as_mut().ok().filter(|s| props::wanted(s)) {
                    signals.asleep = sleep_state(&reader, args.props.get(i), source).await?;
                }
                Fetched::Read(read)
            }
            Err(e) => Fetched::Failed(e.clone()),
        });
    }
    // Positional, not by name: the same source may stand for two replicas.
    let inputs = sources
        .iter()
        .zip(fetched)
        .zip(&earlier)
        .map(|((source, fetched), earlier)| Input {
            name: source.clone(),
            fetched,
            earlier: earlier.as_ref(),
            cpu_request_cores: args.cpu_request,
        });
    let mut fleet = fleet::read(inputs, args.server, now);
    if let Some(map) = counters {
        fleet.remember(map);
    }
    Ok(fleet)
}

/// A llama.cpp replica's sleep state: from its `--props` (a file or URL that cannot be read is an
/// error), else from the `/props` beside a URL source (one that cannot be read leaves it unknown).
async fn sleep_state(
    reader: &Reader,
    given: Option<&String>,
    source: &str,
) -> anyhow::Result<Option<bool>> {
    if let Some(given) = given {
        let body = reader.read(given).await?;
        return props::read(&body, given).map_err(anyhow::Error::msg);
    }
    let Some(at) = Reader::is_url(source)
        .then(|| props::beside_url(source))
        .flatten()
    else {
        return Ok(None);
    };
    Ok(match reader.read(&at).await {
        Ok(body) => props::read(&body, &at).ok().flatten(),
        Err(_) => None,
    })
}
