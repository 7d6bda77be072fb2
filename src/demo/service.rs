//! The demo's Service: what a Kubernetes Service and a least-request load balancer do in front of
//! a Deployment's Ready pods, and, in serve mode, of the activator while it is in the path.
//!
//! In serve mode the clients call this Service, and `serve` adds the activator to its backends
//! ([`DemoPaths`], what an EndpointSlice does in a cluster) while no replica is Ready, requests
//! are held, or the target is idle; the activator reads the replicas' addresses (never its own)
//! and sends to them directly. The Service counts where it sent each client request.
//!
//! The activator forwards to one upstream; in a cluster that is the model's Service, which
//! spreads requests over the Ready pods. Here it is this small proxy: each request goes to the
//! ready backend with the fewest requests outstanding (counted until its response body ends),
//! `/health` answers 200 while any backend is ready and 503 while none is, and a backend taken
//! out of the set (a pod draining) gets no new requests while the ones it holds finish. With no
//! backend at all the Service refuses connections, as kube-proxy does for a Service without
//! endpoints: it stops listening and closes its idle keep-alive connections, so the activator
//! sees a refused connection and holds, and it listens again on the same address once a backend
//! is ready. The address stays the Service's while it is not listening: a socket bound to it with
//! `SO_REUSEPORT` and never listening ([`Address`]) keeps anything else on the machine (another
//! demo's `:0` bind) from being given the port in between.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

/// One pod's address (or the activator's, in serve mode) and the requests it holds through the
/// Service.
#[derive(Debug)]
pub struct Backend {
    pub addr: SocketAddr,
    pub outstanding: AtomicUsize,
    /// The activator, put in the Service's path by serve mode: not a replica.
    pub activator: bool,
}

impl Backend {
    pub fn new(addr: SocketAddr) -> Arc<Backend> {
        Arc::new(Backend {
            addr,
            outstanding: AtomicUsize::new(0),
            activator: false,
        })
    }

    /// The activator as a backend of the Service.
    pub fn activator(addr: SocketAddr) -> Arc<Backend> {
        Arc::new(Backend {
            addr,
            outstanding: AtomicUsize::new(0),
            activator: true,
        })
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }
}

/// The Ready backends, as the endpoints of a Service, and a signal of how many there are.
#[derive(Debug)]
pub struct Endpoints {
    ready: RwLock<Vec<Arc<Backend>>>,
    count: tokio::sync::watch::Sender<usize>,
    /// A fault for tests: every this many requests is answered 500 (0: none).
    fail_every: AtomicUsize,
    requests: AtomicUsize,
    /// The replicas' addresses (the activator left out), as the activator reads a Service's
    /// EndpointSlices.
    pods: tokio::sync::watch::Sender<Vec<http::uri::Authority>>,
    /// Requests the Service sent to a replica, and to the activator.
    pub to_pods: AtomicUsize,
    pub to_activator: AtomicUsize,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            ready: RwLock::new(Vec::new()),
            count: tokio::sync::watch::channel(0).0,
            fail_every: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            pods: tokio::sync::watch::channel(Vec::new()).0,
            to_pods: AtomicUsize::new(0),
            to_activator: AtomicUsize::new(0),
        }
    }
}

impl Endpoints {
    /// Answers every `n`th request 500 from now on (0: none), a loss the demo must report.
    pub fn fail_every(&self, n: usize) {
        self.fail_every.store(n, Ordering::Relaxed);
    }

    /// Whether the request now arriving is one to fail.
    fn fails(&self) -> bool {
        let every = self.fail_every.load(Ordering::Relaxed);
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        every > 0 && n % every == every - 1
    }

    pub fn add(&self, b: Arc<Backend>) {
        if let Ok(mut v) = self.ready.write() {
            if !v.iter().any(|x| x.addr == b.addr) {
                v.push(b);
            }
            self.changed(&v);
        }
    }

    pub fn remove(&self, addr: SocketAddr) {
        if let Ok(mut v) = self.ready.write() {
            v.retain(|b| b.addr != addr);
            self.changed(&v);
        }
    }

