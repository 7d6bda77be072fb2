//! The `/queue/watch` wire, both ends of it: the activator encodes counts as server-sent events
//! and the scaler decodes them, so the two are written, and tested against each other, here.
//!
//! The stream is `text/event-stream`. Each event is one `data: <counts JSON>` line and a blank
//! line; a line starting with `:` is a comment, which the activator sends as a keep-alive while
//! nothing changes. The decoder takes the bytes in whatever chunks the network delivers (an
//! event split anywhere, several in one chunk), LF or CRLF line ends, `data:` with or without
//! its space, several `data:` lines in one event (joined by a newline, as the SSE format says),
//! and ignores comments and other fields (`event:`, `id:`, `retry:`) and events without data. A
//! line or an event past its cap is an error, never an unbounded buffer, and no input panics.

use super::QueueCounts;
use bytes::Bytes;

/// The watch endpoint's media type.
pub const CONTENT_TYPE: &str = "text/event-stream";

/// The keep-alive the activator sends when nothing changed for a while: an empty comment.
pub const KEEP_ALIVE: &[u8] = b":\n\n";

/// Why a watch stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A line longer than the cap, in bytes.
    #[error("an event line over {0} bytes")]
    LineTooLong(usize),
    /// An event whose data lines together pass the cap, in bytes.
    #[error("an event over {0} bytes")]
    EventTooLong(usize),
    /// An event's data (or a `/queue` answer) is not the counts document.
    #[error("counts are not the /queue JSON: {0}")]
    NotCounts(String),
}

/// The counts document, as `/queue` answers it and each event carries it.
pub fn document(counts: &QueueCounts) -> String {
    // A map of strings to integers always serializes; the fallback is never expected.
    serde_json::to_string(counts).unwrap_or_else(|_| "{}".to_owned())
}

/// One event carrying `counts`: `data: <JSON>` and a blank line. The JSON is compact and escapes
/// any newline inside a host name, so it is always one line.
pub fn event(counts: &QueueCounts) -> Bytes {
    let doc = document(counts);
    let mut out = Vec::with_capacity(doc.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(doc.as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Counts from a document (an event's data, or a `/queue` answer).
pub fn counts(doc: &[u8]) -> Result<QueueCounts, WireError> {
    serde_json::from_slice(doc).map_err(|e| WireError::NotCounts(unlike_counts(&e)))
}

/// What is wrong with a document, in words of our own and its position: serde's own text
/// quotes the peer's values, and this error reaches KEDA (a peer's answer is never echoed).
fn unlike_counts(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Io => "unreadable",
        Category::Syntax => "not JSON",
        Category::Data => "JSON of another shape (a value of the wrong type)",
        Category::Eof => "JSON that ends early",
    };
    format!("{what}, at line {} column {}", e.line(), e.column())
}

/// An incremental decoder of a watch stream: feed it chunks as they arrive, take the counts of
/// every event they complete.
#[derive(Debug)]
pub struct Decoder {
    /// The longest line, and the longest event's data, accepted.
    max: usize,
    /// The line read so far (without its line end).
    line: Vec<u8>,
    /// The event's data so far.
    data: Vec<u8>,
    /// Set once a line or event passed the cap: every later feed fails the same way.
    failed: Option<WireError>,
}

impl Decoder {
    /// A decoder refusing lines and events over `max` bytes.
    pub fn new(max: usize) -> Decoder {
        Decoder {
            max,
            line: Vec::new(),
            data: Vec::new(),
            failed: None,
        }
    }

    /// The events `chunk` completes, in order. Drain the iterator: bytes it has not reached
    /// when dropped are lost. An event whose data is not counts is an error and the stream reads
    /// on; a line or event past the cap fails the stream, and every later feed with it.
    pub fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> Decoded<'a> {
        Decoded {
            decoder: self,
            rest: chunk,
            done: false,
        }
    }

    /// The bytes its buffers hold now (a partial line and event, and the room they keep).
    pub fn held(&self) -> usize {
        self.line.capacity() + self.data.capacity()
    }

    /// Appends a piece of the current line, within the cap.
    fn extend_line(&mut self, piece: &[u8]) -> Result<(), WireError> {
        if self.line.len() + piece.len() > self.max {
            return Err(WireError::LineTooLong(self.max));
        }
        self.line.extend_from_slice(piece);
        Ok(())
    }

    /// Handles a complete line; an event when the line is the blank one that ends it.
    fn end_line(&mut self) -> Option<Result<QueueCounts, WireError>> {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        if line.is_empty() {
            self.line.clear();
            if self.data.is_empty() {
                return None;
            }
            let decoded = counts(&self.data);
            self.data.clear();
            return Some(decoded);
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &[][..]),
        };
        if field == b"data" {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let joiner = usize::from(!self.data.is_empty());
            if self.data.len() + joiner + value.len() > self.max {
                self.line.clear();
                return Some(Err(WireError::EventTooLong(self.max)));
            }
            if joiner == 1 {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
        }
        self.line.clear();
        None
    }
}

/// The events one chunk completes; see [`Decoder::feed`].
pub struct Decoded<'a> {
    decoder: &'a mut Decoder,
    rest: &'a [u8],
    done: bool,
}

impl Iterator for Decoded<'_> {
    type Item = Result<QueueCounts, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = &self.decoder.failed {
            self.done = true;
            return Some(Err(e.clone()));
        }
        while !self.rest.is_empty() {
            let (piece, ends_line, rest) = match memchr::memchr(b'\n', self.rest) {
                Some(i) => (&self.rest[..i], true, &self.rest[i + 1..]),
                None => (self.rest, false, &[][..]),
            };
            self.rest = rest;
            let outcome = match self.decoder.extend_line(piece) {
                Err(e) => Some(Err(e)),
                Ok(()) if ends_line => self.decoder.end_line(),
                Ok(()) => None,
            };
            if let Some(Err(e @ (WireError::LineTooLong(_) | WireError::EventTooLong(_)))) =
                &outcome
            {
                // The event's bounds are lost: nothing after can be trusted.
                self.decoder.failed = Some(e.clone());
                self.decoder.line = Vec::new();
                self.decoder.data = Vec::new();
                self.done = true;
            }
            if outcome.is_some() {
                return outcome;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
