//! Zero means zero, end to end on loopback: what `serve` answers KEDA, and what `decide` orders,
//! when replicas cannot be read, when the held count is all there is, when requests are released,
//! when the activator stalls, and what the scaler's own series say per trigger.

mod common;

use common::activator::activator;
use common::http::serve;
use common::keda::{active_when, client, metrics_request, next_push, object, value_when};
use common::kube::Kube;
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::{config, push_after_hold, refused_url, start};
use infscale::serve::limits::Limits;
use infscale::serve::proto::ScaledObjectRef;
use infscale::serve::server::Config;
use infscale_core::control::hpa::replicas::{external_per_pod, to_milli};
use infscale_core::policy::behavior::Tolerances;
use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What llama.cpp's llama-server answers on /metrics when started without `--metrics`.
const LLAMA_501: &str = r#"{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `--metrics`","type":"not_supported_error"}}"#;

fn statics(pairs: &[(&str, Vec<String>)]) -> Config {
    Config {
        statics: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<HashMap<_, _>>(),
        ..config()
    }
}

fn trigger(deployment: &str, threshold: &str) -> Vec<(&'static str, String)> {
    vec![
        ("deployment", deployment.to_owned()),
        ("threshold", threshold.to_owned()),
        ("scrapeIntervalSeconds", "0.2".to_owned()),
        ("scrapeTimeoutSeconds", "0.5".to_owned()),
    ]
}

