//! An upstream that flaps (its listener and every connection killed, then bound again on the
//! same loopback address), a paced client that sends each request with a unique id, the real
//! `infscale activator` process in front, and the verdict over what the client and the upstream
//! each saw. Used by tests/upstream_churn.rs and tests/sigterm.rs, and by the 10,000-request soak
//! (benches/soak_activator.rs includes this file and `loopback.rs` by path).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::loopback::accept_tokio;

/// How the stand-in model server behaves.
#[derive(Clone, Copy)]
pub struct UpstreamOpts {
    /// An idle keep-alive connection is closed after this long (uvicorn, which vLLM runs on,
    /// and llama.cpp's server both default to 5 s).
    pub keep_alive: Duration,
    /// A request that arrives on a connection idle for more than `keep_alive - crossing` is
    /// dropped unanswered: the server's close was already on its way when the request left
    /// (a round trip of `crossing`). Zero: no crossing.
    pub crossing: Duration,
    /// At most this long is spent on each request before answering, at least half of it
    /// (spread over request ids, ms).
    pub work_ms: u64,
    /// Closes each connection this long after answering on it, while having advertised
    /// keep-alive (llama-server does so after every streamed response): a request sent on it
    /// in the meantime is never read. None: keep-alive as advertised.
    pub close_after: Option<Duration>,
}

impl Default for UpstreamOpts {
    fn default() -> Self {
        UpstreamOpts {
            keep_alive: Duration::from_secs(5),
            crossing: Duration::ZERO,
            work_ms: 5,
            close_after: None,
        }
    }
}

/// What the upstream saw.
#[derive(Default)]
pub struct Seen {
    /// Request id -> how many times it arrived.
    pub ids: Mutex<HashMap<u64, u32>>,
    /// Request id -> how many times it was answered (the answer written whole); an arrival
    /// not answered died with the upstream.
    pub answered: Mutex<HashMap<u64, u32>>,
    /// Requests whose body did not carry their header's id.
    pub mismatched: AtomicU64,
    /// Requests dropped by the keep-alive crossing.
    pub crossed: AtomicU64,
    /// Requests that arrived on a reused connection.
    pub reused: AtomicU64,
}

/// The stand-in model server: `/health` 200 while up, `/metrics` [`PAGE`]; `POST /v1/completions` with header
/// `x-request-id: N` and body `{"id":N}` answers `ok {"id":N}`.
pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    opts: UpstreamOpts,
    running: Mutex<Option<JoinHandle<()>>>,
    /// How many times it went down.
    pub downs: AtomicU64,
}

impl Upstream {
    /// Starts on `ip` (a loopback address) on a port picked now.
    pub async fn start(ip: &str, opts: UpstreamOpts) -> Arc<Upstream> {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind loopback");
        let addr = listener.local_addr().expect("addr");
        let up = Arc::new(Upstream {
            addr,
            seen: Arc::new(Seen::default()),
            opts,
            running: Mutex::new(None),
            downs: AtomicU64::new(0),
        });
        up.serve(listener);
        up
    }

    fn serve(&self, listener: TcpListener) {
        let seen = self.seen.clone();
        let opts = self.opts;
        // Aborting the task drops every connection, as a killed process would.
        let task = accept_tokio(listener, move |s| connection(s, seen.clone(), opts));
        *self.running.lock().unwrap() = Some(task);
    }

    /// Kills the listener and every open connection.
    pub async fn down(&self) {
        let task = self.running.lock().unwrap().take();
        if let Some(t) = task {
            t.abort();
            let _ = t.await;
            self.downs.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Binds the same address again.
    pub async fn up(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "cannot bind {} again: {e}",
                        self.addr
                    );
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        self.serve(listener);
    }

    /// How many times request `id` arrived.
    pub fn count(&self, id: u64) -> u32 {
        self.seen.ids.lock().unwrap().get(&id).copied().unwrap_or(0)
    }
}

/// Up for `up[i]`, down for `down[i]`, cycling, until `until`; ends up.
pub fn flap(
    upstream: Arc<Upstream>,
    up: &'static [u64],
    down: &'static [u64],
    until: Instant,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut i = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(up[i % up.len()])).await;
            if Instant::now() >= until {
                return;
            }
            upstream.down().await;
            tokio::time::sleep(Duration::from_millis(down[i % down.len()])).await;
            upstream.up().await;
            i += 1;
        }
    })
}

/// The `/metrics` page: three requests running, none waiting.
pub const PAGE: &[u8] = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 0\n";

fn find(buf: &[u8], what: &[u8]) -> Option<usize> {
    buf.windows(what.len()).position(|w| w == what)
}

