//! The proxy: route a request, hold it while its upstream has no ready replica, forward it.
//!
//! Request bodies are read whole (bounded by `--max-body-bytes`): LLM requests are small JSON,
//! and a body kept in memory can be forwarded again when the upstream turns out to be gone, so a
//! request that arrives as the last replica leaves is held instead of failing. Responses stream
//! through untouched (server-sent events arrive token by token). Hop-by-hop headers are dropped
//! both ways; upstream connections are pooled. Every request ends forwarded or with a JSON answer:
//! 404 no route, 408 body too slow, 413 body too large, 503 route full, body budget spent or
//! shutting down (with `Connection: close`), 504 hold timeout or no response head in time, 502
//! upstream failed, 508 a request that has already passed through the activator [`MAX_HOPS`]
//! times (a loop). Bodies count against one memory budget (`budget::Budget`) and its shares
//! while they are read and held, and are given back once written upstream where they cannot
//! be sent again; an upstream silent for `upstream_idle` in the middle of a response is cut.
//! Every `x-infscale-*` header of an upstream's answer is dropped: those are the activator's
//! own, and a model pod answering `serve`'s probe as the activator would hide that the
//! activator is not in the model's path.

use super::budget::{Budget, Part, Reservation};
use super::conn_watch::ConnShared;
use super::hold::{Admission, Release, RouteState, Turn};
use super::limits::Limits;
use super::pump::{BoxError, ProxyBody};
use super::routes::{Model, Route};
use super::table::{Routing, Table};
use super::telemetry::Telemetry;
use super::written::SignallingConnector;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// The upstream client: pooled connections, and fresh ones for a request sent again.
pub type UpstreamClient = Client<SignallingConnector<HttpConnector>, UpstreamBody>;

pub struct Proxy {
    /// The routes, as they change.
    pub routing: Arc<Routing>,
    /// The shared port (every other port a connection comes in on is a model's).
    pub shared_port: u16,
    pub client: UpstreamClient,
    /// A client that never pools: a request the upstream never read goes again on a new
    /// connection ([`super::unsent`]).
    pub fresh: UpstreamClient,
    pub telemetry: Arc<Telemetry>,
    pub limits: Limits,
    pub budget: Arc<Budget>,
    /// Log lines about unplaced requests, at a bounded rate.
    pub unrouted_log: Throttle,
}

/// The most of an upstream's error body read to tell a held stream why it failed.
const ERROR_BODY_READ: usize = 64 << 10;

/// Headers that describe one hop, never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Drops every header only the activator may set (`x-infscale-*`) from an upstream's answer.
fn strip_own_headers(headers: &mut HeaderMap) {
    let own: Vec<HeaderName> = headers
        .keys()
        .filter(|n| n.as_str().starts_with("x-infscale-"))
        .cloned()
        .collect();
    for name in own {
        headers.remove(name);
    }
}

/// The header that counts how many times a request has passed through an activator.
pub const HOPS_HEADER: &str = "x-infscale-hops";

/// The most times a request may pass through the activator: one more is a loop (a slice or a
/// route naming the activator as its own upstream) and is answered 508. A request passes once
/// in every shipped shape; 3 leaves room for two activators in a chain.
pub const MAX_HOPS: u32 = 3;

/// The hops a request has made so far (a value that is not a number counts as the most).
fn hops_of(headers: &HeaderMap) -> u32 {
    match headers.get(HOPS_HEADER) {
        None => 0,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(MAX_HOPS),
    }
}

