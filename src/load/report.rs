//! A run's result as a user reads it: counts, errors by kind, percentiles and rates, printed as
//! a table or serialized as one JSON object with stable snake_case keys.

use super::config::Mode;
use super::histogram::Percentiles;
use super::recorder::Recorder;
use infscale_core::table::Align::*;
use infscale_core::table::Table;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One run's numbers. Rates are over `elapsed_s`, from the first request sent to the last one
/// ended (at most the duration plus the timeout).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Closed loop: the workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Open loop: the arrival rate asked for, requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// How long new requests were started.
    pub duration_s: f64,
    pub elapsed_s: f64,
    /// Streamed: TTFT is the first token. Not streamed: TTFT is the whole response, as E2E.
    pub stream: bool,
    /// Requests answered or failed (open loop: including the arrivals past the in-flight bound).
    pub requests: u64,
    pub ok: u64,
    /// Failures by kind (`connect`, `closed`, `timeout`, `http_NNN`, `bad_body`, `overflow`).
    pub errors: BTreeMap<String, u64>,
    pub ttft_s: Option<Percentiles>,
    /// Streamed only: the gap between tokens.
    pub itl_s: Option<Percentiles>,
    pub e2e_s: Option<Percentiles>,
    pub output_tokens: u64,
    pub output_tokens_per_s: f64,
    /// Requests answered per second.
    pub requests_per_s: f64,
}

impl Report {
    pub fn new(mode: Mode, duration_s: f64, elapsed_s: f64, stream: bool, r: &Recorder) -> Report {
        let per_s = |n: u64| {
            if elapsed_s > 0.0 {
                n as f64 / elapsed_s
            } else {
                0.0
            }
        };
        let (concurrency, rate) = match mode {
            Mode::Closed { concurrency } => (Some(concurrency), None),
            Mode::Open { rate, .. } => (None, Some(rate)),
        };
        Report {
            concurrency,
            rate,
            duration_s,
            elapsed_s,
            stream,
            requests: r.ok + r.failed(),
            ok: r.ok,
            errors: r.errors.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            ttft_s: r.ttft.percentiles(),
            itl_s: r.itl.percentiles(),
            e2e_s: r.e2e.percentiles(),
            output_tokens: r.output_tokens,
            output_tokens_per_s: per_s(r.output_tokens),
            requests_per_s: per_s(r.ok),
        }
    }

    pub fn failed(&self) -> u64 {
        self.requests - self.ok
    }

    /// `connect 3, http_500 2`, or `-`.
    pub fn errors_line(&self) -> String {
        if self.errors.is_empty() {
            return "-".to_owned();
        }
        let parts: Vec<String> = self
            .errors
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        parts.join(", ")
    }

    /// The report as a person reads it: a summary line, then a row per latency.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let load = match (self.concurrency, self.rate) {
            (Some(c), _) => format!("concurrency {c}"),
            (_, Some(r)) => format!("rate {r} req/s"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{load}, {:.1} s (ended after {:.2} s): {} requests, {} ok, errors: {}",
            self.duration_s,
            self.elapsed_s,
            self.requests,
            self.ok,
            self.errors_line()
        );
        let _ = writeln!(
            out,
            "{:.2} req/s, {:.1} output tokens/s ({} tokens)",
            self.requests_per_s, self.output_tokens_per_s, self.output_tokens
        );
        let ttft = if self.stream {
            "ttft"
        } else {
            "ttft (whole response)"
        };
        let rows = [
            (ttft, self.ttft_s),
            ("itl", self.itl_s),
            ("e2e", self.e2e_s),
        ];
        let mut t = Table::new([
            ("latency", Left),
            ("p50", Right),
            ("p90", Right),
            ("p95", Right),
            ("p99", Right),
        ]);
        for (name, p) in rows {
            match p {
                Some(p) => t.row(
                    std::iter::once(name.to_owned()).chain([p.p50, p.p90, p.p95, p.p99].map(ms)),
                ),
                None => t.row([name, "-", "-", "-", "-"]),
            }
        }
        out.push_str(&t.render());
        out
    }
}

/// Seconds as milliseconds for a table cell.
pub fn ms(seconds: f64) -> String {
    if seconds < 0.01 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.1} ms", seconds * 1e3)
    }
}
