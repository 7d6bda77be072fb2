//! Reading a response into a [`Sample`]: a whole JSON completion, or a server-sent event stream
//! timed chunk by chunk.
//!
//! [`Events`] is the stream's parser, fed bytes as they arrive and the time they arrived, with
//! no I/O of its own; [`read`] drives it (or reads a whole body) from a live response.

use super::config::Limits;
use super::outcome::{ErrorKind, Outcome, Sample};
use serde::Deserialize;
use std::time::Instant;

#[derive(Debug, Default, Deserialize)]
struct Body {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    delta: Option<Message>,
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Debug, Default, Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl Choice {
    /// The generated text this choice carries (completion text, chat delta or message).
    fn content(&self) -> &str {
        let message = self.delta.as_ref().or(self.message.as_ref());
        let from_message = message.and_then(|m| {
            m.content
                .as_deref()
                .filter(|c| !c.is_empty())
                .or(m.reasoning_content.as_deref())
        });
        self.text.as_deref().or(from_message).unwrap_or("")
    }
}

/// A server-sent event stream of completion chunks, parsed as it arrives.
#[derive(Debug)]
pub struct Events {
    line: Vec<u8>,
    max_line: usize,
    max_gaps: usize,
    /// When the first and the last chunk with content arrived.
    first: Option<f64>,
    last: f64,
    /// When `data: [DONE]` arrived.
    done: Option<f64>,
    chunks: u64,
    /// Tokens in the chunks with content: each chunk's `usage` delta when it has one, else 1.
    chunk_tokens: u64,
    /// The largest `usage.completion_tokens` seen (cumulative in every chunk, or once at the end).
    usage: Option<u64>,
    gaps: Vec<f32>,
}

impl Events {
    pub fn new(limits: &Limits) -> Events {
        Events {
            line: Vec::new(),
            max_line: limits.max_body_bytes,
            max_gaps: limits.max_gaps_per_request,
            first: None,
            last: 0.0,
            done: None,
            chunks: 0,
            chunk_tokens: 0,
            usage: None,
            gaps: Vec::new(),
        }
    }

    /// Takes the bytes that arrived `at` seconds after the request was sent.
    pub fn feed(&mut self, bytes: &[u8], at: f64) -> Result<(), ErrorKind> {
        let mut rest = bytes;
        while let Some(n) = memchr::memchr(b'\n', rest) {
            if self.line.is_empty() {
                self.take_line(&rest[..n], at)?;
            } else {
                self.line.extend_from_slice(&rest[..n]);
                let line = std::mem::take(&mut self.line);
                self.take_line(&line, at)?;
            }
            rest = &rest[n + 1..];
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > self.max_line {
            return Err(ErrorKind::BadBody);
        }
        Ok(())
    }

    fn take_line(&mut self, line: &[u8], at: f64) -> Result<(), ErrorKind> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(data) = line.strip_prefix(b"data:") else {
            // Event names, ids, comments (keep-alives) and the blank line between events.
            return Ok(());
        };
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if data == b"[DONE]" {
            self.done.get_or_insert(at);
            return Ok(());
        }
        if self.done.is_some() {
            return Ok(());
        }
        let chunk: Body = serde_json::from_slice(data).map_err(|_| ErrorKind::BadBody)?;
        if chunk.error.is_some() {
            return Err(ErrorKind::BadBody);
        }
        let usage = chunk.usage.and_then(|u| u.completion_tokens);
        let has_content = chunk.choices.iter().any(|c| !c.content().is_empty());
        if has_content {
            let tokens = match (usage, self.usage) {
                (Some(now), Some(before)) if now > before => now - before,
                (Some(now), None) if now > 0 => now,
                _ => 1,
            };
            match self.first {
                None => self.first = Some(at),
                Some(_) => {
                    if self.gaps.len() < self.max_gaps {
                        self.gaps.push(((at - self.last) / tokens as f64) as f32);
                    }
                }
            }
            self.last = at;
            self.chunks += 1;
            self.chunk_tokens += tokens;
        }
        if let Some(u) = usage {
            self.usage = Some(self.usage.map_or(u, |before| before.max(u)));
        }
        Ok(())
    }

