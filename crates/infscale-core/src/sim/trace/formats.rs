//! Published request logs read as traces: Mooncake's JSONL, BurstGPT's CSV and Azure's LLM
//! inference CSV, beside this project's own CSV and YAML scenarios.
//!
//! Real traces come in the shape their authors published, so `--trace` reads them as they are
//! rather than asking users to convert them. Each reader keeps only arrival time, prompt length
//! and output length; times are shifted so the first arrival is at 0 and sorted. A line that
//! cannot be read is an error naming the file, the line and what is wrong; the one skip is
//! BurstGPT's failed requests (0 response tokens), counted in a note.

use super::datetime::{datetime_ticks, TICKS_PER_S};
use super::taken::Taken;
use super::{Request, Trace, TraceError};
use std::str::FromStr;

/// How a `--trace` file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Chosen from the file's extension and first line by [`detect`].
    Auto,
    /// A YAML [`super::Scenario`] to generate from.
    Scenario,
    /// `time_s,prompt_tokens,output_tokens`, read by [`Trace::from_csv`].
    Csv,
    /// JSONL: `timestamp` (ms), `input_length`, `output_length` per line.
    Mooncake,
    /// `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`.
    BurstGpt,
    /// `TIMESTAMP,ContextTokens,GeneratedTokens` with datetimes.
    Azure,
}

/// The names `--trace-format` takes, in [`Format`]'s order.
pub const FORMAT_NAMES: [&str; 6] = ["auto", "scenario", "csv", "mooncake", "burstgpt", "azure"];

impl FromStr for Format {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Format, TraceError> {
        Ok(match s {
            "auto" => Format::Auto,
            "scenario" => Format::Scenario,
            "csv" => Format::Csv,
            "mooncake" => Format::Mooncake,
            "burstgpt" => Format::BurstGpt,
            "azure" => Format::Azure,
            _ => {
                return Err(TraceError(format!(
                    "trace format {s:?}: expected one of {}",
                    FORMAT_NAMES.join(", ")
                )))
            }
        })
    }
}

/// A trace read from a log, with what the reader wants the user to know (skipped rows).
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub trace: Trace,
    pub notes: Vec<String>,
}

/// The format of a file named `name` holding `text`: `.yaml`/`.yml`, or a first line that is a
/// YAML key or `---`, is a scenario; a first line opening a JSON object is Mooncake; a header naming
/// BurstGPT's or Azure's columns is theirs; anything else is this project's CSV.
pub fn detect(name: &str, text: &str) -> Format {
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        return Format::Scenario;
    }
    let first = text
        .lines()
        .map(|l| l.trim_start_matches('\u{feff}').trim())
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    if first == "---" {
        return Format::Scenario;
    }
    if first.starts_with('{') {
        return Format::Mooncake;
    }
    let columns = header_columns(first);
    let has = |c: &str| columns.iter().any(|h| h == c);
    if has("timestamp") && has("request tokens") && has("response tokens") {
        return Format::BurstGpt;
    }
    if has("timestamp") && has("contexttokens") && has("generatedtokens") {
        return Format::Azure;
    }
    let key = first.split_once(':').map_or("", |(k, _)| k);
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Format::Scenario;
    }
    Format::Csv
}

/// Reads a log in `format` (not [`Format::Scenario`], which is YAML to generate from; `Auto`
/// is detected first). `duration` is as for [`Trace::from_csv`].
pub fn read(
    format: Format,
    name: &str,
    text: &str,
    duration: Option<f64>,
) -> Result<Read, TraceError> {
    let plain = |trace| Read {
        trace,
        notes: Vec::new(),
    };
    match format {
        Format::Auto => read(detect(name, text), name, text, duration),
        Format::Scenario => Err(TraceError(format!(
            "{name}: a scenario is generated, not read as a log"
        ))),
        Format::Csv => Trace::from_csv(name, text, duration).map(plain),
        Format::Mooncake => mooncake(name, text, duration).map(plain),
        Format::BurstGpt => burstgpt(name, text, duration),
        Format::Azure => azure(name, text, duration).map(plain),
    }
}

/// Mooncake's JSONL: one object per line with `timestamp` (milliseconds), `input_length` and
/// `output_length`; other fields are ignored, blank lines skipped.
pub fn mooncake(name: &str, text: &str, duration: Option<f64>) -> Result<Trace, TraceError> {
    #[derive(serde::Deserialize)]
    struct Line {
        timestamp: f64,
        input_length: u32,
        output_length: u32,
    }
    let mut taken = Taken::new(name, ("input_length", "output_length"));
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |m: &str| TraceError(format!("{name}:{}: {m}", i + 1));
        let l: Line = serde_json::from_str(line).map_err(|e| bad(&e.to_string()))?;
        if !(l.timestamp.is_finite() && l.timestamp >= 0.0) {
            return Err(bad("timestamp is not a number of milliseconds >= 0"));
        }
        if l.output_length < 1 {
            return Err(bad("output_length must be at least 1"));
        }
        taken.push(
            i + 1,
            Request {
                arrival: l.timestamp / 1000.0,
                prompt: l.input_length,
                output: l.output_length,
            },
        )?;
    }
    taken.finish(true, duration)
}