fn decide(args: &[&str]) -> (serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .arg("decide")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let json = serde_json::from_slice(&out.stdout).unwrap();
    (json, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// (a) One idle replica that reads, one busy one that cannot be read: active, and `decide
/// --min 0` never orders zero; the error says what the server said.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_replica_is_never_idle() {
    let idle = pod("127.0.0.1:0", Behaviour::Page(vllm_running(0)));
    let no_metrics = pod("127.0.0.1:0", Behaviour::Reply(501, LLAMA_501));
    let hang = pod("127.0.0.1:0", Behaviour::Hang);
    let running_server = start(statics(&[
        ("with-501", vec![idle.url(), no_metrics.url()]),
        ("with-hang", vec![idle.url(), hang.url()]),
    ]))
    .await;
    let mut c = client(running_server.grpc).await;
    for name in ["with-501", "with-hang"] {
        let so = object(name, &trigger(name, "2"));
        active_when(&mut c, &so, Ok(true), Duration::from_secs(10)).await;
        for _ in 0..15 {
            let r = c.is_active(so.clone()).await.unwrap().into_inner().result;
            assert!(r, "{name}: IsActive false with a replica unread");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    for unreadable in [no_metrics.url(), hang.url()] {
        let (json, stderr) = decide(&[
            &idle.url(),
            &unreadable,
            "--target",
            "2",
            "--min",
            "0",
            "--timeout",
            "1",
            "--json",
        ]);
        assert_eq!(json["activity"], "active", "{json}");
        assert_ne!(json["desired"], 0, "{json}");
        assert_ne!(json["why"], "idle-to-zero", "{json}");
        assert!(stderr.contains("this replica does not vote"), "{stderr}");
        if unreadable == no_metrics.url() {
            assert!(
                stderr.contains("HTTP status 501 (This server does not support metrics endpoint. Start it with `--metrics`)"),
                "{stderr}"
            );
            assert_eq!(stderr.matches("http://").count(), 1, "{stderr}");
        } else {
            assert!(stderr.contains("timed out"), "{stderr}");
        }
    }
}

async fn first_true(
    c: &mut common::keda::Client,
    so: &ScaledObjectRef,
) -> (
    Duration,
    tonic::Streaming<infscale::serve::proto::IsActiveResponse>,
) {
    let t0 = Instant::now();
    let mut stream = c.stream_is_active(so.clone()).await.unwrap().into_inner();
    while !next_push(&mut stream).await {}
    (t0.elapsed(), stream)
}

/// (b) Local mode: a static URL where nothing listens is a target at zero, and a request held at
/// the activator wakes it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_request_wakes_a_static_target_at_zero() {
    let act = activator("chat4");
    let running_server = start(Config {
        allowed_activators: vec![act.url()],
        ..statics(&[("chat4", vec![refused_url()])])
    })
    .await;
    let mut c = client(running_server.grpc).await;
    let mut meta = trigger("chat4", "2");
    meta.push(("activatorUrl", act.url()));
    meta.push(("activatorHost", "chat4".to_owned()));
    let so = object("chat4", &meta);
    // Nothing listens and nothing is held: at zero and idle.
    active_when(&mut c, &so, Ok(false), Duration::from_secs(10)).await;
    let mut stream = c.stream_is_active(so.clone()).await.unwrap().into_inner();
    assert!(!next_push(&mut stream).await);
    let took = push_after_hold(&mut stream, || act.set_held(1)).await;
    eprintln!("static target: StreamIsActive pushed true {took:?} after the hold");
    let req = metrics_request(&so, "infscale-queue-chat4");
    assert_eq!(value_when(&mut c, &req, Some(1.0)).await, 1.0);
}

/// (c) Kubernetes mode: a collector born at the moment of the first held request pushes `true`
/// before any pod list or scrape has arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_collector_wakes_on_its_first_instant() {
    let api = Kube::model("llm", "chat", Vec::new());
    // No list is answered until the push has come.
    api.cluster.hold_lists(true);
    let act = activator("chat");
    act.set_held(1);
    let running_server = start(Config {
        kube_api: Some(api.server.url("")),
        use_kube: true,
        allowed_activators: vec![act.url()],
        ..config()
    })
    .await;
    let mut c = client(running_server.grpc).await;
    let mut meta = trigger("chat", "2");
    meta.push(("activatorUrl", act.url()));
    let so = object("chat", &meta);
    let (took, _stream) = first_true(&mut c, &so).await;
    // The push came while every list was held unanswered (the ordering is the assertion): it
    // waited for no pod list, and so for no scrape, which needs one.
    api.cluster.hold_lists(false);
    eprintln!(
        "new collector: StreamIsActive pushed true {took:?} after it was opened, no list answered"
    );
}

/// Issue 25: a new collector answered UNAVAILABLE ("nothing read yet") to the first IsActive and
/// GetMetrics with a request held, so a polling `external` trigger waited a whole polling
/// interval. Now the first calls answer from the activator's held demand before any pod has been
/// scraped (here the only pod hangs for its 5 s scrape timeout): one call each, no retry,
/// IsActive true and a value that asks for a replica (1 held at a threshold of 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_first_calls_answer_from_held_demand_before_any_scrape() {
    let hang = pod("127.0.0.1:0", Behaviour::Hang);
    let act = activator("chat");
    act.set_held(1);
    let running_server = start(Config {
        allowed_activators: vec![act.url()],
        ..statics(&[("chat", vec![hang.url()])])
    })
    .await;
    let mut c = client(running_server.grpc).await;
    let meta = |name: &str| {
        let mut meta = trigger("chat", "2");
        meta.retain(|(k, _)| !k.starts_with("scrape"));
        meta.push(("scrapeTimeoutSeconds", "5".to_owned()));
        meta.push(("activatorUrl", act.url()));
        object(name, &meta)
    };
    let started = Instant::now();
    // IsActive first on one new trigger, GetMetrics first on another, each a new collector.
    let first = meta("chat-a");
    let active = c.is_active(first.clone()).await;
    assert!(
        active.as_ref().is_ok_and(|r| r.get_ref().result),
        "{active:?}"
    );
    let second = meta("chat-b");
    for so in [&first, &second] {
        let r = c
            .get_metrics(metrics_request(so, "infscale-queue-chat"))
            .await;
        let value = r.map(|r| r.into_inner().metric_values[0].metric_value_float);
        assert_eq!(value.as_ref().ok(), Some(&1.0), "{}: {value:?}", so.name);
    }
    let took = started.elapsed();
    // A bound, not an ordering: the first calls answer before a polling interval would pass,
    // generously (each call is also held to KEDA's deadline).
    assert!(took < Duration::from_secs(4), "answered after {took:?}");
    eprintln!("first calls answered from held demand within {took:?}");
}

