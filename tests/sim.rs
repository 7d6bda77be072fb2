//! The simulator end to end on the default trace: the reference comparison, the recommendation,
//! the Easy exercise, determinism, and the CSV round trip through the binaries.

use infscale::cli::simulate::{RECOMMENDED, RECOMMENDED_TO_ZERO};
use infscale_core::policy::Policy;
use infscale_core::sim::bound::clairvoyant;
use infscale_core::sim::gpu::GpuModel;
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::report::{summarize, Summary};
use infscale_core::sim::run::{run, Mode, Settings};
use infscale_core::sim::trace::{Scenario, Trace};
use std::process::Command;

fn default_trace() -> Trace {
    Scenario::default_day().generate().unwrap()
}

fn policy(spec: &str) -> Policy {
    Policy::parse_with_max(spec, 8).unwrap()
}

fn simulate(trace: &Trace, spec: &str, settings: &Settings) -> Summary {
    let hw = Hardware::new(GpuModel::default());
    summarize(
        spec,
        &run(trace, &hw, &policy(spec), settings),
        settings.slo_ttft_s,
    )
}

/// The seed's reference table (policy, miss %, replica-minutes), produced by the seed's own
/// simulator on this day: every row within 2 points of misses and 10% of replica-minutes.
const SEED_TABLE: [(&str, f64, f64); 5] = [
    ("cpu:60", 89.6, 25.0),
    ("cpu:25", 0.0, 145.8),
    ("queue:24", 1.7, 86.1),
    ("queue:24,lookahead=90", 0.0, 114.8),
    ("queue:24,min=0,cooldown=120", 1.8, 81.9),
];

#[test]
fn the_default_day_reproduces_the_seed_table() {
    let trace = default_trace();
    let s = Settings::default();
    for (spec, miss_pct, replica_minutes) in SEED_TABLE {
        let ours = simulate(&trace, spec, &s);
        assert!(
            (ours.slo_miss_pct - miss_pct).abs() <= 2.0,
            "{spec}: {:.1}% misses vs the seed's {miss_pct}%",
            ours.slo_miss_pct
        );
        let off = ours.replica_minutes / replica_minutes - 1.0;
        assert!(
            off.abs() <= 0.10,
            "{spec}: {:.1} replica-minutes vs the seed's {replica_minutes}",
            ours.replica_minutes
        );
        if spec == "cpu:60" {
            // CPU at 60% never scales (the pod cannot pass 46%) and the queue grows all day.
            assert_eq!((ours.peak_replicas, ours.scale_events), (1, 0));
            let p50 = ours.ttft_p50_s;
            assert!((p50 / 226.26 - 1.0).abs() <= 0.25, "cpu:60 TTFT p50 {p50}");
        }
    }
}

#[test]
fn a_queue_policy_beats_cpu_on_misses() {
    let trace = default_trace();
    let s = Settings::default();
    let queue = simulate(&trace, "queue:24", &s);
    let cpu = simulate(&trace, "cpu:60", &s);
    assert!(queue.slo_miss * 10 < cpu.slo_miss, "{queue:?} {cpu:?}");
}

#[test]
fn the_recommendation_beats_every_seed_policy_that_meets_the_slo() {
    let trace = default_trace();
    let s = Settings::default();
    let seed: Vec<Summary> = [
        "cpu:60",
        "cpu:25",
        "queue:24",
        "queue:24,lookahead=90",
        "queue:24,min=0,cooldown=120",
    ]
    .iter()
    .map(|p| simulate(&trace, p, &s))
    .collect();
    let hw = Hardware::new(GpuModel::default());
    let bound = clairvoyant(&trace, &hw, &s, 64);
    for spec in [RECOMMENDED, RECOMMENDED_TO_ZERO] {
        let ours = simulate(&trace, spec, &s);
        assert!(ours.slo_miss_pct <= 0.5, "{ours:?}");
        for other in seed.iter().filter(|o| o.slo_miss_pct < 1.0) {
            assert!(
                ours.replica_minutes < other.replica_minutes,
                "{ours:?} vs {other:?}"
            );
        }
        // Reported as a ratio to the bound; the bound is below any policy that meets the SLO.
        // The recommendation is chosen for the worst family of days, and pays for it here (the
        // README's "The benchmark").
        assert!(bound.replica_minutes < ours.replica_minutes);
        assert!(ours.replica_minutes / bound.replica_minutes < 2.6);
    }
}

