//! The OpenAI wire shapes the emulator speaks: a completion or chat request read into the token
//! counts the engine needs, its answer (whole, or as server-sent chunks), and the error body.
//!
//! There is no tokenizer: a prompt's tokens are its whitespace-separated words, and the output is
//! exactly `max_tokens` filler words (as vLLM with `ignore_eos`). Every check names the field at
//! fault; nothing here panics on input.

use http::StatusCode;
use serde_json::{json, Value};

/// Output tokens when the request gives no `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u32 = 16;

/// The two generation endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    Chat,
}

/// A generation request as the engine needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generate {
    pub endpoint: Endpoint,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    pub stream: bool,
}

/// An OpenAI-style error: status, message, and the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub param: Option<&'static str>,
}

impl ApiError {
    pub fn bad(param: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            param: Some(param),
        }
    }

    pub fn status(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            param: None,
        }
    }

    /// `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> String {
        let kind = match self.status {
            StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE => "invalid_request_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::SERVICE_UNAVAILABLE => "service_unavailable",
            _ => "server_error",
        };
        json!({"error": {
            "message": self.message,
            "type": kind,
            "param": self.param,
            "code": self.status.as_u16(),
        }})
        .to_string()
    }
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// `prompt`: a string, an array of strings, or an array of token ids.
fn prompt_tokens(prompt: &Value) -> Result<u64, ApiError> {
    match prompt {
        Value::String(s) => Ok(words(s)),
        Value::Array(items) => {
            let mut n = 0;
            for item in items {
                n +=
                    match item {
                        Value::String(s) => words(s),
                        Value::Number(_) => 1,
                        _ => return Err(ApiError::bad(
                            "prompt",
                            "prompt must be a string, an array of strings or an array of token ids",
                        )),
                    };
            }
            Ok(n)
        }
        _ => Err(ApiError::bad(
            "prompt",
            "prompt must be a string, an array of strings or an array of token ids",
        )),
    }
}

/// `messages[].content`: a string, or an array of parts whose `text` counts.
fn message_tokens(messages: &Value) -> Result<u64, ApiError> {
    let Value::Array(messages) = messages else {
        return Err(ApiError::bad("messages", "messages must be an array"));
    };
    if messages.is_empty() {
        return Err(ApiError::bad("messages", "messages must not be empty"));
    }
    let mut n = 0;
    for (i, m) in messages.iter().enumerate() {
        let Value::Object(m) = m else {
            return Err(ApiError::bad(
                "messages",
                format!("messages[{i}] must be an object"),
            ));
        };
        n += match m.get("content") {
            None | Some(Value::Null) => 0,
            Some(Value::String(s)) => words(s),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .map(words)
                .sum(),
            Some(_) => {
                return Err(ApiError::bad(
                    "messages",
                    format!("messages[{i}].content must be a string or an array of parts"),
                ))
            }
        };
    }
    Ok(n)
}

/// `max_tokens`, else `max_completion_tokens`, else the default; from 1 to
/// [`infscale_core::limits::MAX_TOKENS`].
fn max_tokens(body: &serde_json::Map<String, Value>) -> Result<u64, ApiError> {
    let most = u64::from(infscale_core::limits::MAX_TOKENS);
    for field in ["max_tokens", "max_completion_tokens"] {
        match body.get(field) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                return match v.as_u64() {
                    Some(n) if (1..=most).contains(&n) => Ok(n),
                    _ => Err(ApiError::bad(
                        field,
                        format!("{field} must be an integer from 1 to {most}, not {v}"),
                    )),
                }
            }
        }
    }
    Ok(u64::from(DEFAULT_MAX_TOKENS))
}

