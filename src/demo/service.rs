//! The demo's Service: what a Kubernetes Service and a least-request load balancer do in front of
//! a Deployment's Ready pods.
//!
//! The activator forwards to one upstream; in a cluster that is the model's Service, which
//! spreads requests over the Ready pods. Here it is this small proxy: each request goes to the
//! ready backend with the fewest requests outstanding (counted until its response body ends),
//! `/health` answers 200 while any backend is ready and 503 while none is, and a backend taken
//! out of the set (a pod draining) gets no new requests while the ones it holds finish. With no
//! backend at all the Service refuses connections, as kube-proxy does for a Service without
//! endpoints: it stops listening and closes its idle keep-alive connections, so the activator
//! sees a refused connection and holds, and it listens again on the same address once a backend
//! is ready.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

/// One pod's address and the requests it holds through the Service.
#[derive(Debug)]
pub struct Backend {
    pub addr: SocketAddr,
    pub outstanding: AtomicUsize,
}

impl Backend {
    pub fn new(addr: SocketAddr) -> Arc<Backend> {
        Arc::new(Backend {
            addr,
            outstanding: AtomicUsize::new(0),
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
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            ready: RwLock::new(Vec::new()),
            count: tokio::sync::watch::channel(0).0,
            fail_every: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
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
            v.push(b);
            self.count.send_replace(v.len());
        }
    }

    pub fn remove(&self, addr: SocketAddr) {
        if let Ok(mut v) = self.ready.write() {
            v.retain(|b| b.addr != addr);
            self.count.send_replace(v.len());
        }
    }

    pub fn len(&self) -> usize {
        self.ready.read().map_or(0, |v| v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ready backend with the fewest outstanding requests, counted from now on.
    fn pick(&self) -> Option<Arc<Backend>> {
        let v = self.ready.read().ok()?;
        let b = v.iter().min_by_key(|b| b.outstanding())?.clone();
        b.outstanding.fetch_add(1, Ordering::Relaxed);
        Some(b)
    }
}

type Out = BoxBody<Bytes, hyper::Error>;

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
    for attempt in 0..2 {
        let Some(backend) = endpoints.pick() else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "no ready replica\n");
        };
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

/// Serves the Service at `addr` until the task is aborted: listening while any backend is
/// ready, refusing (not listening, idle connections closed) while none is.
pub async fn serve(addr: SocketAddr, endpoints: Arc<Endpoints>) {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(connector);
    let mut count = endpoints.count.subscribe();
    loop {
        // Not listening: connections are refused until a backend is ready.
        if !until(&mut count, |n| *n > 0).await {
            return;
        }
        let Ok(listener) = tokio::net::TcpListener::bind(addr).await else {
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
