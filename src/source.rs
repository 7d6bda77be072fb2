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
/// The default time allowed for one fetch.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a page could not be read; every variant names the source.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{source_name}: {error}")]
    File {
        source_name: String,
        error: std::io::Error,
    },
    #[error("{source_name}: {error}")]
    Http {
        source_name: String,
        error: reqwest::Error,
    },
    #[error("{source_name}: HTTP status {status}")]
    Status { source_name: String, status: u16 },
    #[error("{source_name}: larger than the {limit}-byte cap")]
    TooLarge { source_name: String, limit: usize },
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
        let http_error = |error| SourceError::Http {
            source_name: url.to_owned(),
            error,
        };
        let response = self.client.get(url).send().await.map_err(http_error)?;
        if !response.status().is_success() {
            return Err(SourceError::Status {
                source_name: url.to_owned(),
                status: response.status().as_u16(),
            });
        }
        let body = http::Response::from(response).into_body();
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