/// Reads a request body; `max_model_len` bounds prompt plus output tokens.
pub fn parse(endpoint: Endpoint, body: &[u8], max_model_len: u32) -> Result<Generate, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::status(
            StatusCode::BAD_REQUEST,
            format!("the body is not valid JSON: {e}"),
        )
    })?;
    let Value::Object(body) = value else {
        return Err(ApiError::status(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        ));
    };
    let prompt = match endpoint {
        Endpoint::Completions => match body.get("prompt") {
            None | Some(Value::Null) => {
                return Err(ApiError::bad("prompt", "missing required field prompt"))
            }
            Some(p) => prompt_tokens(p)?,
        },
        Endpoint::Chat => match body.get("messages") {
            None | Some(Value::Null) => {
                return Err(ApiError::bad("messages", "missing required field messages"))
            }
            Some(m) => message_tokens(m)?,
        },
    };
    let output = max_tokens(&body)?;
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(ApiError::bad(
                "stream",
                format!("stream must be a boolean, not {v}"),
            ))
        }
    };
    if prompt.saturating_add(output) > u64::from(max_model_len) {
        return Err(ApiError::bad(
            "max_tokens",
            format!(
                "this model's maximum context length is {max_model_len} tokens; the request asks for {prompt} prompt and {output} output tokens"
            ),
        ));
    }
    Ok(Generate {
        endpoint,
        // Both fit: their sum is at most max_model_len.
        prompt_tokens: prompt as u32,
        max_tokens: output as u32,
        stream,
    })
}

const FILLER: [&str; 8] = [
    " emulated",
    " tokens",
    " arrive",
    " at",
    " the",
    " model's",
    " own",
    " pace",
];

/// The text of output tokens `from..to`: one filler word each.
pub fn text(from: u32, to: u32) -> String {
    (from..to)
        .map(|i| FILLER[i as usize % FILLER.len()])
        .collect()
}

/// The identity every chunk and answer of one request carries.
#[derive(Debug, Clone)]
pub struct Answer {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub model: String,
    pub prompt_tokens: u32,
}

/// One streamed chunk, as OpenAI's `*.chunk` objects.
#[derive(serde::Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [Choice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

/// A chunk's choice: `text` for completions, `delta` for chat.
#[derive(serde::Serialize)]
struct Choice<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<Delta<'a>>,
    /// Always null.
    logprobs: (),
    finish_reason: Option<&'static str>,
}

#[derive(serde::Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
}

/// Token counts of an answer.
#[derive(serde::Serialize)]
struct Usage {
    prompt_tokens: u32,
    completion_tokens: u32,
    total_tokens: u64,
}

