//! `infscale trace` against a real Prometheus (Debian's `prometheus`, installed in CI) scraping
//! two emulated vLLM replicas under a known open-loop load: the trace it builds replays in the
//! simulator's reader with the request count and mean lengths the replicas served, within 10%.
//! And its bad inputs: each a named error, exit 2.

use infscale::emulate::{spawn, EmulateConfig, Emulator};
use infscale::load::{self, Config, Mode};
use infscale_core::sim::trace::Trace;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// Prometheus, killed when the test ends however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn infscale(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(args)
        .output()
        .expect("infscale runs")
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs_f64()
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("an address").port()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("infscale-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

fn start_prometheus(dir: &Path, targets: &[String]) -> (Running, String) {
    assert!(
        Path::new(PROMETHEUS).exists(),
        "{PROMETHEUS} is missing: this test needs a real Prometheus (apt-get install prometheus); CI installs it"
    );
    let list = targets
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: emulated\n    static_configs:\n      - targets: [{list}]\n"
    );
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, config).expect("the config written");
    let port = free_port();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("a log file"))
        .spawn()
        .expect("prometheus starts");
    (Running(child), format!("http://127.0.0.1:{port}"))
}

/// Waits (at most 60 s) until Prometheus has scraped every target at least twice.
async fn wait_for_samples(prom: &str, targets: usize, dir: &Path) {
    let client = reqwest::Client::new();
    let query =
        format!("{prom}/api/v1/query?query=count_over_time(vllm:request_success_total[1m])");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = async {
            let body = client.get(&query).send().await.ok()?.text().await.ok()?;
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            let result = v["data"]["result"].as_array()?.clone();
            let counted = result
                .iter()
                .filter_map(|s| s["value"][1].as_str()?.parse::<f64>().ok())
                .filter(|&n| n >= 2.0)
                .count();
            (counted == targets).then_some(())
        };
        if ready.await.is_some() {
            return;
        }
        let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
        assert!(
            Instant::now() < until,
            "no samples in Prometheus after 60 s; its log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits (at most 60 s) until Prometheus' latest samples of the success counter sum to `served`.
async fn wait_for_count(prom: &str, served: f64, dir: &Path) {
    let client = reqwest::Client::new();
    let query = format!("{prom}/api/v1/query?query=sum(vllm:request_success_total)");
    let until = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    loop {
        let seen = async {
            let body = client.get(&query).send().await.ok()?.text().await.ok()?;
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            v["data"]["result"][0]["value"][1]
                .as_str()?
                .parse::<f64>()
                .ok()
        }
        .await;
        if seen == Some(served) {
            return;
        }
        last = seen.or(last);
        let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
        assert!(
            Instant::now() < until,
            "Prometheus saw {last:?} of {served} requests after 60 s; its log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn emulator() -> Emulator {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cfg = EmulateConfig {
        speed: 20.0,
        ..EmulateConfig::default()
    };
    spawn(listener, cfg).await.unwrap()
}

fn open_loop(e: &Emulator, rate: f64, seed: u64, prompt: u32, output: u32) -> Config {
    let mut c = Config::closed(format!("http://{}", e.addr()), 1, Duration::from_secs(12));
    c.mode = Mode::Open { rate, seed };
    c.prompt_tokens = prompt;
    c.output_tokens = output;
    c
}

/// A trace's request count and mean lengths.
#[derive(Debug)]
struct Measured {
    requests: f64,
    prompt: f64,
    output: f64,
}

impl Measured {
    /// Each figure within 10% of `want`'s.
    fn near(&self, want: &Measured) {
        let close = |got: f64, w: f64| (got - w).abs() <= 0.1 * w;
        assert!(
            close(self.requests, want.requests)
                && close(self.prompt, want.prompt)
                && close(self.output, want.output),
            "built {self:?}, emulated {want:?}"
        );
    }
}

/// Runs `infscale trace` over `window` into `csv` and reads the CSV back with the simulator's
/// reader.
fn built(prom: &str, window: &[String; 2], extra: &[&str], csv: &Path) -> Measured {
    let mut args = vec![
        "trace",
        "--prometheus",
        prom,
        "--selector",
        "job=\"emulated\"",
        "--start",
        &window[0],
        "--end",
        &window[1],
        "--step",
        "2",
        "-o",
    ];
    args.push(csv.to_str().expect("a UTF-8 path"));
    args.extend_from_slice(extra);
    let out = infscale(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    println!("{stderr}");
    assert!(stderr.contains("steps of 2 s"), "{stderr}");
    assert!(stderr.contains("not in the data"), "{stderr}");
    let text = std::fs::read_to_string(csv).expect("the CSV written");
    let trace = Trace::from_csv("trace.csv", &text, None).expect("a trace simulate reads");
    let n = trace.requests.len() as f64;
    let sum = |f: fn(&infscale_core::sim::trace::Request) -> u32| {
        trace.requests.iter().map(|r| f64::from(f(r))).sum::<f64>()
    };
    Measured {
        requests: n,
        prompt: sum(|r| r.prompt) / n,
        output: sum(|r| r.output) / n,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_built_from_prometheus_replays_the_emulated_run() {
    let dir = temp_dir("trace-prometheus");
    let (a, b) = (emulator().await, emulator().await);
    let targets = vec![a.addr().to_string(), b.addr().to_string()];
    let (_prometheus, prom) = start_prometheus(&dir, &targets);
    wait_for_samples(&prom, 2, &dir).await;
    let start = now_s().floor() - 1.0;

    // Two kinds of traffic at once: short prompts at 6 req/s to one replica, long ones at
    // 3 req/s to the other.
    let (short, long) = tokio::join!(
        load::run(open_loop(&a, 6.0, 1, 100, 20)),
        load::run(open_loop(&b, 3.0, 2, 700, 60)),
    );
    let (short, long) = (short.unwrap(), long.unwrap());
    assert!(
        short.errors.is_empty() && long.errors.is_empty(),
        "{short:?} {long:?}"
    );
    let served = (short.ok + long.ok) as f64;
    let mean_prompt = (short.ok * 100 + long.ok * 700) as f64 / served;
    let mean_output = (short.ok * 20 + long.ok * 60) as f64 / served;
    // The window ends once Prometheus has scraped every request served (a count, not a wait).
    wait_for_count(&prom, served, &dir).await;
    let end = now_s().ceil();

    let want = Measured {
        requests: served,
        prompt: mean_prompt,
        output: mean_output,
    };
    let csv = dir.join("trace.csv");
    let window = [start.to_string(), end.to_string()];
    let histograms = built(&prom, &window, &[], &csv);
    println!("emulated: {want:?}\nbuilt from the histograms: {histograms:?}");
    histograms.near(&want);
    // The token counters alone (llama.cpp's only source) give each step's mean length.
    let counters_csv = dir.join("counters.csv");
    let counters = built(&prom, &window, &["--lengths", "counters"], &counters_csv);
    println!("built from the token counters: {counters:?}");
    counters.near(&want);

    let sim = infscale(&["simulate", "--trace", csv.to_str().unwrap()]);
    assert!(
        sim.status.success(),
        "simulate --trace: {}",
        String::from_utf8_lossy(&sim.stderr)
    );
    a.stop().await;
    b.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server on 127.0.0.1 that answers every request with `status` and `body` (until the test
/// process ends).
fn answering(status: u16, body: &'static str) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten().take(16) {
            let mut buf = [0u8; 4096];
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

#[test]
fn bad_input_is_a_named_error_with_status_2() {
    let refused = format!("http://127.0.0.1:{}", free_port());
    let bad_json = answering(200, "{not json");
    let empty = answering(
        200,
        r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
    );
    let refused_query = answering(
        400,
        r#"{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected"}"#,
    );
    let cases: [(&str, &str, &str, &str, &str); 7] = [
        (&refused, "0", "60", "15", "connection refused"),
        (&bad_json, "0", "60", "15", "not JSON"),
        (
            &empty,
            "0",
            "60",
            "15",
            "no series vllm:request_success_total",
        ),
        (&refused_query, "0", "60", "15", "parse error"),
        (&empty, "0", "60", "0", "--step"),
        (&empty, "60", "60", "15", "not after --start"),
        (&empty, "yesterday", "60", "15", "--start"),
    ];
    for (url, start, end, step, want) in cases {
        let out = infscale(&[
            "trace",
            "--prometheus",
            url,
            "--start",
            start,
            "--end",
            end,
            "--step",
            step,
            "-o",
            "-",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{url} {start} {end} {step}: {stderr}"
        );
        assert!(stderr.contains(want), "{want:?} not in {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let llama = infscale(&[
        "trace",
        "--prometheus",
        &empty,
        "--server",
        "llamacpp",
        "--start",
        "0",
        "--end",
        "60",
        "-o",
        "-",
    ]);
    assert_eq!(llama.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&llama.stderr).contains("--requests METRIC"));
}
