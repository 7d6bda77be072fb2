//! The published trace formats through the binary: each fixture replayed by `simulate --json`,
//! the format told apart or named, BurstGPT's note, a bad line's error, and goodput in the
//! table and the JSON.

use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infscale"))
        .arg("simulate")
        .args(args)
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = simulate(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn each_published_format_replays_through_simulate() {
    for (file, requests) in [
        ("fixtures/traces/mooncake.jsonl", 4),
        ("fixtures/traces/burstgpt.csv", 3),
        ("fixtures/traces/azure.csv", 4),
    ] {
        let v = json(&["queue:24", "--trace", file, "--json"]);
        assert_eq!(v["trace"], file);
        assert_eq!(v["requests"], requests, "{file}");
        let p = &v["policies"][0];
        assert_eq!(p["requests"], requests, "{file}");
        assert_eq!(
            p["slo_miss"], 0,
            "{file}: one warm replica serves a handful at once"
        );
        // Every request met the SLO, so goodput is all of them over the replica-hours.
        let hours = p["replica_minutes"].as_f64().unwrap() / 60.0;
        let goodput = p["goodput_per_gpu_hour"].as_f64().unwrap();
        assert!((goodput - requests as f64 / hours).abs() < 1e-6, "{p}");
    }
}

#[test]
fn a_named_format_is_obeyed_and_a_wrong_one_refused() {
    let named = json(&[
        "queue:24",
        "--trace",
        "fixtures/traces/mooncake.jsonl",
        "--trace-format",
        "mooncake",
        "--json",
    ]);
    assert_eq!(named["requests"], 4);
    let out = simulate(&[
        "--trace",
        "fixtures/traces/mooncake.jsonl",
        "--trace-format",
        "azure",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fixtures/traces/mooncake.jsonl:1: the header has no"),
        "{err}"
    );
    let out = simulate(&["--trace-format", "parquet"]);
    assert!(!out.status.success());
}

#[test]
fn burstgpt_failures_are_counted_on_stderr() {
    let out = simulate(&[
        "queue:24",
        "--trace",
        "fixtures/traces/burstgpt.csv",
        "--json",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("note: fixtures/traces/burstgpt.csv: skipped 1 failed request"),
        "{err}"
    );
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();
}

#[test]
fn a_bad_line_is_an_error_naming_file_and_line() {
    let dir = std::env::temp_dir().join(format!("infscale-traces-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\n\
         {\"timestamp\": 10, \"input_length\": \"ten\", \"output_length\": 5}\n",
    )
    .unwrap();
    let path_s = path.to_string_lossy().into_owned();
    let out = simulate(&["--trace", &path_s]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{path_s}:2: invalid type")), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_table_ends_with_goodput_per_gpu_hour() {
    let out = simulate(&["queue:24", "--trace", "fixtures/traces/azure.csv"]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    let header = table.lines().nth(1).unwrap();
    assert!(
        header.contains("scale events  goodput/GPU-h  x bound"),
        "{table}"
    );
}
