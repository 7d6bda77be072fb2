//! The `infscale` binary end to end: the README's commands, exit statuses, the
//! state file across runs, and URL sources served on loopback.

mod common;

use common::{fixture, infscale, stand_in, stderr};
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn parse_every_top_level_fixture() {
    let mut args = vec!["parse".to_owned()];
    for entry in std::fs::read_dir(fixture("")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "prom") {
            args.push(path.to_string_lossy().into_owned());
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = infscale(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    for server in ["vllm", "llamacpp", "sglang", "tgi", "triton", "trtllm"] {
        assert!(text.contains(server), "{text}");
    }
    assert!(text.contains("vllm-busy.prom"), "{text}");
}

/// The row of `parse`'s table for `source`, split on whitespace.
fn row<'a>(table: &'a str, source: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.contains(source))
        .unwrap_or_else(|| panic!("no row for {source} in\n{table}"))
        .split_whitespace()
        .collect()
}

#[test]
fn parse_reads_tensorrt_llm_pages_running_and_waiting() {
    // trtllm-serve's /prometheus/metrics, and Triton with the TensorRT-LLM backend (whose own
    // pending count is 0 there: requests wait inside the backend's executor).
    for server in ["auto", "trtllm"] {
        let out = infscale(&[
            "parse",
            "--server",
            server,
            &fixture("trtllm-serve.prom"),
            &fixture("triton-trtllm.prom"),
        ]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
        // source, server, running, waiting, kv
        assert_eq!(
            row(&text, "trtllm-serve.prom")[1..5],
            ["trtllm", "12", "5", "0.69"],
            "{text}"
        );
        assert_eq!(
            row(&text, "triton-trtllm.prom")[1..5],
            ["trtllm", "7", "3", "0.49"],
            "{text}"
        );
    }
}

#[test]
fn parse_reports_bad_lines_with_source_and_line_and_exits_2() {
    let broken = fixture("malformed/broken-lines.prom");
    let out = infscale(&["parse", &broken, &fixture("vllm-idle.prom")]);
    assert_eq!(out.status.code(), Some(2));
    let text = stdout(&out);
    assert!(
        text.contains("broken-lines.prom:4: label set is not closed"),
        "{text}"
    );
    assert!(
        text.contains("broken-lines.prom:10: value is not a number"),
        "{text}"
    );
    // What could be read is still printed.
    assert!(text.contains("vllm-idle.prom"), "{text}");
}

#[test]
fn parse_of_a_page_of_no_server_exits_2_and_says_what_was_looked_for() {
    let out = infscale(&["parse", &fixture("malformed/no-server.prom")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("vllm:num_requests_waiting"));
}

#[test]
fn parse_with_previous_pages_shows_rates() {
    let out = infscale(&[
        "parse",
        "--previous",
        &fixture("pairs/vllm-ttft-0.prom"),
        &fixture("pairs/vllm-ttft-1.prom"),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("1200.0"), "{text}");
    assert!(text.contains("0.875s"), "{text}");
}

#[test]
fn seed_decide_on_the_loaded_simulator_page() {
    let out = infscale(&[
        "decide",
        "fixtures/sim-loaded.prom",
        "--target",
        "4",
        "--max",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("queue:4 (min 1, max 3): current 1 -> desired 3 (up; metric)"),
        "{text}"
    );
    assert!(
        text.contains("queue 12 / target 4 per replica = 3 replica(s)"),
        "{text}"
    );
}

#[test]
fn seed_decide_activates_from_zero_on_held_requests() {
    let out = infscale(&[
        "decide",
        "--current",
        "0",
        "--held",
        "5",
        "--min",
        "0",
        "--target",
        "4",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("current 0 -> desired 2 (up; activate)"));
}

#[test]
fn seed_decide_refuses_cpu_from_zero_with_one_line() {
    let out = infscale(&["decide", "--metric", "cpu", "--min", "0", "--target", "60"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cpu cannot scale from zero"), "{err}");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_it() {
    for (args, needle) in [
        (vec!["decide", "--policy", "queue:4,colour=red"], "colour"),
        (vec!["decide", "--target=-1"], "target"),
        (vec!["decide", "--target", "4", "--held", "NaN"], "--held"),
        (
            vec!["decide", "--target", "4", "no/such/file.prom"],
            "no/such/file.prom",
        ),
        (
            vec!["decide", "--target", "4", "fixtures/malformed/garbage.prom"],
            "garbage.prom",
        ),
        (
            vec!["decide", "--target", "4", "--server", "ollama"],
            "ollama",
        ),
    ] {
        let out = infscale(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn decide_prints_json() {
    let out = infscale(&[
        "decide",
        "fixtures/vllm-busy.prom",
        "--policy",
        "queue:24",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["desired"], 3);
    assert_eq!(json["value"], 65.0);
}

#[test]
fn decide_json_names_the_policy_it_applied_flags_included() {
    let out = infscale(&[
        "decide",
        "fixtures/vllm-busy.prom",
        "--policy",
        "queue:24",
        "--lookahead",
        "45",
        "--min",
        "0",
        "--max",
        "6",
        "--json",
        "--now",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let policy = json["policy"].as_str().unwrap_or_default().to_owned();
    for key in ["queue:24", "min=0", "max=6", "lookahead=45"] {
        assert!(
            policy
                .split(',')
                .any(|k| k == key || policy.starts_with(key)),
            "{policy}"
        );
    }
    // It is a policy string `decide` reads back to the same count.
    let again = infscale(&[
        "decide",
        "fixtures/vllm-busy.prom",
        "--policy",
        &policy,
        "--json",
        "--now",
        "0",
    ]);
    let back: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(back["policy"], json["policy"]);
    assert_eq!(back["desired"], json["desired"]);
}

#[test]
fn the_state_file_carries_counters_and_the_window_between_runs() {
    let dir = std::env::temp_dir().join(format!("infscale-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("pod-a.prom");
    let state = dir.join("state.json");
    let _ = std::fs::remove_file(&state);
    let page_s = page.to_string_lossy().into_owned();
    let state_s = state.to_string_lossy().into_owned();
    let decide = |now: &str| {
        infscale(&[
            "decide",
            &page_s,
            "--metric",
            "ttft",
            "--target",
            "0.5",
            "--current",
            "3",
            "--state",
            &state_s,
            "--now",
            now,
        ])
    };
    std::fs::copy(fixture("pairs/vllm-ttft-0.prom"), &page).unwrap();
    let first = decide("1000");
    assert!(
        stdout(&first).contains("(hold; no samples)"),
        "{}",
        stdout(&first)
    );
    std::fs::copy(fixture("pairs/vllm-ttft-1.prom"), &page).unwrap();
    let second = decide("1015");
    let text = stdout(&second);
    // p95 0.875 s against 0.5 s on 1 replica: ceil(1.75) = 2 replicas, held at 3 by the window
    // that the first run seeded.
    assert!(text.contains("TTFT p95 0.875s"), "{text}");
    assert!(
        text.contains("current 3 -> desired 3 (hold; stabilised)"),
        "{text}"
    );
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(saved["counters"][&page_s]["at"], 1015.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn url_sources_are_scraped_on_loopback() {
    let page = std::fs::read(fixture("vllm-busy.prom")).unwrap();
    let server = stand_in(200, page, 1);
    let url = server.url();
    let out = infscale(&["parse", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("48"));
    assert_eq!(server.served(), 1);
}

#[test]
fn a_url_that_fails_does_not_vote_and_all_failing_keeps_the_count_and_exits_1() {
    let down = stand_in(503, b"unavailable".to_vec(), 1);
    let out = infscale(&["decide", &down.url(), "--target", "4", "--current", "2"]);
    // The decision is printed, and the exit status says nothing was read.
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP status 503"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("none of the 1 sources gave a replica's metrics"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("current 2 -> desired 2 (hold; no samples)"),
        "{}",
        stdout(&out)
    );
    down.served();
}

#[test]
fn a_page_over_the_size_cap_is_refused() {
    let out = infscale(&["parse", "--max-bytes", "100", "fixtures/vllm-busy.prom"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("100-byte cap"), "{}", stderr(&out));
}
