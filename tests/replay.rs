//! A user's own traffic, replayed: a recorded trace played faster, started warm, tuned on its
//! earlier parts and judged on the later ones, and the benchmark of families of days, all through
//! the binary as a user runs it.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn infscale(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("infscale-replay-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A recorded trace: `rate` req/s of the default lengths for `seconds`, as a CSV log.
fn recorded(dir: &std::path::Path, rate: f64, seconds: f64) -> String {
    let scenario = dir.join("steady.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: steady\nseed: 7\nduration: {seconds}\nrates: [[0, {rate}], [{seconds}, {rate}]]\n\
             prompt: {{dist: lognormal, mean: 1000, sigma: 0.8, min: 16, max: 8192}}\n\
             output: {{dist: lognormal, mean: 250, sigma: 1.0, min: 8, max: 4096}}\n"
        ),
    )
    .unwrap();
    let csv = dir.join("steady.csv");
    let (scenario, csv_s) = (
        scenario.to_string_lossy().into_owned(),
        csv.to_string_lossy().into_owned(),
    );
    infscale(&[
        "simulate",
        "queue:24",
        "--trace",
        &scenario,
        "--write-trace",
        &csv_s,
        "--json",
    ]);
    csv_s
}

fn first_policy(v: &Value) -> &Value {
    &v["policies"][0]
}

