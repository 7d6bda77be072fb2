//! The emulator's HTTP server (hyper, HTTP/1.1): routes, bounds, cold start and shutdown.
//!
//! Every generation request is bounded before the engine sees it (body size, requests in flight,
//! context length) and answered with an OpenAI-style error naming what is wrong. Connections are
//! accepted through the listener every port shares ([`crate::edge::listener`]). Until the cold
//! start has passed every route answers 503, as a loading server does. [`Emulator::stop`] stops
//! accepting, then aborts what is in flight; [`Emulator::drain`] is a server's graceful shutdown on
//! SIGTERM (a pod terminating): it stops accepting and closes idle connections, and the requests in
//! flight finish before [`Emulator::drained`] says so.

use super::engine::{Clock, Engine, Progress, Stats, Submit};
use super::openai::{self, Answer, ApiError, Endpoint};
use super::{page, EmulateConfig};
use crate::edge::listener::{Bounds, Listener};
use anyhow::Context;
use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

type Body = BoxBody<Bytes, Infallible>;

/// What every handler shares.
struct State {
    cfg: EmulateConfig,
    clock: Clock,
    submissions: mpsc::UnboundedSender<Submit>,
    stats: Arc<Mutex<Stats>>,
    in_flight: Arc<Semaphore>,
    ids: AtomicU64,
}

impl State {
    fn ready(&self) -> bool {
        self.clock.now() >= self.cfg.cold_start_s
    }
}

/// A running emulated server.
pub struct Emulator {
    addr: SocketAddr,
    stats: Arc<Mutex<Stats>>,
    clock: Clock,
    cold_start_s: f64,
    stop: Option<oneshot::Sender<Stop>>,
    server: Option<JoinHandle<()>>,
    engine: Option<JoinHandle<()>>,
}

impl Emulator {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests in the batch and waiting for it, as `/metrics` last showed them.
    pub fn load(&self) -> (usize, usize) {
        self.stats.lock().map_or((0, 0), |s| (s.running, s.waiting))
    }

    /// Whether the cold start has passed.
    pub fn ready(&self) -> bool {
        self.clock.now() >= self.cold_start_s
    }

