//! `infscale tune` as a user runs it for the model `chat` in `llm`, on a one-point grid: the
//! policy it chooses and the ScaledObject it prints, as printed.

use std::process::Command;

/// Runs `tune` on the point `(target, lookahead, down window, down policy, cooldown, with)`
/// and returns (the chosen policy string, the printed YAML).
pub fn tune(
    target: &str,
    lookahead: &str,
    window: &str,
    down: &str,
    cooldown: &str,
    with: &str,
) -> (String, String) {
    let mut args = vec![
        "tune",
        "--targets",
        target,
        "--lookaheads",
        lookahead,
        "--down-windows",
        window,
        "--down-policies",
        down,
        "--cooldowns",
        cooldown,
    ];
    if !with.is_empty() {
        args.extend(["--with", with]);
    }
    args.extend([
        "--max-miss",
        "100",
        "--name",
        "chat",
        "--namespace",
        "llm",
        "--replicates",
        "1",
        "--held-out",
        "0",
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(&args)
        .output()
        .expect("run infscale tune");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("# cheapest with at most"))
        .unwrap_or_else(|| panic!("no choice in\n{text}"));
    let spec = line
        .split(": ")
        .nth(1)
        .and_then(|rest| rest.split(" (").next())
        .unwrap_or_else(|| panic!("no policy in {line}"))
        .to_owned();
    let yaml = text[text.find("apiVersion").expect("a ScaledObject")..].to_owned();
    (spec, yaml)
}
