//! serve's scrape memory under pods a tenant controls: 8, then 64 stand-in pods on loopback
//! serving 16 MiB pages (half with a declared length, half chunked without one) to the real
//! `infscale serve` binary at its default limits. Before the budget, 8 such pods took serve to
//! 524-652 MB and 64 aborted it at 1.87 GB; now its peak resident memory (VmHWM) stays within
//! the 64 MiB budget plus a fixed overhead, far under the shipped 256 Mi limit, gRPC answers
//! throughout, the hostile targets are UNAVAILABLE with the budget named, and a normal target
//! in the same process keeps reading its real value.

mod common;

use common::keda::{client_when_up, metric_value, metrics_request, object, value_when};
use common::loopback::{accept, Server};
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::free_port;
use infscale::serve::proto::GetMetricsRequest;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PAGE: usize = 16 << 20;
const MIB: u64 = 1 << 20;
/// The default budget, and what the process may hold besides it: its own heap, threads and
/// the connections' read buffers (64 x at most ~400 KiB). Well under the 256 Mi limit.
const BUDGET: u64 = 64 * MIB;
const OVERHEAD: u64 = 96 * MIB;

/// A 16 MiB page of real-looking sample lines that lacks vLLM's waiting series: if it fits it
/// is parsed in full, and it never makes a hostile pod vote.
fn hostile_page() -> Arc<Vec<u8>> {
    let mut page = Vec::with_capacity(PAGE);
    let mut i = 0u64;
    while page.len() + 128 < PAGE {
        let line = format!(
            "vllm:num_requests_running{{model_name=\"m\",pad=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\",i=\"{i}\"}} 1\n"
        );
        page.extend_from_slice(line.as_bytes());
        i += 1;
    }
    page.resize(PAGE, b'\n');
    Arc::new(page)
}

/// A hostile pod: answers every scrape with `page`, declared or chunked.
fn hostile_pod(addr: &str, page: Arc<Vec<u8>>, chunked: bool, hits: Arc<AtomicUsize>) -> Server {
    accept(addr, Duration::from_secs(300), move |mut stream, _, _| {
        if !read_request_head(&mut stream) {
            return;
        }
        hits.fetch_add(1, Ordering::SeqCst);
        let head = if chunked {
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".to_owned()
        } else {
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", page.len())
        };
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        for piece in page.chunks(64 << 10) {
            let sent = if chunked {
                stream
                    .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                    .and_then(|_| stream.write_all(piece))
                    .and_then(|_| stream.write_all(b"\r\n"))
            } else {
                stream.write_all(piece)
            };
            if sent.is_err() {
                return;
            }
        }
        if chunked {
            let _ = stream.write_all(b"0\r\n\r\n");
        }
    })
}

/// Reads a request head (up to its blank line), within 10 s.
fn read_request_head(stream: &mut TcpStream) -> bool {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(clone) = stream.try_clone() else {
        return false;
    };
    let mut reader = BufReader::new(clone.take(64 << 10));
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" || line == "\n" => return true,
            Ok(_) => {}
        }
    }
}