    /// Stops accepting and closes idle connections; the requests in flight go on to their end.
    pub fn drain(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Stop::Graceful);
        }
    }

    /// Whether a [`drain`](Self::drain) has ended: no connection is left.
    pub fn drained(&self) -> bool {
        self.stop.is_none() && self.server.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops accepting, aborts the connections in flight (a drain's too), then stops the engine.
    pub async fn stop(mut self) {
        match self.stop.take() {
            Some(stop) => {
                let _ = stop.send(Stop::Abort);
            }
            None => {
                if let Some(server) = &self.server {
                    server.abort();
                }
            }
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        if let Some(engine) = self.engine.take() {
            engine.abort();
            let _ = engine.await;
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        for task in [self.server.take(), self.engine.take()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
    }
}

/// Starts serving on `listener` with the engine's clock starting now.
pub async fn spawn(listener: TcpListener, cfg: EmulateConfig) -> anyhow::Result<Emulator> {
    cfg.validate()?;
    let addr = listener
        .local_addr()
        .context("the listener has no local address")?;
    let clock = Clock::new(cfg.speed);
    let engine = Engine::new(cfg.gpu.clone(), cfg.dt_s, cfg.speed)
        .with_stream_interval(cfg.stream_interval)
        .with_max_model_len(cfg.limits.max_model_len);
    let stats = Arc::new(Mutex::new(engine.stats().clone()));
    let (submissions, rx) = mpsc::unbounded_channel();
    let engine = tokio::spawn(engine.run(clock, rx, stats.clone()));
    let cold_start_s = cfg.cold_start_s;
    let state = Arc::new(State {
        in_flight: Arc::new(Semaphore::new(cfg.limits.max_in_flight)),
        cfg,
        clock,
        submissions,
        stats: stats.clone(),
        ids: AtomicU64::new(0),
    });
    let (stop, stopped) = oneshot::channel();
    let server = tokio::spawn(accept(listener, state, stopped));
    tracing::info!(%addr, "emulated model server listening");
    Ok(Emulator {
        addr,
        stats,
        clock,
        cold_start_s,
        stop: Some(stop),
        server: Some(server),
        engine: Some(engine),
    })
}

/// How the server stops: at once, or after what is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Abort,
    Graceful,
}

/// The first pause after a failed accept (it doubles while accepts keep failing).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// The server's listener bounds: its connection cap, and a first byte and a request head within
/// the head timeout. No idle limit or write stall: hyper's head timer closes a keep-alive
/// connection idle between requests, and a streamed answer goes at the engine's pace to a client
/// that sends nothing meanwhile.
fn bounds(limits: &super::Limits) -> Bounds {
    let head = Duration::from_secs_f64(limits.header_timeout_s);
    Bounds {
        max_connections: limits.max_connections,
        max_per_client: None,
        first_byte: head,
        head_timeout: head,
        idle: None,
        idle_on_writes: false,
        write_stall: None,
        first_request: None,
        max_age: None,
        accept_backoff: ACCEPT_BACKOFF,
    }
}

async fn accept(listener: TcpListener, state: Arc<State>, mut stop: oneshot::Receiver<Stop>) {
    let bounds = bounds(&state.cfg.limits);
    let http1 = bounds.http1();
    let mut listener = Listener::new(listener, bounds, "emulate");
    let mut connections = JoinSet::new();
    let (closing, _) = watch::channel(false);
    let how = loop {
        tokio::select! {
            conn = listener.accept() => {
                while connections.try_join_next().is_some() {}
                let state = state.clone();
                let service = service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(state, req).await) }
                });
                let http1 = http1.clone();
                let mut closing = closing.subscribe();
                connections.spawn(async move {
                    let conn = http1.serve_connection(TokioIo::new(conn), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = async { closing.wait_for(|c| *c).await.is_ok() } => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
            how = &mut stop => break how.unwrap_or(Stop::Abort),
        }
    };
    drop(listener);
    if how == Stop::Graceful {
        closing.send_replace(true);
        while connections.join_next().await.is_some() {}
    }
    connections.shutdown().await;
}

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}

fn error(e: &ApiError) -> Response<Body> {
    full(e.status, "application/json", e.body())
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Response<Body> {
    if !state.ready() {
        return error(&ApiError::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "the model is loading",
        ));
    }
    let path = req.uri().path().to_owned();
    let endpoint = match path.as_str() {
        "/v1/completions" => Some(Endpoint::Completions),
        "/v1/chat/completions" => Some(Endpoint::Chat),
        _ => None,
    };
    match (req.method(), path.as_str(), endpoint) {
        (&Method::POST, _, Some(endpoint)) => generate(&state, endpoint, req)
            .await
            .unwrap_or_else(|e| error(&e)),
        // llama.cpp answers a JSON status; vLLM, SGLang and TGI an empty 200.
        (&Method::GET, "/health", _) => match state.cfg.dialect {
            super::Dialect::Llamacpp => {
                full(StatusCode::OK, "application/json", "{\"status\":\"ok\"}")
            }
            _ => full(StatusCode::OK, "application/json", ""),
        },
        // trtllm-serve serves its page at /prometheus/metrics.
        (&Method::GET, "/metrics" | "/prometheus/metrics", _) => {
            let stats = match state.stats.lock() {
                Ok(s) => s.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            };
            full(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                page::render(state.cfg.dialect, &stats, &state.cfg.model),
            )
        }
        (&Method::GET, "/v1/models", _) => full(
            StatusCode::OK,
            "application/json",
            serde_json::json!({"object": "list", "data": [{
                "id": state.cfg.model, "object": "model", "created": unix_now(),
                "owned_by": "infscale", "max_model_len": state.cfg.limits.max_model_len,
            }]})
            .to_string(),
        ),
        (_, "/health" | "/metrics" | "/prometheus/metrics" | "/v1/models", _) | (_, _, Some(_)) => {
            error(&ApiError::status(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{} is not allowed on {path}", req.method()),
            ))
        }
        _ => error(&ApiError::status(
            StatusCode::NOT_FOUND,
            format!("no route {path}"),
        )),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn generate(
    state: &State,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let limits = state.cfg.limits;
    let permit = state.in_flight.clone().try_acquire_owned().map_err(|_| {
        ApiError::status(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{} requests are in flight already", limits.max_in_flight),
        )
    })?;
    let body = Limited::new(req.into_body(), limits.max_body_bytes)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                ApiError::status(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body is larger than {} bytes", limits.max_body_bytes),
                )
            } else {
                ApiError::status(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {e}"),
                )
            }
        })?
        .to_bytes();
    let g = openai::parse(endpoint, &body, limits.max_model_len)?;
    let (progress, mut rx) = watch::channel(Progress::default());
    state
        .submissions
        .send(Submit {
            arrival: state.clock.now(),
            prompt: g.prompt_tokens,
            output: g.max_tokens,
            progress,
        })
        .map_err(|_| ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "the engine stopped"))?;
    let n = state.ids.fetch_add(1, Ordering::Relaxed);
    let answer = Answer {
        endpoint,
        id: match endpoint {
            Endpoint::Completions => format!("cmpl-{n}"),
            Endpoint::Chat => format!("chatcmpl-{n}"),
        },
        created: unix_now(),
        model: state.cfg.model.clone(),
        prompt_tokens: g.prompt_tokens,
    };
    if g.stream {
        return Ok(stream(answer, rx, permit));
    }
    while !rx.borrow_and_update().done {
        rx.changed()
            .await
            .map_err(|_| ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "the engine stopped"))?;
    }
    drop(permit);
    Ok(full(
        StatusCode::OK,
        "application/json",
        answer.whole(g.max_tokens),
    ))
}

/// What a streamed answer has sent so far; it holds the request's in-flight permit.
struct Streaming {
    answer: Answer,
    rx: watch::Receiver<Progress>,
    sent: u32,
    closed: bool,
    _permit: OwnedSemaphorePermit,
}

/// Server-sent events: the tokens each engine step gave, then usage and `[DONE]`.
fn stream(
    answer: Answer,
    rx: watch::Receiver<Progress>,
    permit: OwnedSemaphorePermit,
) -> Response<Body> {
    let start = Streaming {
        answer,
        rx,
        sent: 0,
        closed: false,
        _permit: permit,
    };
    let events = futures::stream::unfold(start, |mut s| async move {
        if s.closed {
            return None;
        }
        loop {
            let now = *s.rx.borrow_and_update();
            if now.tokens > s.sent || now.done {
                let mut text = s.answer.token_events(s.sent, now.tokens, now.done);
                s.sent = now.tokens;
                if now.done {
                    text.push_str(&s.answer.closing_events(now.tokens));
                    s.closed = true;
                }
                return Some((Ok::<_, Infallible>(Frame::data(Bytes::from(text))), s));
            }
            // The engine stopped: end the stream without [DONE].
            s.rx.changed().await.ok()?;
        }
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(events)));
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    r
}
