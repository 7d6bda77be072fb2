//! One entry point per fuzz target, shared by the targets in `fuzz/` (nightly, cargo-fuzz) and by
//! `tests/fuzz_corpus.rs`, which replays the kept corpora on stable in `cargo test`: a crash
//! found once stays a test. Each takes raw bytes, must not panic on any input, and asserts the
//! cheap invariants and round trips noted on it. Not used by the binaries.

use crate::activator::{preface, proxy, routes};
use crate::serve::metadata::{AllowedActivators, TargetSpec};
use infscale_core::observe::metrics::{exposition, profile};
use infscale_core::policy::{scaled_object, Policy};
use infscale_core::sim::trace::formats::{self, Format};
use infscale_core::sim::trace::{Scenario, Trace};
use std::collections::HashMap;

/// Inputs longer than this are cut: every reader bounds its input before these functions see it
/// (pages, files and metadata are size-limited upstream), and long inputs only slow the fuzzer.
const MAX_INPUT: usize = 256 * 1024;

fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&data[..data.len().min(MAX_INPUT)])
}

/// A `/metrics` page through the scanner, the collector and every server profile (and `auto`).
pub fn exposition(data: &[u8]) {
    let page = &data[..data.len().min(MAX_INPUT)];
    let (_samples, scan) = exposition::collect(page);
    let _ = scan.unusable();
    let choices = std::iter::once(profile::ServerChoice::Auto)
        .chain(profile::Server::ALL.map(profile::ServerChoice::Is));
    for choice in choices {
        let read = profile::read_page(page, choice);
        if let Ok(signals) = read.signals {
            if let profile::ServerChoice::Is(server) = choice {
                assert_eq!(
                    signals.server, server,
                    "a profile read another server's page"
                );
            }
        }
    }
}

/// A trigger's metadata: each line `key=value` (the first `=` splits), read for the
/// ScaledObject `model` in namespace `llm`, with one extra activator allowed.
pub fn metadata(data: &[u8]) {
    let text = text(data);
    let map: HashMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let allowed = AllowedActivators::parse(&["http://activator.shared.svc:9092".to_owned()])
        .unwrap_or_default();
    if let Ok(spec) = TargetSpec::from_metadata("model", "llm", &map, &allowed) {
        let _ = spec.series_labels();
        let _ = spec.label();
        let _ = spec.metric_name();
        assert!(
            spec.policy.validate().is_ok(),
            "metadata gave an invalid policy"
        );
    }
}

/// An activator routes file (YAML). A checked route matches a request for its own host and
/// path prefix.
pub fn routes(data: &[u8]) {
    let text = text(data);
    if let Ok(routes) = routes::parse("routes.yaml", &text, "llm") {
        for r in &routes {
            let path = r.path_prefix.clone().unwrap_or_else(|| "/".to_owned());
            assert!(
                r.matches(r.host.as_deref(), &path),
                "route {r:?} does not match its own host and path"
            );
        }
    }
}

/// The routes [`request_head`] picks from: by host, by path, and a catch-all.
const HEAD_ROUTES: &str = "routes:
  - host: chat.llm.svc
    upstream: http://chat.llm.svc:8000
    service: chat
  - pathPrefix: /v1/embeddings
    upstream: http://embed:8080/
    healthPath: /health
  - upstream: http://fallback.llm.svc:8000
    service: fallback
";

/// A request head as a client sends it (request line, `Name: value` lines, a blank line, then
/// the body): the protocol judged from its first bytes, then the route, the stream check and the
/// head forwarded upstream. The forwarded head carries the route's authority and `Host`, and
/// no hop-by-hop header.
pub fn request_head(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    let _ = preface::judge(data);
    let (head, body) = match memchr::memmem::find(data, b"\r\n\r\n") {
        Some(i) => (&data[..i], &data[i + 4..]),
        None => (data, &b""[..]),
    };
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let Some(request_line) = lines.next() else {
        return;
    };
    let mut words = request_line.split(|&b| b == b' ');
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        return;
    };
    let mut builder = http::Request::builder().method(method).uri(target);
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return;
        };
        let value = line[colon + 1..].trim_ascii();
        builder = builder.header(&line[..colon], value);
    }
    let Ok(request) = builder.body(()) else {
        return;
    };
    let (parts, ()) = request.into_parts();
    let Ok(routes) = routes::parse("routes.yaml", HEAD_ROUTES, "llm") else {
        panic!("the fixed routes parse");
    };
    let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 40000));
    let decision = proxy::decide_head(&routes, parts, body, peer);
    match (decision.route, decision.upstream) {
        (Some(i), Some((_, uri, headers))) => {
            let route = &routes[i];
            assert_eq!(uri.authority(), Some(&route.upstream_authority));
            assert_eq!(headers.get(http::header::HOST), Some(&route.host_header));
            for name in [
                "connection",
                "keep-alive",
                "te",
                "transfer-encoding",
                "upgrade",
            ] {
                assert!(!headers.contains_key(name), "{name} forwarded");
            }
        }
        (None, None) => {}
        (route, up) => panic!("route {route:?} but upstream {up:?}"),
    }
}

