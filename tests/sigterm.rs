//! SIGTERM during load, for both binaries as processes (what Kubernetes does on every rollout):
//!
//! - `infscale activator`: requests already forwarded finish with 200, requests held for a
//!   route with no ready replica are answered 503 with the reason, and the process exits 0
//!   within its drain;
//! - `infscale serve`: calls in flight are answered, every `StreamIsActive` stream ends cleanly,
//!   and the process exits 0 within its 2 s drain (tests/attack.rs checks the same with one
//!   stream and no other load).

mod common;

use common::churn::{activator_process, client, send_to, Outcome, Upstream, UpstreamOpts};
use infscale::serve::proto::{GetMetricsRequest, ScaledObjectRef};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_infscale");

fn sigterm(child: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// Waits up to `within` for the child to exit; kills it and panics after.
async fn exit_within(child: &mut Child, within: Duration) -> (ExitStatus, Duration) {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return (status, t.elapsed());
        }
        if t.elapsed() > within {
            let _ = child.kill();
            panic!("still running {within:?} after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn activator_drains_forwarded_requests_and_answers_held_ones() {
    // Each forwarded request takes 0.8 to 1.6 s at the upstream.
    let busy = Upstream::start(
        "127.0.0.1",
        UpstreamOpts {
            work_ms: 1600,
            ..UpstreamOpts::default()
        },
    )
    .await;
    // Nothing listens here: the cold route never becomes ready.
    let cold = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("infscale-sigterm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let routes = dir.join("routes.yaml");
    std::fs::write(
        &routes,
        format!(
            "routes:\n  - pathPrefix: /cold/\n    upstream: http://{cold}\n    healthPath: /health\n    countsHost: cold\n    holdTimeoutSeconds: 60\n  - upstream: http://{}\n    healthPath: /health\n    countsHost: busy\n",
            busy.addr
        ),
    )
    .unwrap();
    let mut a = activator_process(
        EXE,
        &[
            "--routes".into(),
            routes.display().to_string(),
            "--drain-seconds".into(),
            "10".into(),
        ],
    )
    .await;
    let c = client();
    let forwarded: Vec<_> = (0..20u64)
        .map(|id| {
            let (c, url) = (c.clone(), format!("http://{}/v1/completions", a.proxy));
            tokio::spawn(async move { send_to(&c, &url, id).await })
        })
        .collect();
    let held: Vec<_> = (100..110u64)
        .map(|id| {
            let (c, url) = (c.clone(), format!("http://{}/cold/v1/completions", a.proxy));
            tokio::spawn(async move { send_to(&c, &url, id).await })
        })
        .collect();
    // Every busy request has reached the upstream (most are still being worked on), and the
    // cold ones are held.
    let deadline = Instant::now() + Duration::from_secs(10);
    while (0..20).any(|id| busy.count(id) == 0) {
        assert!(
            Instant::now() < deadline,
            "requests never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    loop {
        let queue: serde_json::Value = reqwest::get(format!("http://{}/queue", a.admin))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if queue["cold"]["Held"] == 10 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cold requests were not held: {queue}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sigterm(&a.child);
    let (status, took) = exit_within(&mut a.child, Duration::from_secs(12)).await;
    assert!(status.success(), "{status:?}");
    for (id, t) in forwarded.into_iter().enumerate() {
        let o = t.await.unwrap();
        assert!(
            matches!(&o, Outcome::Answer(200, body) if *body == format!("ok {{\"id\":{id}}}")),
            "forwarded request {id}: {o:?}"
        );
        assert_eq!(busy.count(id as u64), 1);
    }
    for (i, t) in held.into_iter().enumerate() {
        let o = t.await.unwrap();
        let Outcome::Answer(503, body) = &o else {
            panic!("held request {i}: {o:?}");
        };
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(
            json["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{body}"
        );
    }
    // The longest request takes 1.6 s: the drain waited for the ones in flight, and not for
    // the whole 10 s.
    assert!(
        took < Duration::from_secs(8),
        "exited {took:?} after SIGTERM"
    );
    eprintln!("activator: exited 0 {took:?} after SIGTERM; 20 forwarded answered 200, 10 held answered 503");
    let _ = std::fs::remove_dir_all(dir);
}

fn object(name: &str) -> ScaledObjectRef {
    common::keda::object(
        name,
        &[
            ("deployment", name.to_owned()),
            ("threshold", "4".to_owned()),
            ("scrapeIntervalSeconds", "0.5".to_owned()),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_exits_promptly_under_load_and_its_streams_end_cleanly() {
    let pod = Upstream::start("127.0.0.1", UpstreamOpts::default()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let names: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    let mut cmd = Command::new(EXE);
    cmd.args([
        "serve",
        "--no-kube",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--metrics-listen",
        "none",
        "--drain-seconds",
        "2",
    ]);
    for n in &names {
        cmd.arg("--static-target")
            .arg(format!("{n}=http://{}/metrics", pod.addr));
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let channel = loop {
        match tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{port}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "the scaler never listened: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let mut c = common::keda::client_over(channel.clone());
    for n in &names {
        let req = common::keda::metrics_request(&object(n), &format!("infscale-queue-{n}"));
        while c.get_metrics(req.clone()).await.is_err() {
            assert!(Instant::now() < deadline, "{n} never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut streams = Vec::new();
    for n in &names {
        let mut s = c.stream_is_active(object(n)).await.unwrap().into_inner();
        assert!(s.message().await.unwrap().unwrap().result);
        streams.push(s);
    }
    // Four callers polling as fast as they are answered, until the scaler is gone.
    let callers: Vec<_> = (0..4)
        .map(|k| {
            let mut c = common::keda::client_over(channel.clone());
            let names = names.clone();
            tokio::spawn(async move {
                let (mut ok, mut i) = (0u64, k);
                loop {
                    let n = &names[i % names.len()];
                    let req = GetMetricsRequest {
                        scaled_object_ref: Some(object(n)),
                        metric_name: format!("infscale-queue-{n}"),
                    };
                    let asked = Instant::now();
                    let r = tokio::time::timeout(Duration::from_secs(5), c.get_metrics(req)).await;
                    match r {
                        Ok(Ok(r)) => {
                            assert_eq!(r.into_inner().metric_values[0].metric_value_float, 3.0);
                            ok += 1;
                        }
                        // Refused or closed once the scaler stops: the caller sees an error at once.
                        Ok(Err(_)) => return (ok, asked.elapsed()),
                        Err(_) => panic!("a GetMetrics call hung for 5 s"),
                    }
                    i += 4;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    sigterm(&child);
    let (status, took) = exit_within(&mut child, Duration::from_secs(8)).await;
    assert!(status.success(), "{status:?}");
    // The drain (2 s) is what is tested: the exit comes within it and a margin.
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after SIGTERM"
    );
    for (i, mut s) in streams.into_iter().enumerate() {
        let end = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match s.message().await {
                    Ok(Some(_)) => continue,
                    other => return other.map(|_| ()),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("stream {i} still open 2 s after the scaler exited"));
        assert!(
            end.is_ok(),
            "stream {i} ended with {end:?}, not its end of stream"
        );
    }
    let mut answered = 0;
    for caller in callers {
        let (ok, last_took) = caller.await.unwrap();
        assert!(ok > 0);
        // KEDA's 3 s deadline is what is tested: no call outlives it while serve drains.
        assert!(
            last_took < Duration::from_secs(3),
            "the last call took {last_took:?}"
        );
        answered += ok;
    }
    eprintln!("serve: exited 0 {took:?} after SIGTERM; 20 streams ended cleanly; {answered} calls answered under load");
}
