//! Soak of the scaler: the real `infscale serve` binary (release) with 1,000 static targets on
//! 250 stand-in pods, polled for `INFSCALE_SOAK_SECONDS` the way KEDA and the HPA poll it:
//! GetMetricSpec + GetMetrics every 15 s per target, IsActive every 30 s per target, both spread
//! evenly over the period, and 100 `StreamIsActive` streams open throughout. Each pod serves
//! the 43 KB vLLM fixture page with running and waiting counts that change every minute.
//!
//! Reports latency percentiles per call, errors, answers that match no page the pods served,
//! CPU of the scaler as % of one core, and RSS, threads and open descriptors from /proc at the
//! start, every minute and at the end ("memory flat" = end against the first minute).
//!
//! Without `INFSCALE_SOAK_SECONDS` it does nothing, so `cargo bench` stays short; run it with
//! `scripts/soak-serve.sh [SECONDS]` (600 by default).

mod common;
use common::{cpu_seconds, free_port, rss_mb, start_scaler};
use infscale::serve::proto::external_scaler_client::ExternalScalerClient;
use infscale::serve::proto::{GetMetricsRequest, ScaledObjectRef};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const PODS: usize = 250;
const TARGETS: usize = 1000;
const STREAMS: usize = 100;
const METRICS_PERIOD: Duration = Duration::from_secs(15);
const ACTIVE_PERIOD: Duration = Duration::from_secs(30);
/// Pod load changes this often.
const STEP: Duration = Duration::from_secs(60);

static START: OnceLock<Instant> = OnceLock::new();

fn step_now() -> u64 {
    START
        .get()
        .map_or(0, |s| s.elapsed().as_secs() / STEP.as_secs())
}

/// Pod `j`'s (running, waiting) in load step `s`: every pod changes every step.
fn load(j: usize, s: u64) -> (u64, u64) {
    let j = j as u64;
    ((j + 5 * s) % 11, (j * 7 + 3 * s) % 5)
}

/// The two pods target `i` scrapes.
fn pods_of(i: usize) -> (usize, usize) {
    (i % PODS, (i * 7 + 1) % PODS)
}

/// Values GetMetrics may answer for target `i` near step `s`: each pod's page from this step
/// or the one before (a scrape every 5 s can straddle a change).
fn plausible(i: usize, s: u64) -> Vec<f64> {
    let (a, b) = pods_of(i);
    let steps = [s.saturating_sub(1), s];
    let mut out = Vec::new();
    for sa in steps {
        for sb in steps {
            let (ra, wa) = load(a, sa);
            let (rb, wb) = load(b, sb);
            out.push((ra + wa + rb + wb) as f64);
        }
    }
    out
}

/// Stand-in pods on 127.0.0.1, each answering the fixture page with its current load.
async fn stand_in_pods(template: &'static str) -> Vec<String> {
    let mut urls = Vec::new();
    for j in 0..PODS {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        urls.push(format!("http://{}/metrics", listener.local_addr().unwrap()));
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || async move {
                let (r, w) = load(j, step_now());
                template
                    .replace("{RUNNING}", &r.to_string())
                    .replace("{WAITING}", &w.to_string())
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    urls
}

fn page_template() -> &'static str {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/vllm-busy.prom"
    ))
    .unwrap();
    let model = r#"{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"}"#;
    let t = page
        .replace(
            &format!("vllm:num_requests_running{model} 48.0"),
            &format!("vllm:num_requests_running{model} {{RUNNING}}"),
        )
        .replace(
            &format!("vllm:num_requests_waiting{model} 17.0"),
            &format!("vllm:num_requests_waiting{model} {{WAITING}}"),
        );
    assert!(t.contains("{RUNNING}") && t.contains("{WAITING}"));
    Box::leak(t.into_boxed_str())
}