/// (d) A release is not idle until a scrape that began after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_is_not_idle_before_a_later_scrape() {
    let replica = pod("127.0.0.1:0", Behaviour::Page(vllm_running(0)));
    let act = activator("chat");
    let running_server = start(Config {
        allowed_activators: vec![act.url()],
        ..statics(&[("chat", vec![replica.url()])])
    })
    .await;
    let mut c = client(running_server.grpc).await;
    let mut meta = trigger("chat", "2");
    meta[2].1 = "2".to_owned(); // scrape every 2 s
    meta.push(("activatorUrl", act.url()));
    let so = object("chat", &meta);
    active_when(&mut c, &so, Ok(false), Duration::from_secs(10)).await;
    act.set_held(1);
    let (_, mut stream) = first_true(&mut c, &so).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    act.set_held(0);
    while next_push(&mut stream).await {}
    let idle_at = Instant::now();
    let hits = replica.hits.lock().unwrap().clone();
    assert!(
        hits.iter().any(|h| *h >= released && *h <= idle_at),
        "false pushed {:?} after the release with no scrape in between",
        idle_at - released
    );
    eprintln!(
        "release: false pushed {:?} after the release, after a scrape",
        idle_at - released
    );
}

/// (e) An activator that stops sending (no event, no keep-alive) fails within three of its
/// 5-second keep-alive intervals, and a target at zero then answers with an error, not idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_activator_fails_the_held_source() {
    let stalled_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let mark = stalled_at.clone();
    let act = serve(
        "127.0.0.1:0",
        Duration::from_secs(60),
        move |mut stream, head, stop| {
            if head.target != "/queue/watch" {
                return;
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"chat\":{\"Concurrency\":0,\"RequestCount\":0,\"Held\":0}}\n\n",
            );
            mark.lock().unwrap().get_or_insert_with(Instant::now);
            for _ in 0..300 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        },
    );
    let running_server = start(Config {
        allowed_activators: vec![act.url("")],
        ..statics(&[("chat", vec![refused_url()])])
    })
    .await;
    let mut c = client(running_server.grpc).await;
    let mut meta = trigger("chat", "2");
    meta.push(("activatorUrl", act.url("")));
    let so = object("chat", &meta);
    active_when(&mut c, &so, Ok(false), Duration::from_secs(10)).await;
    active_when(&mut c, &so, Err(()), Duration::from_secs(20)).await;
    let since = stalled_at.lock().unwrap().unwrap().elapsed();
    assert!(
        since < Duration::from_secs(15),
        "failed {since:?} after the stall"
    );
    let e = c.is_active(so.clone()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    assert!(e.message().contains("stalled"), "{e:?}");
    let text = running_server.metrics_text().await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("infscale_activator_up{") && l.ends_with(" 0")),
        "{text}"
    );
    eprintln!("stalled activator: held source failed {since:?} after the stall");
}

/// (f) One pod reads 12 in flight and five cannot be read, 4 per replica: an overload must not
/// read as a scale-down; KEDA's HPA keeps the 6 replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_overload_with_unreadable_pods_keeps_the_replicas() {
    let busy = pod("127.0.0.1:0", Behaviour::Page(vllm_running(12)));
    let failing: Vec<_> = (0..5)
        .map(|_| pod("127.0.0.1:0", Behaviour::Status(500)))
        .collect();
    let urls: Vec<String> = std::iter::once(busy.url())
        .chain(failing.iter().map(|p| p.url()))
        .collect();
    let running_server = start(statics(&[("chat", urls.clone())])).await;
    let mut c = client(running_server.grpc).await;
    let so = object("chat", &trigger("chat", "4"));
    let req = metrics_request(&so, "infscale-queue-chat");
    let value = value_when(&mut c, &req, None).await;
    // What KEDA's HPA does with it: AverageValue 4 on 6 replicas.
    let tolerance = Tolerances::uniform(0.1);
    let replicas = external_per_pod(to_milli(value), to_milli(4.0), 6, tolerance).0;
    assert_eq!((value, replicas), (24.0, 6));

    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.extend(["--target", "4", "--json"]);
    let (json, _) = decide(&args);
    assert_eq!(json["desired"], 6, "{json}");
}

