//! One model-server pod's process: an event loop as vLLM's is (one thread runs a runtime of its
//! own and reads every connection), serving the OpenAI completions and chat completions (each
//! holds one of `max_num_seqs` batch slots for a set time; past those it waits, as vLLM's
//! scheduler queues), `/health`, `/v1/models` and vLLM's `/metrics` page (requests running and
//! waiting, KV cache use, token and success counters). Every request is recorded in arrival
//! order, with what a test needs to tell how it came: the `x-seq` header, the `Host` (and an
//! h2 `:authority`), and whether the activator forwarded it (it adds `x-forwarded-for`;
//! kube-proxy only copies bytes). On stop it closes its listener and finishes what it holds,
//! as vLLM does with `--shutdown-timeout`.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// At most this many requests are kept in the record (of every pod together).
const SEEN_CAP: usize = 1_000_000;

/// How a model server behaves.
#[derive(Clone, Debug)]
pub struct ModelServer {
    /// How long a completion holds its batch slot.
    pub service_time: Duration,
    /// Batch slots (vLLM's `--max-num-seqs`): requests past these wait.
    pub max_num_seqs: usize,
    /// HTTP/1 only, as vLLM's uvicorn is; else h2 with prior knowledge is served too.
    pub http1_only: bool,
    /// How long a stopping server finishes what it holds before it drops it.
    pub shutdown_timeout: Duration,
}

impl Default for ModelServer {
    fn default() -> ModelServer {
        ModelServer {
            service_time: Duration::from_millis(50),
            max_num_seqs: 64,
            http1_only: false,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// One request as a pod received it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The pod's name.
    pub pod: String,
    pub method: String,
    pub path: String,
    /// `x-seq`, if the request carried a number there.
    pub seq: Option<u64>,
    /// The `Host` header, if any.
    pub host: Option<String>,
    /// The request target's authority (h2's `:authority`, or an absolute-form target).
    pub authority: Option<String>,
    /// `HTTP/1.0`, `HTTP/1.1` or `HTTP/2.0`.
    pub version: String,
    /// Whether it carried `x-forwarded-for`, as the activator adds and kube-proxy does not.
    pub via_activator: bool,
    pub at: Instant,
}

impl Seen {
    /// Whether it is a completion (`POST /v1/completions` or `/v1/chat/completions`).
    pub fn is_completion(&self) -> bool {
        self.method == "POST"
            && matches!(
                self.path.as_str(),
                "/v1/completions" | "/v1/chat/completions"
            )
    }

    /// The name the client used: the `Host` header, else the authority.
    pub fn name(&self) -> Option<&str> {
        self.host.as_deref().or(self.authority.as_deref())
    }
}

/// What the `/metrics` page counts.
#[derive(Default)]
struct Gauges {
    running: AtomicU64,
    waiting: AtomicU64,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    success: AtomicU64,
}

struct Pod {
    name: String,
    spec: ModelServer,
    seen: Arc<Mutex<Vec<Seen>>>,
    gauges: Gauges,
    slots: tokio::sync::Semaphore,
}

/// A running server: [`Running::stop`] ends it.
pub struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Running {
    /// Closes the listener, finishes the requests in hand (for up to the shutdown timeout),
    /// and returns once the server's thread is done.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(d) = self.done.take() {
            let _ = d.await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Starts pod `name`'s server on `addr`, on a thread of its own; returns once it listens, or
/// the bind's error.
pub async fn start(
    addr: SocketAddr,
    name: &str,
    spec: ModelServer,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> std::io::Result<Running> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
    let (bound_tx, bound) = tokio::sync::oneshot::channel::<std::io::Result<()>>();
    let pod = Arc::new(Pod {
        name: name.to_owned(),
        slots: tokio::sync::Semaphore::new(spec.max_num_seqs.max(1)),
        spec,
        seen,
        gauges: Gauges::default(),
    });
    std::thread::Builder::new()
        .name(format!("pod {name}"))
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a pod's runtime");
            rt.block_on(serve(addr, pod, stopped, bound_tx));
            drop(rt);
            let _ = done_tx.send(());
        })?;
    match bound.await {
        Ok(Ok(())) => Ok(Running {
            stop: Some(stop),
            done: Some(done),
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::other("the pod's thread ended")),
    }
}

async fn serve(
    addr: SocketAddr,
    pod: Arc<Pod>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
    bound: tokio::sync::oneshot::Sender<std::io::Result<()>>,
) {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            let _ = bound.send(Err(e));
            return;
        }
    };
    let _ = bound.send(Ok(()));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if pod.spec.http1_only {
        builder = builder.http1_only();
    }
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let pod = pod.clone();
                let service = hyper::service::service_fn(move |req| answer(pod.clone(), req));
                let conn = builder.serve_connection(TokioIo::new(stream), service).into_owned();
                tokio::spawn(graceful.watch(conn));
            }
            _ = &mut stopped => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(pod.spec.shutdown_timeout, graceful.shutdown()).await;
}

