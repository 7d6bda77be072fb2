//! What can be wrong with one line of an exposition page.
//!
//! A bad line never aborts a page: the scanner records a [`LineError`] (line number, what is
//! wrong, the offending text) and goes on. The caller names the source when it prints one, so
//! every message reads `source:line: what is wrong: "text"`.

use std::fmt;

/// The longest excerpt of an offending line kept in an error, in characters.
const EXCERPT_CHARS: usize = 80;

/// What is wrong with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LineErrorKind {
    #[error("does not start with a metric name")]
    NoMetricName,
    #[error("metric name has a character outside [a-zA-Z0-9_:]")]
    BadMetricName,
    #[error("label set is not closed with '}}'")]
    UnclosedLabels,
    #[error("bad label name")]
    BadLabelName,
    #[error("expected '=' after a label name")]
    MissingEquals,
    #[error("label value is not in double quotes")]
    UnquotedLabelValue,
    #[error("label value has an escape other than \\\\, \\\" or \\n")]
    BadEscape,
    #[error("expected ',' or '}}' between labels")]
    MissingComma,
    #[error("no value after the metric name")]
    MissingValue,
    #[error("value is not a number")]
    BadValue,
    #[error("timestamp is not a number")]
    BadTimestamp,
    #[error("unexpected text after the value")]
    TrailingText,
    #[error("malformed exemplar")]
    BadExemplar,
    #[error("malformed # TYPE line")]
    BadTypeLine,
    #[error("unknown metric type")]
    UnknownType,
    #[error("malformed # HELP or # UNIT line")]
    BadMetadataLine,
    #[error("text after # EOF")]
    AfterEof,
    #[error("line is not valid UTF-8")]
    NotUtf8,
}

/// One skipped line: where it is, what is wrong, and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number in the page.
    pub line: usize,
    pub kind: LineErrorKind,
    /// The start of the offending line, at most 80 characters.
    pub text: String,
}

impl LineError {
    pub(crate) fn new(line: usize, kind: LineErrorKind, text: &str) -> Self {
        let text = match text.char_indices().nth(EXCERPT_CHARS) {
            Some((cut, _)) => format!("{}...", &text[..cut]),
            None => text.to_owned(),
        };
        LineError { line, kind, text }
    }

    /// The error as a person reads it, with the source it came from.
    pub fn at<'a>(&'a self, source: &'a str) -> Located<'a> {
        Located {
            source,
            error: self,
        }
    }
}

/// A [`LineError`] with the name of its source, printed as `source:line: what: "text"`.
pub struct Located<'a> {
    source: &'a str,
    error: &'a LineError,
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {:?}",
            self.source, self.error.line, self.error.kind, self.error.text
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let line = "é".repeat(200);
        let e = LineError::new(3, LineErrorKind::BadValue, &line);
        assert_eq!(e.text.chars().count(), EXCERPT_CHARS + 3);
        assert!(e.text.ends_with("..."));
    }

    #[test]
    fn located_names_source_and_line() {
        let e = LineError::new(7, LineErrorKind::BadValue, "x abc");
        assert_eq!(
            e.at("pod-a").to_string(),
            "pod-a:7: value is not a number: \"x abc\""
        );
    }
}
