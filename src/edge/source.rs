//! Pages from files and URLs, bounded in size and time.
//!
//! The command-line tools read `/metrics` pages from wherever a person points them: a saved file,
//! or an `http(s)://` URL. Every read is capped (a page larger than the cap is an error, not a
//! truncated page that would read as less load) and every fetch has a timeout.

use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The largest page read by default: real pages are 10 KB to a few MB.
pub const DEFAULT_MAX_BYTES: usize = 16 << 20;

/// Why a page could not be read; every variant names the source.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{source_name}: {error}")]
    File {
        source_name: String,
        error: std::io::Error,
    },
    #[error("{source_name}: {cause}")]
    Http { source_name: String, cause: Cause },
    #[error("{source_name}: HTTP status {status}{}", said(message))]
    Status {
        source_name: String,
        status: u16,
        /// The server's own word on it: the first line of the body (or a JSON error's message).
        message: Option<String>,
    },
    #[error("{source_name}: larger than the {limit}-byte cap")]
    TooLarge { source_name: String, limit: usize },
}

impl SourceError {
    /// What went wrong, without the source's name (for callers that print it already).
    pub fn detail(&self) -> String {
        match self {
            SourceError::File { error, .. } => error.to_string(),
            SourceError::Http { cause, .. } => cause.to_string(),
            SourceError::Status {
                status, message, ..
            } => format!("HTTP status {status}{}", said(message)),
            SourceError::TooLarge { limit, .. } => format!("larger than the {limit}-byte cap"),
        }
    }
}

fn said(message: &Option<String>) -> String {
    message
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default()
}

/// Why an HTTP exchange failed, by its cause rather than the client's wrapper text (which repeats
/// the URL and hides whether the peer refused, hung or broke TLS).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct Cause {
    /// A short label for metrics: refused, reset, timeout, tls, dns, connect, body or transport.
    pub kind: &'static str,
    pub text: String,
}

/// The cause of a failed HTTP exchange, found along the error's source chain.
pub fn cause(e: &reqwest::Error) -> Cause {
    use std::error::Error;
    use std::io::ErrorKind;
    let mut io_kind = None;
    let mut tls = None;
    let mut innermost = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        if s.downcast_ref::<rustls::Error>().is_some() {
            tls = Some(s.to_string());
        }
        innermost = s.to_string();
        next = s.source();
    }
    let (kind, text) = match io_kind {
        _ if e.is_timeout() => ("timeout", "timed out".to_owned()),
        Some(ErrorKind::TimedOut) => ("timeout", "timed out".to_owned()),
        Some(ErrorKind::ConnectionRefused) => ("refused", "connection refused".to_owned()),
        Some(ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe) => {
            ("reset", "connection reset by the peer".to_owned())
        }
        _ if tls.is_some() => ("tls", format!("TLS: {}", tls.unwrap_or_default())),
        _ if innermost.contains("dns error") || innermost.contains("failed to lookup") => {
            ("dns", format!("name not resolved: {innermost}"))
        }
        _ if e.is_connect() => ("connect", format!("cannot connect: {innermost}")),
        _ if e.is_body() || e.is_decode() => ("body", format!("reading the body: {innermost}")),
        _ => ("transport", innermost),
    };
    Cause { kind, text }
}

/// The longest server message kept from an error response.
const MESSAGE_CHARS: usize = 200;

/// What an error response's body says, bounded: a JSON error's `message` (llama.cpp's
/// `{"error": {"message": "..."}}`, or a top-level `message`/`error` string), else its first
/// non-empty line.
pub fn status_message(body: &[u8]) -> Option<String> {
    let json = serde_json::from_slice::<serde_json::Value>(body).ok();
    let from_json = json.as_ref().and_then(|v| {
        let error = v.get("error");
        error
            .and_then(|e| e.get("message"))
            .or_else(|| v.get("message"))
            .or(error)
            .and_then(|m| m.as_str())
            .map(str::to_owned)
    });
    let text = from_json.or_else(|| {
        String::from_utf8_lossy(body)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
    })?;
    let text: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(MESSAGE_CHARS)
        .collect();
    (!text.is_empty()).then_some(text)
}

