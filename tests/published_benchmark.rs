//! The simulator on a published benchmark: llm-d's KEDA saturation run (Qwen3-32B on one
//! H100-class GPU per replica, 20 req/s for 600 s, 1,000-token prompts and 4,000-token outputs,
//! at most 10 replicas, pods starting in about 112 s), which measured a reactive policy at a
//! P99 TTFT of about 450 s. The shipped scenario and GPU files, run through the binary, land a
//! reactive queue policy in that regime: saturated at the 10-replica cap, P99 TTFT of minutes.

use std::process::Command;

#[test]
fn a_reactive_policy_saturates_as_the_benchmark_measured() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args([
            "simulate",
            "--trace",
            &format!("{root}/fixtures/scenarios/llm-d-saturation-decode-heavy.yaml"),
            "--gpu-file",
            &format!("{root}/fixtures/gpus/qwen3-32b-h100.yaml"),
            "--max",
            "10",
            "--json",
            "queue:24",
        ])
        .output()
        .expect("run infscale simulate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let p = &doc["policies"][0];
    let p99 = p["ttft_p99_s"].as_f64().unwrap();
    assert!((300.0..700.0).contains(&p99), "P99 TTFT {p99} s");
    assert_eq!(p["peak_replicas"], 10);
    assert!(p["slo_miss_pct"].as_f64().unwrap() > 90.0);
    // The clairvoyant plan needs far more than the cap: no policy at 10 replicas meets the SLO.
    assert!(
        doc["clairvoyant_replica_minutes"].as_f64().unwrap()
            > 5.0 * p["replica_minutes"].as_f64().unwrap()
    );
}