impl Answer {
    fn usage_counts(&self, completion: u32) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: completion,
            total_tokens: u64::from(self.prompt_tokens) + u64::from(completion),
        }
    }

    /// The whole answer of a finished request.
    pub fn whole(&self, tokens: u32) -> String {
        let content = text(0, tokens);
        let (object, choice) = match self.endpoint {
            Endpoint::Completions => (
                "text_completion",
                json!({"index": 0, "text": content, "logprobs": null, "finish_reason": "length"}),
            ),
            Endpoint::Chat => (
                "chat.completion",
                json!({"index": 0, "message": {"role": "assistant", "content": content},
                       "logprobs": null, "finish_reason": "length"}),
            ),
        };
        json!({
            "id": self.id, "object": object, "created": self.created, "model": self.model,
            "choices": [choice], "usage": self.usage_counts(tokens),
        })
        .to_string()
    }

    fn object(&self) -> &'static str {
        match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::Chat => "chat.completion.chunk",
        }
    }

    /// Appends one `data:` event: a chunk with `choices` and, if any, `usage`. Written from
    /// borrowed fields, since a streamed answer writes one per token.
    fn chunk(&self, out: &mut Vec<u8>, choices: &[Choice<'_>], usage: Option<Usage>) {
        let chunk = Chunk {
            id: &self.id,
            object: self.object(),
            created: self.created,
            model: &self.model,
            choices,
            usage,
        };
        out.extend_from_slice(b"data: ");
        // Writing plain fields into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &chunk);
        out.extend_from_slice(b"\n\n");
    }

    /// The choice carrying `piece`, the text of output token `token` (None: no text, only the
    /// end).
    fn choice<'a>(
        &self,
        token: u32,
        piece: Option<&'a str>,
        finish: Option<&'static str>,
    ) -> Choice<'a> {
        match self.endpoint {
            Endpoint::Completions => Choice {
                index: 0,
                text: Some(piece.unwrap_or("")),
                delta: None,
                logprobs: (),
                finish_reason: finish,
            },
            Endpoint::Chat => Choice {
                index: 0,
                text: None,
                delta: Some(Delta {
                    role: (token == 0 && piece.is_some()).then_some("assistant"),
                    content: piece,
                }),
                logprobs: (),
                finish_reason: finish,
            },
        }
    }

    /// Server-sent events for output tokens `from..to` (one event per token); `last` marks the
    /// final token with its finish reason.
    pub fn token_events(&self, from: u32, to: u32, last: bool) -> String {
        let mut out = Vec::with_capacity(256 * (to.saturating_sub(from) as usize + 1));
        if last && from >= to {
            // Every token went out before the request was known to be done.
            self.chunk(&mut out, &[self.choice(from, None, Some("length"))], None);
        }
        for i in from..to {
            let finish = (last && i + 1 == to).then_some("length");
            let piece = FILLER[i as usize % FILLER.len()];
            self.chunk(&mut out, &[self.choice(i, Some(piece), finish)], None);
        }
        String::from_utf8(out).unwrap_or_default()
    }

    /// The closing events: usage on a chunk without choices, then `[DONE]`.
    pub fn closing_events(&self, tokens: u32) -> String {
        let mut out = Vec::with_capacity(512);
        self.chunk(&mut out, &[], Some(self.usage_counts(tokens)));
        out.extend_from_slice(b"data: [DONE]\n\n");
        String::from_utf8(out).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_count_words() {
        let g = parse(
            Endpoint::Completions,
            br#"{"prompt": "one two  three", "max_tokens": 5}"#,
            100,
        )
        .unwrap();
        assert_eq!((g.prompt_tokens, g.max_tokens, g.stream), (3, 5, false));
        let g = parse(Endpoint::Completions, br#"{"prompt": ["a b", "c"]}"#, 100).unwrap();
        assert_eq!((g.prompt_tokens, g.max_tokens), (3, DEFAULT_MAX_TOKENS));
        let g = parse(
            Endpoint::Chat,
            br#"{"messages": [{"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi there you"}]}],
                "max_completion_tokens": 7, "stream": true}"#,
            100,
        )
        .unwrap();
        assert_eq!((g.prompt_tokens, g.max_tokens, g.stream), (5, 7, true));
    }

    #[test]
    fn bad_requests_name_the_field() {
        let cases: [(Endpoint, &[u8], &str); 7] = [
            (Endpoint::Completions, b"{not json", "not valid JSON"),
            (Endpoint::Completions, b"[1]", "JSON object"),
            (Endpoint::Completions, b"{}", "prompt"),
            (Endpoint::Chat, b"{\"prompt\": \"x\"}", "messages"),
            (
                Endpoint::Completions,
                b"{\"prompt\": \"x\", \"max_tokens\": -1}",
                "max_tokens",
            ),
            (
                Endpoint::Completions,
                b"{\"prompt\": \"x\", \"stream\": 1}",
                "stream",
            ),
            (
                Endpoint::Completions,
                b"{\"prompt\": \"x\", \"max_tokens\": 200}",
                "maximum context length",
            ),
        ];
        for (endpoint, body, needle) in cases {
            let e = parse(endpoint, body, 100).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(needle), "{needle} in {}", e.message);
            assert!(e.body().contains("invalid_request_error"));
        }
    }

    #[test]
    fn chunks_then_usage_then_done() {
        let a = Answer {
            endpoint: Endpoint::Chat,
            id: "chatcmpl-1".into(),
            created: 0,
            model: "m".into(),
            prompt_tokens: 2,
        };
        let events = a.token_events(0, 3, true) + &a.closing_events(3);
        let lines: Vec<&str> = events.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].contains("\"role\":\"assistant\""));
        assert!(lines[2].contains("\"finish_reason\":\"length\""));
        assert!(lines[3].contains("\"total_tokens\":5"));
        assert_eq!(lines[4], "data: [DONE]");
        let whole: Value = serde_json::from_str(&a.whole(3)).unwrap();
        assert_eq!(whole["usage"]["completion_tokens"], 3);
        assert_eq!(whole["choices"][0]["message"]["content"], text(0, 3));
    }
}