async fn connection(mut s: TcpStream, seen: Arc<Seen>, opts: UpstreamOpts) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut idle_since: Option<Instant> = None;
    loop {
        // A request head; an idle connection closes after `keep_alive`.
        let mut idle_for = Duration::ZERO;
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break p + 4;
            }
            let wait = match (buf.is_empty(), idle_since) {
                (true, Some(since)) => opts.keep_alive.saturating_sub(since.elapsed()),
                _ => Duration::from_secs(10),
            };
            match tokio::time::timeout(wait, s.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => {
                    if buf.is_empty() {
                        idle_for = idle_since.map_or(Duration::ZERO, |t| t.elapsed());
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                _ => return,
            }
        };
        if idle_since.is_some() {
            seen.reused.fetch_add(1, Ordering::Relaxed);
            if !opts.crossing.is_zero() && idle_for + opts.crossing > opts.keep_alive {
                seen.crossed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let header = |name: &str| {
            head.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == name)
                .map(|(_, v)| v.trim().to_owned())
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            match tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        }
        let body: Vec<u8> = buf[head_end..head_end + length].to_vec();
        let mut answering = None;
        buf.drain(..head_end + length);
        let target = head.split(' ').nth(1).unwrap_or("").to_owned();
        let (status, reply) = if target == "/health" {
            (200, b"ok".to_vec())
        } else if target == "/metrics" {
            (200, PAGE.to_vec())
        } else if let Some(id) = header("x-request-id").and_then(|v| v.parse::<u64>().ok()) {
            *seen.ids.lock().unwrap().entry(id).or_insert(0) += 1;
            answering = Some(id);
            if body != format!("{{\"id\":{id}}}").as_bytes() {
                seen.mismatched.fetch_add(1, Ordering::Relaxed);
            }
            if opts.work_ms > 0 {
                let half = opts.work_ms / 2;
                let ms = half + (id * 97) % (opts.work_ms - half + 1);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let mut reply = b"ok ".to_vec();
            reply.extend_from_slice(&body);
            (200, reply)
        } else {
            (404, b"no id".to_vec())
        };
        let mut out = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        )
        .into_bytes();
        out.extend_from_slice(&reply);
        if s.write_all(&out).await.is_err() {
            return;
        }
        if let Some(id) = answering {
            *seen.answered.lock().unwrap().entry(id).or_insert(0) += 1;
        }
        if let Some(after) = opts.close_after {
            tokio::time::sleep(after).await;
            // Peeked, not read: a server that closes after its answer never reads the next
            // request, so its kernel answers those bytes with a reset.
            let waiting = tokio::time::timeout(Duration::ZERO, s.peek(&mut chunk)).await;
            if !buf.is_empty() || matches!(waiting, Ok(Ok(n)) if n > 0) {
                seen.crossed.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        idle_since = Some(Instant::now());
    }
}

/// The real activator as a process, killed when dropped.
pub struct ActivatorProcess {
    pub child: Child,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
}

impl Drop for ActivatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// `infscale activator` (the binary at `exe`) in front of `upstream`, probing `/health`, with
/// `extra` flags; returns once its admin `/healthz` answers.
pub async fn start_activator(exe: &str, upstream: SocketAddr, extra: &[&str]) -> ActivatorProcess {
    let mut args: Vec<String> = [
        "--upstream",
        &format!("http://{upstream}"),
        "--health-path",
        "/health",
        "--host",
        "chat",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    activator_process(exe, &args).await
}

/// `infscale activator` with these flags (listen addresses added), once `/healthz` answers.
pub async fn activator_process(exe: &str, args: &[String]) -> ActivatorProcess {
    let (listen, admin) = (free_port(), free_port());
    let child = Command::new(exe)
        .arg("activator")
        .args(args)
        .args([
            "--listen",
            &format!("127.0.0.1:{listen}"),
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(match std::env::var_os("INFSCALE_TEST_ACTIVATOR_LOG") {
            Some(path) => std::fs::File::create(path).map_or(Stdio::null(), Stdio::from),
            None => Stdio::null(),
        })
        .spawn()
        .expect("start infscale activator");
    let a = ActivatorProcess {
        child,
        proxy: ([127, 0, 0, 1], listen).into(),
        admin: ([127, 0, 0, 1], admin).into(),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("http://{}/healthz", a.admin))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the activator did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a
}

/// What the client got for one request.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// An HTTP answer: status and body.
    Answer(u16, String),
    /// No answer (connection cut, reset, or the client's own timeout).
    Lost(String),
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(90))
        // Well under the activator's 20 s keep-alive limit.
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .expect("client")
}

/// Sends one request with id `id` to the activator at `proxy`.
pub async fn send(c: &reqwest::Client, proxy: SocketAddr, id: u64) -> Outcome {
    send_to(c, &format!("http://{proxy}/v1/completions"), id).await
}

/// Sends one request with id `id` to `url`.
pub async fn send_to(c: &reqwest::Client, url: &str, id: u64) -> Outcome {
    let r = c
        .post(url)
        .header("x-request-id", id.to_string())
        .header("content-type", "application/json")
        .body(format!("{{\"id\":{id}}}"))
        .send()
        .await;
    match r {
        Ok(r) => {
            let status = r.status().as_u16();
            match r.text().await {
                Ok(body) => Outcome::Answer(status, body),
                Err(e) => Outcome::Lost(format!("{status}, then the body failed: {e}")),
            }
        }
        Err(e) => Outcome::Lost(format!("{e:?}")),
    }
}

/// Sends ids `0..count` at `per_second`, each on its own task; returns every outcome by id.
pub async fn drive(proxy: SocketAddr, count: u64, per_second: f64) -> Vec<Outcome> {
    let c = client();
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(count as usize);
    for id in 0..count {
        let at = t0 + Duration::from_secs_f64(id as f64 / per_second);
        tokio::time::sleep_until(at.into()).await;
        let c = c.clone();
        tasks.push(tokio::spawn(async move { send(&c, proxy, id).await }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(
            t.await
                .unwrap_or_else(|e| Outcome::Lost(format!("task: {e}"))),
        );
    }
    out
}

/// The verdict over one run.
#[derive(Debug, Default)]
pub struct Verdict {
    pub sent: usize,
    /// 200 with the right body, and the upstream saw the id exactly once.
    pub forwarded_once: usize,
    /// Explicit activator errors by status (a JSON body naming the reason).
    pub explicit: BTreeMap<u16, usize>,
    /// Of the explicit 502s, how many the upstream had received (cut mid-request).
    pub explicit_seen_upstream: usize,
    /// The first reason of each explicit status.
    pub reasons: BTreeMap<u16, String>,
    /// No answer at all.
    pub lost: Vec<(u64, String)>,
    /// Ids the upstream answered more than once.
    pub duplicated: Vec<(u64, u32)>,
    /// Ids answered 200 that had also reached an upstream which died before answering them
    /// (sent again on a new connection).
    pub resent_after_cut: usize,
    /// Answers that are neither: wrong body, an unexpected status, 200 without the upstream
    /// having seen it, an error answer the upstream did see but should not have.
    pub wrong: Vec<(u64, String)>,
    /// Bodies the upstream received that did not match their id.
    pub mismatched_at_upstream: u64,
}

impl Verdict {
    pub fn of(outcomes: &[Outcome], upstream: &Upstream) -> Verdict {
        let mut v = Verdict {
            sent: outcomes.len(),
            mismatched_at_upstream: upstream.seen.mismatched.load(Ordering::Relaxed),
            ..Verdict::default()
        };
        let ids = upstream.seen.ids.lock().unwrap().clone();
        let answered = upstream.seen.answered.lock().unwrap().clone();
        for (&id, &n) in &answered {
            if n > 1 {
                v.duplicated.push((id, n));
            }
        }
        for &id in ids.keys() {
            if id >= outcomes.len() as u64 {
                v.wrong
                    .push((id, "the upstream saw an id never sent".into()));
            }
        }
        v.duplicated.sort();
        for (id, o) in outcomes.iter().enumerate() {
            let id = id as u64;
            let seen = ids.get(&id).copied().unwrap_or(0);
            let done = answered.get(&id).copied().unwrap_or(0);
            match o {
                Outcome::Lost(why) => v.lost.push((id, why.clone())),
                Outcome::Answer(200, body) => {
                    if *body == format!("ok {{\"id\":{id}}}") && done == 1 {
                        v.forwarded_once += 1;
                        if seen > 1 {
                            v.resent_after_cut += 1;
                        }
                    } else {
                        v.wrong
                            .push((id, format!("200 {body:?}, upstream saw it {seen}x")));
                    }
                }
                Outcome::Answer(status @ 502..=504, body) => {
                    let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
                    let reason = json["error"].as_str().unwrap_or("");
                    let explicit = !reason.is_empty() && json["status"] == *status;
                    // Only a 502 may follow a request the upstream received (it was cut there),
                    // and none may follow one it answered.
                    let seen_ok = done == 0 && (seen == 0 || *status == 502);
                    if explicit && seen_ok {
                        *v.explicit.entry(*status).or_insert(0) += 1;
                        v.reasons
                            .entry(*status)
                            .or_insert_with(|| reason.to_owned());
                        if seen > 0 {
                            v.explicit_seen_upstream += 1;
                        }
                    } else {
                        v.wrong
                            .push((id, format!("{status} {body:?}, upstream saw it {seen}x")));
                    }
                }
                Outcome::Answer(status, body) => v
                    .wrong
                    .push((id, format!("{status} {body:?}, upstream saw it {seen}x"))),
            }
        }
        v
    }

    /// None lost, none duplicated, none wrong.
    pub fn clean(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.wrong.is_empty()
            && self.mismatched_at_upstream == 0
    }

    pub fn summary(&self) -> String {
        let first = |v: &[(u64, String)]| {
            v.first()
                .map_or(String::new(), |(id, w)| format!(" (first: id {id}: {w})"))
        };
        format!(
            "sent {}: forwarded once and answered 200: {} ({} sent again after an upstream died with them); explicit errors: {:?} (502s the upstream had received: {}) reasons {:?}; lost: {}{}; duplicated: {}{}; wrong: {}{}; bodies mismatched at the upstream: {}",
            self.sent,
            self.forwarded_once,
            self.resent_after_cut,
            self.explicit,
            self.explicit_seen_upstream,
            self.reasons,
            self.lost.len(),
            first(&self.lost),
            self.duplicated.len(),
            self.duplicated.first().map_or(String::new(), |(id, n)| format!(" (first: id {id} {n}x)")),
            self.wrong.len(),
            first(&self.wrong),
            self.mismatched_at_upstream,
        )
    }
}