fn full(body: impl Into<Bytes>) -> ProxyBody {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A JSON answer from the activator itself.
fn answer(status: StatusCode, error: &str, retry_after: Option<u64>) -> Response<ProxyBody> {
    let body = serde_json::json!({ "error": error, "status": status.as_u16() }).to_string();
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(s) = retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// A request body on its way upstream, saying when it is in the socket (its last frame taken
/// and the connection's next write done, see [`super::written`]: `Some` of that time) or will
/// never be (the body dropped: `None`): the next request in turn may then send.
pub struct UpstreamBody {
    inner: Full<Bytes>,
    written: Option<Written>,
}

type Written = tokio::sync::oneshot::Sender<Option<Instant>>;

impl UpstreamBody {
    fn taken_whole(&mut self) {
        if let Some(tx) = self.written.take() {
            super::written::park(tx);
        }
    }

    fn signal(&mut self) {
        if let Some(tx) = self.written.take() {
            let _ = tx.send(None);
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.taken_whole();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        self.signal();
    }
}

/// Why a request head is refused before any route is picked: CONNECT (nothing is tunnelled:
/// 405), more than one Host header, or a Host that names another authority than the request's
/// own (400: a proxy and the router it fronts must agree on where a request goes).
fn head_refusal<B>(req: &Request<B>) -> Option<(StatusCode, &'static str)> {
    if req.method() == http::Method::CONNECT {
        return Some((StatusCode::METHOD_NOT_ALLOWED, "CONNECT is not proxied"));
    }
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Some((StatusCode::BAD_REQUEST, "more than one Host header"));
    }
    if let (Some(host), Some(authority)) = (host, req.uri().authority()) {
        let same = host
            .to_str()
            .is_ok_and(|h| h.eq_ignore_ascii_case(authority.as_str()));
        if !same {
            return Some((
                StatusCode::BAD_REQUEST,
                "the Host header and the request's authority disagree",
            ));
        }
    }
    None
}

/// Whether a request asks for a streamed answer: a POST whose JSON body says `"stream": true`
/// (OpenAI's completions and chat completions).
fn wants_stream(method: &http::Method, body: &[u8]) -> bool {
    method == http::Method::POST
        && serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("stream").and_then(|s| s.as_bool()))
            .unwrap_or(false)
}

/// One SSE event carrying an OpenAI-style error object.
fn error_event(message: &str, code: u16) -> Frame<Bytes> {
    let event = serde_json::json!({
        "error": { "message": message, "type": "upstream_error", "code": code }
    });
    Frame::data(Bytes::from(format!("data: {event}\n\n")))
}

/// Why a request body was not taken.
enum BodyRefusal {
    TooLarge,
    Budget,
    Slow,
    Unreadable,
}

impl BodyRefusal {
    fn reason(&self) -> &'static str {
        match self {
            BodyRefusal::TooLarge => "body_too_large",
            BodyRefusal::Budget => "body_budget",
            BodyRefusal::Slow => "body_timeout",
            BodyRefusal::Unreadable => "body_unreadable",
        }
    }

    fn answer(&self) -> Response<ProxyBody> {
        match self {
            BodyRefusal::TooLarge => answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body over the limit",
                None,
            ),
            BodyRefusal::Budget => answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "the activator holds as many request bodies as its memory budget allows",
                Some(1),
            ),
            BodyRefusal::Slow => answer(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
                None,
            ),
            BodyRefusal::Unreadable => answer(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
                None,
            ),
        }
    }
}