#[test]
fn downpods_one_never_drops_more_than_one_replica_a_period() {
    let trace = default_trace();
    let s = Settings {
        record_timeline: true,
        ..Settings::default()
    };
    let hw = Hardware::new(GpuModel::default());
    let r = run(&trace, &hw, &policy("queue:24,downpods=1"), &s);
    let downs: Vec<(f64, u32, u32)> = r
        .timeline
        .iter()
        .filter(|e| e.to < e.from)
        .map(|e| (e.t, e.from, e.to))
        .collect();
    assert!(!downs.is_empty());
    for (t, from, to) in &downs {
        assert_eq!(from - to, 1, "at {t}: {from} -> {to}");
    }
    // And without it, the late drop takes several replicas at once.
    let r = run(&trace, &hw, &policy("queue:24"), &s);
    assert!(r.timeline.iter().any(|e| e.from > e.to + 1));
}

#[test]
fn the_same_seed_gives_identical_results() {
    let s = Settings::default();
    let a = simulate(&default_trace(), "queue:24,lookahead=90,min=0", &s);
    let b = simulate(&default_trace(), "queue:24,lookahead=90,min=0", &s);
    assert_eq!(a, b);
    let other = Scenario {
        seed: 7,
        ..Scenario::default_day()
    }
    .generate()
    .unwrap();
    assert_ne!(simulate(&other, "queue:24,lookahead=90,min=0", &s), a);
}

#[test]
fn the_hpa_loop_runs_the_seed_decision_every_fifteen_seconds() {
    let s = Settings {
        mode: Mode::Hpa,
        record_timeline: true,
        ..Settings::default()
    };
    let trace = default_trace();
    let hw = Hardware::new(GpuModel::default());
    let r = run(&trace, &hw, &policy("queue:24"), &s);
    assert_eq!(r.timeline.len(), 100);
    assert!(r.timeline.iter().all(|e| e.by == "decide"));
}

#[test]
fn scale_to_zero_wakes_on_a_held_request() {
    let trace = default_trace();
    let s = Settings {
        record_timeline: true,
        ..Settings::default()
    };
    let hw = Hardware::new(GpuModel::default());
    let r = run(&trace, &hw, &policy("queue:24,min=0,cooldown=120"), &s);
    let to_zero = r
        .timeline
        .iter()
        .find(|e| e.to == 0)
        .expect("scaled to zero");
    assert!(to_zero.t > 960.0 && to_zero.t < 1320.0, "{to_zero:?}");
    let wake = r.timeline.iter().find(|e| e.from == 0).expect("woke");
    assert_eq!(wake.by, "push");
    // The trickle's first request arrives after 1320 s and activates within one step.
    let first = trace.requests.iter().find(|q| q.arrival >= 1320.0).unwrap();
    assert!(
        wake.t - first.arrival <= 0.5,
        "{} vs {}",
        wake.t,
        first.arrival
    );
    // Nothing waited out the activator's timeout.
    assert_eq!(r.outcomes.iter().filter(|o| o.rejected).count(), 0);
}

