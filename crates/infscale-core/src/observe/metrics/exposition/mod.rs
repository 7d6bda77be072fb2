//! The Prometheus text format (0.0.4) and OpenMetrics 1.0, read without copying.
//!
//! Every model server publishes its load as a `/metrics` page, and pages run from 10 KB to several
//! MB. [`scan`] walks a page once, line by line, and hands each sample whose metric name a
//! [`Visitor`] wants to that visitor as a borrowed [`Sample`]: nothing is allocated per sample,
//! and labels are only iterated (and unescaped) when the visitor asks for them.
//!
//! The grammar accepted: `# HELP`, `# TYPE`, `# UNIT` and `# EOF` lines, other comments, blank
//! lines; sample lines `name{label="value",...} value [timestamp] [# {exemplar} value [ts]]`,
//! where names may hold colons, label values may hold commas, braces and the escapes `\\`, `\"`
//! and `\n`, values may be `NaN`, `+Inf` or `-Inf`, timestamps may be integer milliseconds
//! (0.0.4) or float seconds (OpenMetrics), and lines may end in CRLF. A line that breaks the
//! grammar is skipped and recorded as a [`LineError`]; the rest of the page still counts.

mod error;
mod labels;

pub use error::{LineError, LineErrorKind, Located};
pub use labels::{Label, Labels};

use labels::{scan_label_set, skip_blanks};
use std::borrow::Cow;

/// At most this many skipped lines are kept with their text; the rest are only counted.
pub const MAX_RECORDED_ERRORS: usize = 64;

/// One sample line, borrowed from the page.
#[derive(Debug, Clone)]
pub struct Sample<'a> {
    /// The metric name as written, e.g. `vllm:num_requests_running`.
    pub name: &'a str,
    labels: &'a str,
    pub value: f64,
    /// Integer milliseconds in 0.0.4 pages, float seconds in OpenMetrics pages, as written.
    pub timestamp: Option<f64>,
    /// 1-based line number.
    pub line: usize,
}

impl<'a> Sample<'a> {
    /// The sample's labels in page order.
    pub fn labels(&self) -> Labels<'a> {
        Labels::new(self.labels)
    }

    /// The unescaped value of one label, if the sample has it.
    pub fn label(&self, name: &str) -> Option<Cow<'a, str>> {
        self.labels()
            .find(|label| label.name == name)
            .map(|label| label.value())
    }
}

/// Receives the samples of a page.
pub trait Visitor {
    /// Whether samples with this metric name should be handed to [`Visitor::sample`]. Asked
    /// before the sample's labels are looked at.
    fn wants(&mut self, name: &str) -> bool;
    /// One wanted sample.
    fn sample(&mut self, sample: &Sample<'_>);
}

/// What a scan saw, besides the samples it handed out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    /// Lines in the page.
    pub lines: usize,
    /// Well-formed sample lines, wanted or not.
    pub samples: usize,
    /// Lines skipped because they break the grammar.
    pub skipped: usize,
    /// The first [`MAX_RECORDED_ERRORS`] skipped lines, with what is wrong.
    pub errors: Vec<LineError>,
    /// The page ended with `# EOF` (OpenMetrics).
    pub eof: bool,
}

impl Scan {
    /// True when the page had bad lines and not one good sample: nothing on it can be trusted.
    pub fn unusable(&self) -> bool {
        self.samples == 0 && self.skipped > 0
    }

    fn skip(&mut self, line: usize, kind: LineErrorKind, text: &[u8]) {
        self.skipped += 1;
        if self.errors.len() < MAX_RECORDED_ERRORS {
            self.errors
                .push(LineError::new(line, kind, &String::from_utf8_lossy(text)));
        }
    }
}

/// Reads a whole page, handing wanted samples to `visitor`.
pub fn scan(page: &[u8], visitor: &mut impl Visitor) -> Scan {
    let mut result = Scan::default();
    let mut start = 0;
    let mut line_no = 0;
    while start < page.len() {
        let end = memchr::memchr(b'\n', &page[start..]).map_or(page.len(), |i| start + i);
        line_no += 1;
        let raw = &page[start..end];
        start = end + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if let Err(kind) = read_line(raw, line_no, &mut result, visitor) {
            result.skip(line_no, kind, raw);
        }
    }
    result.lines = line_no;
    result
}

fn read_line(
    raw: &[u8],
    line_no: usize,
    result: &mut Scan,
    visitor: &mut impl Visitor,
) -> Result<(), LineErrorKind> {
    let first = skip_blanks(raw, 0);
    if first == raw.len() {
        return Ok(());
    }
    if result.eof {
        return Err(LineErrorKind::AfterEof);
    }
    let line = std::str::from_utf8(raw).map_err(|_| LineErrorKind::NotUtf8)?;
    if raw[first] == b'#' {
        result.eof = read_comment(&line[first + 1..])?;
        return Ok(());
    }
    let sample = read_sample(line, first, line_no)?;
    result.samples += 1;
    if visitor.wants(sample.name) {
        visitor.sample(&sample);
    }
    Ok(())
}

