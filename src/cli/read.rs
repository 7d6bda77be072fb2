//! Reading the sources named on the command line into replicas, with rates where an earlier
//! page exists (`--previous`, a second scrape `--interval` seconds later, or the state file).

use super::checks::positive_seconds;
use crate::metrics::exposition::Scan;
use crate::metrics::rates::Snapshot;
use crate::metrics::{read_page, Replica, ServerChoice};
use crate::source::{Reader, DEFAULT_MAX_BYTES};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where pages come from and how to read them; shared by `parse` and `decide`.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Which server's series to read: auto, vllm, llamacpp, sglang, tgi or triton.
    #[arg(long, default_value = "auto", value_parser = parse_server)]
    pub server: ServerChoice,
    /// An earlier page of the same replica, for rates; repeat it once per source, in order.
    #[arg(long, value_name = "FILE|URL")]
    pub previous: Vec<String>,
    /// Seconds between the earlier page and the current one (default 15 with --previous).
    /// Without --previous, URL sources are scraped twice this many seconds apart.
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// The pod's CPU request in cores, for CPU as a percentage of it.
    #[arg(long, value_name = "CORES", default_value_t = crate::metrics::replica::DEFAULT_CPU_REQUEST_CORES)]
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

/// One source, read.
#[derive(Debug)]
pub struct Read {
    pub source: String,
    /// The replica, or why the source gave none.
    pub replica: Result<Replica, String>,
    /// What the scan of the current page saw (absent when the page could not be fetched).
    pub scan: Option<Scan>,
}

/// Reads every source. `counters` is the state file's memory of earlier scrapes, updated here;
/// `now` is the time of this read on the same clock.
pub async fn read_all(
    sources: &[String],
    args: &SourceArgs,
    mut counters: Option<&mut BTreeMap<String, Snapshot>>,
    now: f64,
) -> anyhow::Result<Vec<Read>> {
    if !args.previous.is_empty() && args.previous.len() != sources.len() {
        bail!(
            "--previous was given {} time(s) for {} source(s): give one earlier page per source",
            args.previous.len(),
            sources.len()
        );
    }
    if let Some(interval) = args.interval {
        positive_seconds("--interval", interval)?;
    }
    if !(args.cpu_request.is_finite() && args.cpu_request > 0.0) {
        bail!(
            "--cpu-request {}: expected a positive number of cores",
            args.cpu_request
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
        let interval = args.interval.unwrap_or(15.0);
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

    let mut reads = Vec::with_capacity(sources.len());
    for (source, before) in sources.iter().zip(earlier) {
        let page = match reader.read(source).await {
            Ok(page) => page,
            Err(e) if Reader::is_url(source) => {
                reads.push(Read {
                    source: source.clone(),
                    replica: Err(e.detail()),
                    scan: None,
                });
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let read = read_page(&page, args.server);
        let replica = read.signals.map_err(|e| e.to_string()).map(|signals| {
            // Positional, not by name: the same source may stand for two replicas.
            let mut last: BTreeMap<String, Snapshot> =
                before.map(|s| (source.clone(), s)).into_iter().collect();
            let replica =
                Replica::from_scrape(source.clone(), signals, &mut last, now, args.cpu_request);
            if let Some(map) = counters.as_deref_mut() {
                map.extend(last);
            }
            replica
        });
        reads.push(Read {
            source: source.clone(),
            replica,
            scan: Some(read.scan),
        });
    }
    Ok(reads)
}
