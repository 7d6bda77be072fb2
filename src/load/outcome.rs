//! What one request came to: a [`Sample`] of its timings and tokens, or the [`ErrorKind`] it
//! failed with. Every failure is one of a few kinds, counted, never fatal to the run.

use std::fmt;

/// Why a request did not count as answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// No connection: refused, unreachable, name not resolved, TLS failed, connect timed out.
    Connect,
    /// The connection closed (or reset) before the whole response arrived.
    Closed,
    /// The request's timeout passed before the whole response arrived.
    Timeout,
    /// The server answered with this status other than 2xx.
    Status(u16),
    /// A 2xx response that is not an OpenAI completion: not JSON, no choices, an `error`
    /// event in the stream, no content at all, or a body past the size bound.
    BadBody,
    /// Open loop: the arrival found the in-flight bound reached and was not sent.
    Overflow,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Connect => f.write_str("connect"),
            ErrorKind::Closed => f.write_str("closed"),
            ErrorKind::Timeout => f.write_str("timeout"),
            ErrorKind::Status(code) => write!(f, "http_{code}"),
            ErrorKind::BadBody => f.write_str("bad_body"),
            ErrorKind::Overflow => f.write_str("overflow"),
        }
    }
}

impl ErrorKind {
    /// The kind of a client error.
    pub fn of(e: &reqwest::Error) -> ErrorKind {
        if e.is_connect() {
            ErrorKind::Connect
        } else if e.is_timeout() {
            ErrorKind::Timeout
        } else {
            ErrorKind::Closed
        }
    }
}

/// One answered request, times in seconds from when it was sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Streamed: until the first chunk with content. Not streamed: the whole response.
    pub ttft: f64,
    /// Until the last token (`data: [DONE]`, or the end of the body).
    pub e2e: f64,
    /// `usage.completion_tokens` when the server sent it, else the chunks with content (not
    /// streamed: the words of the text).
    pub output_tokens: u64,
    /// Streamed: each gap between chunks with content, per token in the later chunk.
    pub gaps: Vec<f32>,
}

pub type Outcome = Result<Sample, ErrorKind>;
