//! A trace in infscale's own CSV (`time_s,prompt_tokens,output_tokens`), read and written: the
//! plainest of the formats `formats` tells apart, and the one `simulate --write-trace` writes.

use super::taken::Taken;
use super::{Request, Trace, TraceError};
use std::fmt::Write;

/// The header of a trace CSV.
pub const CSV_HEADER: &str = "time_s,prompt_tokens,output_tokens";

impl Trace {
    /// Reads `time_s,prompt_tokens,output_tokens` rows (a header line and `#` comments allowed).
    /// Rows are sorted by time; the run lasts until `duration` or, by default, two minutes past
    /// the last arrival.
    pub fn from_csv(name: &str, text: &str, duration: Option<f64>) -> Result<Trace, TraceError> {
        let mut taken = Taken::new(name, ("prompt_tokens", "output_tokens"));
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || (i == 0 && line.starts_with("time")) {
                continue;
            }
            let bad = |m: &str| TraceError(format!("{name}:{}: {m}: {line:?}", i + 1));
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [time, prompt, output] = fields[..] else {
                return Err(bad("expected time_s,prompt_tokens,output_tokens"));
            };
            let arrival: f64 = time
                .parse()
                .ok()
                .filter(|t: &f64| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| bad("time_s is not a number of seconds >= 0"))?;
            let prompt: u32 = prompt
                .parse()
                .map_err(|_| bad("prompt_tokens is not a whole number"))?;
            let output: u32 = output
                .parse()
                .ok()
                .filter(|o| *o >= 1)
                .ok_or_else(|| bad("output_tokens is not a whole number >= 1"))?;
            taken.push(
                i + 1,
                Request {
                    arrival,
                    prompt,
                    output,
                },
            )?;
        }
        taken.finish(false, duration)
    }

    /// The trace as CSV; times print in full precision, so reading it back gives the same trace.
    pub fn to_csv(&self) -> String {
        let mut out = String::with_capacity(self.requests.len() * 24 + 40);
        out.push_str(CSV_HEADER);
        out.push('\n');
        for r in &self.requests {
            let _ = writeln!(out, "{},{},{}", r.arrival, r.prompt, r.output);
        }
        out
    }
}