    fn changed(&self, v: &[Arc<Backend>]) {
        self.count.send_replace(v.len());
        let pods: Vec<http::uri::Authority> = v
            .iter()
            .filter(|b| !b.activator)
            .filter_map(|b| b.addr.to_string().parse().ok())
            .collect();
        self.pods.send_if_modified(|now| {
            let differs = *now != pods;
            *now = pods.clone();
            differs
        });
    }

    /// The replicas' addresses as they change (the activator's serve-mode route reads them).
    pub fn pods(&self) -> tokio::sync::watch::Receiver<Vec<http::uri::Authority>> {
        self.pods.subscribe()
    }

    /// Backends in the Service, the activator included.
    pub fn len(&self) -> usize {
        self.ready.read().map_or(0, |v| v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ready replicas in the Service (the activator left out).
    pub fn replicas(&self) -> usize {
        self.ready
            .read()
            .map_or(0, |v| v.iter().filter(|b| !b.activator).count())
    }

    /// The ready backend with the fewest outstanding requests, counted from now on; ties go
    /// by turns, so every backend gets some (a probe meant for the activator reaches it).
    fn pick(&self) -> Option<Arc<Backend>> {
        let v = self.ready.read().ok()?;
        if v.is_empty() {
            return None;
        }
        let start = self.requests.load(Ordering::Relaxed) % v.len();
        let b = v
            .iter()
            .cycle()
            .skip(start)
            .take(v.len())
            .min_by_key(|b| b.outstanding())?
            .clone();
        b.outstanding.fetch_add(1, Ordering::Relaxed);
        Some(b)
    }

    /// Counts a client request by where the Service sent it.
    fn routed(&self, b: &Backend) {
        let to = if b.activator {
            &self.to_activator
        } else {
            &self.to_pods
        };
        to.fetch_add(1, Ordering::Relaxed);
    }
}

type Out = BoxBody<Bytes, hyper::Error>;

/// How long the Service keeps an idle connection to a pod: under the emulated server's head
/// timeout ([`crate::emulate::Limits`]' 10 s), as the activator's pool is under a model server's.
const POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(4);

/// The largest request body the Service forwards.
const MAX_BODY: usize = 8 << 20;

/// A response body that gives its request back to the backend's count when it ends or drops.
struct Tracked {
    inner: Incoming,
    backend: Arc<Backend>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.backend.outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Out> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(text.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r
}

async fn handle(
    req: Request<Incoming>,
    endpoints: Arc<Endpoints>,
    client: Client<HttpConnector, Full<Bytes>>,
) -> Response<Out> {
    if req.uri().path() == "/health" {
        return if endpoints.is_empty() {
            plain(StatusCode::SERVICE_UNAVAILABLE, "no ready replica\n")
        } else {
            plain(StatusCode::OK, "ok\n")
        };
    }
    if endpoints.fails() {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "injected fault\n");
    }
    let (parts, body) = req.into_parts();
    // Requests are small JSON: read whole, so one can be sent again when a pooled connection to a
    // pod turns out closed (a pod that stopped on the same slot).
    let Ok(body) = http_body_util::Limited::new(body, MAX_BODY).collect().await else {
        return plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large or cut\n",
        );
    };
    let body = body.to_bytes();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let probe = parts
        .headers
        .contains_key(crate::activator::proxy::PROBE_HEADER);
    for attempt in 0..2 {
        let Some(backend) = endpoints.pick() else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "no ready replica\n");
        };
        if attempt == 0 && !probe {
            endpoints.routed(&backend);
        }
        let Ok(uri) = format!("http://{}{path}", backend.addr).parse::<http::Uri>() else {
            backend.outstanding.fetch_sub(1, Ordering::Relaxed);
            return plain(StatusCode::BAD_REQUEST, "bad path\n");
        };
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = parts.method.clone();
        *req.uri_mut() = uri;
        *req.headers_mut() = parts.headers.clone();
        match client.request(req).await {
            Ok(resp) => return resp.map(|inner| Tracked { inner, backend }.boxed()),
            Err(_) if attempt == 0 => {
                backend.outstanding.fetch_sub(1, Ordering::Relaxed);
            }
            Err(_) => {
                backend.outstanding.fetch_sub(1, Ordering::Relaxed);
                break;
            }
        }
    }
    plain(StatusCode::BAD_GATEWAY, "the replica did not answer\n")
}

