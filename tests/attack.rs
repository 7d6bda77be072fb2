//! The scaler under attack and at its limits, on loopback: addresses that try to reach what they
//! should not, inputs too large or too many, idle connections, a SIGTERM with a stream open,
//! values and durations out of range.

mod common;

use common::keda::{active_when, client, metrics_request, next_push, object, value_when};
use common::kube::{FakePod, Kube};
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::{config, free_port, start, with_kube};
use infscale::serve::limits::Limits;
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A listener that only counts the connections made to it (for 20 s at most).
fn victim() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let count = hits.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match listener.accept() {
                Ok(_) => {
                    count.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (addr.to_string(), hits)
}

fn trigger(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut meta = vec![
        ("deployment", "chat".to_owned()),
        ("threshold", "4".to_owned()),
        ("scrapeIntervalSeconds", "0.2".to_owned()),
    ];
    meta.extend_from_slice(extra);
    meta
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn addresses_that_reach_elsewhere_are_refused_and_nothing_is_fetched() {
    let (victim, hits) = victim();
    let running = start(Config {
        // An operator allowed one activator, without a port in one entry and with one in the other.
        allowed_activators: vec![format!("http://{victim}"), "http://act".to_owned()],
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let victim_port = victim.rsplit(':').next().unwrap();
    let urls = [
        format!("http://act.llm.svc:x@{victim}/internal/admin?"),
        format!("http://{victim}@evil.example/queue"),
        format!("http://{victim}0"),
        "http://act.evil.example".to_owned(),
        format!("http://act.llm.svc:{victim_port}/queue?"),
        format!("http://127.0.0.1:{victim_port}/#x"),
    ];
    for url in &urls {
        let so = object("chat", &trigger(&[("activatorUrl", url.clone())]));
        let e = c.is_active(so).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{url}: {e:?}");
        assert!(e.message().contains("activatorUrl"), "{url}: {e:?}");
    }
    let paths = [
        "/../../../../api/v1/namespaces/kube-system/secrets",
        "/%2e%2e/%2e%2e/secrets",
        "/metrics@evil",
        "/metrics\r\nHost: evil",
        "/metrics/./..",
    ];
    for path in paths {
        let so = object("chat", &trigger(&[("metricsPath", path.to_owned())]));
        let e = c.is_active(so).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{path:?}: {e:?}");
        assert!(e.message().contains("metricsPath"), "{path:?}: {e:?}");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a request reached the victim"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversized_metadata_and_too_many_targets_are_refused() {
    let replica = pod("127.0.0.1:0", Behaviour::Page(vllm_running(1)));
    let running = start(Config {
        statics: HashMap::from([("chat".to_owned(), vec![replica.url()])]),
        limits: Limits {
            max_targets: 3,
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let huge = format!("/{}", "m".repeat(1 << 20));
    let so = object("chat", &trigger(&[("metricsPath", huge)]));
    let e = c.get_metric_spec(so).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("metricsPath"),
        "{}",
        &e.message()[..200.min(e.message().len())]
    );
    assert!(e.message().len() < 500, "the error echoes the value");
    let many: Vec<(&'static str, String)> = (0..100)
        .map(|i| {
            (
                Box::leak(format!("k{i}").into_boxed_str()) as &'static str,
                "v".to_owned(),
            )
        })
        .collect();
    let e = c.is_active(object("chat", &many)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);

    // Three triggers KEDA reads fill the scaler (a spec-only one would give way).
    for i in 0..3 {
        let so = object(&format!("chat-{i}"), &trigger(&[]));
        c.get_metric_spec(so.clone()).await.unwrap();
        let _ = c.is_active(so).await;
    }
    // A target past the limit: its spec still answers (from the metadata alone, so KEDA's
    // fallback can apply), its value and activity are refused.
    let fourth = object("chat-3", &trigger(&[]));
    c.get_metric_spec(fourth.clone()).await.unwrap();
    let e = c
        .get_metrics(metrics_request(&fourth, "infscale-queue-chat-3"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    let e = c.is_active(fourth).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    // The targets already followed still answer.
    let so = object("chat-0", &trigger(&[]));
    value_when(
        &mut c,
        &metrics_request(&so, "infscale-queue-chat"),
        Some(1.0),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_scaled_objects_in_a_namespace_share_one_pod_watch() {
    let replica = pod("127.0.0.2:0", Behaviour::Page(vllm_running(2)));
    let port = replica.server.addr.port();
    let api = Kube::model(
        "llm",
        "chat",
        vec![FakePod {
            name: "chat-0".into(),
            ip: "127.0.0.2".into(),
            ready: true,
        }],
    );
    let (_running, mut c) = with_kube(api.server.url("")).await;
    let objects: Vec<_> = (0..50)
        .map(|i| {
            object(
                &format!("so-{i}"),
                &trigger(&[("metricsPort", port.to_string())]),
            )
        })
        .collect();
    for so in &objects {
        c.is_active(so.clone()).await.ok();
    }
    for so in &objects {
        active_when(&mut c, so, Ok(true), Duration::from_secs(10)).await;
    }
    let lists = api.pod_lists();
    assert!(
        lists <= 2,
        "{lists} pod lists for 50 ScaledObjects in one namespace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_connections_are_closed_and_keda_keeps_working() {
    let replica = pod("127.0.0.1:0", Behaviour::Page(vllm_running(3)));
    let running = start(Config {
        statics: HashMap::from([("chat".to_owned(), vec![replica.url()])]),
        limits: Limits {
            connection_idle: Duration::from_secs(2),
            ..Limits::default()
        },
        ..config()
    })
    .await;
    // KEDA's pooled connection, opened before the flood, and used across it.
    let mut keda = client(running.grpc).await;
    let so = object("chat", &trigger(&[]));
    let req = metrics_request(&so, "infscale-queue-chat");
    value_when(&mut keda, &req, Some(3.0)).await;
    let mut idle = Vec::new();
    for _ in 0..1100 {
        idle.push(std::net::TcpStream::connect(running.grpc).unwrap());
    }
    let flooded = Instant::now();
    // Every idle one is closed (read returns 0 or an error) within the idle timeout and a margin.
    for s in &mut idle {
        s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
        let mut buf = [0u8; 256];
        loop {
            use std::io::Read;
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue, // the server's HTTP/2 preface
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("an idle connection was still open: {e}"),
            }
        }
    }
    let closed_in = flooded.elapsed();
    assert!(
        closed_in < Duration::from_secs(5),
        "closed after {closed_in:?}"
    );
    // KEDA's connection outlived the idle timeout (the server's pings kept it) and still works.
    let r = keda.get_metrics(req.clone()).await.unwrap().into_inner();
    assert_eq!(r.metric_values[0].metric_value_float, 3.0);
    let mut fresh = client(running.grpc).await;
    assert!(fresh.is_active(so).await.unwrap().into_inner().result);
    eprintln!("1100 idle connections closed within {closed_in:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_with_an_open_stream_exits_within_the_drain() {
    let replica = pod("127.0.0.1:0", Behaviour::Page(vllm_running(3)));
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args([
            "serve",
            "--no-kube",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--metrics-listen",
            "none",
            "--drain-seconds",
            "2",
            "--static-target",
            &format!("chat={}", replica.url()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut c = common::keda::client_when_up(addr, Duration::from_secs(10)).await;
    let so = object("chat", &trigger(&[]));
    active_when(&mut c, &so, Ok(true), Duration::from_secs(10)).await;
    let mut stream = c.stream_is_active(so).await.unwrap().into_inner();
    assert!(next_push(&mut stream).await);
    let term = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if term.elapsed() > Duration::from_secs(8) {
            let _ = child.kill();
            panic!("still running 8 s after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = term.elapsed();
    assert!(exited.success(), "{exited:?}");
    // The 2 s drain is what is tested: the exit comes within it and a margin.
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after SIGTERM"
    );
    // The stream was closed, not cut.
    let end = tokio::time::timeout(Duration::from_secs(1), stream.message()).await;
    assert!(matches!(end, Ok(Ok(None)) | Ok(Err(_))), "{end:?}");
    eprintln!("SIGTERM with an open stream: exited after {took:?}");
}

#[test]
fn durations_out_of_range_exit_2_naming_the_flag() {
    for args in [
        vec!["serve", "--no-kube", "--idle-stop-seconds", "1e300"],
        vec!["serve", "--no-kube", "--stale-after-seconds", "1e300"],
        vec!["serve", "--no-kube", "--drain-seconds", "1e300"],
        vec!["serve", "--no-kube", "--connection-idle-seconds", "inf"],
        vec![
            "activator",
            "--upstream",
            "http://127.0.0.1:1",
            "--health-path",
            "/health",
            "--hold-timeout",
            "1e19",
        ],
        vec![
            "activator",
            "--upstream",
            "http://127.0.0.1:1",
            "--health-path",
            "/health",
            "--drain-seconds",
            "1e300",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let flag = args[args.len() - 2];
        assert!(
            stderr.contains(flag) || stderr.contains("holdTimeoutSeconds"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gauge_of_two_to_the_64_is_clamped_to_what_keda_holds() {
    let replica = pod(
        "127.0.0.1:0",
        Behaviour::Page(vllm_running(18446744073709551615)),
    );
    let running = start(Config {
        statics: HashMap::from([("chat".to_owned(), vec![replica.url()])]),
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object("chat", &trigger(&[]));
    let req = metrics_request(&so, "infscale-queue-chat");
    let v = value_when(&mut c, &req, None).await;
    let r = c.get_metrics(req).await.unwrap().into_inner();
    assert_eq!(v, infscale_core::limits::MAX_METRIC_VALUE);
    assert_eq!(r.metric_values[0].metric_value, 1 << 53);
    // KEDA multiplies by 1000 into an int64: it fits.
    assert!(v * 1000.0 < i64::MAX as f64);
}
