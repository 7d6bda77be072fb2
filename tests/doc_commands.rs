//! Every command in the README and `docs/` stays true.
//!
//! Each fenced block names its kind (`sh`, `console`, `text`, `yaml`, ...). In `sh` and `console`
//! blocks every command is checked: an `infscale` (or `cargo run -- ...`) command must parse with
//! today's flags, a repository path it names must exist, a script or test it names must be there.
//! A `console` block shows commands (`$ ...`) and their output: each is run and its output must
//! begin with the lines shown (a page may cut the rest; `| head -N` and `| tail -N` are applied).
//! A block that needs what this machine does not have (a cluster, a GPU, a running server, a
//! quiet machine for timings) carries `<!-- cmd: needs WHAT -->` on the line above: its commands
//! are still checked, not run, and commands other than infscale's are allowed in it.
//! `scripts/doc-outputs.py` pastes the real outputs into the pages after a change to what a
//! command prints.

use clap::Parser;
use infscale::cli::{Cli, SimCli};
use std::path::Path;
use std::process::{Command, Stdio};

mod doc_pages;

use doc_pages::{fences, pages, root};

/// A fenced block of a page.
struct Block {
    page: String,
    /// The line of the opening fence, from 1.
    line: usize,
    info: String,
    /// Why it is not run, when the line above says so.
    needs: Option<String>,
    lines: Vec<String>,
}

fn blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let name = page
        .strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    fences(&lines)
        .into_iter()
        .map(|f| Block {
            page: name.clone(),
            line: f.fence + 1,
            needs: f
                .above
                .strip_prefix("<!-- cmd: ")
                .and_then(|l| l.strip_suffix("-->"))
                .map(|l| l.trim().to_owned()),
            lines: lines[f.start..f.end]
                .iter()
                .map(|l| l.to_string())
                .collect(),
            info: f.info,
        })
        .collect()
}

