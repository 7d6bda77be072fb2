//! `infscale load` against stand-in OpenAI servers on loopback: each test starts its own
//! hyper server that answers `/v1/completions` (and chat) after a known prefill delay, streams
//! tokens at a known inter-token delay, and serves at most a batch of requests at once (the rest
//! queue), so the load generator's counts, percentiles, errors and knee can be checked against
//! numbers the test chose.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use infscale::load::{self, Config, Mode, Report};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

const MS: Duration = Duration::from_millis(1);

/// What the stand-in does with a request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Behaviour {
    /// Answer as a model server would.
    Serve,
    /// 500 with an OpenAI error body.
    Fail,
    /// Stream the first token, then break the connection.
    BreakMidStream,
    /// 200 with a body that is not a completion.
    Garbage,
    /// Never answer.
    Hang,
}

#[derive(Debug, Clone, Copy)]
struct Model {
    /// Requests served at once; the rest wait for a slot.
    batch: usize,
    /// From a slot to the first token.
    prefill: Duration,
    /// Between tokens.
    per_token: Duration,
    behaviour: Behaviour,
}

impl Model {
    fn new(batch: usize, prefill_ms: u64, per_token_ms: u64) -> Model {
        Model {
            batch,
            prefill: Duration::from_millis(prefill_ms),
            per_token: Duration::from_millis(per_token_ms),
            behaviour: Behaviour::Serve,
        }
    }

    fn behaving(behaviour: Behaviour) -> Model {
        Model {
            behaviour,
            ..Model::new(64, 1, 1)
        }
    }
}

struct State {
    model: Model,
    slots: Arc<Semaphore>,
    served: AtomicU64,
    /// The last request's path and body.
    seen: Mutex<Option<(String, Value)>>,
}

struct StandIn {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        // The accept loop owns the connections' JoinSet: aborting it ends them all.
        self.task.abort();
    }
}

impl StandIn {
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn served(&self) -> u64 {
        self.state.served.load(Ordering::SeqCst)
    }

    fn seen(&self) -> (String, Value) {
        self.state.seen.lock().unwrap().clone().unwrap()
    }
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let body = Full::new(body.into())
        .map_err(|e: Infallible| match e {})
        .boxed_unsync();
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r
}

fn event(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn token(chat: bool, i: u64) -> Value {
    if chat {
        json!({"choices": [{"index": 0, "delta": {"content": format!(" t{i}")}}]})
    } else {
        json!({"choices": [{"index": 0, "text": format!(" t{i}")}]})
    }
}

async fn answer(req: Request<Incoming>, state: Arc<State>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    *state.seen.lock().unwrap() = Some((path.clone(), request.clone()));
    let chat = path == "/v1/chat/completions";
    if !chat && path != "/v1/completions" {
        return Ok(full(StatusCode::NOT_FOUND, "no such path"));
    }
    let model = state.model;
    match model.behaviour {
        Behaviour::Fail => {
            let error = r#"{"error":{"message":"model crashed"}}"#;
            return Ok(full(StatusCode::INTERNAL_SERVER_ERROR, error));
        }
        Behaviour::Garbage => return Ok(full(StatusCode::OK, "<html>busy</html>")),
        Behaviour::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            return Ok(full(StatusCode::OK, ""));
        }
        Behaviour::Serve | Behaviour::BreakMidStream => {}
    }
    let tokens = request["max_tokens"].as_u64().unwrap_or(16).max(1);
    let stream = request["stream"] == true;
    let Ok(slot) = state.slots.clone().acquire_owned().await else {
        return Ok(full(StatusCode::SERVICE_UNAVAILABLE, "closed"));
    };
    if !stream {
        tokio::time::sleep(model.prefill + model.per_token * (tokens as u32 - 1)).await;
        drop(slot);
        state.served.fetch_add(1, Ordering::SeqCst);
        let text: Vec<String> = (0..tokens).map(|i| format!("t{i}")).collect();
        let choice = if chat {
            json!({"index": 0, "message": {"role": "assistant", "content": text.join(" ")}})
        } else {
            json!({"index": 0, "text": text.join(" ")})
        };
        let body = json!({"choices": [choice], "usage": {"completion_tokens": tokens}});
        return Ok(full(StatusCode::OK, body.to_string()));
    }
    // Chat opens with a role chunk before any token, as vLLM's does: it is not the first token.
    let role = json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]});
    let opening = chat.then(|| event(&role));
    let events = futures::stream::unfold((0u64, Some(slot), opening), move |(i, slot, opening)| {
        let state = state.clone();
        async move {
            if let Some(opening) = opening {
                return Some((Ok(Frame::data(opening)), (i, slot, None)));
            }
            let slot = slot?;
            if i == 0 {
                tokio::time::sleep(model.prefill).await;
            } else if i < tokens {
                tokio::time::sleep(model.per_token).await;
            }
            if model.behaviour == Behaviour::BreakMidStream && i == 1 {
                let broken = std::io::Error::other("the stand-in breaks the stream");
                return Some((Err(broken), (i + 1, None, None)));
            }
            let bytes = if i < tokens {
                event(&token(chat, i))
            } else if i == tokens {
                event(&json!({"choices": [], "usage": {"completion_tokens": tokens}}))
            } else {
                drop(slot);
                state.served.fetch_add(1, Ordering::SeqCst);
                return Some((
                    Ok(Frame::data(Bytes::from("data: [DONE]\n\n"))),
                    (i + 1, None, None),
                ));
            };
            Some((Ok(Frame::data(bytes)), (i + 1, Some(slot), None)))
        }
    });
    let mut r = Response::new(BodyExt::boxed_unsync(StreamBody::new(events)));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    Ok(r)
}