impl Proxy {
    /// Handles one client request that came in on local port `port`: a model's port places it
    /// whatever its host, the shared port by host and path.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        peer: SocketAddr,
        conn: &ConnShared,
        port: Option<u16>,
    ) -> Response<ProxyBody> {
        if let Some((status, why)) = head_refusal(&req) {
            self.telemetry.reject("none", "bad_head");
            return answer(status, why, None);
        }
        let table = self.routing.table();
        let model_port = port.filter(|p| *p != self.shared_port);
        let by_port = model_port.and_then(|p| table.at_port(p));
        if req.headers().contains_key(PROBE_HEADER) {
            return probe_answer(&req, &table, model_port, by_port.as_ref());
        }
        if hops_of(req.headers()) >= MAX_HOPS {
            self.telemetry.reject("none", "loop");
            return answer(
                StatusCode::LOOP_DETECTED,
                &format!(
                    "the request has passed through the activator {MAX_HOPS} times: its route \
                     leads back to the activator"
                ),
                None,
            );
        }
        let state = match by_port.or_else(|| table.pick(req.headers(), req.uri())) {
            Some(s) => s,
            None => return self.unrouted(&req, &table, peer),
        };
        drop(table);
        let host = state.route.counts_host.as_str();
        let too_large = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .is_some_and(|n| n > self.limits.max_body as u64);
        if too_large {
            self.telemetry.reject(host, "body_too_large");
            return answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body over the limit",
                None,
            );
        }
        let (parts, body) = req.into_parts();
        // Held until the request is answered: the body may be sent again.
        let shares = [
            &conn.bodies,
            &self
                .budget
                .part(Part::Client(peer.ip()), self.limits.client_body_share),
            &self.budget.part(
                Part::Route(state.route.counts_host.clone()),
                self.limits.route_body_share,
            ),
        ];
        let (body, reservation) = match self.read_body(body, &shares).await {
            Ok(read) => read,
            Err(refusal) => {
                self.telemetry.reject(host, refusal.reason());
                return refusal.answer();
            }
        };
        if let Some(every) = state.route.keep_alive {
            if !state.is_ready() && !state.would_refuse() && wants_stream(&parts.method, &body) {
                return self.keep_alive(state, parts, body, peer, reservation, every);
            }
        }
        self.deliver(state, parts, body, peer, reservation).await
    }

    /// A request no route places: answered 404 with what the activator serves, counted by
    /// reason, and logged at a bounded rate.
    fn unrouted<B>(
        &self,
        req: &Request<B>,
        table: &Table,
        peer: SocketAddr,
    ) -> Response<ProxyBody> {
        let host = super::routes::request_host(req.headers(), req.uri());
        let reason = match host {
            None => "no_host",
            Some(h) if table.routes.iter().any(|s| s.route.matches_host(Some(h))) => "no_path",
            Some(_) => "unknown_host",
        };
        self.telemetry.reject("none", "no_route");
        self.telemetry.unrouted(reason);
        let shown = host.map(|h| infscale_core::limits::cut(h, 256));
        let serves = table.hosts();
        if let Some(suppressed) = self.unrouted_log.allow() {
            tracing::warn!(
                %peer, host = shown.as_deref().unwrap_or("(none)"), path = %infscale_core::limits::cut(req.uri().path(), 256),
                reason, ?serves, suppressed, "no route for a request"
            );
        }
        let body = serde_json::json!({
            "error": "no route for this host and path",
            "status": 404,
            "reason": reason,
            "host": shown,
            "serves": serves,
        })
        .to_string();
        let mut r = Response::new(full(body));
        *r.status_mut() = StatusCode::NOT_FOUND;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }

    /// Holds (if need be) and forwards a request whose body has been read; every outcome is a
    /// response. `reservation` keeps the body's share of the budget until then, or until the
    /// body is written upstream and can no longer be sent again.
    async fn deliver(
        &self,
        state: Arc<RouteState>,
        mut parts: http::request::Parts,
        body: Bytes,
        peer: SocketAddr,
        reservation: Reservation,
    ) -> Response<ProxyBody> {
        let (mut body, mut reservation) = (Some(body), Some(reservation));
        let counters = &state.counters;
        let host = state.route.counts_host.as_str();
        // Built at the first forward, not before: a held request carries only what it came with.
        let mut upstream: Option<Upstream> = None;
        let arrived = Instant::now();
        let deadline = arrived + state.route.hold_timeout;
        let ticket = state.count_request();
        let mut held_as = None;
        loop {
            let ordinal = match state.admit(ticket) {
                Admission::Full => {
                    self.telemetry.reject(host, "full");
                    return answer(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "too many requests held for this route",
                        Some(1),
                    );
                }
                Admission::NamespaceFull => {
                    self.telemetry.reject(host, "namespace_full");
                    return answer(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "too many requests held for this route's namespace",
                        Some(1),
                    );
                }
                Admission::Closed => return self.shutting_down(host),
                Admission::Held(mut held) => {
                    if upstream.is_none() {
                        detach(&mut parts);
                    }
                    tokio::select! {
                        released = &mut held.release => match released {
                            Ok(Release::Go { ordinal: n }) => {
                                held_as = Some(n);
                                Some(n)
                            }
                            Ok(Release::Shutdown) => return self.shutting_down(host),
                            Err(_) => continue,
                        },
                        _ = tokio::time::sleep_until(deadline) => {
                            held.expire();
                            counters.timed_out.inc();
                            let timeout = state.route.hold_timeout.as_secs().max(1);
                            return answer(StatusCode::GATEWAY_TIMEOUT, "no replica became ready within the hold timeout", Some(timeout));
                        }
                    }
                }
                Admission::Forward { ordinal } => ordinal,
            };
            let held_for = arrived.elapsed();
            // Boxed: a held request should not carry the forwarding state machine around.
            let upstream =
                upstream.get_or_insert_with(|| Upstream::new(&state.route, &mut parts, peer));
            if held_as.is_some() {
                // A release opens a connection per request at once. A thread-per-connection
                // server (llama.cpp's) keeps each one's thread through its keep-alive once the
                // answer is out, so the release's first answers left idle pooled connections
                // holding every thread while the rest waited 4-5 s to be read: a released
                // request's connection closes with its answer.
                upstream
                    .headers
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            // In a release, wait for every request before this one to be written upstream, and
            // for a slot, within this request's own deadline.
            let turn = match ordinal {
                Some(n) => match tokio::time::timeout_at(deadline, state.turn(n)).await {
                    Ok(turn) => Some(turn),
                    Err(_) => {
                        counters.timed_out.inc();
                        let timeout = state.route.hold_timeout.as_secs().max(1);
                        return answer(
                            StatusCode::GATEWAY_TIMEOUT,
                            "no replica took the request within the hold timeout",
                            Some(timeout),
                        );
                    }
                },
                None => None,
            };
            // A direct route sends to one of the ready endpoints; with none left (the last
            // one refused a moment ago), the request is held again in its place.
            let to = match state.route.direct {
                false => None,
                true => match state.pick_endpoint() {
                    Some(to) => Some(to),
                    None => {
                        state.upstream_refused();
                        continue;
                    }
                },
            };
            let forwarded = self.forward(
                &state,
                counters,
                upstream,
                &mut body,
                &mut reservation,
                turn,
                to.as_ref(),
            );
            match Box::pin(forwarded).await {
                Ok(mut response) => {
                    if let Some(n) = held_as {
                        counters.held_seconds.observe(held_for.as_secs_f64());
                        let h = response.headers_mut();
                        h.insert(
                            "x-infscale-held-ms",
                            HeaderValue::from(held_for.as_millis() as u64),
                        );
                        h.insert("x-infscale-released", HeaderValue::from(n));
                    }
                    counters.forwarded.inc();
                    return response;
                }
                Err(Failure::Upstream(e))
                    if e.is_connect() && Instant::now() < deadline && body.is_some() =>
                {
                    // The upstream is gone (scaled to zero under us): hold the request again, in
                    // its place, until the route is ready again.
                    tracing::info!(route = %host, error = %Chain(&e), "upstream refused the connection; holding");
                    match &to {
                        Some(gone) => state.endpoint_refused(gone),
                        None => state.upstream_refused(),
                    }
                }
                Err(Failure::HeadTimeout) => {
                    let waited = self.limits.upstream_head_timeout;
                    tracing::warn!(route = %host, ?waited, "the upstream sent no response head in time");
                    return answer(
                        StatusCode::GATEWAY_TIMEOUT,
                        "the upstream sent no response head within --upstream-head-timeout",
                        None,
                    );
                }
                Err(Failure::Upstream(e)) => {
                    tracing::warn!(route = %host, error = %Chain(&e), "upstream failed");
                    counters.upstream_errors.inc();
                    return answer(StatusCode::BAD_GATEWAY, "the upstream failed", None);
                }
                Err(Failure::BodyGone) => {
                    counters.upstream_errors.inc();
                    return answer(StatusCode::BAD_GATEWAY, "the upstream failed", None);
                }
            }
        }
    }

    /// Answers a streaming request at once (`200 text/event-stream`) while it is held, with an
    /// SSE comment every `every`, then splices the upstream's events; an upstream failure (or a
    /// hold that ends without a replica) arrives as one `data:` event with an OpenAI-style error
    /// object, and the stream ends. A client that leaves stops it all, and the hold is abandoned.
    fn keep_alive(
        self: Arc<Self>,
        state: Arc<RouteState>,
        parts: http::request::Parts,
        body: Bytes,
        peer: SocketAddr,
        reservation: Reservation,
        every: Duration,
    ) -> Response<ProxyBody> {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(16);
        tokio::spawn(async move {
            let deliver = self.deliver(state, parts, body, peer, reservation);
            let mut deliver = std::pin::pin!(deliver);
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            let response = loop {
                tokio::select! {
                    r = &mut deliver => break r,
                    // The client left: the hold is abandoned, nothing is forwarded.
                    _ = tx.closed() => return,
                    _ = tick.tick() => {
                        let comment = Frame::data(Bytes::from_static(b": waiting for a replica\n\n"));
                        if tx.send(Ok(comment)).await.is_err() {
                            return;
                        }
                    }
                }
            };
            let status = response.status();
            let mut body = response.into_body();
            if !status.is_success() {
                // Only the start of an error body is read: a 1 GiB error page would otherwise
                // be held whole in memory.
                let mut said = Vec::new();
                while said.len() < ERROR_BODY_READ {
                    let Some(Ok(frame)) = body.frame().await else {
                        break;
                    };
                    if let Ok(data) = frame.into_data() {
                        let room = ERROR_BODY_READ - said.len();
                        said.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                let message = crate::edge::source::status_message(&said)
                    .unwrap_or_else(|| format!("HTTP status {}", status.as_u16()));
                let _ = tx.send(Ok(error_event(&message, status.as_u16()))).await;
                return;
            }
            while let Some(frame) = body.frame().await {
                let (frame, failed) = match frame {
                    Ok(f) => (f, false),
                    Err(e) => (error_event(&format!("the upstream failed: {e}"), 502), true),
                };
                if tx.send(Ok(frame)).await.is_err() || failed {
                    return;
                }
            }
        });
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut r = Response::new(http_body_util::StreamBody::new(stream).boxed());
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert("x-infscale-keep-alive", HeaderValue::from_static("held"));
        r
    }

    fn shutting_down(&self, host: &str) -> Response<ProxyBody> {
        self.telemetry.reject(host, "shutting_down");
        let mut r = answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "the activator is shutting down",
            Some(1),
        );
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    }

    /// The whole body, within `body_timeout` (no pause longer than `body_idle`), `max_body`,
    /// the shared budget and its `shares` (the connection's, the address's, the route's:
    /// charged as the bytes arrive), or why not. A refusal gives its bytes back at once.
    async fn read_body(
        &self,
        body: Incoming,
        shares: &[&Arc<Budget>],
    ) -> Result<(Bytes, Reservation), BodyRefusal> {
        let mut reservation = self.budget.reservation(shares);
        let idle = self.limits.body_idle;
        let read = async {
            let mut body = std::pin::pin!(body);
            let mut out = bytes::BytesMut::new();
            loop {
                let frame = match tokio::time::timeout(idle, body.frame()).await {
                    Err(_) => return Err(BodyRefusal::Slow),
                    Ok(None) => break,
                    Ok(Some(frame)) => frame,
                };
                let frame = frame.map_err(|_| BodyRefusal::Unreadable)?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if out.len() + data.len() > self.limits.max_body {
                    return Err(BodyRefusal::TooLarge);
                }
                if !reservation.grow(data.len()) {
                    return Err(BodyRefusal::Budget);
                }
                out.extend_from_slice(&data);
            }
            Ok(out.freeze())
        };
        match tokio::time::timeout(self.limits.body_timeout, read).await {
            Ok(Ok(bytes)) => Ok((bytes, reservation)),
            Ok(Err(refusal)) => Err(refusal),
            Err(_) => Err(BodyRefusal::Slow),
        }
    }

    /// Sends the request upstream and waits for its head, within `upstream_head_timeout`. Once
    /// the request is written and [`super::unsent::CROSSING`] has passed (it can no longer be
    /// sent again), its `body` and `reservation` are given back: the wait holds no body memory.
    #[allow(clippy::too_many_arguments)]
    async fn forward(
        &self,
        state: &Arc<RouteState>,
        counters: &super::telemetry::RouteTelemetry,
        upstream: &Upstream,
        body: &mut Option<Bytes>,
        reservation: &mut Option<Reservation>,
        mut turn: Option<Turn>,
        to: Option<&http::uri::Authority>,
    ) -> Result<Response<ProxyBody>, Failure> {
        let Some(bytes) = body.clone() else {
            return Err(Failure::BodyGone);
        };
        let (request, mut written) = upstream.request(bytes, to);
        let guard = state.forwarding();
        // A release sends each request on a connection of its own: an event-loop server reads
        // new connections in the order it accepts them, but reads an already accepted one a
        // turn earlier, so a pooled connection would let a later request overtake.
        let client = if turn.is_some() {
            &self.fresh
        } else {
            &self.client
        };
        let mut response = client.request(request);
        let slot = turn.as_mut().and_then(Turn::take_slot);
        let head_deadline = tokio::time::sleep(self.limits.upstream_head_timeout);
        let mut head_deadline = std::pin::pin!(head_deadline);
        let mut written_at = None;
        let mut awaiting_write = true;
        // The turn passes on once this request is written (or has failed) and either its
        // answer's head came or RELEASE_SPACING passed: time for a server that reads each
        // connection on a thread of its own to take this one before the next.
        let mut spacing: Option<Pin<Box<tokio::time::Sleep>>> = None;
        let mut give_back: Option<Pin<Box<tokio::time::Sleep>>> = None;
        let response = loop {
            tokio::select! {
                r = &mut response => break r,
                w = &mut written, if awaiting_write => {
                    awaiting_write = false;
                    written_at = w.ok().flatten();
                    if turn.is_some() {
                        spacing = Some(Box::pin(tokio::time::sleep(RELEASE_SPACING)));
                    }
                    if written_at.is_some() {
                        give_back = Some(Box::pin(tokio::time::sleep(super::unsent::CROSSING)));
                    }
                }
                _ = async { if let Some(s) = spacing.as_mut() { s.await } }, if spacing.is_some() => {
                    spacing = None;
                    drop(turn.take());
                }
                _ = async { if let Some(s) = give_back.as_mut() { s.await } }, if give_back.is_some() => {
                    give_back = None;
                    body.take();
                    reservation.take();
                }
                _ = &mut head_deadline => {
                    counters.upstream_errors.inc();
                    return Err(Failure::HeadTimeout);
                }
            }
        };
        drop(turn);
        let idempotent = upstream.method.is_idempotent();
        let response = match response {
            Err(e) => {
                let written_at = written_at.or_else(|| written.try_recv().ok().flatten());
                let resend = match body.as_ref() {
                    Some(b) if super::unsent::never_read(&e, written_at, idempotent) => b.clone(),
                    _ => return Err(Failure::Upstream(e)),
                };
                // A pooled connection the upstream had closed: send it once more, on a new one.
                tracing::debug!(error = %Chain(&e), "the upstream closed a pooled connection under a request; sending it again");
                counters.resent.inc();
                let again = self.fresh.request(upstream.request(resend, to).0);
                match tokio::time::timeout_at(head_deadline.deadline(), again).await {
                    Ok(r) => r.map_err(Failure::Upstream)?,
                    Err(_) => {
                        counters.upstream_errors.inc();
                        return Err(Failure::HeadTimeout);
                    }
                }
            }
            Ok(r) => r,
        };
        super::unsent::note_answer(&response);
        // The head is in: the release slot goes to the next request.
        drop(slot);
        let (mut parts, incoming) = response.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        strip_own_headers(&mut parts.headers);
        let body = super::pump::carry(
            incoming,
            guard,
            self.limits.upstream_idle,
            self.limits.client_stall,
        );
        Ok(Response::from_parts(parts, body))
    }
}

/// Why a forward brought no answer.
#[derive(Debug)]
enum Failure {
    /// The upstream connection failed.
    Upstream(hyper_util::client::legacy::Error),
    /// No response head within `upstream_head_timeout`.
    HeadTimeout,
    /// The body was given back (written, past the time it could be sent again): never the
    /// case at a send, which only a request still holding its body makes.
    BodyGone,
}

/// The least time between two released requests' sends (unless the first one's answer came
/// sooner): a thread-per-connection server (llama.cpp's) wakes each connection's thread in its
/// own time, and two requests written microseconds apart could be read in either order.
pub const RELEASE_SPACING: Duration = Duration::from_millis(5);

/// A request with this header is answered by the activator itself (204, with
/// [`ACTIVATOR_HEADER`]), never forwarded: how `serve` sees, through a model's Service, that the
/// activator is in its path before it lets the last replica go.
pub const PROBE_HEADER: &str = "x-infscale-probe";

/// The header on the activator's answer to a probe.
pub const ACTIVATOR_HEADER: &str = "x-infscale-activator";

/// On the answer to a probe that names a model the port places: the key `/queue` counts the
/// model's requests under, which `serve` checks against the key it reads (`activatorHost`).
pub const COUNTS_HEADER: &str = "x-infscale-counts";

/// On a probe, the model `serve` expects the probed port to hold (`NAMESPACE/SERVICE`): before
/// it sends a Service to an activator pod at a port, `serve` asks that pod, at that port,
/// whether the port is that model's.
pub const MODEL_HEADER: &str = "x-infscale-model";

/// The activator's answer to a probe. Without [`MODEL_HEADER`]: 204 (`serve` probing through
/// a Service sees the activator there). With it: 204 naming the model when this port places
/// it (a model's port holding that model, or the shared port with a route for it); 409 naming
/// the port's owner when the port is another model's (the asker moves to another port); 404
/// saying what the activator serves when it has no route for the model at all.
fn probe_answer<B>(
    req: &Request<B>,
    table: &Table,
    model_port: Option<u16>,
    by_port: Option<&Arc<RouteState>>,
) -> Response<ProxyBody> {
    let placed = by_port.and_then(|s| s.route.model.clone());
    let asked = req
        .headers()
        .get(MODEL_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once('/'))
        .map(|(namespace, service)| Model {
            namespace: namespace.to_owned(),
            service: service.to_owned(),
        });
    let (status, body) = match (&asked, &placed) {
        (None, _) => (StatusCode::NO_CONTENT, None),
        (Some(a), Some(p)) if a == p => (StatusCode::NO_CONTENT, None),
        (Some(a), None) if model_port.is_none() && table.serves(a) => {
            (StatusCode::NO_CONTENT, None)
        }
        (Some(a), Some(p)) => (
            StatusCode::CONFLICT,
            Some(serde_json::json!({
                "error": format!("port {} places {p}, not {a}", model_port.unwrap_or(0)),
                "status": 409,
            })),
        ),
        (Some(a), None) => (
            StatusCode::NOT_FOUND,
            Some(serde_json::json!({
                "error": match model_port {
                    Some(port) => format!("port {port} places no model; {a} is {}", match table.port_of(a) {
                        Some(p) => format!("at port {p}"),
                        None if table.serves(a) => "placed by its names".to_owned(),
                        None => "not routed here".to_owned(),
                    }),
                    None => format!("no route for {a}"),
                },
                "status": 404,
                "serves": table.hosts(),
            })),
        ),
    };
    let mut r = Response::new(full(body.map(|b| b.to_string()).unwrap_or_default()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(ACTIVATOR_HEADER, HeaderValue::from_static("1"));
    let named = placed.or_else(|| asked.filter(|a| model_port.is_none() && table.serves(a)));
    if let Some(m) = &named {
        if let Ok(v) = HeaderValue::from_str(&m.to_string()) {
            h.insert(MODEL_HEADER, v);
        }
        let counts = by_port.map(|s| s.route.counts_host.clone()).or_else(|| {
            table
                .routes
                .iter()
                .find(|s| s.route.model.as_ref() == Some(m))
                .map(|s| s.route.counts_host.clone())
        });
        if let Some(v) = counts.and_then(|c| HeaderValue::from_str(&c).ok()) {
            h.insert(COUNTS_HEADER, v);
        }
    }
    if status != StatusCode::NO_CONTENT {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    r
}

/// At most one log line per [`Throttle::EVERY`], with how many were left out since.
#[derive(Default)]
pub struct Throttle {
    /// When the last line was let through, in milliseconds since the process started.
    last_ms: std::sync::atomic::AtomicU64,
    suppressed: std::sync::atomic::AtomicU64,
    started: std::sync::OnceLock<Instant>,
}

impl Throttle {
    const EVERY: Duration = Duration::from_secs(10);

    /// `Some(left out since the last line)` when a line may be written now.
    pub fn allow(&self) -> Option<u64> {
        let started = *self.started.get_or_init(Instant::now);
        // +1 so the very first call (at 0 ms) is let through.
        self.allow_at(started.elapsed().as_millis() as u64 + 1)
    }

    /// [`Throttle::allow`] at `now_ms` (above 0) on the throttle's own clock.
    fn allow_at(&self, now_ms: u64) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        let last = self.last_ms.load(Relaxed);
        let due = last == 0 || now_ms.saturating_sub(last) >= Self::EVERY.as_millis() as u64;
        if due
            && self
                .last_ms
                .compare_exchange(last, now_ms, Relaxed, Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Relaxed));
        }
        self.suppressed.fetch_add(1, Relaxed);
        None
    }
}

/// An error with every cause it wraps, for a log line that says why (hyper's own text is only
/// the outermost: "client error (SendRequest)").
struct Chain<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// Copies a held request's head out of the connection's read buffer. hyper's header values and
/// URI are slices of that buffer, so while they live it cannot be reused and the connection reads
/// into a second one: two buffers per held request instead of one (see
/// scripts/profile-activator.sh, part 3).
fn detach(parts: &mut http::request::Parts) {
    let mut headers = HeaderMap::with_capacity(parts.headers.len());
    for (name, value) in parts.headers.iter() {
        let copy = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
        headers.append(name.clone(), copy);
    }
    parts.headers = headers;
    if let Ok(uri) = parts.uri.to_string().parse() {
        parts.uri = uri;
    }
}

/// The request as it goes upstream, built once however often it is sent (taking the client's
/// method and headers).
struct Upstream {
    method: http::Method,
    uri: http::Uri,
    headers: HeaderMap,
}

impl Upstream {
    /// The request to send with `body` (to endpoint `to`, where given, in place of the
    /// route's upstream), and the signal that it is in the socket.
    fn request(
        &self,
        body: Bytes,
        to: Option<&http::uri::Authority>,
    ) -> (
        Request<UpstreamBody>,
        tokio::sync::oneshot::Receiver<Option<Instant>>,
    ) {
        let (written_tx, written) = tokio::sync::oneshot::channel();
        let mut request = Request::new(UpstreamBody {
            inner: Full::new(body),
            written: Some(written_tx),
        });
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = match to {
            Some(to) => {
                let mut parts = self.uri.clone().into_parts();
                parts.authority = Some(to.clone());
                http::Uri::from_parts(parts).unwrap_or_else(|_| self.uri.clone())
            }
            None => self.uri.clone(),
        };
        *request.headers_mut() = self.headers.clone();
        (request, written)
    }

    fn new(route: &Route, parts: &mut http::request::Parts, peer: SocketAddr) -> Upstream {
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(http::uri::Scheme::HTTP);
        uri.authority = Some(route.upstream_authority.clone());
        uri.path_and_query = Some(
            parts
                .uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
        );
        // Scheme, authority and path are all present: this cannot fail.
        let uri = http::Uri::from_parts(uri).unwrap_or_default();
        let mut headers = std::mem::take(&mut parts.headers);
        strip_hop_by_hop(&mut headers);
        let original_host = headers.insert(header::HOST, route.host_header.clone());
        if let Some(h) = original_host {
            headers.insert("x-forwarded-host", h);
        }
        let forwarded_for = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prior) => format!("{prior}, {}", peer.ip()),
            None => peer.ip().to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&forwarded_for) {
            headers.insert("x-forwarded-for", v);
        }
        headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
        let hops = hops_of(&headers).saturating_add(1);
        headers.insert(HOPS_HEADER, HeaderValue::from(hops));
        Upstream {
            method: std::mem::take(&mut parts.method),
            uri,
            headers,
        }
    }
}

