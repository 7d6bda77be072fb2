//! The demo's users: the scenario's requests sent through the activator by real HTTP clients,
//! each at its arrival time on the compressed clock, each streaming its answer.
//!
//! A request's first token is the first SSE `data:` event of its answer; its TTFT is stated in
//! simulated seconds. A request that ends without one (an error status, a refused or cut
//! connection) is lost. Whether a replica was ready when it arrived is noted, so the requests
//! held at zero and then served can be counted. How late each is sent after its arrival time
//! goes to the lag [`Meter`].

use super::clock::SimClock;
use super::lag::Meter;
use super::service::Endpoints;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use infscale_core::sim::cluster::RequestOutcome;
use infscale_core::sim::trace::Request;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What became of each request, in trace order.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub outcome: RequestOutcome,
    /// No replica was ready when it was sent.
    pub at_zero: bool,
    /// It got no answer with a first token: why (`http 503`, `connect`, `cut`...).
    pub lost: Option<String>,
    /// When it was sent, simulated seconds.
    pub sent_at: f64,
}

/// Outcomes as they come in, shared with the live view.
pub type Outcomes = Arc<Mutex<Vec<Outcome>>>;

/// Where the users note what happens: each request's outcome, the requests in flight, and how
/// late each is sent.
#[derive(Debug, Clone)]
pub struct Tally {
    pub outcomes: Outcomes,
    pub in_flight: Arc<AtomicUsize>,
    pub meter: Arc<Meter>,
}

fn body(request: &Request, model: &str) -> Bytes {
    let mut prompt = String::with_capacity(request.prompt as usize * 2);
    for i in 0..request.prompt {
        if i > 0 {
            prompt.push(' ');
        }
        prompt.push('w');
    }
    let json = serde_json::json!({
        "model": model,
        "prompt": prompt,
        "max_tokens": request.output,
        "stream": true,
    });
    Bytes::from(json.to_string())
}

/// Sends one request and waits for its first event (then drains the rest of the stream).
async fn one(
    client: &Client<HttpConnector, Full<Bytes>>,
    activator: SocketAddr,
    payload: Bytes,
    clock: SimClock,
    sent_at: f64,
) -> Result<f64, String> {
    let req = http::Request::post(format!("http://{activator}/v1/completions"))
        .header("content-type", "application/json")
        .body(Full::new(payload))
        .map_err(|e| format!("request: {e}"))?;
    let resp = client
        .request(req)
        .await
        .map_err(|_| "connect".to_owned())?;
    if !resp.status().is_success() {
        // Who answered is in the words: the Service's, the activator's or the pod's.
        let status = resp.status().as_u16();
        let said = http_body_util::Limited::new(resp.into_body(), 512)
            .collect()
            .await
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).trim().to_owned())
            .unwrap_or_default();
        return Err(match said.is_empty() {
            true => format!("http {status}"),
            false => format!("http {status}: {said}"),
        });
    }
    let mut body = resp.into_body();
    let mut first = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| "cut".to_owned())?;
        if let Some(data) = frame.data_ref() {
            if first.is_some() {
                continue;
            }
            if let Some(at) = memchr::memmem::find(data, b"data:") {
                // An error sent as an event (the activator's answer to a held stream whose
                // upstream failed) is no first token.
                let event = data[at + 5..].trim_ascii_start();
                if event.starts_with(b"{\"error\"") {
                    let said = String::from_utf8_lossy(event);
                    return Err(format!("error event: {}", said.trim()));
                }
                first = Some(clock.now() - sent_at);
            }
        }
    }
    first.ok_or_else(|| "no first token".to_owned())
}

/// Replays `requests` (arrival times in simulated seconds) against the activator, recording
/// into `tally` (whose outcomes must hold one entry per request); returns when every request
/// ended.
pub async fn replay(
    requests: Vec<Request>,
    activator: SocketAddr,
    model: String,
    clock: SimClock,
    endpoints: Arc<Endpoints>,
    tally: Tally,
) {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    // Idle connections are let go well before the activator closes them (its header timeout,
    // 20 s), so a request is never written on a connection the activator is closing.
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .pool_idle_timeout(std::time::Duration::from_secs(10))
        .build(connector);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, request) in requests.into_iter().enumerate() {
        tokio::time::sleep_until(clock.at(request.arrival).into()).await;
        let at_zero = endpoints.replicas() == 0;
        let payload = body(&request, &model);
        let (client, tally) = (client.clone(), tally.clone());
        tasks.spawn(async move {
            let Tally {
                outcomes,
                in_flight,
                meter,
            } = tally;
            let sent_at = clock.now();
            meter.send(sent_at - request.arrival);
            in_flight.fetch_add(1, Ordering::Relaxed);
            let ttft = one(&client, activator, payload, clock, sent_at).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
            if let Ok(mut all) = outcomes.lock() {
                if let Some(o) = all.get_mut(i) {
                    o.at_zero = at_zero;
                    o.sent_at = sent_at;
                    match ttft {
                        Ok(t) => o.outcome.ttft = t as f32,
                        Err(why) => {
                            o.lost = Some(why);
                            o.outcome.rejected = true;
                        }
                    }
                }
            };
        });
        // Reap what has finished, so the set does not grow with the whole trace.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}