/// The first bytes of an error response's body, enough for [`status_message`]; never the whole
/// of a large body, never an error of its own.
pub async fn error_body<B: hyper::body::Body>(body: B) -> Vec<u8> {
    use bytes::Buf;
    use http_body_util::BodyExt;
    const KEEP: usize = 4096;
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    let read = async {
        while out.len() < KEEP {
            let Some(Ok(frame)) = body.frame().await else {
                break;
            };
            if let Ok(mut data) = frame.into_data() {
                while data.has_remaining() && out.len() < KEEP {
                    let chunk = data.chunk();
                    let n = chunk.len().min(KEEP - out.len());
                    out.extend_from_slice(&chunk[..n]);
                    data.advance(n);
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), read).await;
    out
}

/// A body read whole, or `Ok(None)` once it is known to pass `max` bytes (from its length, or
/// as soon as the bytes read do): the rest is never read. Every HTTP read in infscale goes
/// through this.
pub async fn read_capped<B: hyper::body::Body>(
    body: B,
    max: usize,
) -> Result<Option<Vec<u8>>, B::Error> {
    use bytes::{Buf, BufMut};
    use http_body_util::BodyExt;
    if body.size_hint().lower() > max as u64 {
        return Ok(None);
    }
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            if out.len() + data.remaining() > max {
                return Ok(None);
            }
            out.put(data);
        }
    }
    Ok(Some(out))
}

/// Reads pages, sharing one HTTP client (and its connection pool) across fetches.
#[derive(Debug, Clone)]
pub struct Reader {
    client: reqwest::Client,
    max_bytes: usize,
}

impl Reader {
    pub fn new(timeout: Duration, max_bytes: usize) -> Result<Reader, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(Reader { client, max_bytes })
    }

    /// Whether a source names a URL rather than a file.
    pub fn is_url(source: &str) -> bool {
        source.starts_with("http://") || source.starts_with("https://")
    }

    /// The whole page at `source`.
    pub async fn read(&self, source: &str) -> Result<Vec<u8>, SourceError> {
        if Self::is_url(source) {
            self.fetch(source).await
        } else {
            self.read_file(source).await
        }
    }

    async fn read_file(&self, source: &str) -> Result<Vec<u8>, SourceError> {
        let file_error = |error| SourceError::File {
            source_name: source.to_owned(),
            error,
        };
        let file = tokio::fs::File::open(Path::new(source))
            .await
            .map_err(file_error)?;
        let mut page = Vec::new();
        file.take(self.max_bytes as u64 + 1)
            .read_to_end(&mut page)
            .await
            .map_err(file_error)?;
        self.check_size(source, page)
    }

    async fn fetch(&self, url: &str) -> Result<Vec<u8>, SourceError> {
        let http_error = |error: reqwest::Error| SourceError::Http {
            source_name: url.to_owned(),
            cause: cause(&error),
        };
        let response = self.client.get(url).send().await.map_err(http_error)?;
        let status = response.status();
        let body = http::Response::from(response).into_body();
        if !status.is_success() {
            return Err(SourceError::Status {
                source_name: url.to_owned(),
                status: status.as_u16(),
                message: status_message(&error_body(body).await),
            });
        }
        read_capped(body, self.max_bytes)
            .await
            .map_err(http_error)?
            .ok_or_else(|| SourceError::TooLarge {
                source_name: url.to_owned(),
                limit: self.max_bytes,
            })
    }

    fn check_size(&self, source: &str, page: Vec<u8>) -> Result<Vec<u8>, SourceError> {
        if page.len() > self.max_bytes {
            return Err(SourceError::TooLarge {
                source_name: source.to_owned(),
                limit: self.max_bytes,
            });
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_say_what_the_server_said() {
        let llama = br#"{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `--metrics`","type":"not_supported_error"}}"#;
        assert_eq!(
            status_message(llama).as_deref(),
            Some("This server does not support metrics endpoint. Start it with `--metrics`")
        );
        assert_eq!(
            status_message(b"\n  upstream connect error\r\nmore").as_deref(),
            Some("upstream connect error")
        );
        assert_eq!(
            status_message(br#"{"message":"nope"}"#).as_deref(),
            Some("nope")
        );
        assert_eq!(status_message(b""), None);
        let long = vec![b'x'; 10_000];
        assert_eq!(status_message(&long).map(|m| m.len()), Some(MESSAGE_CHARS));
    }
}