/// What the proxy makes of a request head before any I/O: the route it takes, whether it asks
/// for a streamed answer, and the head it is forwarded with.
#[derive(Debug)]
pub struct HeadDecision {
    pub route: Option<usize>,
    pub streams: bool,
    /// Method, URI and headers as sent upstream, when a route matched.
    pub upstream: Option<(http::Method, http::Uri, HeaderMap)>,
}

/// The pure part of [`Proxy::handle`] for one request head and body: every call it makes on
/// them without I/O (route, stream check, detach, upstream head), each made here unconditionally
/// where `handle` makes some only for a held request; public for the fuzz targets
/// (`crate::fuzzing`).
pub fn decide_head(
    routes: &[Route],
    mut parts: http::request::Parts,
    body: &[u8],
    peer: SocketAddr,
) -> HeadDecision {
    let route = super::routes::pick(routes, &parts.headers, &parts.uri);
    let streams = wants_stream(&parts.method, body);
    let upstream = route.and_then(|i| routes.get(i)).map(|route| {
        detach(&mut parts);
        let up = Upstream::new(route, &mut parts, peer);
        (up.method, up.uri, up.headers)
    });
    HeadDecision {
        route,
        streams,
        upstream,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("content-type", HeaderValue::from_static("application/json"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("content-type"));
    }

    #[test]
    fn unplaced_requests_are_logged_once_per_span_with_the_count_left_out() {
        let t = Throttle::default();
        assert_eq!(t.allow_at(1), Some(0), "the first is logged");
        assert_eq!(t.allow_at(5), None);
        assert_eq!(t.allow_at(9_000), None);
        assert_eq!(
            t.allow_at(10_001),
            Some(2),
            "a span later, with the two left out"
        );
        assert_eq!(t.allow_at(10_002), None);
    }

    #[test]
    fn answers_are_json_with_retry_after() {
        let r = answer(StatusCode::GATEWAY_TIMEOUT, "late", Some(300));
        assert_eq!(r.status(), 504);
        assert_eq!(r.headers()[header::RETRY_AFTER], "300");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
    }
}