/// The process's peak resident memory so far (VmHWM), bytes.
fn peak_rss(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// The serve process, killed when dropped; its stderr collected.
struct Serve {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn trigger(name: &str, interval: &str) -> Vec<(&'static str, String)> {
    vec![
        ("deployment", name.to_owned()),
        ("threshold", "4".to_owned()),
        ("scrapeIntervalSeconds", interval.to_owned()),
        ("scrapeTimeoutSeconds", "10".to_owned()),
    ]
}

/// Waits until every pod was scraped `rounds` more times than `from`, asking for the target
/// meanwhile (so its collector runs) and checking the normal target answers its value.
async fn through_rounds(
    c: &mut common::keda::Client,
    hostile: &GetMetricsRequest,
    normal: &GetMetricsRequest,
    normal_value: f64,
    hits: &[Arc<AtomicUsize>],
    rounds: usize,
    hostile_errors: &mut Vec<tonic::Status>,
) {
    let from: Vec<usize> = hits.iter().map(|h| h.load(Ordering::SeqCst)).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match metric_value(c, hostile).await {
            Ok(v) => panic!("a hostile target read {v}: its pods' pages never vote"),
            Err(e) => hostile_errors.push(e),
        }
        let v = metric_value(c, normal).await;
        assert_eq!(
            v.as_ref().ok(),
            Some(&normal_value),
            "the normal target lost its reading: {v:?}"
        );
        if hits
            .iter()
            .zip(&from)
            .all(|(h, f)| h.load(Ordering::SeqCst) >= f + rounds)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the hostile pods were not scraped {rounds} more times within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_8_then_64_hostile_pods_stay_within_the_budget_and_a_normal_target_reads() {
    let page = hostile_page();
    let normal = pod("127.0.0.2:0", Behaviour::Page(vllm_running(3)));
    let mut servers = Vec::new();
    let mut hits = Vec::new();
    let mut urls = Vec::new();
    for i in 0..72 {
        let h = Arc::new(AtomicUsize::new(0));
        let s = hostile_pod(
            &format!("127.0.0.{}:0", 10 + i),
            page.clone(),
            i % 2 == 1,
            h.clone(),
        );
        urls.push(s.url("/metrics"));
        servers.push(s);
        hits.push(h);
    }
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args([
            "serve",
            "--no-kube",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--metrics-listen",
            "none",
            "--static-target",
            &format!("normal={}", normal.url()),
            "--static-target",
            &format!("eight={}", urls[..8].join(",")),
            "--static-target",
            &format!("sixtyfour={}", urls[8..].join(",")),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let collected = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            collected.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let serve = Serve { child, log };
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut c = client_when_up(addr, Duration::from_secs(20)).await;
    let normal_req = metrics_request(
        &object("normal", &trigger("normal", "0.5")),
        "infscale-queue-normal",
    );
    let normal_value = value_when(&mut c, &normal_req, None).await;
    let baseline = peak_rss(&serve.child);

    let mut hostile_errors = Vec::new();
    let eight = metrics_request(
        &object("eight", &trigger("eight", "1")),
        "infscale-queue-eight",
    );
    through_rounds(
        &mut c,
        &eight,
        &normal_req,
        normal_value,
        &hits[..8],
        3,
        &mut hostile_errors,
    )
    .await;
    let after_eight = peak_rss(&serve.child);
    assert!(
        after_eight < BUDGET + OVERHEAD,
        "8 pods of 16 MiB pages: serve peaked at {} MiB (from {} MiB), over the {} MiB budget \
         plus {} MiB",
        after_eight / MIB,
        baseline / MIB,
        BUDGET / MIB,
        OVERHEAD / MIB
    );

    let sixtyfour = metrics_request(
        &object("sixtyfour", &trigger("sixtyfour", "1")),
        "infscale-queue-sixtyfour",
    );
    through_rounds(
        &mut c,
        &sixtyfour,
        &normal_req,
        normal_value,
        &hits[8..],
        2,
        &mut hostile_errors,
    )
    .await;
    // The first target's pods are still scraped beside the 64.
    through_rounds(
        &mut c,
        &eight,
        &normal_req,
        normal_value,
        &hits[..8],
        1,
        &mut hostile_errors,
    )
    .await;
    let after_all = peak_rss(&serve.child);
    assert!(
        after_all < BUDGET + OVERHEAD,
        "72 pods of 16 MiB pages: serve peaked at {} MiB (from {} MiB), over the {} MiB budget \
         plus {} MiB",
        after_all / MIB,
        baseline / MIB,
        BUDGET / MIB,
        OVERHEAD / MIB
    );
    eprintln!(
        "peak RSS: {} MiB at start, {} MiB after 8 pods, {} MiB after 72",
        baseline / MIB,
        after_eight / MIB,
        after_all / MIB
    );

    assert!(hostile_errors
        .iter()
        .all(|e| e.code() == tonic::Code::Unavailable));
    let log = serve.log.lock().unwrap().clone();
    let refused = log
        .lines()
        .find(|l| l.contains("scrape memory budget") && l.contains("127.0.0."));
    assert!(
        refused.is_some(),
        "no log line names a pod refused for the budget:\n{}",
        &log[log.len().saturating_sub(4000)..]
    );
    assert!(
        hostile_errors
            .iter()
            .any(|e| e.message().contains("scrape memory budget")),
        "no hostile answer names the budget: {:?}",
        hostile_errors.last()
    );
    drop(servers);
}

#[test]
fn a_budget_it_cannot_count_exits_2_naming_the_flag() {
    for bytes in ["0", "1000", "8589934592"] {
        let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args(["serve", "--no-kube", "--scrape-memory-bytes", bytes])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bytes}: {stderr}");
        assert!(
            stderr.contains("--scrape-memory-bytes"),
            "{bytes}: {stderr}"
        );
    }
}
