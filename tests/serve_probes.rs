//! Serve mode's probes and writes cannot be aimed or made to hammer, as KEDA and a recording
//! Kubernetes API stand-in see them: a `serviceUrl` naming anything but the trigger's own
//! Service is refused naming the key (at `GetMetricSpec`, or at `IsActive` when only the API
//! can tell), a page that redirects is never followed, and slice writes the API refuses are
//! retried with a pause that doubles while the target stays active.

mod common;

use common::activator::activator_on;
use common::keda::{client, is_active, object};
use common::kube::{Cluster, Kube, ADMIN_SERVICE};
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::{config, start};
use infscale::serve::path_kube::ServeModeSettings;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn serve_mode_keys<'a>(extra: &[(&'a str, String)]) -> Vec<(&'a str, String)> {
    let mut keys: Vec<(&'a str, String)> = vec![
        ("deployment", "chat".into()),
        ("threshold", "4".into()),
        ("scrapeIntervalSeconds", "0.1".into()),
        (
            "activatorUrl",
            format!("http://{ADMIN_SERVICE}.llm.svc:9092"),
        ),
        ("activatorHost", "chat".into()),
        ("serveMode", "true".into()),
        ("service", "chat".into()),
        ("activatorPort", "8080".into()),
        ("serveModeSettleSeconds", "0.2".into()),
    ];
    keys.extend_from_slice(extra);
    keys
}

/// The activator as the manifests find it: the ready pod of its admin Service, which selects
/// it, allowed by the operator (`--allow-activator`); serve mode's settings for a loopback
/// cluster with `activatorPort` 8080 among the activator's ports.
fn activator_installed(slices: &Cluster) -> common::activator::Activator {
    let act = activator_on("chat", "127.0.0.3:0");
    slices.activator_installed(&[act.server.addr]);
    act
}