/// Waits until the watched value satisfies `f`; false when its sender is gone.
async fn until<T>(rx: &mut tokio::sync::watch::Receiver<T>, f: impl FnMut(&T) -> bool) -> bool {
    rx.wait_for(f).await.is_ok()
}

/// The Service's address, held for as long as this lives (bound, never listening).
pub struct Address {
    held: tokio::net::TcpSocket,
    addr: SocketAddr,
}

impl Address {
    /// A free port on 127.0.0.1, held.
    pub fn hold() -> std::io::Result<Address> {
        let held = shared_socket()?;
        held.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let addr = held.local_addr()?;
        Ok(Address { held, addr })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A listener on the held address.
    fn listen(&self) -> std::io::Result<tokio::net::TcpListener> {
        let socket = shared_socket()?;
        socket.bind(self.held.local_addr()?)?;
        socket.listen(1024)
    }
}

/// A socket that may share its port with the others of this Service (`SO_REUSEPORT`), and with
/// nothing else.
fn shared_socket() -> std::io::Result<tokio::net::TcpSocket> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseport(true)?;
    Ok(socket)
}

/// Serves the Service at `address` until the task is aborted: listening while any backend is
/// ready, refusing (not listening, idle connections closed) while none is.
pub async fn serve(address: Address, endpoints: Arc<Endpoints>) {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    // Idle pooled connections go on a timer, well before the emulated servers' head timer (10 s)
    // closes them: a request written on a connection the pod is closing that instant is cut,
    // and connections opened in one burst go idle, and are closed, together, so the retry below
    // could meet a second one.
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE)
        .build(connector);
    let mut count = endpoints.count.subscribe();
    loop {
        // Not listening: connections are refused until a backend is ready.
        if !until(&mut count, |n| *n > 0).await {
            return;
        }
        let Ok(listener) = address.listen() else {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            continue;
        };
        let (closing, _) = tokio::sync::watch::channel(false);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let (endpoints, client) = (endpoints.clone(), client.clone());
                    let mut closing = closing.subscribe();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| {
                            let (endpoints, client) = (endpoints.clone(), client.clone());
                            async move {
                                Ok::<_, std::convert::Infallible>(handle(req, endpoints, client).await)
                            }
                        });
                        let conn = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc);
                        tokio::pin!(conn);
                        tokio::select! {
                            _ = conn.as_mut() => {}
                            _ = until(&mut closing, |c| *c) => {
                                conn.as_mut().graceful_shutdown();
                                let _ = conn.await;
                            }
                        }
                    });
                }
                open = until(&mut count, |n| *n == 0) => {
                    if !open {
                        return;
                    }
                    closing.send_replace(true);
                    break;
                }
            }
        }
    }
}

/// Serve mode's writer for the demo: the activator in, or out of, this Service's backends.
pub struct DemoPaths {
    pub endpoints: Arc<Endpoints>,
    /// The activator's proxy address.
    pub activator: SocketAddr,
    /// This Service's address, where the activator is probed.
    pub service: SocketAddr,
}

impl crate::serve::path::PathWriter for DemoPaths {
    fn session(
        &self,
        _mode: &crate::serve::metadata::ServeMode,
        _activator: Option<crate::serve::activators::Members>,
    ) -> Box<dyn crate::serve::path::PathSession> {
        Box::new(DemoSession {
            endpoints: self.endpoints.clone(),
            activator: self.activator,
            service: self.service,
        })
    }
}

/// The demo's one writer of its one Service.
struct DemoSession {
    endpoints: Arc<Endpoints>,
    activator: SocketAddr,
    service: SocketAddr,
}

impl crate::serve::path::PathSession for DemoSession {
    fn write(
        &mut self,
        in_path: bool,
    ) -> futures::future::BoxFuture<
        '_,
        Result<crate::serve::path::Wrote, crate::serve::path::WriteError>,
    > {
        use crate::serve::path::Wrote;
        Box::pin(async move {
            if in_path {
                self.endpoints.add(Backend::activator(self.activator));
                Ok(Wrote::Done(Some(format!("http://{}", self.service))))
            } else {
                self.endpoints.remove(self.activator);
                Ok(Wrote::Done(None))
            }
        })
    }
}
