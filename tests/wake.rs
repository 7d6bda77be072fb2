//! Waking from zero, the whole path: a Deployment with no pods, the real activator in front of
//! it, and the real scaler following the activator. A request held at the activator reaches
//! KEDA as `StreamIsActive: true` and as demand in `GetMetrics`.

mod common;

use common::keda::{client, object};
use common::kube::Kube;
use infscale::activator::routes::RouteSpec;
use infscale::serve::discovery::ScrapeVia;
use infscale::serve::proto::GetMetricsRequest;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_request_wakes_the_deployment() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The model is at zero: no pods, and its Service's port answers nothing.
    let api = Kube::model("llm", "chat", Vec::new());
    let nothing = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}", nothing.local_addr().unwrap());
    drop(nothing);
    let route = RouteSpec {
        health_path: Some("/health".into()),
        max_held: 100,
        hold_timeout_seconds: 30.0,
        counts_host: Some("chat".into()),
        ..RouteSpec::to_upstream(&upstream)
    }
    .check(0, "llm")
    .unwrap();
    let act = infscale::activator::server::bind(infscale::activator::server::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        routes: vec![route],
        reload: None,
        learn: None,
        namespace_cap: None,
        kube_api: None,
        limits: infscale::activator::limits::Limits {
            max_body: 1 << 20,
            drain: Duration::from_secs(1),
            ..Default::default()
        },
    })
    .await
    .unwrap();
    let (proxy, admin) = (act.proxy_addr().unwrap(), act.admin_addr().unwrap());
    tokio::spawn(act.run(std::future::pending()));

    let scaler = infscale::serve::server::bind(infscale::serve::server::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: None,
        tls: None,
        statics: HashMap::new(),
        allowed_activators: vec![format!("http://{admin}")],
        kube_api: Some(api.server.url("")),
        use_kube: true,
        scrape_via: Some(ScrapeVia::Direct),
        paths: None,
        state_dir: None,
        serve_mode: Default::default(),
        limits: infscale::serve::limits::Limits {
            max_page_bytes: 1 << 20,
            max_concurrent_scrapes: 8,
            ..Default::default()
        },
    })
    .await
    .unwrap();
    let grpc = scaler.grpc_addr().unwrap();
    tokio::spawn(scaler.run(std::future::pending()));
    let mut c = client(grpc).await;
    let so = object(
        "chat",
        &[
            ("threshold", "4".to_owned()),
            ("scrapeIntervalSeconds", "0.2".to_owned()),
            ("activatorUrl", format!("http://{admin}")),
        ],
    );
    // Idle at zero: not active, no demand.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !matches!(c.is_active(so.clone()).await, Ok(r) if !r.get_ref().result) {
        assert!(Instant::now() < deadline, "never idle");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut stream = c.stream_is_active(so.clone()).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(!first.result);

    // A client calls the model: the activator holds it; KEDA hears at once.
    let sent = Instant::now();
    let request = tokio::spawn(
        reqwest::Client::new()
            .post(format!("http://{proxy}/v1/completions"))
            .body(r#"{"prompt":"hello"}"#)
            .send(),
    );
    let woke = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let took = sent.elapsed();
    assert!(woke.result);
    // Promptness is what is tested (tight for that reason): well inside the 0.2 s scrape
    // interval, so the wake was pushed, not found by a poll.
    assert!(took < Duration::from_millis(100), "woke after {took:?}");
    eprintln!("a held request reached StreamIsActive in {took:?}");
    let m = c
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(so.clone()),
            metric_name: "infscale-queue-chat".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(m.metric_values[0].metric_value_float, 1.0);
    assert!(
        !request.is_finished(),
        "the request is still held, waiting for a replica"
    );
    request.abort();
    drop(api);
}
