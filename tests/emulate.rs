//! `infscale emulate` end to end on loopback: each dialect read back by the parser under load,
//! TTFT and throughput against the replica model, the OpenAI shapes, errors and cold start.

use infscale::emulate::{self, Dialect, EmulateConfig, Emulator, Limits};
use infscale_core::observe::metrics::{read_page, Rates, Replica, ServerChoice};
use infscale_core::sim::gpu::GpuModel;
use infscale_core::sim::replica::{Finished, FirstToken, Hardware, Phase, SimReplica};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Timing tests share two cores: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn start(cfg: EmulateConfig) -> Emulator {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    emulate::spawn(listener, cfg).await.expect("spawn")
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

fn words(n: usize) -> String {
    vec!["word"; n].join(" ")
}

async fn page(c: &reqwest::Client, e: &Emulator) -> Vec<u8> {
    let r = c
        .get(format!("http://{}/metrics", e.addr()))
        .send()
        .await
        .expect("metrics");
    assert_eq!(r.status(), 200);
    r.bytes().await.expect("page").to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dialect_shows_the_batch_and_the_queue_under_load() {
    let _serial = SERIAL.lock().await;
    for dialect in Dialect::ALL {
        let e = start(EmulateConfig {
            gpu: GpuModel {
                max_batch: 4,
                ..GpuModel::default()
            },
            dialect,
            ..EmulateConfig::default()
        })
        .await;
        let c = client();
        // Ten long requests: four run, six wait, for far longer than the test looks.
        let load: Vec<_> = (0..10)
            .map(|_| {
                let (c, url) = (c.clone(), format!("http://{}/v1/completions", e.addr()));
                tokio::spawn(async move {
                    let body = json!({"prompt": words(100), "max_tokens": 20000});
                    let _ = c.post(url).json(&body).send().await;
                })
            })
            .collect();
        let choice = ServerChoice::Is(dialect.server());
        let mut seen = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let s = read_page(&page(&c, &e).await, choice)
                .signals
                .expect("signals");
            if s.waiting == 6.0 {
                seen = Some(s);
                break;
            }
        }
        let s = seen.unwrap_or_else(|| panic!("{dialect}: never 6 waiting"));
        assert_eq!(s.server, dialect.server());
        if dialect == Dialect::Triton {
            // Triton has no running gauge: the executing occupancy of two scrapes.
            let before = s.clone();
            let t0 = Instant::now();
            tokio::time::sleep(Duration::from_millis(1000)).await;
            let now = read_page(&page(&c, &e).await, choice)
                .signals
                .expect("signals");
            let rates = Rates::between(&now.counters, &before.counters, t0.elapsed().as_secs_f64());
            let r = Replica::new("triton", now, rates);
            let running = r.running().expect("running from two scrapes");
            assert!((running - 4.0).abs() < 0.5, "triton running {running}");
            assert!((r.in_flight().unwrap_or(0.0) - 10.0).abs() < 0.8);
        } else {
            assert_eq!(s.running, Some(4.0), "{dialect}");
        }
        if matches!(dialect, Dialect::Vllm | Dialect::Sglang) {
            assert!(s.kv.is_some_and(|kv| kv > 0.0), "{dialect} kv");
        }
        e.stop().await;
        for l in load {
            let _ = l.await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infscale_parse_reads_the_page() {
    let _serial = SERIAL.lock().await;
    let e = start(EmulateConfig {
        gpu: GpuModel {
            max_batch: 4,
            ..GpuModel::default()
        },
        dialect: Dialect::Sglang,
        ..EmulateConfig::default()
    })
    .await;
    let c = client();
    let load: Vec<_> = (0..10)
        .map(|_| {
            let (c, url) = (c.clone(), format!("http://{}/v1/completions", e.addr()));
            tokio::spawn(async move {
                let _ = c
                    .post(url)
                    .json(&json!({"prompt": "hi", "max_tokens": 20000}))
                    .send()
                    .await;
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let url = format!("http://{}/metrics", e.addr());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args(["parse", &url])
            .output()
    })
    .await
    .expect("join")
    .expect("run infscale parse");
    let text = String::from_utf8_lossy(&out.stdout);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.contains("sglang"))
        .unwrap_or_else(|| panic!("no sglang row in {text}"))
        .split_whitespace()
        .collect();
    assert_eq!((row[2], row[3]), ("4", "6"), "{text}");
    e.stop().await;
    for l in load {
        let _ = l.await;
    }
}

/// A slow GPU, so first tokens and completions are long beside the engine's step.
fn slow_gpu() -> GpuModel {
    GpuModel {
        peak_tflops: 20.0,
        hbm_gb_per_s: 335.0,
        ..GpuModel::default()
    }
}

const PROMPT: u32 = 250;
const OUTPUT: u32 = 32;
const DT: f64 = 0.02;

/// The replica model offline: `n` requests at time 0; mean TTFT and output tokens per second.
fn model(n: u32) -> (f64, f64) {
    let hw = Hardware::new(slow_gpu());
    let mut r = SimReplica::new(0, Phase::Ready);
    for i in 0..n {
        r.waiting.push_back((i, PROMPT, OUTPUT));
    }
    let (mut first, mut finished) = (Vec::<FirstToken>::new(), Vec::<Finished>::new());
    let mut k = 0u32;
    while finished.len() < n as usize && k < 1_000_000 {
        r.step_reporting(
            &hw,
            f64::from(k) * DT,
            DT,
            |_| 0.0,
            &mut first,
            &mut finished,
        );
        k += 1;
    }
    let ttft = first.iter().map(|f| f.at).sum::<f64>() / f64::from(n);
    let makespan = finished.iter().map(|f| f.at).fold(0.0, f64::max);
    (ttft, f64::from(n * OUTPUT) / makespan)
}

/// `n` streaming clients at once; mean TTFT and output tokens per second, simulated seconds.
async fn measure(n: u32, speed: f64) -> (f64, f64) {
    let e = start(EmulateConfig {
        gpu: slow_gpu(),
        speed,
        dt_s: DT,
        ..EmulateConfig::default()
    })
    .await;
    let c = client();
    let url = format!("http://{}/v1/completions", e.addr());
    let t0 = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|_| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move {
                let body =
                    json!({"prompt": words(PROMPT as usize), "max_tokens": OUTPUT, "stream": true});
                let sent = Instant::now();
                let mut r = c.post(url).json(&body).send().await.expect("send");
                let mut ttft = None;
                let mut text = String::new();
                while let Some(chunk) = r.chunk().await.expect("chunk") {
                    ttft.get_or_insert_with(|| sent.elapsed().as_secs_f64());
                    text.push_str(&String::from_utf8_lossy(&chunk));
                }
                assert!(text.ends_with("data: [DONE]\n\n"));
                (ttft.expect("a first chunk"), Instant::now())
            })
        })
        .collect();
    let (mut ttft, mut last) = (0.0, t0);
    for c in clients {
        let (t, done) = c.await.expect("client");
        ttft += t;
        last = last.max(done);
    }
    e.stop().await;
    let makespan = (last - t0).as_secs_f64() * speed;
    (
        ttft / f64::from(n) * speed,
        f64::from(n * OUTPUT) / makespan,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_and_throughput_follow_the_replica_model() {
    let _serial = SERIAL.lock().await;
    let mut rows = Vec::new();
    for (n, speed) in [(1, 5.0), (8, 10.0), (64, 40.0)] {
        let (ttft_model, tput_model) = model(n);
        let (ttft, tput) = measure(n, speed).await;
        rows.push(format!(
            "n={n} speed={speed}: ttft {ttft:.3} s (model {ttft_model:.3}), {tput:.1} tok/s (model {tput_model:.1})"
        ));
        let off = |a: f64, b: f64| (a - b).abs() / b;
        assert!(off(ttft, ttft_model) < 0.15, "{}", rows.join("\n"));
        assert!(off(tput, tput_model) < 0.15, "{}", rows.join("\n"));
    }
    eprintln!("{}", rows.join("\n"));
}

#[tokio::test]
async fn answers_in_openai_shape() {
    let e = start(EmulateConfig {
        speed: 20.0,
        ..EmulateConfig::default()
    })
    .await;
    let c = client();
    let base = format!("http://{}", e.addr());
    // Streaming: token chunks, then usage, then [DONE].
    let body = json!({"messages": [{"role": "user", "content": "one two three"}], "max_tokens": 5, "stream": true});
    let r = c
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap_or("")
        .starts_with("text/event-stream"));
    let text = r.text().await.expect("body");
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(events.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).expect("a JSON chunk"))
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content.split_whitespace().count(), 5, "{text}");
    let usage = &chunks.last().expect("usage chunk")["usage"];
    assert_eq!(usage["prompt_tokens"], 3);
    assert_eq!(usage["completion_tokens"], 5);
    assert_eq!(usage["total_tokens"], 8);
    assert!(chunks
        .iter()
        .any(|c| c["choices"][0]["finish_reason"] == "length"));
    // Whole: the text and usage.
    let r: Value = c
        .post(format!("{base}/v1/completions"))
        .json(&json!({"prompt": ["a b", "c d e"], "max_completion_tokens": 7}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(r["object"], "text_completion");
    assert_eq!(
        r["usage"],
        json!({"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12})
    );
    assert_eq!(
        r["choices"][0]["text"]
            .as_str()
            .map(|t| t.split_whitespace().count()),
        Some(7)
    );
    // The default output length.
    let r: Value = c
        .post(format!("{base}/v1/completions"))
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(r["usage"]["completion_tokens"], 16);
    let models: Value = c
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(models["data"][0]["id"], "infscale-emulated");
    e.stop().await;
}

#[tokio::test]
async fn a_stream_interval_sends_every_token_in_fewer_writes() {
    // Steps short enough that each gives about one token.
    let e = start(EmulateConfig {
        speed: 5.0,
        dt_s: 0.005,
        stream_interval: 20,
        ..EmulateConfig::default()
    })
    .await;
    let mut r = client()
        .post(format!("http://{}/v1/completions", e.addr()))
        .json(&json!({"prompt": "a b c", "max_tokens": 100, "stream": true}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let (mut text, mut reads) = (String::new(), 0);
    while let Some(bytes) = r.chunk().await.expect("a chunk") {
        reads += 1;
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    let tokens: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|c| c["choices"][0]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tokens.split_whitespace().count(), 100, "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    // The first token alone, then one write per 20 tokens, then the end: not one per token.
    assert!(reads <= 12, "{reads} reads for 100 tokens");
    e.stop().await;
}

#[tokio::test]
async fn bad_requests_are_named_and_bounded() {
    let e = start(EmulateConfig {
        gpu: GpuModel {
            max_batch: 1,
            ..GpuModel::default()
        },
        limits: Limits {
            max_in_flight: 2,
            max_body_bytes: 1000,
            ..Limits::default()
        },
        ..EmulateConfig::default()
    })
    .await;
    let c = client();
    let url = format!("http://{}/v1/completions", e.addr());
    let cases = [
        ("{\"prompt\": ", "not valid JSON"),
        ("{\"max_tokens\": 3}", "prompt"),
        (
            "{\"prompt\": \"x\", \"max_tokens\": \"many\"}",
            "max_tokens",
        ),
        // 2^64-1 once wrapped past the context check (prompt + output) and was cut to 2^32-1.
        (
            "{\"prompt\": \"x\", \"max_tokens\": 18446744073709551615}",
            "max_tokens must be an integer from 1 to 1048576",
        ),
        (
            "{\"prompt\": \"x\", \"max_completion_tokens\": 18446744073709551615}",
            "max_completion_tokens must be an integer from 1 to 1048576",
        ),
        (
            "{\"prompt\": \"x\", \"max_tokens\": 1048577}",
            "max_tokens must be an integer from 1 to 1048576",
        ),
    ];
    for (body, needle) in cases {
        let r = c.post(&url).body(body).send().await.expect("send");
        assert_eq!(r.status(), 400, "{body}");
        let v: Value = r.json().await.expect("json");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(needle)),
            "{v}"
        );
    }
    let r = c.post(&url).body(words(600)).send().await.expect("send");
    assert_eq!(r.status(), 413);
    let chat = c
        .post(format!("http://{}/v1/chat/completions", e.addr()))
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .expect("send");
    assert_eq!(chat.status(), 400);
    let v: Value = chat.json().await.expect("json");
    assert_eq!(v["error"]["param"], "messages");
    // Two long requests in flight; a third is refused.
    let long: Vec<_> = (0..2)
        .map(|_| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move {
                let _ = c
                    .post(url)
                    .json(&json!({"prompt": "x", "max_tokens": 100000}))
                    .send()
                    .await;
            })
        })
        .collect();
    let mut refused = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let r = c
            .post(&url)
            .json(&json!({"prompt": "x", "max_tokens": 1}))
            .send()
            .await
            .expect("send");
        if r.status() == 503 {
            refused = true;
            break;
        }
    }
    assert!(refused, "a third request in flight was not refused");
    let r = c
        .get(format!("http://{}/nowhere", e.addr()))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 404);
    e.stop().await;
    for l in long {
        let _ = l.await;
    }
}

#[tokio::test]
async fn a_cold_start_answers_503_until_it_passes() {
    let e = start(EmulateConfig {
        cold_start_s: 6.0,
        speed: 20.0,
        ..EmulateConfig::default()
    })
    .await;
    let c = client();
    let health = format!("http://{}/health", e.addr());
    let r = c.get(&health).send().await.expect("send");
    assert_eq!(r.status(), 503);
    assert!(!e.ready());
    let r = c
        .post(format!("http://{}/v1/completions", e.addr()))
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 503);
    let r = c
        .get(format!("http://{}/metrics", e.addr()))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 503);
    let t0 = Instant::now();
    let mut status = 503;
    while status == 503 && t0.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        status = c.get(&health).send().await.expect("send").status().as_u16();
    }
    assert_eq!(status, 200);
    assert!(e.ready());
    // 6 simulated seconds at 20x: 0.3 s of wall time.
    let waited = t0.elapsed().as_secs_f64();
    assert!(waited > 0.2 && waited < 2.0, "ready after {waited} s");
    e.stop().await;
}

#[tokio::test]
async fn a_drain_finishes_what_is_in_flight_and_takes_nothing_new() {
    let mut e = start(EmulateConfig {
        gpu: slow_gpu(),
        ..EmulateConfig::default()
    })
    .await;
    let addr = e.addr();
    let mut r = client()
        .post(format!("http://{addr}/v1/completions"))
        .json(&json!({"prompt": words(20), "max_tokens": 40, "stream": true}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let mut text = String::new();
    let first = r.chunk().await.expect("a chunk").expect("a first chunk");
    text.push_str(&String::from_utf8_lossy(&first));
    // SIGTERM, as a terminating pod gets it: what streams goes on, a new connection is refused.
    e.drain();
    let mut refused = false;
    for _ in 0..100 {
        refused = tokio::net::TcpStream::connect(addr).await.is_err();
        if refused {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "a draining server went on taking new connections");
    assert!(!e.drained(), "drained with a stream still open");
    while let Some(bytes) = r.chunk().await.expect("the stream is not cut") {
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let mut drained = false;
    for _ in 0..200 {
        drained = e.drained();
        if drained {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(drained, "the stream ended but the drain did not");
    e.stop().await;
}
