//! The scaler under load, as a separate process (the real `infscale serve` binary):
//!
//! 1. CPU and memory of collectors scraping 100 stand-in pods every second (ten targets of ten
//!    pods, each serving a 43 KB vLLM page), sampled from /proc over 30 s;
//! 2. GetMetrics latency, p50 and p99 over 20,000 calls, with 1,000 targets registered (each
//!    with a running collector), measured round trip from a tonic client on loopback.
//!
//! Run with `cargo bench --bench serve` (or `scripts/bench-serve.sh`).

mod common;
use common::{free_port, rss_mb, start_scaler};
use infscale::serve::proto::external_scaler_client::ExternalScalerClient;
use infscale::serve::proto::{GetMetricsRequest, ScaledObjectRef};
use std::time::{Duration, Instant};

const PODS: usize = 100;
const TARGETS_UNDER_LOAD: usize = 10;
const REGISTERED: usize = 1000;
const CALLS: usize = 20_000;

/// Stand-in pods: one listener per pod on 127.0.0.1, all serving the same page.
async fn stand_in_pods(page: &'static [u8]) -> Vec<String> {
    let mut urls = Vec::new();
    for _ in 0..PODS {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        urls.push(format!("http://{}/metrics", listener.local_addr().unwrap()));
        let app =
            axum::Router::new().route("/metrics", axum::routing::get(move || async move { page }));
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    urls
}

/// utime + stime of a process, seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields after the command: state is 0, utime is 11, stime is 12.
    (ticks(11) + ticks(12)) / 100.0
}

fn object(name: &str, interval: &str) -> ScaledObjectRef {
    ScaledObjectRef {
        name: name.to_owned(),
        namespace: "bench".to_owned(),
        scaler_metadata: [
            ("deployment", name),
            ("threshold", "24"),
            ("scrapeIntervalSeconds", interval),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    }
}

fn request(name: &str, interval: &str) -> GetMetricsRequest {
    GetMetricsRequest {
        scaled_object_ref: Some(object(name, interval)),
        metric_name: format!("infscale-queue-{name}"),
    }
}

async fn connect(port: u16) -> ExternalScalerClient<tonic::transport::Channel> {
    for _ in 0..200 {
        if let Ok(c) = ExternalScalerClient::connect(format!("http://127.0.0.1:{port}")).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the scaler did not start");
}

async fn wait_ready(
    c: &mut ExternalScalerClient<tonic::transport::Channel>,
    names: &[String],
    interval: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in names {
        while c.get_metrics(request(name, interval)).await.is_err() {
            assert!(Instant::now() < deadline, "{name} never answered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let page: &'static [u8] = Box::leak(
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/vllm-busy.prom"
        ))
        .unwrap()
        .into_boxed_slice(),
    );
    let urls = stand_in_pods(page).await;
    println!(
        "machine: {} cores; pods serve {} bytes each",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        page.len()
    );

    // 1. Ten targets of ten pods, scraped every second.
    let names: Vec<String> = (0..TARGETS_UNDER_LOAD)
        .map(|i| format!("load{i}"))
        .collect();
    let statics: Vec<String> = names
        .iter()
        .zip(urls.chunks(PODS / TARGETS_UNDER_LOAD))
        .map(|(n, chunk)| format!("{n}={}", chunk.join(",")))
        .collect();
    let port = free_port();
    let scaler = start_scaler(&statics, port);
    let pid = scaler.0.id();
    let mut c = connect(port).await;
    wait_ready(&mut c, &names, "1").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (cpu0, t0) = (cpu_seconds(pid), Instant::now());
    let mut rss = Vec::new();
    while t0.elapsed() < Duration::from_secs(30) {
        for n in &names {
            let _ = c.get_metrics(request(n, "1")).await;
        }
        rss.push(rss_mb(pid));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let cpu = (cpu_seconds(pid) - cpu0) / t0.elapsed().as_secs_f64() * 100.0;
    rss.sort_by(f64::total_cmp);
    println!(
        "scraping {PODS} pods every second ({} page/s): CPU {cpu:.1}% of one core; RSS median {:.1} MB, max {:.1} MB",
        PODS,
        rss[rss.len() / 2],
        rss[rss.len() - 1]
    );
    drop(scaler);

    // 2. A thousand targets registered; GetMetrics latency.
    let names: Vec<String> = (0..REGISTERED).map(|i| format!("t{i}")).collect();
    let statics: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{n}={}", urls[i % PODS]))
        .collect();
    let port = free_port();
    let scaler = start_scaler(&statics, port);
    let pid = scaler.0.id();
    let mut c = connect(port).await;
    wait_ready(&mut c, &names, "5").await;
    let requests: Vec<GetMetricsRequest> = names.iter().map(|n| request(n, "5")).collect();
    for r in requests.iter().take(500) {
        c.get_metrics(r.clone()).await.unwrap();
    }
    let mut took = Vec::with_capacity(CALLS);
    for i in 0..CALLS {
        let r = requests[(i * 7919) % REGISTERED].clone();
        let started = Instant::now();
        c.get_metrics(r).await.unwrap();
        took.push(started.elapsed());
    }
    took.sort();
    println!(
        "GetMetrics with {REGISTERED} targets registered, {CALLS} calls: p50 {:?}, p99 {:?}, max {:?}; scaler RSS {:.1} MB",
        percentile(&took, 0.50),
        percentile(&took, 0.99),
        took[took.len() - 1],
        rss_mb(pid)
    );
}
