//! llama.cpp's sleep state, which its `/metrics` page does not carry: `GET /props` says it.
//!
//! With `--sleep-idle-seconds` the llama.cpp server frees its model after an idle spell and
//! loads it again on the next request. While it sleeps `/health` still answers `{"status":"ok"}`
//! and `/metrics` answers the page cached when it fell asleep (tools/server/server-context.cpp:
//! `get_metrics` uses `cached_metrics` while `queue_tasks.is_sleeping()`), so the page reads as
//! an idle replica. `/props` answers without waking it and carries `"is_sleeping"`
//! (`get_res_props`). The shells fetch it beside the page of every llama.cpp replica; this module
//! reads it and names where it is.

use super::profile::{Server, Signals};
use serde::Deserialize;

/// The last path segment that replaces the page's: `/metrics` becomes `/props`.
pub const PROPS: &str = "props";

/// Whether a replica's signals come from a server whose sleep state is on `/props`, and not
/// already read from its page.
pub fn wanted(signals: &Signals) -> bool {
    signals.server == Server::LlamaCpp && signals.asleep.is_none()
}

/// The path of `/props` beside a page's path: the last segment replaced, so a server behind a
/// prefix (`/llm/metrics`) is asked at `/llm/props`. A query is dropped.
pub fn beside(page_path: &str) -> String {
    let path = page_path.split(['?', '#']).next().unwrap_or_default();
    match path.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{PROPS}"),
        None => format!("/{PROPS}"),
    }
}

/// The URL of `/props` beside a page's URL (`None` for what is not `scheme://...`).
pub fn beside_url(page_url: &str) -> Option<String> {
    let (scheme, rest) = page_url.split_once("://")?;
    let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    let path = if path.starts_with('/') { path } else { "" };
    Some(format!("{scheme}://{authority}{}", beside(path)))
}

#[derive(Deserialize)]
struct Props {
    is_sleeping: Option<bool>,
}

/// Reads a `/props` body: `Some(true)` while the server sleeps, `None` where the body has no
/// `is_sleeping` (a llama.cpp from before `--sleep-idle-seconds`). `source` names the body in
/// the error.
pub fn read(body: &[u8], source: &str) -> Result<Option<bool>, String> {
    serde_json::from_slice::<Props>(body)
        .map(|p| p.is_sleeping)
        .map_err(|e| format!("{source}: not llama.cpp's /props JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::{read_page, ServerChoice};

    /// Trimmed from what `get_res_props` answers while the server sleeps.
    const SLEEPING: &str = r#"{"default_generation_settings":{"n_ctx":4096},"total_slots":1,
        "model_alias":"m","endpoint_metrics":true,"build_info":"b1","is_sleeping":true,
        "cors_proxy_enabled":false}"#;

    #[test]
    fn is_sleeping_is_read_and_set_on_a_llamacpp_page() {
        let page = "llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n";
        let mut signals = read_page(page.as_bytes(), ServerChoice::Auto)
            .signals
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(wanted(&signals));
        signals.asleep = read(SLEEPING.as_bytes(), "/props").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(signals.asleep, Some(true));
        assert!(!wanted(&signals));
        assert_eq!(read(br#"{"total_slots":1}"#, "p"), Ok(None));
        assert!(read(b"<html>", "pod-a").is_err_and(|e| e.starts_with("pod-a: ")));
    }

    #[test]
    fn props_sits_beside_the_page() {
        assert_eq!(beside("/metrics"), "/props");
        assert_eq!(beside("/llm/metrics?x=1"), "/llm/props");
        assert_eq!(
            beside("/api/v1/namespaces/ns/pods/p:8080/proxy/metrics"),
            "/api/v1/namespaces/ns/pods/p:8080/proxy/props"
        );
        assert_eq!(beside(""), "/props");
        assert_eq!(
            beside_url("http://10.0.0.7:8080/metrics").as_deref(),
            Some("http://10.0.0.7:8080/props")
        );
        assert_eq!(
            beside_url("http://[::1]:80?x").as_deref(),
            Some("http://[::1]:80/props")
        );
        assert_eq!(beside_url("pod-a.prom"), None);
    }
}