/// BurstGPT's CSV: columns found by name in the header (`Timestamp` in seconds, `Request
/// tokens`, `Response tokens`); rows with 0 response tokens are failed requests, skipped and
/// counted in a note.
pub fn burstgpt(name: &str, text: &str, duration: Option<f64>) -> Result<Read, TraceError> {
    let mut rows = CsvRows::new(
        name,
        text,
        &["timestamp", "request tokens", "response tokens"],
    )?;
    let mut taken = Taken::new(name, ("Request tokens", "Response tokens"));
    let mut failed = 0usize;
    while let Some(row) = rows.next_row()? {
        let (line, f) = row;
        let bad = |m: &str| TraceError(format!("{name}:{line}: {m}"));
        let arrival: f64 = f[0]
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| bad(&format!("Timestamp {:?} is not seconds >= 0", f[0])))?;
        let prompt: u32 = f[1]
            .parse()
            .map_err(|_| bad(&format!("Request tokens {:?} is not a whole number", f[1])))?;
        let output: u32 = f[2]
            .parse()
            .map_err(|_| bad(&format!("Response tokens {:?} is not a whole number", f[2])))?;
        if output == 0 {
            failed += 1;
            continue;
        }
        taken.push(
            line,
            Request {
                arrival,
                prompt,
                output,
            },
        )?;
    }
    let notes = if failed > 0 {
        vec![format!(
            "{name}: skipped {failed} failed request{} (0 response tokens)",
            if failed == 1 { "" } else { "s" }
        )]
    } else {
        Vec::new()
    };
    Ok(Read {
        trace: taken.finish(true, duration)?,
        notes,
    })
}

/// Azure's LLM inference CSV: `TIMESTAMP` a datetime such as `2023-11-16 18:15:46.6805900`
/// (up to 7 fractional digits, no zone), `ContextTokens`, `GeneratedTokens` (at least 1).
pub fn azure(name: &str, text: &str, duration: Option<f64>) -> Result<Trace, TraceError> {
    let mut rows = CsvRows::new(
        name,
        text,
        &["timestamp", "contexttokens", "generatedtokens"],
    )?;
    let mut first_ticks = None;
    let mut taken = Taken::new(name, ("ContextTokens", "GeneratedTokens"));
    while let Some((line, f)) = rows.next_row()? {
        let bad = |m: &str| TraceError(format!("{name}:{line}: {m}"));
        let ticks =
            datetime_ticks(&f[0]).map_err(|m| bad(&format!("TIMESTAMP {:?}: {m}", f[0])))?;
        let prompt: u32 = f[1]
            .parse()
            .map_err(|_| bad(&format!("ContextTokens {:?} is not a whole number", f[1])))?;
        let output: u32 = f[2].parse().ok().filter(|o| *o >= 1).ok_or_else(|| {
            bad(&format!(
                "GeneratedTokens {:?} is not a whole number >= 1",
                f[2]
            ))
        })?;
        // Differences of whole ticks keep the 100 ns resolution that epoch seconds in an f64
        // would lose.
        let base = *first_ticks.get_or_insert(ticks);
        taken.push(
            line,
            Request {
                arrival: (ticks - base) as f64 / TICKS_PER_S as f64,
                prompt,
                output,
            },
        )?;
    }
    taken.finish(true, duration)
}

/// A header's column names, trimmed and lower-cased.
fn header_columns(line: &str) -> Vec<String> {
    line.trim_start_matches('\u{feff}')
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect()
}

/// A CSV with a header: the wanted columns' fields of each row, by 1-based line number.
struct CsvRows<'a> {
    name: &'a str,
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    width: usize,
    wanted: Vec<usize>,
}

impl<'a> CsvRows<'a> {
    fn new(name: &'a str, text: &'a str, wanted: &[&str]) -> Result<CsvRows<'a>, TraceError> {
        let mut lines = text.lines().enumerate();
        let (i, header) = lines
            .by_ref()
            .find(|(_, l)| !l.trim().is_empty())
            .ok_or_else(|| TraceError(format!("{name}: empty, expected a header line")))?;
        let columns = header_columns(header);
        let wanted = wanted
            .iter()
            .map(|w| {
                columns.iter().position(|c| c == w).ok_or_else(|| {
                    TraceError(format!(
                        "{name}:{}: the header has no {w:?} column: {:?}",
                        i + 1,
                        header.trim()
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(CsvRows {
            name,
            lines,
            width: columns.len(),
            wanted,
        })
    }

    /// The next non-blank row's line number and wanted fields, in the order asked for.
    fn next_row(&mut self) -> Result<Option<(usize, Vec<String>)>, TraceError> {
        for (i, line) in self.lines.by_ref() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != self.width {
                return Err(TraceError(format!(
                    "{}:{}: {} fields where the header has {}: {line:?}",
                    self.name,
                    i + 1,
                    fields.len(),
                    self.width
                )));
            }
            let picked = self.wanted.iter().map(|&c| fields[c].to_owned()).collect();
            return Ok(Some((i + 1, picked)));
        }
        Ok(None)
    }
}

#[cfg(test)]
#[path = "formats_tests.rs"]
mod tests;