/// Reads the text after `#`; returns true for `# EOF`.
fn read_comment(text: &str) -> Result<bool, LineErrorKind> {
    let mut words = text.split([' ', '\t']).filter(|w| !w.is_empty());
    match words.next() {
        Some("EOF") => Ok(words.next().is_none()),
        Some("TYPE") => {
            let (Some(name), Some(kind), None) = (words.next(), words.next(), words.next()) else {
                return Err(LineErrorKind::BadTypeLine);
            };
            if metric_name_end(name.as_bytes(), 0) != name.len() {
                return Err(LineErrorKind::BadTypeLine);
            }
            match kind {
                "counter" | "gauge" | "histogram" | "summary" | "untyped" | "unknown"
                | "gaugehistogram" | "stateset" | "info" => Ok(false),
                _ => Err(LineErrorKind::UnknownType),
            }
        }
        Some("HELP" | "UNIT") => match words.next() {
            Some(name) if metric_name_end(name.as_bytes(), 0) == name.len() => Ok(false),
            _ => Err(LineErrorKind::BadMetadataLine),
        },
        // Any other comment is free text.
        _ => Ok(false),
    }
}

fn read_sample(line: &str, first: usize, line_no: usize) -> Result<Sample<'_>, LineErrorKind> {
    let bytes = line.as_bytes();
    let name_end = metric_name_end(bytes, first);
    if name_end == first {
        return Err(LineErrorKind::NoMetricName);
    }
    let mut i = skip_blanks(bytes, name_end);
    let mut labels = "";
    if bytes.get(i) == Some(&b'{') {
        let close = scan_label_set(bytes, i)?;
        labels = &line[i + 1..close - 1];
        i = close;
    } else if i == name_end && i < bytes.len() {
        // Something glued to the name that is neither a label set nor a blank.
        return Err(LineErrorKind::BadMetricName);
    }
    let (value, rest) = number_token(line, i).ok_or(LineErrorKind::MissingValue)?;
    let value = parse_float(value).ok_or(LineErrorKind::BadValue)?;
    let mut timestamp = None;
    let mut i = rest;
    if let Some((token, rest)) = number_token(line, i) {
        if token.starts_with('#') {
            read_exemplar(line, i)?;
            i = line.len();
        } else {
            let ts = parse_float(token).filter(|t| t.is_finite());
            timestamp = Some(ts.ok_or(LineErrorKind::BadTimestamp)?);
            i = rest;
        }
    }
    if let Some((token, _)) = number_token(line, i) {
        if !token.starts_with('#') {
            return Err(LineErrorKind::TrailingText);
        }
        read_exemplar(line, i)?;
    }
    Ok(Sample {
        name: &line[first..name_end],
        labels,
        value,
        timestamp,
        line: line_no,
    })
}

/// An exemplar: `# {labels} value [timestamp]`, starting at the `#` found from `from`.
fn read_exemplar(line: &str, from: usize) -> Result<(), LineErrorKind> {
    let bytes = line.as_bytes();
    let hash = skip_blanks(bytes, from);
    let open = skip_blanks(bytes, hash + 1);
    if bytes.get(open) != Some(&b'{') {
        return Err(LineErrorKind::BadExemplar);
    }
    let close = scan_label_set(bytes, open).map_err(|_| LineErrorKind::BadExemplar)?;
    let mut tokens = line[close..].split([' ', '\t']).filter(|t| !t.is_empty());
    let value_ok = tokens.next().and_then(parse_float).is_some();
    let ts_ok = tokens.next().is_none_or(|t| parse_float(t).is_some());
    if value_ok && ts_ok && tokens.next().is_none() {
        Ok(())
    } else {
        Err(LineErrorKind::BadExemplar)
    }
}

/// The next blank-separated token from `from`, and the index after it.
fn number_token(line: &str, from: usize) -> Option<(&str, usize)> {
    let bytes = line.as_bytes();
    let start = skip_blanks(bytes, from);
    if start == bytes.len() {
        return None;
    }
    let end = memchr::memchr2(b' ', b'\t', &bytes[start..]).map_or(bytes.len(), |n| start + n);
    Some((&line[start..end], end))
}

/// A sample value or timestamp: decimal, exponent, `NaN`, `+Inf`, `-Inf` (any case).
pub fn parse_float(token: &str) -> Option<f64> {
    token.parse::<f64>().ok()
}

/// The end of the metric name that starts at `start` (equal to `start` when there is none):
/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn metric_name_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    match bytes.get(i) {
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' || *b == b':' => i += 1,
        _ => return start,
    }
    while let Some(b) = bytes.get(i) {
        if b.is_ascii_alphanumeric() || *b == b'_' || *b == b':' {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// A visitor that keeps every sample, owned: for tests, tools and the `parse` command's
/// verbose mode. It allocates per sample, which the profiles never do.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Collect {
    pub samples: Vec<OwnedSample>,
}

/// A sample copied out of its page.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedSample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp: Option<f64>,
    pub line: usize,
}

impl Visitor for Collect {
    fn wants(&mut self, _name: &str) -> bool {
        true
    }

    fn sample(&mut self, sample: &Sample<'_>) {
        self.samples.push(OwnedSample {
            name: sample.name.to_owned(),
            labels: sample
                .labels()
                .map(|l| (l.name.to_owned(), l.value().into_owned()))
                .collect(),
            value: sample.value,
            timestamp: sample.timestamp,
            line: sample.line,
        });
    }
}

/// Reads a whole page into owned samples.
pub fn collect(page: &[u8]) -> (Vec<OwnedSample>, Scan) {
    let mut all = Collect::default();
    let scan = scan(page, &mut all);
    (all.samples, scan)
}

#[cfg(test)]
mod tests;
