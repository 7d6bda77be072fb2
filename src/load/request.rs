//! The requests a run sends: the OpenAI completions (or chat) body with a prompt of exactly the
//! asked number of words, `max_tokens` and vLLM's `ignore_eos`, so every request asks the same
//! work of the server.
//!
//! Each prompt opens with its own request number, so a server's prefix cache cannot answer one
//! request from another's prefill; the other words cycle through common one-token English words.

use super::config::Config;

const WORDS: [&str; 16] = [
    "the", "model", "server", "runs", "one", "batch", "of", "requests", "and", "each", "new",
    "token", "waits", "for", "its", "turn",
];

/// What every request of a run shares; [`Template::body`] makes one request's body.
#[derive(Debug, Clone)]
pub struct Template {
    pub endpoint: String,
    chat: bool,
    stream: bool,
    model: Option<String>,
    output_tokens: u32,
    /// The prompt after its first word: `prompt_tokens - 1` words, each preceded by a space.
    tail: String,
}

impl Template {
    pub fn new(config: &Config) -> Template {
        let tail_words = config.prompt_tokens.saturating_sub(1) as usize;
        let mut tail = String::with_capacity(tail_words * 6);
        for i in 0..tail_words {
            tail.push(' ');
            tail.push_str(WORDS[i % WORDS.len()]);
        }
        Template {
            endpoint: config.endpoint(),
            chat: config.is_chat(),
            stream: config.stream,
            model: config.model.clone(),
            output_tokens: config.output_tokens,
            tail,
        }
    }

    pub fn stream(&self) -> bool {
        self.stream
    }

    /// The JSON body of request number `index`.
    pub fn body(&self, index: u64) -> Vec<u8> {
        let prompt = format!("r{index}{}", self.tail);
        let mut body = serde_json::json!({
            "max_tokens": self.output_tokens,
            "ignore_eos": true,
            "stream": self.stream,
        });
        if self.chat {
            body["messages"] = serde_json::json!([{"role": "user", "content": prompt}]);
        } else {
            body["prompt"] = serde_json::Value::String(prompt);
        }
        if self.stream {
            body["stream_options"] = serde_json::json!({"include_usage": true});
        }
        if let Some(model) = &self.model {
            body["model"] = serde_json::Value::String(model.clone());
        }
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_prompt_has_exactly_the_asked_words() {
        let mut config = Config::closed("http://h:1", 1, Duration::from_secs(1));
        config.prompt_tokens = 37;
        config.output_tokens = 9;
        config.stream = true;
        config.model = Some("m".into());
        let t = Template::new(&config);
        let body: serde_json::Value = serde_json::from_slice(&t.body(5)).unwrap();
        let prompt = body["prompt"].as_str().unwrap();
        assert_eq!(prompt.split_whitespace().count(), 37);
        assert!(prompt.starts_with("r5 the model"));
        assert_eq!(body["max_tokens"], 9);
        assert_eq!(body["ignore_eos"], true);
        assert_eq!(body["stream"], true);
        assert_eq!(body["model"], "m");
        config.chat = true;
        config.prompt_tokens = 1;
        let body: serde_json::Value =
            serde_json::from_slice(&Template::new(&config).body(0)).unwrap();
        assert_eq!(body["messages"][0]["content"], "r0");
        assert_eq!(t.endpoint, "http://h:1/v1/completions");
    }
}