/// Lines joined across trailing backslashes, comments dropped.
fn logical(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in lines {
        let l = match l.find(" #") {
            Some(at) => &l[..at],
            None if l.trim_start().starts_with('#') => "",
            None => l,
        };
        let l = l.trim_end();
        if let Some(head) = l.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(l);
            if !cur.trim().is_empty() {
                out.push(cur.trim().to_owned());
            }
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// The simple commands of a line: split at `;`, `&&`, `||` and `|`.
fn simple(line: &str) -> Vec<Vec<String>> {
    line.replace("&&", ";")
        .replace("||", ";")
        .replace('|', ";")
        .split(';')
        .map(|c| {
            c.split_whitespace()
                .map(|w| w.trim_matches(|q| q == '"' || q == '\'').to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// The arguments of an `infscale` command, and which binary, when `words` is one.
fn infscale_args(words: &[String]) -> Option<(&'static str, Vec<String>)> {
    match words.first().map(String::as_str) {
        Some("infscale") => Some(("infscale", words[1..].to_vec())),
        Some("infscale-sim") => Some(("infscale-sim", words[1..].to_vec())),
        Some("cargo") if words.get(1).map(String::as_str) == Some("run") => {
            let dash = words.iter().position(|w| w == "--")?;
            let bin = if words[..dash].iter().any(|w| w == "infscale-sim") {
                "infscale-sim"
            } else {
                "infscale"
            };
            Some((bin, words[dash + 1..].to_vec()))
        }
        _ => None,
    }
}

/// Whether a repository path exists; one `*` in the file name matches any run of characters.
fn exists(path: &str) -> bool {
    if !path.contains('*') {
        return root().join(path).exists();
    }
    let (dir, pattern) = path.rsplit_once('/').unwrap_or((".", path));
    let (pre, post) = pattern.split_once('*').unwrap_or((pattern, ""));
    std::fs::read_dir(root().join(dir))
        .map(|entries| {
            entries.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(pre) && n.ends_with(post) && n.len() >= pre.len() + post.len()
            })
        })
        .unwrap_or(false)
}

const REPO_DIRS: &[&str] = &[
    "fixtures/",
    "manifests/",
    "scripts/",
    "tests/",
    "docs/",
    "src/",
];

/// What is wrong with one simple command, if anything. `free`: any other program is allowed.
fn check(words: &[String], free: bool) -> Option<String> {
    for w in words {
        let path = w.split_once('@').map_or(w.as_str(), |(p, _)| p);
        if REPO_DIRS.iter().any(|d| path.starts_with(d)) && !exists(path) {
            return Some(format!("{path} does not exist"));
        }
    }
    if let Some((bin, args)) = infscale_args(words) {
        let argv = std::iter::once(bin.to_owned()).chain(args);
        let parsed = if bin == "infscale" {
            Cli::try_parse_from(argv).map(|_| ())
        } else {
            SimCli::try_parse_from(argv).map(|_| ())
        };
        return parsed
            .err()
            .map(|e| e.to_string().lines().next().unwrap_or_default().to_owned());
    }
    let program = words[0].as_str();
    match program {
        "cargo" => match words.iter().position(|w| w == "--test") {
            Some(at) => {
                let name = words.get(at + 1).map(String::as_str).unwrap_or("");
                (!exists(&format!("tests/{name}.rs"))).then(|| format!("no tests/{name}.rs"))
            }
            None => None,
        },
        "echo" | "tail" | "head" => None,
        "kubectl" if words.get(1).map(String::as_str) == Some("apply") => None,
        p if p.starts_with("scripts/") => None,
        _ if free => None,
        _ => Some(format!(
            "`{program}` is not checked here: mark the block with <!-- cmd: needs ... -->"
        )),
    }
}

#[test]
fn every_block_names_its_kind_and_every_command_is_valid() {
    let mut bad = Vec::new();
    for page in pages() {
        for b in blocks(&page) {
            let at = format!("{}:{}", b.page, b.line);
            if b.info.is_empty() {
                bad.push(format!(
                    "{at}: a block without a kind (sh, console, text, yaml...)"
                ));
                continue;
            }
            let commands: Vec<String> = match b.info.as_str() {
                "sh" => logical(&b.lines),
                "console" => console_runs(&b)
                    .into_iter()
                    .map(|(command, _)| command)
                    .collect(),
                _ => {
                    if b.lines.iter().any(|l| l.starts_with("$ ")) {
                        bad.push(format!("{at}: commands in a `{}` block", b.info));
                    }
                    continue;
                }
            };
            if commands.is_empty() {
                bad.push(format!("{at}: a command block without a command"));
            }
            for line in commands {
                for words in simple(&line) {
                    if let Some(why) = check(&words, b.needs.is_some()) {
                        bad.push(format!("{at}: `{line}`: {why}"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
}

/// The commands of a console block, each with the output lines shown after it.
fn console_runs(b: &Block) -> Vec<(String, Vec<String>)> {
    let mut runs: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut continued = false;
    for l in &b.lines {
        if let Some(cmd) = l.strip_prefix("$ ") {
            runs.push((vec![cmd.to_owned()], Vec::new()));
            continued = cmd.trim_end().ends_with('\\');
        } else if let Some(last) = runs.last_mut() {
            if continued {
                last.0.push(l.clone());
                continued = l.trim_end().ends_with('\\');
            } else {
                last.1.push(l.clone());
            }
        }
    }
    runs.into_iter()
        .map(|(cmd, out)| (logical(&cmd).join(" "), out))
        .collect()
}

/// Runs an infscale command line (with an optional `| head -N` or `| tail -N`); its stdout lines.
fn run(line: &str) -> Result<Vec<String>, String> {
    let parts = simple(line);
    let (bin, args) = parts
        .first()
        .and_then(|w| infscale_args(w))
        .ok_or_else(|| "only infscale commands are run; mark it".to_owned())?;
    let exe = match bin {
        "infscale" => env!("CARGO_BIN_EXE_infscale"),
        _ => env!("CARGO_BIN_EXE_infscale-sim"),
    };
    let out = Command::new(exe)
        .args(&args)
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_owned()).collect();
    for filter in &parts[1..] {
        let n: usize = filter
            .get(1)
            .and_then(|n| n.trim_start_matches('-').parse().ok())
            .ok_or_else(|| format!("cannot apply {filter:?}"))?;
        lines = match filter[0].as_str() {
            "head" => lines.into_iter().take(n).collect(),
            "tail" => lines.split_off(lines.len().saturating_sub(n)),
            other => return Err(format!("cannot apply `{other}`")),
        };
    }
    Ok(lines)
}

#[test]
fn console_blocks_show_what_the_commands_print() {
    let mut runs = Vec::new();
    for page in pages() {
        for b in blocks(&page) {
            if b.info == "console" && b.needs.is_none() {
                for (command, shown) in console_runs(&b) {
                    runs.push((format!("{}:{}", b.page, b.line), command, shown));
                }
            }
        }
    }
    assert!(!runs.is_empty());
    // Two at a time: the simulator's blocks take most of a core each in a debug build.
    let bad: Vec<String> = runs
        .chunks(2)
        .flat_map(|pair| {
            std::thread::scope(|s| {
                let handles: Vec<_> = pair
                    .iter()
                    .map(|(at, command, shown)| s.spawn(move || compare(at, command, shown)))
                    .collect();
                handles
                    .into_iter()
                    .filter_map(|h| h.join().unwrap_or_else(|_| Some("panicked".into())))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    assert!(bad.is_empty(), "\n{}", bad.join("\n\n"));
}

/// What differs between a command's output and the lines a page shows for it.
fn compare(at: &str, command: &str, shown: &[String]) -> Option<String> {
    let actual = match run(command) {
        Ok(lines) => lines,
        Err(e) => return Some(format!("{at}: `{command}`: {e}")),
    };
    for (i, want) in shown.iter().enumerate() {
        let got = actual
            .get(i)
            .map(String::as_str)
            .unwrap_or("<no more output>");
        if got != want.trim_end() {
            return Some(format!(
                "{at}: `{command}`, output line {}:\n  page: {want}\n  now:  {got}",
                i + 1
            ));
        }
    }
    None
}