fn object(i: usize) -> ScaledObjectRef {
    let name = format!("t{i}");
    ScaledObjectRef {
        name: name.clone(),
        namespace: "soak".to_owned(),
        scaler_metadata: [("deployment", name.as_str()), ("threshold", "24")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// One /proc sample of the scaler.
struct Sample {
    at: Duration,
    rss_mb: f64,
    threads: u64,
    fds: usize,
    cpu_s: f64,
}

fn sample(pid: u32, t0: Instant) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let threads = status
        .lines()
        .find(|l| l.starts_with("Threads:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    Sample {
        at: t0.elapsed(),
        rss_mb: rss_mb(pid),
        threads,
        fds,
        cpu_s: cpu_seconds(pid),
    }
}

#[derive(Default)]
struct Calls {
    took: Mutex<Vec<Duration>>,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Calls {
    fn record<T>(&self, started: Instant, r: &Result<T, tonic::Status>) {
        self.took.lock().unwrap().push(started.elapsed());
        if let Err(e) = r {
            self.errors.fetch_add(1, Ordering::Relaxed);
            self.first_error
                .lock()
                .unwrap()
                .get_or_insert_with(|| format!("{:?}: {}", e.code(), e.message()));
        }
    }

    fn report(&self, name: &str) {
        let mut took = self.took.lock().unwrap().clone();
        took.sort();
        let n = took.len();
        let q = |p: f64| {
            if n == 0 {
                return Duration::ZERO;
            }
            took[((n as f64 * p).ceil() as usize).clamp(1, n) - 1]
        };
        println!(
            "{name:<14} calls {n:>6}  p50 {:>9.3?}  p95 {:>9.3?}  p99 {:>9.3?}  max {:>9.3?}  errors {}{}",
            q(0.50),
            q(0.95),
            q(0.99),
            took.last().copied().unwrap_or_default(),
            self.errors.load(Ordering::Relaxed),
            self.first_error
                .lock()
                .unwrap()
                .as_ref()
                .map_or(String::new(), |e| format!(" (first: {e})"))
        );
    }
}

async fn connect(port: u16) -> Channel {
    for _ in 0..400 {
        if let Ok(c) = Channel::from_shared(format!("http://127.0.0.1:{port}"))
            .unwrap()
            .connect()
            .await
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the scaler did not start");
}

fn print_sample(s: &Sample, prev: Option<&Sample>) {
    let cpu = prev.map_or(String::from("    -"), |p| {
        format!(
            "{:5.1}",
            (s.cpu_s - p.cpu_s) / (s.at - p.at).as_secs_f64().max(1e-3) * 100.0
        )
    });
    println!(
        "  t={:>5.0}s  RSS {:6.1} MB  threads {:3}  fds {:4}  CPU {cpu}% of a core since last",
        s.at.as_secs_f64(),
        s.rss_mb,
        s.threads,
        s.fds
    );
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(seconds) = std::env::var("INFSCALE_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        println!("soak_serve: skipped (set INFSCALE_SOAK_SECONDS, or run scripts/soak-serve.sh)");
        return;
    };
    START.get_or_init(Instant::now);
    let template = page_template();
    let urls = stand_in_pods(template).await;
    let statics: Vec<String> = (0..TARGETS)
        .map(|i| {
            let (a, b) = pods_of(i);
            format!("t{i}={},{}", urls[a], urls[b])
        })
        .collect();
    let port = free_port();
    let scaler = start_scaler(&statics, port);
    let pid = scaler.0.id();
    let channel = connect(port).await;
    println!(
        "soak_serve: {TARGETS} targets on {PODS} pods (2 each, {} B page, load changes every {}s), {STREAMS} streams, {seconds}s; machine {} cores",
        template.len(),
        STEP.as_secs(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Warm-up: KEDA asks for every spec when ScaledObjects appear; then each target's first
    // value must arrive before the clock starts.
    let t_boot = Instant::now();
    let mut c = ExternalScalerClient::new(channel.clone());
    for i in 0..TARGETS {
        c.get_metric_spec(object(i))
            .await
            .expect("GetMetricSpec at start");
    }
    for i in 0..TARGETS {
        let req = GetMetricsRequest {
            scaled_object_ref: Some(object(i)),
            metric_name: format!("infscale-queue-t{i}"),
        };
        while c.get_metrics(req.clone()).await.is_err() {
            assert!(
                t_boot.elapsed() < Duration::from_secs(120),
                "t{i} never answered"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    println!(
        "warm-up: all {TARGETS} targets answered after {:.1?}",
        t_boot.elapsed()
    );

    let spec = Arc::new(Calls::default());
    let metrics = Arc::new(Calls::default());
    let active = Arc::new(Calls::default());
    let implausible = Arc::new(AtomicU64::new(0));
    let first_implausible = Arc::new(Mutex::new(None::<String>));
    let stream_msgs = Arc::new(AtomicU64::new(0));
    let stream_errors = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..TARGETS {
        let mut c = ExternalScalerClient::new(channel.clone());
        let (spec, metrics, implausible, first) = (
            spec.clone(),
            metrics.clone(),
            implausible.clone(),
            first_implausible.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let so = object(i);
            let mut next = t0 + METRICS_PERIOD * i as u32 / TARGETS as u32;
            while next < end {
                tokio::time::sleep_until(next.into()).await;
                let started = Instant::now();
                let r = c.get_metric_spec(so.clone()).await;
                spec.record(started, &r);
                let Ok(r) = r else {
                    next += METRICS_PERIOD;
                    continue;
                };
                let name = r.into_inner().metric_specs[0].metric_name.clone();
                let started = Instant::now();
                let r = c
                    .get_metrics(GetMetricsRequest {
                        scaled_object_ref: Some(so.clone()),
                        metric_name: name,
                    })
                    .await;
                metrics.record(started, &r);
                if let Ok(r) = r {
                    let v = r.into_inner().metric_values[0].metric_value_float;
                    let s = step_now();
                    if !plausible(i, s).contains(&v) {
                        implausible.fetch_add(1, Ordering::Relaxed);
                        first.lock().unwrap().get_or_insert_with(|| {
                            format!("t{i} answered {v}, pages gave {:?}", plausible(i, s))
                        });
                    }
                }
                next += METRICS_PERIOD;
            }
        }));
        let mut c = ExternalScalerClient::new(channel.clone());
        let active = active.clone();
        tasks.push(tokio::spawn(async move {
            let so = object(i);
            let mut next = t0 + ACTIVE_PERIOD * i as u32 / TARGETS as u32;
            while next < end {
                tokio::time::sleep_until(next.into()).await;
                let started = Instant::now();
                let r = c.is_active(so.clone()).await;
                active.record(started, &r);
                next += ACTIVE_PERIOD;
            }
        }));
    }
    let mut streams = Vec::new();
    for i in 0..STREAMS {
        let mut c = ExternalScalerClient::new(channel.clone());
        let mut s = c
            .stream_is_active(object(i * (TARGETS / STREAMS)))
            .await
            .expect("StreamIsActive")
            .into_inner();
        let (msgs, errors) = (stream_msgs.clone(), stream_errors.clone());
        streams.push(tokio::spawn(async move {
            loop {
                match tokio::time::timeout_at(end.into(), s.message()).await {
                    Err(_) => return true, // still open at the end
                    Ok(Ok(Some(_))) => {
                        msgs.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(None)) | Ok(Err(_)) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return false;
                    }
                }
            }
        }));
    }

    println!("samples of the scaler process (/proc):");
    let mut samples = vec![sample(pid, t0)];
    print_sample(&samples[0], None);
    while Instant::now() + Duration::from_secs(60) <= end {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let s = sample(pid, t0);
        print_sample(&s, samples.last());
        samples.push(s);
    }
    for t in tasks {
        let _ = t.await;
    }
    let mut open = 0;
    for s in streams {
        if s.await.unwrap_or(false) {
            open += 1;
        }
    }
    let last = sample(pid, t0);
    print_sample(&last, samples.last());
    let first = &samples[0];
    let cpu_avg = (last.cpu_s - first.cpu_s) / (last.at - first.at).as_secs_f64() * 100.0;
    println!("results over {:.0?}:", t0.elapsed());
    spec.report("GetMetricSpec");
    metrics.report("GetMetrics");
    active.report("IsActive");
    println!(
        "GetMetrics answers matching no page the pods served: {}{}",
        implausible.load(Ordering::Relaxed),
        first_implausible
            .lock()
            .unwrap()
            .as_ref()
            .map_or(String::new(), |e| format!(" (first: {e})"))
    );
    println!(
        "StreamIsActive: {open}/{STREAMS} open at the end, {} messages, {} ended or failed early",
        stream_msgs.load(Ordering::Relaxed),
        stream_errors.load(Ordering::Relaxed)
    );
    println!("scaler CPU: {cpu_avg:.1}% of one core on average");
    let warm = samples.get(1).unwrap_or(first);
    println!(
        "scaler memory: RSS start {:.1} MB, after warm-up (t={:.0}s) {:.1} MB, end {:.1} MB ({:+.1} MB since warm-up); threads {} -> {}; fds {} -> {}",
        first.rss_mb,
        warm.at.as_secs_f64(),
        warm.rss_mb,
        last.rss_mb,
        last.rss_mb - warm.rss_mb,
        first.threads,
        last.threads,
        first.fds,
        last.fds
    );
    drop(scaler);
}