    /// The sample, once the body has ended `at` seconds after the request was sent.
    pub fn finish(mut self, at: f64) -> Outcome {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.take_line(&line, at)?;
        }
        let Some(first) = self.first else {
            return Err(ErrorKind::BadBody);
        };
        let total = self
            .usage
            .unwrap_or(self.chunk_tokens)
            .max(self.chunk_tokens);
        // Chunks that carried several tokens without saying so in their own usage: spread the
        // tokens the final usage reports evenly over the gaps.
        if total > self.chunk_tokens {
            let scale = self.chunk_tokens as f64 / total as f64;
            for g in &mut self.gaps {
                *g = (*g as f64 * scale) as f32;
            }
        }
        Ok(Sample {
            ttft: first,
            e2e: self.done.unwrap_or(at).max(self.last),
            output_tokens: total,
            gaps: self.gaps,
        })
    }
}

/// A whole (not streamed) completion's body, read `at` seconds after the request was sent.
pub fn whole(body: &[u8], at: f64) -> Outcome {
    let body: Body = serde_json::from_slice(body).map_err(|_| ErrorKind::BadBody)?;
    if body.error.is_some() {
        return Err(ErrorKind::BadBody);
    }
    let Some(choice) = body.choices.first() else {
        return Err(ErrorKind::BadBody);
    };
    let tokens = body
        .usage
        .and_then(|u| u.completion_tokens)
        .unwrap_or_else(|| choice.content().split_whitespace().count() as u64);
    Ok(Sample {
        ttft: at,
        e2e: at,
        output_tokens: tokens,
        gaps: Vec::new(),
    })
}

/// [`send`] the template's request, the whole exchange bounded by `limits.timeout` (past it,
/// [`ErrorKind::Timeout`]).
pub async fn send_timed(
    client: &reqwest::Client,
    template: &super::request::Template,
    body: Vec<u8>,
    limits: &Limits,
) -> Outcome {
    let sent = send(client, &template.endpoint, body, template.stream(), limits);
    tokio::time::timeout(limits.timeout, sent)
        .await
        .unwrap_or(Err(ErrorKind::Timeout))
}

