//! Security review (issue 25): `serve`'s metrics listener (9091) had no bounds, so idle
//! connections to it exhausted the process's descriptors and every pod scrape failed. Both of
//! its listeners are now bounded the same way ([`infscale::edge::listener`]): a connection cap
//! where a silent connection gives way to a new one, a first byte and a request head within the
//! header timeout, and an idle timeout. The scaler runs as the real binary under a 256-descriptor
//! limit (as a container may be), and the tests assert what its peers see: KEDA's calls, a pod's
//! scrapes (through the values KEDA receives) and a Prometheus scrape of `/metrics`.

mod common;

use common::keda::{client, metrics_request, object, value_when};
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::{config, free_port, start};
use infscale::serve::limits::Limits;
use infscale::serve::server::Config;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The scaler binary, stopped (by its own id) when dropped.
struct Scaler(Child);

impl Drop for Scaler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `infscale serve` under `ulimit -n 256` (soft and hard: raising to the hard limit at
/// start-up gains nothing), with `chat` at `pod_url`.
fn serve_with_256_descriptors(grpc: SocketAddr, metrics: SocketAddr, pod_url: &str) -> Scaler {
    let child = Command::new("sh")
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_infscale"))
        .args(["serve", "--no-kube", "--listen", &grpc.to_string()])
        .args(["--metrics-listen", &metrics.to_string()])
        .args(["--static-target", &format!("chat={pod_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs");
    Scaler(child)
}

fn trigger() -> Vec<(&'static str, String)> {
    vec![
        ("threshold", "2".to_owned()),
        ("scrapeIntervalSeconds", "0.2".to_owned()),
    ]
}

/// A plain HTTP/1.1 GET of `/metrics` on a new connection: the status and the body.
fn scrape(addr: SocketAddr) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nhost: scaler\r\nconnection: close\r\n\r\n")
        .ok()?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).ok()?;
    let text = String::from_utf8_lossy(&all).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text))
}

/// Whether the server has closed `s` (a read gives end of file or an error within `wait`).
fn closed(s: &mut TcpStream, wait: Duration) -> bool {
    let _ = s.set_read_timeout(Some(wait));
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eleven_hundred_idle_metrics_connections_leave_scrapes_and_keda_answering() {
    // This process holds the 1,100 client ends: its own limit goes up to its hard limit.
    let limit = infscale::edge::descriptors::raise_open_files().unwrap_or_default();
    let flood = if limit.to.is_none_or(|n| n >= 1_400) {
        1_100
    } else {
        // A hard limit this low still floods a 256-descriptor scaler several times over.
        limit.to.map_or(0, |n| n.saturating_sub(300) as usize)
    };
    let replica = pod("127.0.0.1:0", Behaviour::Page(vllm_running(3)));
    let grpc: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let _scaler = serve_with_256_descriptors(grpc, metrics, &replica.url());
    let mut keda = common::keda::client_when_up(grpc, Duration::from_secs(10)).await;
    let so = object("chat", &trigger());
    let req = metrics_request(&so, "infscale-queue-chat");
    assert_eq!(value_when(&mut keda, &req, Some(3.0)).await, 3.0);

    // (A scaler that no longer accepts leaves connects to time out: stop after a few.)
    let mut idle: Vec<TcpStream> = Vec::new();
    let mut refused = 0;
    while idle.len() + refused < flood && refused < 20 {
        match TcpStream::connect_timeout(&metrics, Duration::from_millis(300)) {
            Ok(s) => idle.push(s),
            Err(_) => refused += 1,
        }
    }
    assert!(
        idle.len() >= flood * 9 / 10,
        "only {} of {flood} connections opened",
        idle.len()
    );
    let flood = idle.len();
    // The pod is still scraped: a new value reaches KEDA.
    replica.set(Behaviour::Page(vllm_running(5)));
    assert_eq!(value_when(&mut keda, &req, Some(5.0)).await, 5.0);
    // Prometheus still scrapes the scaler.
    let scraped = scrape(metrics);
    assert!(
        scraped
            .as_ref()
            .is_some_and(|(status, body)| *status == 200 && body.contains("infscale_collectors 1")),
        "{scraped:?}"
    );
    // A new KEDA connection is served.
    let mut fresh = client(grpc).await;
    let r = fresh.get_metrics(req.clone()).await.expect("GetMetrics");
    assert_eq!(r.into_inner().metric_values[0].metric_value_float, 5.0);
    // At most the cap of the silent ones is still open.
    let open = idle
        .iter_mut()
        .map(|s| closed(s, Duration::from_millis(5)))
        .filter(|closed| !closed)
        .count();
    assert!(open <= 64, "{open} of {flood} idle connections still open");
    eprintln!("{flood} idle connections: {open} still open, scrapes and KEDA answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_a_half_sent_and_an_idle_connection_are_closed_in_time() {
    let running = start(Config {
        limits: Limits {
            header_timeout: Duration::from_secs(1),
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let connect = |addr| TcpStream::connect(addr).expect("connect");
    let t0 = Instant::now();
    // Silent on either port: closed after the header timeout.
    let mut silent_metrics = connect(running.metrics);
    let mut silent_grpc = connect(running.grpc);
    // A request head that never ends.
    let mut half = connect(running.metrics);
    half.write_all(b"GET /metrics HTTP/1.1\r\nhost: scaler\r\n")
        .unwrap();
    // A keep-alive connection idle after one answered request.
    let mut kept = connect(running.metrics);
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: scaler\r\n\r\n")
        .unwrap();
    let mut answer = [0u8; 256];
    let n = kept.read(&mut answer).unwrap();
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &answer[..n]
    );
    for (what, s) in [
        ("silent (metrics)", &mut silent_metrics),
        ("silent (gRPC)", &mut silent_grpc),
        ("half a head", &mut half),
        ("idle keep-alive", &mut kept),
    ] {
        assert!(closed(s, Duration::from_secs(4)), "{what} still open");
        let took = t0.elapsed();
        // The listeners' idle and header timeouts are what is tested, bounded with a margin.
        assert!(
            took < Duration::from_secs(4),
            "{what} closed after {took:?}"
        );
    }
    // KEDA's own connection, which speaks, is served throughout.
    let mut c = client(running.grpc).await;
    let so = object("x", &trigger());
    c.get_metric_spec(so).await.expect("spec");
}
