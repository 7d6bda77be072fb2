//! The closed loop: a fixed number of workers, each sending its next request as soon as the
//! last one ended. The server's speed sets the arrival rate, so this measures what a batch of N
//! concurrent users sees, the way a per-replica queue target is set. A worker whose connection
//! is refused waits before its next try, twice as long after each refusal in a row.

use super::config::Limits;
use super::outcome::ErrorKind;
use super::recorder::Recorder;
use super::request::Template;
use super::response::send_timed;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Runs `concurrency` workers until `duration` has passed, letting the requests in flight at
/// that instant finish (each within the timeout).
pub async fn run(
    client: &reqwest::Client,
    template: Arc<Template>,
    concurrency: u32,
    duration: Duration,
    limits: Limits,
) -> Recorder {
    let deadline = Instant::now() + duration;
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::with_capacity(concurrency as usize);
    for _ in 0..concurrency {
        let (client, template, next) = (client.clone(), template.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut recorder = Recorder::default();
            let mut backoff = limits.connect_backoff;
            while Instant::now() < deadline {
                let body = template.body(next.fetch_add(1, Ordering::Relaxed));
                let outcome = send_timed(&client, &template, body, &limits).await;
                let refused = outcome == Err(ErrorKind::Connect);
                recorder.record(outcome);
                if refused {
                    tokio::time::sleep_until(deadline.min(Instant::now() + backoff)).await;
                    backoff = (backoff * 2).min(limits.max_connect_backoff);
                } else {
                    backoff = limits.connect_backoff;
                }
            }
            recorder
        }));
    }
    let mut all = Recorder::default();
    for worker in workers {
        if let Ok(recorder) = worker.await {
            all.merge(&recorder);
        }
    }
    all
}