/// Sends `body` to `endpoint` and reads the answer, streamed or whole; every failure is an
/// [`ErrorKind`]. The client's own timeout bounds the whole exchange.
pub async fn send(
    client: &reqwest::Client,
    endpoint: &str,
    body: Vec<u8>,
    stream: bool,
    limits: &Limits,
) -> Outcome {
    let sent = Instant::now();
    let mut response = client
        .post(endpoint)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| ErrorKind::of(&e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(ErrorKind::Status(status.as_u16()));
    }
    if stream {
        let mut events = Events::new(limits);
        while let Some(bytes) = response.chunk().await.map_err(|e| ErrorKind::of(&e))? {
            events.feed(&bytes, sent.elapsed().as_secs_f64())?;
        }
        events.finish(sent.elapsed().as_secs_f64())
    } else {
        let mut whole_body = Vec::new();
        while let Some(bytes) = response.chunk().await.map_err(|e| ErrorKind::of(&e))? {
            if whole_body.len() + bytes.len() > limits.max_body_bytes {
                return Err(ErrorKind::BadBody);
            }
            whole_body.extend_from_slice(&bytes);
        }
        whole(&whole_body, sent.elapsed().as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Events {
        Events::new(&Limits::default())
    }

    #[test]
    fn a_completion_stream_split_anywhere() {
        let text = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n\
                    data: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n\
                    : keep-alive\n\n\
                    data: {\"choices\":[{\"text\":\"c\"}]}\n\n\
                    data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\n\
                    data: [DONE]\n\n";
        let mut e = events();
        // One byte at a time, 10 ms apart.
        for (i, b) in text.as_bytes().iter().enumerate() {
            e.feed(&[*b], i as f64 * 0.01).unwrap();
        }
        let s = e.finish(10.0).unwrap();
        assert_eq!(s.output_tokens, 3);
        assert_eq!(s.gaps.len(), 2);
        assert!(s.ttft > 0.0 && s.ttft < s.e2e && s.e2e < 10.0);
    }

    #[test]
    fn chunks_with_several_tokens_divide_their_gaps() {
        // Per-chunk usage (vLLM's continuous usage stats): the second chunk carries 4 tokens.
        let mut e = events();
        e.feed(
            b"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"completion_tokens\":1}}\n",
            0.1,
        )
        .unwrap();
        e.feed(
            b"data: {\"choices\":[{\"text\":\"bcde\"}],\"usage\":{\"completion_tokens\":5}}\n",
            0.5,
        )
        .unwrap();
        let s = e.finish(0.5).unwrap();
        assert_eq!(s.output_tokens, 5);
        assert!((s.gaps[0] - 0.1).abs() < 1e-6, "{:?}", s.gaps);
        // Only a final usage: the 6 tokens are spread over 3 chunks, 2 each.
        let mut e = events();
        for (i, t) in ["a", "b", "c"].iter().enumerate() {
            let line = format!("data: {{\"choices\":[{{\"text\":\"{t}\"}}]}}\n");
            e.feed(line.as_bytes(), 0.2 * i as f64).unwrap();
        }
        e.feed(
            b"data: {\"choices\":[],\"usage\":{\"completion_tokens\":6}}\n",
            0.5,
        )
        .unwrap();
        let s = e.finish(0.5).unwrap();
        assert_eq!(s.output_tokens, 6);
        assert!(
            s.gaps.iter().all(|g| (g - 0.1).abs() < 1e-6),
            "{:?}",
            s.gaps
        );
    }

    #[test]
    fn chat_role_chunks_are_not_the_first_token() {
        let mut e = events();
        e.feed(
            b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n",
            0.1,
        )
        .unwrap();
        e.feed(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n",
            0.3,
        )
        .unwrap();
        let s = e.finish(0.4).unwrap();
        assert_eq!((s.ttft, s.e2e, s.output_tokens), (0.3, 0.4, 1));
    }

    #[test]
    fn bad_streams_are_bad_bodies() {
        let mut e = events();
        assert_eq!(e.feed(b"data: {not json\n", 0.1), Err(ErrorKind::BadBody));
        let mut e = events();
        let error = b"data: {\"error\":{\"message\":\"oom\"}}\n";
        assert_eq!(e.feed(error, 0.1), Err(ErrorKind::BadBody));
        let mut e = events();
        e.feed(b"data: [DONE]\n", 0.1).unwrap();
        assert_eq!(e.finish(0.1), Err(ErrorKind::BadBody));
        let mut e = Events::new(&Limits {
            max_body_bytes: 8,
            ..Limits::default()
        });
        assert_eq!(e.feed(b"data: 0123456789", 0.1), Err(ErrorKind::BadBody));
    }

    #[test]
    fn whole_completions() {
        let body = br#"{"choices":[{"text":"one two three"}],"usage":{"completion_tokens":7}}"#;
        let s = whole(body, 0.5).unwrap();
        assert_eq!((s.ttft, s.e2e, s.output_tokens), (0.5, 0.5, 7));
        let chat = br#"{"choices":[{"message":{"content":"one two three"}}]}"#;
        assert_eq!(whole(chat, 0.5).unwrap().output_tokens, 3);
        assert_eq!(whole(b"<html>", 0.5), Err(ErrorKind::BadBody));
        assert_eq!(whole(br#"{"choices":[]}"#, 0.5), Err(ErrorKind::BadBody));
        assert_eq!(ErrorKind::Status(503).to_string(), "http_503");
    }
}