#[test]
fn a_busy_log_starts_warm_where_one_cold_replica_would_drown() {
    let dir = scratch("warm");
    // 40 req/s needs three replicas from the first second.
    let csv = recorded(&dir, 40.0, 600.0);
    let policy = "queue:24,lookahead=90";
    let warm = infscale(&["simulate", policy, "--trace", &csv, "--json"]);
    let cold = infscale(&[
        "simulate",
        policy,
        "--trace",
        &csv,
        "--start-replicas",
        "min",
        "--json",
    ]);
    let miss = |v: &Value| first_policy(v)["slo_miss_pct"].as_f64().unwrap();
    assert!(miss(&warm) < 0.5, "warm: {}", first_policy(&warm));
    assert!(miss(&cold) > 5.0, "cold: {}", first_policy(&cold));
    // The bound starts warm too: it pays no cold start for what runs at time 0.
    let bound = |v: &Value| v["clairvoyant_replica_minutes"].as_f64().unwrap();
    assert!(
        bound(&warm) < bound(&cold),
        "{} {}",
        bound(&warm),
        bound(&cold)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rate_scale_plays_the_same_requests_faster() {
    let dir = scratch("rate");
    let csv = recorded(&dir, 4.0, 600.0);
    let once = infscale(&["simulate", "queue:24", "--trace", &csv, "--json"]);
    let twice = infscale(&[
        "simulate",
        "queue:24",
        "--trace",
        &csv,
        "--rate-scale",
        "2",
        "--json",
    ]);
    assert_eq!(once["requests"], twice["requests"]);
    let peak = |v: &Value| first_policy(v)["peak_replicas"].as_f64().unwrap();
    assert!(peak(&twice) >= peak(&once));
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(["simulate", "--trace", &csv, "--rate-scale", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rate-scale 0"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tune_on_a_recorded_trace_chooses_on_its_first_half_and_reports_the_second() {
    let dir = scratch("tune");
    let csv = recorded(&dir, 12.0, 1200.0);
    let v = infscale(&[
        "tune",
        "--trace",
        &csv,
        "--parts",
        "4",
        "--rate-scale",
        "1.5",
        "--targets",
        "24,96",
        "--lookaheads",
        "0,60",
        "--down-windows",
        "60",
        "--down-policies",
        "default",
        "--cooldowns",
        "none",
        "--json",
    ]);
    assert_eq!(v["chosen_on"], "parts 1..2 of 4", "{v}");
    assert_eq!(v["held_out"]["parts"], "parts 3..4 of 4", "{v}");
    let held = v["held_out"]["points"].as_array().unwrap();
    assert!(!held.is_empty(), "{v}");
    for p in held {
        assert!(p["slo_miss_pct"].as_f64().is_some(), "{p}");
        assert!(p["bound_ratio"].as_f64().unwrap() > 0.0, "{p}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_suite_judges_each_family_on_its_own_days() {
    let dir = scratch("suite");
    let csv = recorded(&dir, 3.0, 3600.0);
    let v = infscale(&[
        "simulate",
        "--suite",
        "--seeds",
        "2",
        "--families",
        "default,on-off,trace:steady",
        "--suite-trace",
        &csv,
        "queue:24,lookahead=90",
        "--search-points",
        "none",
        "--json",
    ]);
    let families = v["families"].as_array().unwrap();
    let names: Vec<&str> = families
        .iter()
        .map(|f| f["family"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "on-off", "trace:steady"]);
    for f in families {
        assert_eq!(f["days"], 2, "{f}");
        assert!(f["clairvoyant_replica_minutes"].as_f64().unwrap() > 0.0);
        assert!(f["clairvoyant_miss_pct"].as_f64().unwrap() >= 0.0);
        let p = &f["policies"][0];
        assert!(p["slo_miss_pct_max"].as_f64().unwrap() >= p["slo_miss_pct"].as_f64().unwrap());
    }
    // An unknown family is named, with the ones there are.
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(["simulate", "--suite", "--seeds", "1", "--families", "sunny"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"sunny\"") && err.contains("on-off"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_suite_judges_each_policy_against_its_familys_anchors_searched_or_saved() {
    let dir = scratch("anchors");
    let suite = [
        "simulate",
        "--suite",
        "--seeds",
        "1",
        "--families",
        "default",
        "--max",
        "4",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        suite.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let args = with(&[
        "--search-points",
        "2",
        "queue:24",
        "queue:192,min=4,max=4",
        "--json",
    ]);
    let v = infscale(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let f = &v["families"][0];
    // The fixed fleets 1..4 and 2 of the search's other points. The best fleet is one of them
    // and misses nothing on the built-in day, so it dominates a fleet of 4, at more cost.
    assert_eq!(v["anchors"]["points"], 6);
    let fixed = &f["best_fixed"];
    assert!(fixed["policy"]
        .as_str()
        .unwrap()
        .starts_with("queue:192,min="));
    assert_eq!(fixed["meets_bar"], true);
    let best = f["best_search"]["replica_minutes"].as_f64().unwrap();
    assert!(best <= fixed["replica_minutes"].as_f64().unwrap());
    for p in f["policies"].as_array().unwrap() {
        let x = p["x_best_search"].as_f64().unwrap();
        assert!(
            (x - p["replica_minutes"].as_f64().unwrap() / best).abs() < 1e-9,
            "{p}"
        );
    }
    assert_eq!(f["policies"][1]["dominated_by_fixed"], true);
    assert_eq!(v["summary"][1]["dominated_in"][0], "default");
    assert_eq!(v["summary"][1]["policy"], "queue:192,min=4,max=4");
    // The same anchors read back from the saved JSON, and from `tune --suite --per-family`.
    let saved = dir.join("suite.json");
    std::fs::write(&saved, v.to_string()).unwrap();
    let saved_s = saved.to_string_lossy().into_owned();
    let args = with(&["--anchors", &saved_s, "queue:24", "--json"]);
    let again = infscale(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(again["anchors"], v["anchors"]);
    let tuned = infscale(&[
        "tune",
        "--suite",
        "--per-family",
        "--replicates",
        "1",
        "--families",
        "default",
        "--max",
        "4",
        "--points",
        "2",
        "--json",
    ]);
    assert_eq!(tuned, v["anchors"]);
    // Anchors of other days are refused, naming the family.
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args([
            "simulate",
            "--suite",
            "--seeds",
            "2",
            "--families",
            "default",
            "--max",
            "4",
        ])
        .args(["--anchors", &saved_s, "queue:24"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"default\" was searched on other days"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