/// (g) Two triggers on one Deployment export two series, and a stopped collector's series go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn series_per_trigger_removed_when_the_collector_stops() {
    let replica = pod("127.0.0.1:0", Behaviour::Page(vllm_running(4)));
    let running_server = start(Config {
        limits: Limits {
            idle_stop: Duration::from_secs(1),
            ..Limits::default()
        },
        ..statics(&[("chat", vec![replica.url()])])
    })
    .await;
    let mut c = client(running_server.grpc).await;
    for (name, threshold) in [("chat-small", "2"), ("chat-large", "8")] {
        let so = object(name, &trigger("chat", threshold));
        value_when(
            &mut c,
            &metrics_request(&so, "infscale-queue-chat"),
            Some(4.0),
        )
        .await;
    }
    let text = running_server.metrics_text().await;
    let values: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("infscale_target_value{"))
        .collect();
    assert_eq!(values.len(), 2, "{text}");
    for (name, threshold) in [("chat-small", "2"), ("chat-large", "8")] {
        let series = format!(
            "infscale_target_value{{namespace=\"llm\",scaledobject=\"{name}\",target=\"chat\",metric=\"queue\",threshold=\"{threshold}\",trigger=\""
        );
        assert!(
            values
                .iter()
                .any(|l| l.starts_with(&series) && l.ends_with("\"} 4.0")),
            "{text}"
        );
    }
    // No call for a while: the collectors stop, and their series with them.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = running_server.metrics_text().await;
        let gone = text.contains("infscale_collectors 0")
            && !text.lines().any(|l| {
                l.starts_with("infscale_target_")
                    || l.starts_with("infscale_scrape_duration_seconds_count{")
            });
        if gone {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "series outlived the collectors:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Issue 25: triggers of one ScaledObject that differ only in `server` or in
/// `scrapeIntervalSeconds` shared one set of labels, so Prometheus saw one series for two
/// triggers, and a trigger with no value removed the series of one that had one (absent in 87
/// of 200 reads). Each trigger now has its own series: every read of `/metrics` shows the two
/// that have a value, while a third (the wrong server: no value) has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn triggers_differing_only_in_server_or_interval_have_their_own_series() {
    let replica = pod("127.0.0.1:0", Behaviour::Page(vllm_running(4)));
    let running_server = start(statics(&[("chat", vec![replica.url()])])).await;
    let mut c = client(running_server.grpc).await;
    let with = |key: &'static str, value: &str| {
        let mut meta = trigger("chat", "2");
        meta.retain(|(k, _)| *k != key);
        meta.push((key, value.to_owned()));
        object("chat", &meta)
    };
    let named = with("server", "vllm");
    let slower = with("scrapeIntervalSeconds", "0.3");
    let wrong = with("server", "sglang");
    for so in [&named, &slower] {
        let req = metrics_request(so, "infscale-queue-chat");
        assert_eq!(value_when(&mut c, &req, Some(4.0)).await, 4.0);
    }
    active_when(&mut c, &wrong, Ok(true), Duration::from_secs(10)).await;
    let req = metrics_request(&wrong, "infscale-queue-chat");
    assert!(
        c.get_metrics(req).await.is_err(),
        "the wrong server has a value"
    );
    let prefix = "infscale_target_value{namespace=\"llm\",scaledobject=\"chat\",target=\"chat\",metric=\"queue\",threshold=\"2\",trigger=\"";
    let mut seen = std::collections::BTreeSet::new();
    for read in 0..40 {
        let text = running_server.metrics_text().await;
        let values: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("infscale_target_value{"))
            .collect();
        assert_eq!(values.len(), 2, "read {read}: {values:?}");
        for v in values {
            assert!(
                v.starts_with(prefix) && v.ends_with("\"} 4.0"),
                "read {read}: {v}"
            );
            seen.insert(v.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

/// A trigger that names the wrong server is a configuration error, said once and exported with
/// the dialect seen; its pods do not vote (never idle) until it is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrong_server_is_a_configuration_error() {
    let llama = pod(
        "127.0.0.1:0",
        Behaviour::Page(std::fs::read(common::fixture("llamacpp.prom")).unwrap()),
    );
    let running_server = start(statics(&[("chat", vec![llama.url()])])).await;
    let mut c = client(running_server.grpc).await;
    let mut meta = trigger("chat", "2");
    meta.push(("server", "vllm".to_owned()));
    let so = object("chat", &meta);
    active_when(&mut c, &so, Ok(true), Duration::from_secs(10)).await;
    let e = c
        .get_metrics(metrics_request(&so, "infscale-queue-chat"))
        .await
        .unwrap_err();
    assert!(
        e.message()
            .contains("configured as vllm, the page is llamacpp's"),
        "{e:?}"
    );
    let text = running_server.metrics_text().await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("infscale_config_errors{")
                && l.contains("key=\"server\",seen=\"llamacpp\"}")
                && l.ends_with(" 1")),
        "{text}"
    );
    assert!(
        !text.contains("infscale_scrape_errors_total{"),
        "a wrong server is not a failed scrape:\n{text}"
    );
}