async fn stand_in(model: Model) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(State {
        model,
        slots: Arc::new(Semaphore::new(model.batch)),
        served: AtomicU64::new(0),
        seen: Mutex::new(None),
    });
    let shared = state.clone();
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let state = shared.clone();
            connections.spawn(async move {
                let service = service_fn(move |req| answer(req, state.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
            while connections.try_join_next().is_some() {}
        }
    });
    StandIn { addr, state, task }
}

/// A server that reads each request and closes the connection without answering.
async fn closer() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
        }
    });
    (addr, task)
}

fn config(url: &str, concurrency: u32, duration_ms: u64) -> Config {
    let mut c = Config::closed(url, concurrency, Duration::from_millis(duration_ms));
    c.prompt_tokens = 20;
    c.output_tokens = 8;
    c
}

fn ms(seconds: f64) -> f64 {
    seconds * 1e3
}

fn within(what: &str, got_s: f64, low_ms: f64, high_ms: f64) {
    let got = ms(got_s);
    assert!(
        (low_ms..=high_ms).contains(&got),
        "{what} {got:.1} ms, expected {low_ms}..{high_ms} ms"
    );
}

fn no_errors(r: &Report) {
    assert!(r.errors.is_empty(), "{r:#?}");
    assert_eq!(r.requests, r.ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_counts_and_percentiles_match_the_stand_ins_delays() {
    // 40 ms to the first token, then 7 more 10 ms apart: 110 ms a request.
    let server = stand_in(Model::new(64, 40, 10)).await;
    let mut c = config(&server.url(), 4, 1500);
    c.stream = true;
    let r = load::run(c).await.unwrap();
    no_errors(&r);
    assert_eq!(r.ok, server.served());
    // 4 workers x 1.5 s / 110 ms, about 55, the last ones finishing past the duration.
    assert!((35..=64).contains(&r.ok), "{}", r.ok);
    assert_eq!(r.output_tokens, r.ok * 8);
    let (ttft, itl, e2e) = (r.ttft_s.unwrap(), r.itl_s.unwrap(), r.e2e_s.unwrap());
    within("ttft p50", ttft.p50, 40.0, 60.0);
    within("itl p50", itl.p50, 9.5, 15.0);
    within("e2e p50", e2e.p50, 110.0, 145.0);
    assert!(ttft.p50 <= ttft.p90 && ttft.p90 <= ttft.p95 && ttft.p95 <= ttft.p99);
    within("elapsed", r.elapsed_s, 1500.0, 1800.0);
    let rate = r.ok as f64 / r.elapsed_s;
    assert!((r.requests_per_s - rate).abs() < 1e-9);
    assert!((r.output_tokens_per_s - 8.0 * rate).abs() < 1e-6);
    // What was asked of the server.
    let (path, body) = server.seen();
    assert_eq!(path, "/v1/completions");
    assert_eq!(
        body["prompt"].as_str().unwrap().split_whitespace().count(),
        20
    );
    assert_eq!(body["max_tokens"], 8);
    assert_eq!(body["ignore_eos"], true);
    assert_eq!(body["stream"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_response_is_its_own_ttft() {
    // 30 ms prefill + 7 x 10 ms: 100 ms a request, answered whole.
    let server = stand_in(Model::new(64, 30, 10)).await;
    let r = load::run(config(&server.url(), 2, 1000)).await.unwrap();
    no_errors(&r);
    assert_eq!(r.ok, server.served());
    assert_eq!(r.output_tokens, r.ok * 8);
    let (ttft, e2e) = (r.ttft_s.unwrap(), r.e2e_s.unwrap());
    assert_eq!(ttft, e2e);
    within("e2e p50", e2e.p50, 100.0, 135.0);
    assert!(r.itl_s.is_none());
    assert_eq!(server.seen().1["stream"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_streams_time_the_first_content_not_the_role_chunk() {
    let server = stand_in(Model::new(64, 50, 5)).await;
    let mut c = config(&server.url(), 2, 600);
    c.stream = true;
    c.chat = true;
    c.model = Some("stand-in".into());
    let r = load::run(c).await.unwrap();
    no_errors(&r);
    assert_eq!(r.output_tokens, r.ok * 8);
    within("ttft p50", r.ttft_s.unwrap().p50, 50.0, 70.0);
    let (path, body) = server.seen();
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(body["model"], "stand-in");
    let content = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(content.split_whitespace().count(), 20);
}

async fn errors_of(url: &str, stream: bool) -> Report {
    let mut c = config(url, 2, 400);
    c.stream = stream;
    load::run(c).await.unwrap()
}

fn only_error(r: &Report, kind: &str) {
    assert_eq!(r.ok, 0, "{r:#?}");
    assert!(r.requests > 0);
    let expected = [(kind.to_owned(), r.requests)].into_iter().collect();
    assert_eq!(r.errors, expected, "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_a_closed_connection_and_a_bad_body_are_counted_by_kind() {
    let failing = stand_in(Model::behaving(Behaviour::Fail)).await;
    only_error(&errors_of(&failing.url(), false).await, "http_500");
    let garbage = stand_in(Model::behaving(Behaviour::Garbage)).await;
    only_error(&errors_of(&garbage.url(), false).await, "bad_body");
    only_error(&errors_of(&garbage.url(), true).await, "bad_body");
    let breaking = stand_in(Model::behaving(Behaviour::BreakMidStream)).await;
    only_error(&errors_of(&breaking.url(), true).await, "closed");
    let (addr, task) = closer().await;
    only_error(&errors_of(&format!("http://{addr}"), false).await, "closed");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_a_connect_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Nothing listens there now.
    let r = errors_of(&format!("http://127.0.0.1:{port}"), false).await;
    only_error(&r, "connect");
    // The backoff after each refusal keeps it from spinning, doubling from 10 ms: each of the 2
    // workers tries at 0, 10, 30, 70, 150 and 310 ms of the 400 ms run, so at most 12 tries
    // (fewer when the machine is slow).
    assert!(r.requests <= 12, "{}", r.requests);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_times_out_and_the_run_ends_by_the_duration_plus_the_timeout() {
    let server = stand_in(Model::behaving(Behaviour::Hang)).await;
    let mut c = config(&server.url(), 3, 500);
    c.limits.timeout = 300 * MS;
    let started = std::time::Instant::now();
    let r = load::run(c).await.unwrap();
    only_error(&r, "timeout");
    // Each worker: a timeout at 300 ms, another sent then, ending at 600 ms; the count is what
    // the loop decides (a third request would start past the 500 ms duration).
    assert_eq!(r.requests, 6, "{r:#?}");
    // It ended after its requests' timeouts, and not a whole default timeout (60 s) later: the
    // upper bound has room for a machine with both cores busy.
    let took = started.elapsed();
    assert!(took >= 600 * MS && took < 5_000 * MS, "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_loop_sends_the_seeded_poisson_arrivals_at_the_rate() {
    let server = stand_in(Model::new(256, 5, 1)).await;
    let mut c = config(&server.url(), 1, 1500);
    c.mode = Mode::Open {
        rate: 400.0,
        seed: 3,
    };
    c.output_tokens = 2;
    let r = load::run(c).await.unwrap();
    no_errors(&r);
    let arrivals = load::open_loop::arrivals(400.0, 1.5, 3).count() as u64;
    assert_eq!(r.requests, arrivals);
    assert_eq!(server.served(), arrivals);
    // 600 expected (sd 24.5): within 15%.
    assert!((510..=690).contains(&r.requests), "{}", r.requests);
    assert!(
        (r.requests_per_s - 400.0).abs() < 60.0,
        "{}",
        r.requests_per_s
    );
    assert_eq!((r.rate, r.concurrency), (Some(400.0), None));
    within("e2e p50", r.e2e_s.unwrap().p50, 6.0, 40.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrivals_past_the_in_flight_bound_are_overflow() {
    // Each request takes 600 ms; at most 3 in flight.
    let server = stand_in(Model::new(256, 600, 1)).await;
    let mut c = config(&server.url(), 1, 500);
    c.mode = Mode::Open {
        rate: 100.0,
        seed: 1,
    };
    c.output_tokens = 1;
    c.limits.max_in_flight = 3;
    let r = load::run(c).await.unwrap();
    let arrivals = load::open_loop::arrivals(100.0, 0.5, 1).count() as u64;
    assert_eq!(r.requests, arrivals);
    assert_eq!(r.ok, 3, "{r:#?}");
    assert_eq!(r.errors["overflow"], arrivals - 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_finds_the_knee_at_the_batch_limit() {
    // At most 4 served at once: 20 ms to the first token, 7 more 10 ms apart.
    let server = stand_in(Model::new(4, 20, 10)).await;
    let mut c = config(&server.url(), 1, 600);
    c.stream = true;
    let sweep = load::sweep(&c, &[16, 1, 2, 4, 8]).await.unwrap();
    let levels: Vec<u32> = sweep.rows.iter().filter_map(|r| r.concurrency).collect();
    assert_eq!(levels, [1, 2, 4, 8, 16]);
    for r in &sweep.rows {
        no_errors(r);
    }
    let knee = sweep.knee.unwrap();
    assert_eq!((knee.concurrency, knee.past), (4, 8), "{sweep:#?}");
    let verdict = sweep.verdict();
    assert!(
        verdict.starts_with("knee: concurrency 4 (TTFT p50 "),
        "{verdict}"
    );
    assert!(verdict.ends_with("use it as the per-replica queue target"));
    let json = serde_json::to_value(&sweep).unwrap();
    assert_eq!(json["knee"], 4);
    assert_eq!(json["sweep"].as_array().unwrap().len(), 5);
}

#[test]
fn the_json_keys_are_stable() {
    let r = Report::new(
        Mode::Closed { concurrency: 2 },
        1.0,
        1.0,
        true,
        &Default::default(),
    );
    let json = serde_json::to_value(&r).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "concurrency",
            "duration_s",
            "e2e_s",
            "elapsed_s",
            "errors",
            "itl_s",
            "ok",
            "output_tokens",
            "output_tokens_per_s",
            "requests",
            "requests_per_s",
            "stream",
            "ttft_s",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_prints_a_table_and_json() {
    let server = stand_in(Model::new(64, 10, 2)).await;
    let url = server.url();
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_infscale"))
                .args(args)
                .output()
                .unwrap()
        })
    };
    let base = [
        "load",
        "--url",
        &url,
        "--duration",
        "0.3",
        "--output-tokens",
        "4",
    ];
    let base: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    let mut table = base.clone();
    table.extend(["--stream", "--concurrency", "2"].map(String::from));
    let out = run(table).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("concurrency 2, 0.3 s"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("itl ")), "{text}");
    let mut sweep = base;
    sweep.extend(["--sweep", "1,2", "--json"].map(String::from));
    let out = run(sweep).await.unwrap();
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["sweep"].as_array().unwrap().len(), 2);
    assert_eq!(json["sweep"][1]["concurrency"], 2);
    assert!(json["knee_rule"].as_str().unwrap().contains("2x"));
}
