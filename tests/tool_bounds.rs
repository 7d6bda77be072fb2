//! The tools on absurd numbers and endless files: every command refuses a number past its bound
//! (`crates/infscale-core/src/limits.rs`) and a file it cannot read whole (`/dev/zero`, a binary file), with exit
//! status 2 and an error naming the flag, or the file, line and field. Each run is bounded by a
//! process timeout: a tool that ran on for hours (or spun reading `/dev/zero`) is killed and
//! fails the test.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one refusal may take, a debug build on a busy machine included.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `bin` with `args`; the exit code and stderr, or a failure if it outlives [`DEADLINE`].
fn run_bin(bin: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.code(), err)
}

/// Asserts that `infscale args` exits 2 and that its error names every one of `needles`.
fn refused(args: &[&str], needles: &[&str]) {
    refused_by(env!("CARGO_BIN_EXE_infscale"), args, needles);
}

fn refused_by(bin: &str, args: &[&str], needles: &[&str]) {
    let (code, err) = run_bin(bin, args);
    assert_eq!(code, Some(2), "{args:?}: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: no {needle:?} in {err}");
    }
}

/// A file under the temporary directory, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str, text: &str) -> Temp {
        let path =
            std::env::temp_dir().join(format!("infscale-bounds-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write");
        Temp(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn scenario(duration: &str, rates: &str) -> String {
    format!(
        "name: absurd\nduration: {duration}\nrates: {rates}\nprompt: {{dist: constant, value: 100}}\noutput: {{dist: constant, value: 100}}\n"
    )
}

#[test]
fn scenarios_past_their_bounds_are_refused_naming_the_field() {
    let long = Temp::new("long.yaml", &scenario("1e300", "[[0, 1]]"));
    refused(
        &["simulate", "--trace", long.path(), "queue:24"],
        &["long.yaml", "duration 1e300", "31 days"],
    );
    let fast = Temp::new("fast.yaml", &scenario("600", "[[0, 1e300]]"));
    refused(
        &["simulate", "--trace", fast.path(), "queue:24"],
        &["fast.yaml", "rates[0]", "100000 requests per second"],
    );
    // Each within its bound, together too many requests.
    let month = Temp::new("month.yaml", &scenario("2678400", "[[0, 100000]]"));
    refused(
        &["simulate", "--trace", month.path(), "queue:24"],
        &["month.yaml", "requests, more than 50000000"],
    );
    let bursts = Temp::new(
        "bursts.yaml",
        &format!(
            "{}bursts: {{kind: overdispersed, block: 1e-9, sigma: 1}}\n",
            scenario("600", "[[0, 1]]")
        ),
    );
    refused(
        &["simulate", "--trace", bursts.path(), "queue:24"],
        &["bursts: block 1e-9"],
    );
    let tokens = Temp::new(
        "tokens.yaml",
        "name: t\nduration: 60\nrates: [[0, 1]]\nprompt: {dist: constant, value: 4294967295}\noutput: {dist: constant, value: 1}\n",
    );
    refused(
        &["gpu", "--scenario", tokens.path()],
        &["tokens.yaml", "prompt: value 4294967295"],
    );
    refused(
        &["simulate", "--duration", "1e300", "queue:24"],
        &["--duration 1e300"],
    );
}

#[test]
fn trace_rows_past_their_bounds_are_refused_naming_the_line() {
    let late = Temp::new(
        "late.csv",
        "time_s,prompt_tokens,output_tokens\n0,10,10\n1e9,10,10\n",
    );
    refused(
        &["simulate", "--trace", late.path(), "queue:24"],
        &["late.csv:3:", "an arrival 1000000000 s", "31 days"],
    );
    let mooncake = Temp::new(
        "late.jsonl",
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 10}\n{\"timestamp\": 1e12, \"input_length\": 10, \"output_length\": 10}\n",
    );
    refused(
        &["simulate", "--trace", mooncake.path(), "queue:24"],
        &["late.jsonl:2:", "after the first (line 1)"],
    );
    let huge = Temp::new("huge.csv", "0,4294967295,10\n");
    refused(
        &["simulate", "--trace", huge.path(), "queue:24"],
        &["huge.csv:1:", "prompt_tokens 4294967295"],
    );
    let csv = Temp::new("ok.csv", "0,10,10\n60,10,10\n");
    refused(
        &[
            "simulate",
            "--trace",
            csv.path(),
            "--rate-scale",
            "1e300",
            "queue:24",
        ],
        &["--rate-scale 1e300"],
    );
    refused(
        &[
            "simulate",
            "--suite",
            "--seeds",
            "1",
            "--suite-trace",
            &format!("{}@1e-300", csv.path()),
            "queue:24",
        ],
        &["--suite-trace", "a rate scale of 1e-300"],
    );
}

#[test]
fn the_simulators_flags_past_their_bounds_are_refused() {
    for (args, needle) in [
        (&["--dt", "1e-9"][..], "--dt 1e-9"),
        (&["--max", "4000000000"], "--max 4000000000"),
        (&["--seeds", "100000000"], "--seeds"),
        (&["--hold-timeout", "1e300"], "--hold-timeout 1e300"),
    ] {
        let mut all = vec!["simulate"];
        all.extend_from_slice(args);
        all.push("queue:24");
        refused(&all, &[needle]);
    }
    // Each within its bound, together too many steps: a month in steps of a millisecond.
    let csv = Temp::new("steps.csv", "0,10,10\n");
    refused(
        &[
            "simulate",
            "--trace",
            csv.path(),
            "--duration",
            "2678400",
            "--dt",
            "0.001",
            "queue:24",
        ],
        &["--dt 0.001", "steps, more than"],
    );
    refused(
        &["tune", "--replicates", "1000000000000"],
        &["--replicates"],
    );
    refused(&["tune", "--max-miss", "1e300"], &["--max-miss 1e300"]);
    let many: Vec<String> = (1..=1000).map(|i| i.to_string()).collect();
    let many = many.join(",");
    refused(
        &["tune", "--targets", &many, "--down-windows", &many],
        &["the grid", "more than 1000000"],
    );
    refused(
        &["gpu", "--hbm-gb-per-s", "1e300"],
        &["hbm_gb_per_s 1e300 is above 1000000"],
    );
    refused(&["gpu", "--load-gb-per-s", "1e-300"], &["the cold start"]);
    refused(&["gpu", "--max-batch", "4000000000"], &["max_batch"]);
    // infscale-sim runs the same checks.
    refused_by(
        env!("CARGO_BIN_EXE_infscale-sim"),
        &["simulate", "--duration", "1e300", "queue:24"],
        &["--duration 1e300"],
    );
}

#[cfg(unix)]
#[test]
fn files_that_never_end_are_refused_at_once() {
    let zero = "/dev/zero";
    refused(
        &["simulate", "--trace", zero, "queue:24"],
        &["/dev/zero: not a text file"],
    );
    refused(&["tune", "--trace", zero], &["/dev/zero: not a text file"]);
    refused(
        &["simulate", "--suite", "--suite-trace", zero, "queue:24"],
        &["/dev/zero: not a text file"],
    );
    refused(
        &["gpu", "--gpu-file", zero],
        &["/dev/zero: not a text file"],
    );
    refused(
        &["gpu", "--scenario", zero],
        &["/dev/zero: not a text file"],
    );
    let page = fixture("vllm-idle.prom");
    refused(
        &["decide", "--target", "24", "--state", zero, &page],
        &["/dev/zero: not a text file"],
    );
    refused(
        &[
            "kube",
            "--deployment",
            "m",
            "--target",
            "24",
            "--kube-api",
            "http://127.0.0.1:9",
            "--state",
            zero,
        ],
        &["/dev/zero: not a text file"],
    );
    refused(
        &["activator", "--routes", zero, "--listen", "127.0.0.1:0"],
        &["/dev/zero: not a text file"],
    );
    refused(
        &[
            "serve",
            "--tls-cert",
            zero,
            "--tls-key",
            zero,
            "--listen",
            "127.0.0.1:0",
        ],
        &["/dev/zero: not a text file"],
    );
    // A page is capped at --max-bytes (16 MiB by default), which is itself capped.
    refused(&["parse", zero], &["/dev/zero", "cap"]);
    refused(
        &["parse", "--max-bytes", "18446744073709551615", zero],
        &["--max-bytes 18446744073709551615"],
    );
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn decide_load_emulate_and_demo_refuse_absurd_numbers() {
    let page = fixture("vllm-idle.prom");
    for (flag, value) in [
        ("--held", "1e300"),
        ("--now", "1e300"),
        ("--current", "4000000000"),
        ("--status", "4000000000"),
        ("--cpu-request", "1e300"),
    ] {
        refused(
            &["decide", "--target", "24", flag, value, &page],
            &[&format!("{flag} {value}")],
        );
    }
    refused(
        &[
            "kube",
            "--deployment",
            "m",
            "--target",
            "24",
            "--held",
            "1e300",
        ],
        &["--held 1e300"],
    );
    // Nothing listens on port 9 of loopback: the flags are refused before any request.
    let url = "http://127.0.0.1:9";
    for (flag, value) in [
        ("--rate", "1e300"),
        ("--concurrency", "4000000000"),
        ("--prompt-tokens", "4000000000"),
        ("--output-tokens", "4000000000"),
        ("--duration", "1e300"),
        ("--max-in-flight", "18446744073709551615"),
    ] {
        refused(
            &["load", "--url", url, flag, value],
            &[&format!("{flag} {value}")],
        );
    }
    refused(
        &["load", "--url", url, "--sweep", "1,4000000000"],
        &["--sweep 4000000000"],
    );
    for (flag, value, needle) in [
        ("--speed", "1e300", "speed 1e300"),
        ("--speed", "1e-300", "speed 1e-300"),
        ("--step", "1e-9", "step 1e-9"),
        ("--cold-start", "1e300", "cold start 1e300"),
        ("--max-model-len", "4000000000", "max_model_len 4000000000"),
        ("--max-in-flight", "18446744073709551615", "max_in_flight"),
    ] {
        refused(
            &["emulate", "--listen", "127.0.0.1:0", flag, value],
            &[needle],
        );
    }
    refused(&["demo", "--until", "1e300"], &["--until 1e300"]);
    refused(&["demo", "--speed", "1e300"], &["--speed 1e300"]);
    refused(
        &["demo", "--policy", "queue:24,max=1000"],
        &["max 1000 replicas"],
    );
}