fn bin(name: &str, args: &[&str]) -> String {
    let exe = match name {
        "infscale" => env!("CARGO_BIN_EXE_infscale"),
        _ => env!("CARGO_BIN_EXE_infscale-sim"),
    };
    let out = Command::new(exe).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_csv_trace_round_trips_through_the_binary() {
    let dir = std::env::temp_dir().join(format!("infscale-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("trace.csv");
    let csv_s = csv.to_string_lossy().into_owned();
    let generated = bin(
        "infscale",
        &["simulate", "queue:24", "--write-trace", &csv_s, "--json"],
    );
    let replayed = bin(
        "infscale-sim",
        &[
            "simulate",
            "queue:24",
            "--trace",
            &csv_s,
            "--duration",
            "1500",
            "--json",
        ],
    );
    let a: serde_json::Value = serde_json::from_str(&generated).unwrap();
    let b: serde_json::Value = serde_json::from_str(&replayed).unwrap();
    assert_eq!(a["policies"], b["policies"]);
    assert_eq!(
        a["clairvoyant_replica_minutes"],
        b["clairvoyant_replica_minutes"]
    );
    let trace =
        Trace::from_csv("t", &std::fs::read_to_string(&csv).unwrap(), Some(1500.0)).unwrap();
    let original = default_trace();
    assert_eq!(trace.duration, original.duration);
    assert!(
        trace.requests == original.requests,
        "the requests differ after the round trip"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_output_has_the_promised_fields() {
    let out = bin("infscale", &["simulate", "queue:24", "cpu:60", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["clairvoyant_replica_minutes"].as_f64().unwrap() > 0.0);
    for p in v["policies"].as_array().unwrap() {
        for field in [
            "policy",
            "slo_miss_pct",
            "replica_minutes",
            "ttft_p95_s",
            "peak_replicas",
            "scale_events",
        ] {
            assert!(!p[field].is_null(), "{field} in {p}");
        }
    }
}

#[test]
fn gpu_prints_the_seed_numbers_in_both_binaries() {
    let a = bin("infscale", &["gpu"]);
    assert_eq!(a, bin("infscale-sim", &["gpu"]));
    assert!(
        a.contains("396728 tokens") && a.contains("cold start   91 s"),
        "{a}"
    );
    let slower = bin("infscale", &["gpu", "--hbm-gb-per-s", "2000"]);
    assert!(slower.contains("11.5 ms at batch 1"), "{slower}");
}

#[test]
fn tune_prints_a_frontier_and_a_scaled_object() {
    let out = bin(
        "infscale",
        &[
            "tune",
            "--targets",
            "24,48",
            "--lookaheads",
            "0,120",
            "--down-windows",
            "60",
            "--down-policies",
            "default",
            "--cooldowns",
            "none,60",
            "--max-miss",
            "1",
            "--replicates",
            "1",
            "--held-out",
            "0",
        ],
    );
    assert!(out.contains("Pareto frontier"), "{out}");
    let yaml = &out[out.find("apiVersion").expect("a ScaledObject")..];
    let doc: serde_yaml::Value = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(doc["kind"], "ScaledObject");
    assert_eq!(doc["spec"]["triggers"][0]["type"], "external-push");
}

#[test]
fn the_plot_is_an_svg() {
    let path = std::env::temp_dir().join(format!("infscale-plot-{}.svg", std::process::id()));
    let path_s = path.to_string_lossy().into_owned();
    bin("infscale", &["simulate", "queue:24", "--plot", &path_s]);
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains(">\nqueue:24\n<")
            && svg.contains("replicas and demand")
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn the_simulator_applies_the_fault_rules() {
    // A tenth of the scrapes fail: the timeline shows unread replicas keeping the target active,
    // and KEDA only ever takes it to zero on an answer where every replica was read and idle.
    let trace = default_trace();
    let s = Settings {
        record_timeline: true,
        unreadable: 0.1,
        ..Settings::default()
    };
    let hw = Hardware::new(GpuModel::default());
    let spec = "queue:48,lookahead=120,downwindow=60,min=0,cooldown=60";
    let r = run(&trace, &hw, &policy(spec), &s);
    let said = |needle: &str| {
        r.timeline
            .iter()
            .any(|e| e.lines.iter().any(|l| l.contains(needle)))
    };
    assert!(said("could not be read and may be busy"));
    assert!(said("counted as the HPA counts missing pods"));
    let to_zero: Vec<_> = r
        .timeline
        .iter()
        .filter(|e| e.why == "idle-to-zero")
        .collect();
    assert!(!to_zero.is_empty(), "the trace's silences still reach zero");
    for e in to_zero {
        assert!(
            e.lines
                .iter()
                .any(|l| l.starts_with("idle: every replica read")),
            "to zero at {} on {:?}",
            e.t,
            e.lines
        );
    }
}
