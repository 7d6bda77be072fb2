//! What a load run is asked to do, and the bounds it runs within, in one place.
//!
//! [`Config`] is what `infscale load` parses its flags into and what a test builds by hand;
//! [`Limits`] holds every timeout and cap of a run, each with its default.

use std::time::Duration;

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Closed loop: this many workers, each sending its next request as soon as the last ends.
    Closed { concurrency: u32 },
    /// Open loop: Poisson arrivals at this many requests per second, each on its own task,
    /// whatever the server's speed; the arrival times come from `seed`.
    Open { rate: f64, seed: u64 },
}

/// The bounds of a run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request's whole life, from connecting to the last byte; the run ends at its duration
    /// plus at most this.
    pub timeout: Duration,
    /// Connecting to the server.
    pub connect_timeout: Duration,
    /// Open loop: requests in flight at once; an arrival past it is counted as `overflow`.
    pub max_in_flight: usize,
    /// Closed loop: how long a worker waits after a connection error before trying again, so a
    /// server that is down is not hammered by a busy loop; each further error in a row doubles
    /// the wait, up to [`Limits::max_connect_backoff`], and an answer resets it.
    pub connect_backoff: Duration,
    /// The longest wait between connection attempts.
    pub max_connect_backoff: Duration,
    /// Inter-token gaps kept per request (a stream with more chunks still counts its tokens).
    pub max_gaps_per_request: usize,
    /// Bytes of a non-streamed response body, and of one SSE line, before it is a `bad_body`.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            max_in_flight: 10_000,
            connect_backoff: Duration::from_millis(10),
            max_connect_backoff: Duration::from_secs(1),
            max_gaps_per_request: 16_384,
            max_body_bytes: 16 << 20,
        }
    }
}

/// One load run against an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's base URL (`http://127.0.0.1:8000`, with or without `/v1`) or the full
    /// completions URL.
    pub url: String,
    pub mode: Mode,
    pub duration: Duration,
    /// Words in every prompt (a stand-in counts prompt tokens as words).
    pub prompt_tokens: u32,
    /// `max_tokens` of every request (sent with `ignore_eos`, so the server generates them all).
    pub output_tokens: u32,
    /// Ask for server-sent events and time the first token and the gaps between tokens.
    pub stream: bool,
    /// `/v1/chat/completions` with a user message instead of `/v1/completions` with a prompt.
    pub chat: bool,
    /// The `model` field; none leaves it out (a server with one model then uses it).
    pub model: Option<String>,
    pub limits: Limits,
}

impl Config {
    /// A closed-loop run of `concurrency` workers for `duration`, 128 words in, 128 tokens out,
    /// not streamed, with the default limits.
    pub fn closed(url: impl Into<String>, concurrency: u32, duration: Duration) -> Config {
        Config {
            url: url.into(),
            mode: Mode::Closed { concurrency },
            duration,
            prompt_tokens: 128,
            output_tokens: 128,
            stream: false,
            chat: false,
            model: None,
            limits: Limits::default(),
        }
    }

    /// The URL requests go to: the given one when it already names a completions endpoint,
    /// else `/v1/completions` (or `/v1/chat/completions`) under it.
    pub fn endpoint(&self) -> String {
        let base = self.url.trim_end_matches('/');
        if base.ends_with("/completions") {
            return base.to_owned();
        }
        let path = if self.chat {
            "chat/completions"
        } else {
            "completions"
        };
        if base.ends_with("/v1") {
            format!("{base}/{path}")
        } else {
            format!("{base}/v1/{path}")
        }
    }

    /// Whether the request is a chat one: asked for, or implied by the URL.
    pub fn is_chat(&self) -> bool {
        self.chat
            || self
                .url
                .trim_end_matches('/')
                .ends_with("/chat/completions")
    }

    /// Why this configuration cannot run, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        match self.mode {
            Mode::Closed { concurrency: 0 } => return Err("concurrency must be at least 1".into()),
            Mode::Open { rate, .. } if !(rate.is_finite() && rate > 0.0) => {
                return Err(format!("rate {rate}: expected requests per second above 0"))
            }
            _ => {}
        }
        if self.prompt_tokens == 0 || self.output_tokens == 0 {
            return Err("prompt and output tokens must be at least 1".into());
        }
        if self.duration.is_zero() {
            return Err("duration must be above 0".into());
        }
        if self.limits.timeout.is_zero() {
            return Err("timeout must be above 0".into());
        }
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(format!("{}: expected an http:// or https:// URL", self.url));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(url: &str, chat: bool) -> String {
        let mut c = Config::closed(url, 1, Duration::from_secs(1));
        c.chat = chat;
        c.endpoint()
    }

    #[test]
    fn the_endpoint_from_a_base_or_a_full_url() {
        let base = "http://127.0.0.1:8000";
        assert_eq!(endpoint(base, false), format!("{base}/v1/completions"));
        assert_eq!(
            endpoint("http://h:1/", true),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(
            endpoint("http://h:1/v1", false),
            "http://h:1/v1/completions"
        );
        let full = "http://h:1/v1/chat/completions";
        assert_eq!(endpoint(full, false), full);
        assert!(Config::closed(full, 1, Duration::from_secs(1)).is_chat());
    }
}