/// A scaler config for [`activator_installed`], with `settings` for its leases.
fn installed_config(
    kube: &Kube,
    idle: &common::pods::Pod,
    settings: ServeModeSettings,
) -> infscale::serve::server::Config {
    infscale::serve::server::Config {
        statics: HashMap::from([("chat".to_owned(), vec![idle.url()])]),
        kube_api: Some(kube.server.url("")),
        use_kube: true,
        allowed_activators: vec![format!("http://{ADMIN_SERVICE}.llm.svc:9092")],
        serve_mode: ServeModeSettings {
            ports: 8000..=8999,
            loopback_pods: true,
            ..settings
        },
        ..config()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_url_naming_anything_but_the_triggers_service_is_refused_naming_the_key() {
    let slices = Cluster::default();
    let kube = Kube::serve_mode(slices.clone());
    let idle = pod("127.0.0.2:0", Behaviour::Page(vllm_running(0)));
    let _act = activator_installed(&slices);
    let running = start(installed_config(
        &kube,
        &idle,
        ServeModeSettings {
            lease: None,
            ..ServeModeSettings::default()
        },
    ))
    .await;
    let mut c = client(running.grpc).await;
    for aimed in [
        "http://db.llm.svc:5432",
        "http://chat.other.svc",
        "http://kubernetes.default.svc",
        "http://169.254.169.254",
        "http://metadata.example",
        "http://chat.llm.svc/latest/meta-data/iam/security-credentials/",
    ] {
        let so = object(
            "chat",
            &serve_mode_keys(&[("serviceUrl", aimed.to_owned())]),
        );
        let e = c
            .get_metric_spec(so.clone())
            .await
            .expect_err(&format!("{aimed} accepted"));
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{aimed}: {e}");
        assert!(e.message().contains("serviceUrl"), "{aimed}: {e}");
        let e = is_active(&mut c, &so).await.expect_err(aimed);
        assert!(e.message().contains("serviceUrl"), "{aimed}: {e}");
    }
    // An address the Service does not have (it has no ClusterIP here): idle, the target is
    // IsActive's error naming the key, never idle.
    let so = object(
        "chat",
        &serve_mode_keys(&[("serviceUrl", "http://127.0.0.9:80".to_owned())]),
    );
    let end = Instant::now() + Duration::from_secs(20);
    let said = loop {
        match is_active(&mut c, &so).await {
            Err(e) if e.message().contains("serviceUrl") => break e.message().to_owned(),
            Ok(active) => assert!(active, "idle with serviceUrl not the Service's"),
            Err(_) => {}
        }
        assert!(Instant::now() < end, "no error naming serviceUrl");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(said.contains("ClusterIP"), "{said}");
    // Nothing was probed there, and no slice written.
    assert!(!slices.ours("chat"));
}

/// A page server on `ip` answering every request with `answer`, counting them.
fn page_server(ip: &str, answer: String) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let (count, answer) = (count.clone(), answer.clone());
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
                    match std::io::Read::read(&mut conn, &mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
                let _ = conn.write_all(answer.as_bytes());
            });
        }
    });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_page_that_redirects_is_never_followed() {
    let page = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 9\n";
    let (elsewhere, followed) = page_server(
        "127.0.0.3",
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
            page.len()
        ),
    );
    let (pod, asked) = page_server(
        "127.0.0.2",
        format!(
            "HTTP/1.1 302 Found\r\nlocation: http://{elsewhere}/latest/meta-data/iam/security-credentials/\r\n\
             content-length: 0\r\nconnection: close\r\n\r\n"
        ),
    );
    let running = start(infscale::serve::server::Config {
        statics: HashMap::from([("chat".to_owned(), vec![format!("http://{pod}/metrics")])]),
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let so = object(
        "chat",
        &[
            ("deployment", "chat".to_owned()),
            ("threshold", "4".to_owned()),
            ("scrapeIntervalSeconds", "0.1".to_owned()),
        ],
    );
    let end = Instant::now() + Duration::from_secs(20);
    while asked.load(Ordering::SeqCst) < 5 {
        let _ = is_active(&mut c, &so).await;
        assert!(Instant::now() < end, "the pod was not scraped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        followed.load(Ordering::SeqCst),
        0,
        "a redirect was followed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_slice_writes_back_off_while_the_target_stays_active() {
    let slices = Cluster::default();
    let kube = Kube::serve_mode(slices.clone());
    let idle = pod("127.0.0.2:0", Behaviour::Page(vllm_running(0)));
    let _act = activator_installed(&slices);
    slices.forbid_slice_writes(true);
    let running = start(installed_config(
        &kube,
        &idle,
        ServeModeSettings {
            lease: None,
            ..ServeModeSettings::default()
        },
    ))
    .await;
    let mut c = client(running.grpc).await;
    let so = object("chat", &serve_mode_keys(&[]));
    let patches = || {
        kube.calls()
            .iter()
            .filter(|call| call.method == "PATCH" && call.path.contains("endpointslices"))
            .count()
    };
    let end = Instant::now() + Duration::from_secs(20);
    while patches() == 0 {
        assert!(Instant::now() < end, "no slice write was tried");
        let _ = is_active(&mut c, &so).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = patches();
    // 20 s of 403s, the target asked about every 250 ms: every 500 ms before (40 writes).
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        let active = is_active(&mut c, &so).await;
        // Active, or an error (the stand-in activator's watch sends no keep-alives, so after
        // 12 s of quiet its counts may read stalled for a moment): never idle.
        assert!(
            !matches!(active, Ok(false)),
            "idle while the slice cannot be written"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let tried = patches() - first;
    eprintln!("{tried} slice writes in 20 s of refusals");
    assert!(tried <= 10, "{tried} slice writes in 20 s");
    let page = running.metrics_text().await;
    let failed = page
        .lines()
        .find(|l| l.starts_with("infscale_serve_path_write_failures_total{"))
        .unwrap_or_default();
    assert!(failed.contains("reason=\"forbidden\""), "{page}");
    // The API writes again: the slice is written at the next try.
    slices.forbid_slice_writes(false);
    let end = Instant::now() + Duration::from_secs(40);
    while !slices.ours("chat") {
        assert!(
            Instant::now() < end,
            "the slice was not written once the API took it"
        );
        let _ = is_active(&mut c, &so).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_that_observes_never_probes_a_service_url_the_service_does_not_have() {
    let slices = Cluster::default();
    let kube = Kube::serve_mode(slices.clone());
    let idle = pod("127.0.0.2:0", Behaviour::Page(vllm_running(0)));
    let _act = activator_installed(&slices);
    let (aimed, asked) = page_server(
        "127.0.0.9",
        "HTTP/1.1 200 OK\r\nx-infscale-activator: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            .to_owned(),
    );
    let running = start(installed_config(
        &kube,
        &idle,
        common::scaler::quick_leases(),
    ))
    .await;
    let mut c = client(running.grpc).await;
    // The writer of the Service's slice first: a ScaledObject with no serviceUrl.
    let writer = object("chat", &serve_mode_keys(&[]));
    let end = Instant::now() + Duration::from_secs(20);
    while !slices.ours("chat") {
        let _ = is_active(&mut c, &writer).await;
        assert!(Instant::now() < end, "the writer wrote no slice");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A second ScaledObject on the Service observes it, its serviceUrl an address the Service
    // does not have (something that answers as the activator would).
    let observer = object(
        "chat-two",
        &serve_mode_keys(&[("serviceUrl", format!("http://{aimed}"))]),
    );
    let end = Instant::now() + Duration::from_secs(20);
    let said = loop {
        let _ = is_active(&mut c, &writer).await;
        match is_active(&mut c, &observer).await {
            Err(e) if e.message().contains("serviceUrl") => break e.message().to_owned(),
            Ok(active) => assert!(active, "the observer went idle"),
            Err(_) => {}
        }
        assert!(Instant::now() < end, "no error naming serviceUrl");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(said.contains("ClusterIP"), "{said}");
    for _ in 0..20 {
        let _ = is_active(&mut c, &observer).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "the aimed address was probed"
    );
}
