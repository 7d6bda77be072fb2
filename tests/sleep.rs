//! A sleeping replica is read as no capacity, by each server's own names: vLLM's
//! `vllm:engine_sleep_state{sleep_state="awake"}` on its page, llama.cpp's `"is_sleeping"` on
//! `/props` (its page, cached when it fell asleep, reads idle). `decide` over pages and URLs, and
//! `serve` as KEDA calls it, on loopback: the sleeping replica does not vote, is kept in the
//! count, and the value KEDA's HPA divides asks for awake replicas on top of it.

mod common;

use common::fixture;
use common::http::{respond, serve, Server};
use common::keda::{active_when, client, metrics_request, object, value_when};
use common::scaler::{config, start};
use infscale::serve::server::Config;
use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

fn decide(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(["decide", "--json", "--now", "0"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run infscale");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("decide's JSON")
}

/// The value `decide` computed and the count it ordered.
fn ordered(d: &serde_json::Value) -> (Option<f64>, Option<u64>) {
    (d["value"].as_f64(), d["desired"].as_u64())
}

fn reasons(d: &serde_json::Value) -> String {
    d["reasons"].to_string()
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("fixture")
}

/// A llama.cpp stand-in: `page` on /metrics, `props` on /props.
fn llamacpp(page: Vec<u8>, props: Vec<u8>) -> Server {
    serve(
        "127.0.0.1:0",
        Duration::from_secs(120),
        move |mut stream, head, _| {
            if head.target.starts_with("/props") {
                respond(&mut stream, 200, "application/json", &props);
            } else {
                respond(&mut stream, 200, "text/plain; version=0.0.4", &page);
            }
        },
    )
}

/// The llama.cpp page of one awake replica with `n` requests processing.
fn llamacpp_busy(n: u32) -> Vec<u8> {
    String::from_utf8_lossy(&read("llamacpp-asleep.prom"))
        .replace(
            "llamacpp:requests_processing 0",
            &format!("llamacpp:requests_processing {n}"),
        )
        .into_bytes()
}

fn awake_props() -> Vec<u8> {
    String::from_utf8_lossy(&read("llamacpp-asleep.props.json"))
        .replace("\"is_sleeping\": true", "\"is_sleeping\": false")
        .into_bytes()
}

#[test]
fn decide_reads_a_sleeping_vllm_replica_as_no_capacity() {
    // 12 in flight on a busy replica; beside it one idle replica, awake or asleep.
    let busy = "fixtures/sim-loaded.prom";
    let awake = decide(&["--target", "4", busy, "fixtures/vllm-idle.prom"]);
    assert_eq!(ordered(&awake), (Some(12.0), Some(3)));
    let asleep = decide(&["--target", "4", busy, "fixtures/vllm-asleep.prom"]);
    // The sleeper does not vote: the busy one's 12 ask for 3 awake, and it is kept beside them.
    assert_eq!(ordered(&asleep), (Some(16.0), Some(4)));
    assert!(reasons(&asleep).contains("1 replica(s) asleep"), "{asleep}");
    assert!(reasons(&asleep).contains("on 1 replica(s)"), "{asleep}");
}

#[test]
fn decide_reads_llamacpp_sleep_from_props() {
    let page = "fixtures/llamacpp-asleep.prom";
    let props = "fixtures/llamacpp-asleep.props.json";
    // Its page alone reads as one idle replica that is ready: it takes the 3 held.
    let d = decide(&["--target", "4", "--held", "3", page]);
    assert_eq!(ordered(&d), (Some(3.0), Some(1)), "{d}");
    // With /props it sleeps: no replica is ready, so the 3 held are the demand, and an awake
    // replica is ordered beside the sleeping one.
    let d = decide(&["--target", "4", "--held", "3", page, "--props", props]);
    assert_eq!(ordered(&d), (Some(7.0), Some(2)), "{d}");
    assert!(reasons(&d).contains("no ready replica"), "{d}");
    assert!(reasons(&d).contains("asleep"), "{d}");
    assert_eq!(d["active"].as_bool(), Some(true));
}

#[test]
fn decide_fetches_props_beside_a_llamacpp_url() {
    let sleeping = llamacpp(
        read("llamacpp-asleep.prom"),
        read("llamacpp-asleep.props.json"),
    );
    let url = sleeping.url("/metrics");
    let d = decide(&["--target", "4", &url]);
    assert_eq!(ordered(&d), (Some(4.0), Some(1)), "{d}");
    assert!(reasons(&d).contains("asleep"), "{d}");
    assert_eq!(d["active"].as_bool(), Some(false), "nothing waits: idle");
}

fn trigger(deployment: &str) -> Vec<(&'static str, String)> {
    vec![
        ("deployment", deployment.to_owned()),
        ("threshold", "4".to_owned()),
        ("scrapeIntervalSeconds", "0.2".to_owned()),
        ("scrapeTimeoutSeconds", "1".to_owned()),
    ]
}

/// The replicas KEDA's HPA asks for at threshold 4, once GetMetrics for `deployment`'s trigger
/// answers `value`.
async fn replicas_asked(c: &mut common::keda::Client, deployment: &str, value: f64) -> f64 {
    let so = object(deployment, &trigger(deployment));
    let name = format!("infscale-queue-{deployment}");
    let v = value_when(c, &metrics_request(&so, &name), Some(value)).await;
    (v / 4.0).ceil()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_gives_keda_no_capacity_for_a_sleeping_replica() {
    // vLLM: a busy replica (12 in flight) and one whose sleep gauge reads asleep.
    let busy = common::pods::pod(
        "127.0.0.1:0",
        common::pods::Behaviour::Page(read("sim-loaded.prom")),
    );
    let vllm_asleep = common::pods::pod(
        "127.0.0.1:0",
        common::pods::Behaviour::Page(read("vllm-asleep.prom")),
    );
    // llama.cpp: one replica with 3 processing, one asleep by its /props.
    let working = llamacpp(llamacpp_busy(3), awake_props());
    let dozing = llamacpp(
        read("llamacpp-asleep.prom"),
        read("llamacpp-asleep.props.json"),
    );
    // llama.cpp alone: only the sleeping replica.
    let alone = llamacpp(
        read("llamacpp-asleep.prom"),
        read("llamacpp-asleep.props.json"),
    );
    let running = start(Config {
        statics: HashMap::from([
            ("vllm".to_owned(), vec![busy.url(), vllm_asleep.url()]),
            (
                "llama".to_owned(),
                vec![working.url("/metrics"), dozing.url("/metrics")],
            ),
            ("asleep".to_owned(), vec![alone.url("/metrics")]),
        ]),
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    // KEDA's HPA asks for ceil(value / 4): 3 awake for the 12, and the sleeper kept.
    assert_eq!(replicas_asked(&mut c, "vllm", 16.0).await, 4.0);
    // 3 processing ask for 1 awake; the sleeping one is kept: 2.
    assert_eq!(replicas_asked(&mut c, "llama", 7.0).await, 2.0);
    // Only a sleeping replica, nothing waiting: idle, and it is kept (no awake one ordered).
    assert_eq!(replicas_asked(&mut c, "asleep", 4.0).await, 1.0);
    let so = object("asleep", &trigger("asleep"));
    active_when(&mut c, &so, Ok(false), Duration::from_secs(10)).await;
}
