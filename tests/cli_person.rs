//! The first hour at the terminal: what a person meets when a command cannot do what was asked
//! (a flag it cannot apply, a misspelt key, a reader that goes away, a log in a file) and the
//! help they read (an example per subcommand, the GPU model's flags grouped, durations named one
//! way).

mod common;

use common::{infscale, stderr};
use std::process::Command;

#[test]
fn a_rate_scale_applies_to_the_built_in_day_and_is_refused_where_it_cannot() {
    let requests = |x: &str| {
        let out = infscale(&["simulate", "--rate-scale", x, "--json", "cpu:60"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["requests"].as_f64().unwrap_or_default()
    };
    let (one, half) = (requests("1"), requests("0.5"));
    assert!(half > 0.4 * one && half < 0.6 * one, "{one} then {half}");
    for x in ["0", "-1"] {
        let out = infscale(&["simulate", &format!("--rate-scale={x}"), "cpu:60"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            stderr(&out).contains(&format!("--rate-scale {x}")),
            "{}",
            stderr(&out)
        );
    }
    // A seed draws a generated day; a recorded trace has none to draw.
    let out = infscale(&[
        "simulate",
        "--seed",
        "5",
        "--trace",
        "fixtures/traces/azure.csv",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--seed 5"), "{}", stderr(&out));
    let out = infscale(&["simulate", "--suite", "--seeds", "1", "--rate-scale", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--suite-trace FILE@X"),
        "{}",
        stderr(&out)
    );
}

/// `infscale gpu | head`: a reader that goes away ends the command quietly (SIGPIPE's default,
/// which a shell reports as 141), never a panic.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_a_printing_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    for args in [
        &["gpu"][..],
        &["simulate", "cpu:60"],
        &["parse", "fixtures/vllm-busy.prom"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run infscale");
        // Close the reading end before the command writes anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let quiet = out.status.code() == Some(0) || out.status.signal() == Some(13);
        assert!(quiet, "{args:?}: {:?}\n{}", out.status, stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// The first line a server logs, with `extra` flags, its stderr a pipe (not a terminal).
fn first_log_line(extra: &[&str]) -> String {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(["emulate", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run infscale emulate");
    let mut line = String::new();
    if let Some(err) = child.stderr.take() {
        // The server logs that it listens at once; the read ends with that line.
        let _ = BufReader::new(err).read_line(&mut line);
    }
    let _ = child.kill();
    let _ = child.wait();
    line
}

#[test]
fn logs_carry_colour_only_when_asked_or_on_a_terminal() {
    let plain = first_log_line(&[]);
    assert!(!plain.is_empty(), "no log line");
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    assert!(!first_log_line(&["--color", "never"]).contains('\u{1b}'));
    assert!(first_log_line(&["--color", "always"]).contains('\u{1b}'));
}

#[test]
fn a_misspelt_policy_key_gets_the_key_meant() {
    let out = infscale(&["simulate", "queue:24,lookahed=45"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown policy key \"lookahed\"; did you mean \"lookahead\"?"),
        "{}",
        stderr(&out)
    );
}

/// Every subcommand's `--help` ends with an example that parses with today's flags.
#[test]
fn every_subcommand_has_an_example_that_parses() {
    use clap::{CommandFactory, Parser};
    use infscale::cli::Cli;
    let cli = Cli::command();
    for sub in cli.get_subcommands() {
        let help = sub
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        let example = help
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("infscale "))
            .unwrap_or_else(|| panic!("{}: no example in {help:?}", sub.get_name()));
        assert!(
            example.starts_with(&format!("infscale {} ", sub.get_name())),
            "{example}"
        );
        if let Err(e) = Cli::try_parse_from(example.split_whitespace()) {
            panic!("{example}: {e}");
        }
    }
}

/// The GPU model's flags stand under one heading wherever a command takes them, and every
/// duration's value reads SECONDS.
#[test]
fn help_groups_the_gpu_flags_and_names_every_duration_seconds() {
    use clap::CommandFactory;
    use infscale::cli::Cli;
    let cli = Cli::command();
    let mut with_gpu = Vec::new();
    for sub in cli.get_subcommands() {
        for arg in sub.get_arguments() {
            let long = arg.get_long().unwrap_or_default();
            if long == "params-billion" {
                with_gpu.push(sub.get_name().to_owned());
            }
            if ["params-billion", "max-batch", "cold-start-s", "gpu-file"].contains(&long) {
                assert_eq!(
                    arg.get_help_heading(),
                    Some("GPU model"),
                    "{} --{long}",
                    sub.get_name()
                );
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let lower = help.to_lowercase();
            let duration =
                lower.starts_with("seconds ") || lower.trim_end_matches('.').ends_with(", seconds");
            let takes_value = arg.get_action().takes_values();
            if duration && takes_value {
                let names: Vec<String> = arg
                    .get_value_names()
                    .map(|v| v.iter().map(|n| n.to_string()).collect())
                    .unwrap_or_default();
                // One duration, or a list of them.
                assert!(
                    names == ["SECONDS"] || names == ["SECONDS,..."],
                    "{} --{long} {names:?}: {help}",
                    sub.get_name()
                );
            }
        }
    }
    with_gpu.sort();
    assert_eq!(with_gpu, ["emulate", "gpu", "simulate", "tune"]);
}