/// Two activators behind one trigger: a request held at either wakes the target; one that
/// cannot be read is a fault (never zero held), and it counts again when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_activators_are_summed_and_a_lost_one_is_a_fault() {
    let first = common::activator::activator("chat");
    let second = activator("chat");
    let (first_url, second_url) = (first.url(), second.url());
    let running_server = start(Config {
        allowed_activators: vec![first_url.clone(), second_url.clone()],
        ..statics(&[("chat", vec![refused_url()])])
    })
    .await;
    let mut c = client(running_server.grpc).await;
    let mut meta = trigger("chat", "2");
    meta.push(("activatorUrl", format!("{first_url},{second_url}")));
    let so = object("chat", &meta);
    active_when(&mut c, &so, Ok(false), Duration::from_secs(10)).await;
    let mut stream = c.stream_is_active(so.clone()).await.unwrap().into_inner();
    assert!(!next_push(&mut stream).await);
    // Held at the second: wakes as fast as with one activator.
    let took = push_after_hold(&mut stream, || second.set_held(1)).await;
    // Held at both: the value is the sum.
    first.set_held(2);
    let req = metrics_request(&so, "infscale-queue-chat");
    assert_eq!(value_when(&mut c, &req, Some(3.0)).await, 3.0);
    second.set_held(0);
    first.set_held(0);
    active_when(&mut c, &so, Ok(false), Duration::from_secs(10)).await;
    // The first goes away: nothing it might hold is read as zero.
    let port = first.server.addr.port();
    drop(first);
    active_when(&mut c, &so, Err(()), Duration::from_secs(10)).await;
    // What the second holds still wakes the target.
    second.set_held(1);
    active_when(&mut c, &so, Ok(true), Duration::from_secs(5)).await;
    second.set_held(0);
    // The first is back on its address: read again, idle again.
    let deadline = Instant::now() + Duration::from_secs(5);
    let _back = loop {
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            break common::activator::activator_on("chat", &format!("127.0.0.1:{port}"));
        }
        assert!(Instant::now() < deadline, "port {port} never freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    active_when(&mut c, &so, Ok(false), Duration::from_secs(15)).await;
    eprintln!("two activators: pushed true {took:?} after a hold at the second");
}

/// In Kubernetes, `activatorUrl` names the activator Service: every ready endpoint is followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_activator_services_endpoints_are_each_followed() {
    let first = common::activator::activator_on("chat", "127.0.0.2:0");
    let port = first.server.addr.port();
    let second = common::activator::activator_on("chat", &format!("127.0.0.3:{port}"));
    let api = Kube::model("llm", "chat", Vec::new());
    api.set_activators("llm", &["127.0.0.2".into(), "127.0.0.3".into()], port);
    let running_server = start(Config {
        kube_api: Some(api.server.url("")),
        use_kube: true,
        ..config()
    })
    .await;
    let mut c = client(running_server.grpc).await;
    let mut meta = trigger("chat", "2");
    meta.push((
        "activatorUrl",
        "http://infscale-activator.llm.svc:9092".to_owned(),
    ));
    let so = object("chat", &meta);
    active_when(&mut c, &so, Ok(false), Duration::from_secs(10)).await;
    second.set_held(2);
    active_when(&mut c, &so, Ok(true), Duration::from_secs(5)).await;
    first.set_held(1);
    let req = metrics_request(&so, "infscale-queue-chat");
    assert_eq!(value_when(&mut c, &req, Some(3.0)).await, 3.0);
}