fn reply(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()))
        .expect("a response")
}

/// vLLM's page for what runs and waits now.
fn page(pod: &Pod) -> String {
    let g = &pod.gauges;
    let (running, waiting) = (
        g.running.load(Ordering::SeqCst),
        g.waiting.load(Ordering::SeqCst),
    );
    let kv = running as f64 / pod.spec.max_num_seqs.max(1) as f64;
    let l = "{engine=\"0\",model_name=\"m\"}";
    format!(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{l} {running}\n\
         # HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{l} {waiting}\n\
         # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n\
         # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{l} {kv}\n\
         # HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{l} {}\n\
         # HELP vllm:generation_tokens_total Number of generation tokens processed.\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{l} {}\n\
         # HELP vllm:request_success_total Count of successfully processed requests.\n\
         # TYPE vllm:request_success_total counter\n\
         vllm:request_success_total{{engine=\"0\",model_name=\"m\",finished_reason=\"length\"}} {}\n",
        g.prompt_tokens.load(Ordering::SeqCst),
        g.generation_tokens.load(Ordering::SeqCst),
        g.success.load(Ordering::SeqCst),
    )
}

async fn answer(
    pod: Arc<Pod>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let seen = Seen {
        pod: pod.name.clone(),
        method: req.method().to_string(),
        path: req.uri().path().to_owned(),
        seq: header("x-seq").and_then(|v| v.trim().parse().ok()),
        host: header("host"),
        authority: req.uri().authority().map(|a| a.to_string()),
        version: format!("{:?}", req.version()),
        via_activator: req.headers().contains_key("x-forwarded-for"),
        at: Instant::now(),
    };
    let completion = seen.is_completion();
    let (method, path) = (seen.method.clone(), seen.path.clone());
    {
        let mut all = pod.seen.lock().unwrap();
        if all.len() < SEEN_CAP {
            all.push(seen);
        }
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(reply(400, "text/plain", "unreadable body\n")),
    };
    Ok(match (method.as_str(), path.as_str()) {
        _ if completion => complete(&pod, &path, &body).await,
        ("GET", "/health") => reply(200, "text/plain", ""),
        ("GET", "/metrics") => reply(200, "text/plain; version=0.0.4", page(&pod)),
        ("GET", "/v1/models") => reply(
            200,
            "application/json",
            r#"{"object":"list","data":[{"id":"m","object":"model","owned_by":"vllm"}]}"#,
        ),
        _ => reply(404, "application/json", r#"{"detail":"Not Found"}"#),
    })
}

/// One completion: waits for a batch slot, holds it for the service time, answers as OpenAI's
/// API does.
async fn complete(pod: &Pod, path: &str, body: &[u8]) -> Response<Full<Bytes>> {
    let g = &pod.gauges;
    g.waiting.fetch_add(1, Ordering::SeqCst);
    let permit = pod.slots.acquire().await;
    g.waiting.fetch_sub(1, Ordering::SeqCst);
    g.running.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(pod.spec.service_time).await;
    g.running.fetch_sub(1, Ordering::SeqCst);
    drop(permit);
    let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let prompt = (body.len() as u64 / 4).max(1);
    let generated = request["max_tokens"].as_u64().unwrap_or(16);
    g.prompt_tokens.fetch_add(prompt, Ordering::SeqCst);
    g.generation_tokens.fetch_add(generated, Ordering::SeqCst);
    g.success.fetch_add(1, Ordering::SeqCst);
    let usage = serde_json::json!({"prompt_tokens": prompt, "completion_tokens": generated,
        "total_tokens": prompt + generated});
    let answer = if path == "/v1/chat/completions" {
        serde_json::json!({"id": format!("chatcmpl-{}", pod.name), "object": "chat.completion",
            "model": "m", "choices": [{"index": 0, "finish_reason": "length",
            "message": {"role": "assistant", "content": "ok"}}], "usage": usage})
    } else {
        serde_json::json!({"id": format!("cmpl-{}", pod.name), "object": "text_completion",
            "model": "m", "choices": [{"index": 0, "text": "ok", "finish_reason": "length"}],
            "usage": usage})
    };
    reply(200, "application/json", answer.to_string())
}