/// A policy spec (`metric:target[,key=value...]`). A parsed policy, written as a ScaledObject
/// and read back, deploys the same (a legacy HPA's tolerance, the controller's flag, aside).
pub fn policy(data: &[u8]) {
    let text = text(data);
    let Ok(policy) = Policy::parse(&text) else {
        return;
    };
    let placement = scaled_object::Placement {
        name: "model".to_owned(),
        namespace: "llm".to_owned(),
        scaler_address: "infscale.keda.svc:9090".to_owned(),
        activator_url: Some(scaled_object::activator_url(
            "infscale-activator",
            "llm",
            9092,
        )),
        service: "model".to_owned(),
        polling_interval_s: 5.0,
        cold_start_s: 60.0,
    };
    let yaml = scaled_object::render(&policy, &placement);
    match scaled_object::read(&yaml) {
        Ok(mut deployed) => {
            // Without a behavior block (legacy) the tolerance is the controller's cluster-wide
            // flag, which no ScaledObject carries: the cluster's is the policy's.
            if policy.behavior.is_none() {
                deployed.policy.controller.tolerance = policy.controller.tolerance;
            }
            if let Some(diff) = scaled_object::deploy_difference(&policy, &deployed.policy) {
                panic!("{text:?} deploys differently once rendered: {diff}\n{yaml}");
            }
        }
        Err(e) => panic!("{text:?} renders a ScaledObject that does not read back: {e}\n{yaml}"),
    }
}

/// A trace log through every reader (and format detection). A trace read, written as CSV and
/// read back, is the same trace.
pub fn trace(data: &[u8]) {
    let text = text(data);
    for name in ["trace", "trace.csv", "trace.yaml", "trace.jsonl"] {
        let _ = formats::detect(name, &text);
    }
    let all = [
        Format::Auto,
        Format::Csv,
        Format::Mooncake,
        Format::BurstGpt,
        Format::Azure,
    ];
    for format in all {
        let Ok(read) = formats::read(format, "trace", &text, None) else {
            continue;
        };
        let trace = read.trace;
        assert!(trace.duration.is_finite() && trace.duration > 0.0);
        let again = Trace::from_csv(&trace.name, &trace.to_csv(), Some(trace.duration));
        assert_eq!(again.as_ref(), Ok(&trace), "{format:?} trace through CSV");
    }
}

/// Requests a fuzzed scenario may generate: more only slows the fuzzer.
const MAX_GENERATED: f64 = 20_000.0;

/// A YAML scenario, validated, and generated when small: arrivals sorted and inside the run.
pub fn scenario(data: &[u8]) {
    let text = text(data);
    let Ok(scenario) = serde_yaml::from_str::<Scenario>(&text) else {
        return;
    };
    if scenario.validate().is_err() {
        return;
    }
    let peak = scenario.rates.iter().map(|p| p.1).fold(0.0, f64::max);
    if peak * scenario.duration > MAX_GENERATED {
        return;
    }
    if let Ok(trace) = scenario.generate() {
        assert!(trace
            .requests
            .windows(2)
            .all(|w| w[0].arrival <= w[1].arrival));
        assert!(trace
            .requests
            .iter()
            .all(|r| r.arrival >= 0.0 && r.arrival < scenario.duration && r.output >= 1));
    }
}

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target by name, as `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/` name them.
pub const TARGETS: [(&str, Target); 7] = [
    ("exposition", exposition),
    ("metadata", metadata),
    ("routes", routes),
    ("request_head", request_head),
    ("policy", policy),
    ("trace", trace),
    ("scenario", scenario),
];
