//! The requests a trace reader has taken in, checked against the limits as each row comes: its
//! token counts, how many rows, and how far apart the first and last arrivals are.
//!
//! A log is outside input: a row of 2^32 tokens, a hundred million rows or one arrival at 1e9 s
//! would make a simulation that runs for days. Each reader pushes its rows here, and the error
//! names the file, the line and the field.

use super::{Request, Trace, TraceError};
use crate::limits::{show, MAX_SIM_SECONDS, MAX_TOKENS, MAX_TRACE_REQUESTS};

/// The columns a format names its token counts by, for messages.
pub type Columns = (&'static str, &'static str);

#[derive(Debug)]
pub struct Taken<'a> {
    name: &'a str,
    columns: Columns,
    requests: Vec<Request>,
    /// The earliest and the latest arrival, with their lines.
    earliest: Option<(f64, usize)>,
    latest: Option<(f64, usize)>,
}

impl<'a> Taken<'a> {
    pub fn new(name: &'a str, columns: Columns) -> Taken<'a> {
        Taken {
            name,
            columns,
            requests: Vec::new(),
            earliest: None,
            latest: None,
        }
    }

    /// Takes the request of 1-based line `line`, or says why not.
    pub fn push(&mut self, line: usize, r: Request) -> Result<(), TraceError> {
        let bad = |m: String| TraceError(format!("{}:{line}: {m}", self.name));
        for (column, tokens) in [(self.columns.0, r.prompt), (self.columns.1, r.output)] {
            if tokens > MAX_TOKENS {
                return Err(bad(format!(
                    "{column} {tokens} is above {MAX_TOKENS} tokens"
                )));
            }
        }
        if self.requests.len() >= MAX_TRACE_REQUESTS {
            return Err(bad(format!(
                "more than {MAX_TRACE_REQUESTS} requests in one trace"
            )));
        }
        if self.earliest.is_none_or(|(t, _)| r.arrival < t) {
            self.earliest = Some((r.arrival, line));
        }
        if self.latest.is_none_or(|(t, _)| r.arrival > t) {
            self.latest = Some((r.arrival, line));
        }
        self.requests.push(r);
        Ok(())
    }

    /// The trace: sorted by time, shifted so the first arrival is at 0 when `shift` (a log's
    /// timestamps), and running for `duration` (by default two minutes past the last arrival).
    /// Its arrivals must span at most [`MAX_SIM_SECONDS`] (from 0 when not shifted).
    pub fn finish(self, shift: bool, duration: Option<f64>) -> Result<Trace, TraceError> {
        let name = self.name;
        let t0 = match (shift, self.earliest) {
            (true, Some((t, _))) => t,
            _ => 0.0,
        };
        if let Some((last, line)) = self.latest {
            let span = last - t0;
            if span > MAX_SIM_SECONDS {
                let from = match (shift, self.earliest) {
                    (true, Some((_, first))) => format!(" after the first (line {first})"),
                    _ => String::new(),
                };
                return Err(TraceError(format!(
                    "{name}:{line}: an arrival {} s{from} is past the longest trace, {MAX_SIM_SECONDS} s (31 days)",
                    show(span)
                )));
            }
        }
        let mut requests = self.requests;
        requests.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
        if t0 != 0.0 {
            for r in &mut requests {
                r.arrival -= t0;
            }
        }
        Ok(Trace {
            name: name.to_owned(),
            duration: run_length(name, &requests, duration)?,
            requests,
        })
    }
}

/// How long a read trace runs: `duration`, or by default two minutes past the last of the
/// sorted `requests` (within [`MAX_SIM_SECONDS`]).
pub fn run_length(
    name: &str,
    requests: &[Request],
    duration: Option<f64>,
) -> Result<f64, TraceError> {
    let last = requests.last().map_or(0.0, |r| r.arrival);
    let duration = duration.unwrap_or((last + 120.0).ceil().min(MAX_SIM_SECONDS));
    if !(duration.is_finite() && duration > 0.0 && duration <= MAX_SIM_SECONDS) {
        return Err(TraceError(format!(
            "{name}: duration {} must be a number of seconds above 0, at most {MAX_SIM_SECONDS} (31 days)",
            show(duration)
        )));
    }
    Ok(duration)
}
