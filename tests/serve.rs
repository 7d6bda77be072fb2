//! `infscale serve` end to end on loopback: a stand-in Kubernetes API, stand-in model servers
//! serving fixture pages, a stand-in activator, and KEDA's calls made with a tonic client.

mod common;

use common::activator::activator;
use common::fixture;
use common::keda::{client, client_over, metrics_request, next_push, object, value_when};
use common::kube::{ready_pods, FakePod, Kube};
use common::pods::{pod, pods_on_one_port, Behaviour};
use common::scaler::{config, push_after_hold, start};
use infscale::serve::limits::Limits;
use infscale::serve::server::Config;
use infscale_core::control::decision::{evaluate, ScalerState};
use infscale_core::observe::metrics::{read_page, Replica, ServerChoice};
use infscale_core::policy::{Metric, Policy};
use infscale_core::project::demand::Observation;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

fn page(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

/// What `decide` computes for the same pages and held count: the library's evaluation.
fn decided_value(pages: &[&str], held: f64) -> f64 {
    let replicas: Vec<Replica> = pages
        .iter()
        .map(|p| {
            Replica::new(
                *p,
                read_page(&page(p), ServerChoice::Auto).signals.unwrap(),
                None,
            )
        })
        .collect();
    let obs = Observation {
        now: 0.0,
        current: replicas.len() as u32,
        status: None,
        replicas: &replicas,
        missing: 0,
        held: Some(held),
        scraped_at: Some(0.0),
        asleep: &[],
        starting_since: &[],
    };
    evaluate(
        &Policy::new(Metric::Queue, 24.0),
        &obs,
        &mut ScalerState::default(),
    )
    .value
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keda_calls_against_a_stand_in_cluster() {
    let busy = ["vllm-busy.prom", "vllm-idle.prom", "vllm-two-engines.prom"];
    let (pods, port) = pods_on_one_port(busy.iter().map(|p| Behaviour::Page(page(p))).collect());
    let api = Kube::model("llm", "chat", ready_pods("chat", 3));
    let act = activator("chat");
    let running = start(Config {
        kube_api: Some(api.server.url("")),
        use_kube: true,
        allowed_activators: vec![act.url()],
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object(
        "chat",
        &[
            ("scalerAddress", "infscale.infscale.svc:9090".into()),
            ("threshold", "24".into()),
            ("metricsPort", port.to_string()),
            ("scrapeIntervalSeconds", "0.2".into()),
            ("activatorUrl", act.url()),
        ],
    );

    // GetMetricSpec: one spec, the per-replica target in both fields.
    let spec = c.get_metric_spec(so.clone()).await.unwrap().into_inner();
    assert_eq!(spec.metric_specs.len(), 1);
    let name = spec.metric_specs[0].metric_name.clone();
    assert_eq!(name, "infscale-queue-chat");
    assert_eq!(
        (
            spec.metric_specs[0].target_size,
            spec.metric_specs[0].target_size_float
        ),
        (24, 24.0)
    );

    // GetMetrics: running + waiting over the three pods, exactly what decide computes.
    let req = metrics_request(&so, &name);
    let expected = decided_value(&busy, 0.0);
    assert_eq!(expected, 65.0 + 0.0 + 70.0);
    assert_eq!(value_when(&mut c, &req, Some(expected)).await, expected);
    let r = c.get_metrics(req.clone()).await.unwrap().into_inner();
    assert_eq!(r.metric_values[0].metric_value, 135);
    assert!(c.is_active(so.clone()).await.unwrap().into_inner().result);

    // Idle: value 0 in both fields, IsActive false.
    for p in &pods {
        p.set(Behaviour::Page(page("vllm-idle.prom")));
    }
    assert_eq!(value_when(&mut c, &req, Some(0.0)).await, 0.0);
    let r = c.get_metrics(req.clone()).await.unwrap().into_inner();
    assert_eq!(
        (
            r.metric_values[0].metric_value,
            r.metric_values[0].metric_value_float
        ),
        (0, 0.0)
    );
    assert!(!c.is_active(so.clone()).await.unwrap().into_inner().result);

    // StreamIsActive: the current state at once, then true within 100 ms of a held request.
    let mut stream = c.stream_is_active(so.clone()).await.unwrap().into_inner();
    assert!(!next_push(&mut stream).await);
    let took = push_after_hold(&mut stream, || act.set_held(1)).await;
    eprintln!("StreamIsActive pushed true {took:?} after the request was held");

    // The held request is demand: value = running + waiting + held, as decide computes.
    let with_held = decided_value(&["vllm-idle.prom"; 3], 1.0);
    assert_eq!(value_when(&mut c, &req, Some(with_held)).await, 1.0);
    assert!(c.is_active(so.clone()).await.unwrap().into_inner().result);

    // Health: SERVING; the scaler's own /metrics lists the collector.
    let channel = Channel::from_shared(format!("http://{}", running.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(
        status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    let text = reqwest::get(format!("http://{}/metrics", running.metrics))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("infscale_collectors 1"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("infscale_target_value{namespace=\"llm\",scaledobject=\"chat\",target=\"chat\",metric=\"queue\",threshold=\"24\",trigger=\"")
            && l.ends_with("\"} 1.0")),
        "{text}"
    );
    drop(api);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faulty_pods_do_not_vote_and_all_failing_is_an_error() {
    let good = pod("127.0.0.1:0", Behaviour::Page(page("vllm-busy.prom")));
    let hang = pod("127.0.0.1:0", Behaviour::Hang);
    let error = pod("127.0.0.1:0", Behaviour::Status(500));
    let huge = pod("127.0.0.1:0", Behaviour::Huge(50 << 20));
    let garbage = pod(
        "127.0.0.1:0",
        Behaviour::Page(page("malformed/garbage.prom")),
    );
    let mut statics = HashMap::new();
    statics.insert(
        "mixed".to_owned(),
        vec![
            good.url(),
            hang.url(),
            error.url(),
            huge.url(),
            garbage.url(),
        ],
    );
    statics.insert(
        "broken".to_owned(),
        vec![hang.url(), error.url(), huge.url(), garbage.url()],
    );
    let running = start(Config {
        statics,
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let meta = |d: &str| {
        vec![
            ("deployment", d.to_owned()),
            ("threshold", "24".to_owned()),
            ("scrapeTimeoutSeconds", "1".to_owned()),
            ("scrapeIntervalSeconds", "0.5".to_owned()),
        ]
    };
    let mixed = object("mixed", &meta("mixed"));
    let req = metrics_request(&mixed, "infscale-queue-mixed");
    // The good pod reads 65, above the target of 24: the four that fail count as nothing, as the
    // HPA counts missing pods on the way up; 65 over 5 pods is below the target, which flips
    // the direction, so the HPA keeps the 5 it has: 5 x 24.
    assert_eq!(value_when(&mut c, &req, Some(120.0)).await, 120.0);
    assert!(
        c.is_active(mixed.clone())
            .await
            .unwrap()
            .into_inner()
            .result
    );
    let asked = Instant::now();
    c.get_metrics(req.clone()).await.unwrap();
    // Measured against the 1 s scrape timeout: GetMetrics answers from what was read, never
    // waiting for the hung pod's scrape to time out.
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "GetMetrics waited {:?}",
        asked.elapsed()
    );

    let broken = object("broken", &meta("broken"));
    let req = metrics_request(&broken, "infscale-queue-broken");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let e = c.get_metrics(req.clone()).await.unwrap_err();
        if e.message().contains("none of 4 ready replica(s)") || Instant::now() > deadline {
            break e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("none of 4 ready replica(s)"),
        "{status:?}"
    );
    // Four pods that cannot be read may all be busy: active, never idle.
    assert!(
        c.is_active(broken.clone())
            .await
            .unwrap()
            .into_inner()
            .result
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_metadata_is_invalid_argument_naming_the_key() {
    let running = start(config()).await;
    let mut c = client(running.grpc).await;
    for (meta, key) in [
        (vec![("deployment", "x".to_owned())], "threshold"),
        (
            vec![("threshold", "4".to_owned()), ("colour", "red".to_owned())],
            "colour",
        ),
        (
            vec![
                ("threshold", "4".to_owned()),
                ("activatorUrl", "http://169.254.169.254".to_owned()),
            ],
            "activatorUrl",
        ),
    ] {
        let e = c.get_metric_spec(object("x", &meta)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains(key), "{e:?}");
    }
    // A name other than the one GetMetricSpec declared.
    let so = object("x", &[("threshold", "4".to_owned())]);
    let e = c
        .get_metrics(metrics_request(&so, "s0-something-else"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    // A huge name is not echoed whole (a status message travels in a header).
    let huge = "m".repeat(100_000);
    let e = c
        .get_metrics(metrics_request(&so, &huge))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{}", e.message().len());
    assert!(e.message().len() < 1024, "{}", e.message().len());
    // StreamMetricSpec is not implemented: KEDA falls back to polling GetMetricSpec.
    let e = c.stream_metric_spec(so).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unimplemented);
}

/// Issue 25: `metric: kv`, `ttft` or `cpu` with `server: llamacpp` was accepted and answered
/// UNAVAILABLE forever ("rates need two scrapes"). Now the trigger is refused where it is read:
/// GetMetricSpec and IsActive are INVALID_ARGUMENT naming the server, the metric and what the
/// server does export, no collector starts, and `decide` and `kube` refuse the same flags with
/// the same words (one core check), exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metric_the_named_server_cannot_export_is_refused_at_the_trigger() {
    let llama = pod("127.0.0.1:0", Behaviour::Page(page("llamacpp.prom")));
    let running = start(Config {
        statics: HashMap::from([("chat".to_owned(), vec![llama.url()])]),
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let gives = "llamacpp gives queue, waiting, running, occupancy, work";
    for (metric, threshold, lacks) in [
        ("kv", "0.8", "KV-cache usage gauge"),
        ("ttft", "2", "time-to-first-token histogram"),
        ("cpu", "70", "process CPU counter"),
        ("queue,kv", "4,0.8", "KV-cache usage gauge"),
    ] {
        let so = object(
            "chat",
            &[
                ("threshold", threshold.to_owned()),
                ("metric", metric.to_owned()),
                ("server", "llamacpp".to_owned()),
            ],
        );
        let spec = c.get_metric_spec(so.clone()).await.unwrap_err();
        let active = c.is_active(so).await.unwrap_err();
        for e in [spec, active] {
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{metric}: {e:?}");
            let m = e.message();
            assert!(m.contains("trigger metadata metric"), "{m}");
            assert!(m.contains("server llamacpp exports no"), "{m}");
            assert!(m.contains(lacks), "{m}");
            assert!(m.contains(gives), "{m}");
        }
    }
    // The same server with a metric it exports is followed and read.
    let so = object(
        "chat",
        &[
            ("threshold", "4".to_owned()),
            ("metric", "queue".to_owned()),
            ("server", "llamacpp".to_owned()),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    assert_eq!(value_when(&mut c, &req, Some(7.0)).await, 7.0);
    let text = running.metrics_text().await;
    assert!(text.contains("infscale_collectors 1"), "{text}");

    // decide and kube read the same pair through the same check.
    let decide = std::process::Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(["decide", &fixture("llamacpp.prom"), "--server", "llamacpp"])
        .args(["--metric", "kv", "--target", "0.8"])
        .output()
        .unwrap();
    let kube = std::process::Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(["kube", "--deployment", "chat", "--server", "llamacpp"])
        .args(["--metric", "kv", "--target", "0.8", "--kube-api"])
        .arg(common::scaler::refused_url())
        .output()
        .unwrap();
    for out in [decide, kube] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr
                .contains("server llamacpp exports no KV-cache usage gauge, which metric kv needs"),
            "{stderr}"
        );
        assert!(stderr.contains(gives), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_api_or_a_static_target_the_target_errors() {
    let running = start(config()).await;
    let mut c = client(running.grpc).await;
    let so = object(
        "ghost",
        &[
            ("threshold", "4".to_owned()),
            ("scrapeIntervalSeconds", "0.1".to_owned()),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let e = c.is_active(so.clone()).await.unwrap_err();
        if e.message().contains("no --static-target ghost") {
            break;
        }
        assert!(Instant::now() < deadline, "{e:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A CA, and a certificate it signs for `names` (PEM: certificate, key).
struct Pki {
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        Pki { ca, ca_key }
    }

    fn issue(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.ca, &self.ca_key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_from_certificate_files() {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("infscale-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pki = Pki::new();
    let (server_cert, server_key) = pki.issue(&["localhost", "127.0.0.1"]);
    let (client_cert, client_key) = pki.issue(&["keda-operator"]);
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let tls = infscale::serve::server::TlsFiles {
        cert: write("server.pem", &server_cert),
        key: write("server.key", &server_key),
        client_ca: Some(write("ca.pem", &pki.ca.pem())),
    };
    let running = start(Config {
        tls: Some(tls),
        ..config()
    })
    .await;
    let url = format!("https://{}", running.grpc);
    let base = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pki.ca.pem()))
        .domain_name("localhost");
    let with_cert = base
        .clone()
        .identity(Identity::from_pem(&client_cert, &client_key));
    let channel = Channel::from_shared(url.clone())
        .unwrap()
        .tls_config(with_cert)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = client_over(channel);
    let spec = c
        .get_metric_spec(object("chat", &[("threshold", "8".to_owned())]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(spec.metric_specs[0].target_size, 8);
    // Without a client certificate the handshake is refused.
    let no_cert = Channel::from_shared(url)
        .unwrap()
        .tls_config(base)
        .unwrap()
        .connect()
        .await;
    let refused = match no_cert {
        Err(_) => true,
        Ok(channel) => client_over(channel)
            .get_metric_spec(object("chat", &[("threshold", "8".to_owned())]))
            .await
            .is_err(),
    };
    assert!(refused, "a client without a certificate was served");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_last_pod_list_outlives_the_api_for_a_bounded_time() {
    let (pods, port) = pods_on_one_port(vec![Behaviour::Page(page("vllm-busy.prom"))]);
    let api = Kube::model(
        "llm",
        "chat",
        vec![FakePod {
            name: "chat-0".into(),
            ip: "127.0.0.2".into(),
            ready: true,
        }],
    );
    let running = start(Config {
        kube_api: Some(api.server.url("")),
        use_kube: true,
        limits: Limits {
            staleness: Duration::from_secs(2),
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object(
        "chat",
        &[
            ("threshold", "24".into()),
            ("metricsPort", port.to_string()),
            ("scrapeIntervalSeconds", "0.2".into()),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    assert_eq!(value_when(&mut c, &req, Some(65.0)).await, 65.0);
    let down_at = Instant::now();
    drop(api);
    // Still the last pod set for a while, then an error, never a zero.
    let mut served_after = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(20);
    let error = loop {
        match c.get_metrics(req.clone()).await {
            Ok(r) => {
                assert_eq!(r.into_inner().metric_values[0].metric_value_float, 65.0);
                served_after = down_at.elapsed();
            }
            Err(e) => break e,
        }
        assert!(Instant::now() < deadline, "never went stale");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(error.code(), tonic::Code::Unavailable);
    assert!(
        error.message().contains("past the staleness bound"),
        "{error:?}"
    );
    assert!(served_after >= Duration::from_secs(1), "{served_after:?}");
    drop(pods);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_kube_decides_through_the_pod_proxy_and_applies() {
    let (pods, port) = pods_on_one_port(vec![
        Behaviour::Page(page("vllm-busy.prom")),
        Behaviour::Page(page("vllm-two-engines.prom")),
    ]);
    let api = Kube::model("llm", "chat", ready_pods("chat", 2));
    let args: Vec<String> = [
        "kube",
        "-n",
        "llm",
        "--deployment",
        "chat",
        "--kube-api",
        &api.server.url(""),
        "--metrics-port",
        &port.to_string(),
        "--scrape-via",
        "proxy",
        "--target",
        "24",
        "--max",
        "10",
        "--apply",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let text = tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .unwrap();
    // 65 + 70 = 135 in flight at 24 per replica: 6.
    assert!(
        text.contains("queue 135 = running 106 + waiting 29 on 2 replica(s)"),
        "{text}"
    );
    assert!(
        text.contains("current 2 -> desired 6 (up; metric)"),
        "{text}"
    );
    assert!(text.contains("scaled deployment/chat to 6"), "{text}");
    assert_eq!(api.replicas("llm", "chat").unwrap(), 6);
    drop(pods);
}
