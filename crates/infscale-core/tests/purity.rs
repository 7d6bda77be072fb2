//! The core stays pure: no clock, no socket, no file, and none of the I/O crates.
//!
//! The design's first invariant is that the core takes time as a parameter and does no I/O, so
//! that `serve`, `decide`, the demo and the simulator compute the same thing from the same
//! inputs. The compiler keeps the crates out (the core's manifest does not name them); these
//! tests keep it so: one reads `Cargo.lock` for everything the core pulls in, the other reads
//! the core's sources for a clock, a sleep, a socket or a file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates that do I/O, by the package name `Cargo.lock` gives them.
const IO_CRATES: &[&str] = &[
    "tokio",
    "hyper",
    "kube",
    "kube-client",
    "reqwest",
    "tonic",
    "mio",
    "socket2",
    "axum",
];

/// What a clock, a socket or a file looks like in Rust source.
const IMPURE: &[&str] = &[
    "Instant",
    "SystemTime",
    "UNIX_EPOCH",
    "thread::sleep",
    "std::net",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "UnixStream",
    "std::fs",
    "File::open",
    "File::create",
    "std::process",
    "std::env::var",
    "tokio",
];

/// `Cargo.lock`'s packages: name to the names it depends on.
fn lock_graph(lock: &str) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let mut name = None;
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in block.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("name = ") {
                name = Some(v.trim_matches('"').to_owned());
            } else if line.starts_with("dependencies = [") {
                in_deps = true;
            } else if in_deps && line.starts_with(']') {
                in_deps = false;
            } else if in_deps {
                // `"name"` or `"name version"`.
                let dep = line.trim_matches(|c| c == '"' || c == ',');
                if let Some(n) = dep.split_whitespace().next() {
                    deps.push(n.to_owned());
                }
            }
        }
        if let Some(name) = name {
            graph.insert(name, deps);
        }
    }
    graph
}

#[test]
fn the_core_pulls_in_no_io_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lock =
        std::fs::read_to_string(root.join("Cargo.lock")).expect("the workspace's Cargo.lock");
    let graph = lock_graph(&lock);
    // The core's own dev-dependencies are not in what it builds with: read its manifest's
    // [dependencies] for the roots.
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("the core's manifest");
    let direct: Vec<String> = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split('=').next())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .collect();
    assert!(
        !direct.is_empty(),
        "no [dependencies] read from the core's manifest"
    );
    let mut seen = BTreeSet::new();
    let mut todo = direct;
    while let Some(n) = todo.pop() {
        if seen.insert(n.clone()) {
            todo.extend(graph.get(&n).cloned().unwrap_or_default());
        }
    }
    let bad: Vec<&&str> = IO_CRATES.iter().filter(|c| seen.contains(**c)).collect();
    assert!(
        bad.is_empty(),
        "the core depends on {bad:?} (through {seen:?})"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` that are code and not test code: comments dropped, and everything from
/// a `#[cfg(test)]` on (tests may build fixtures; the core's own code may not).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| !l.trim_start().starts_with("#[cfg(test)]"))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
}

fn impurities(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.is_some_and(|n| n == "tests.rs" || n.ends_with("_tests.rs")) {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("a source file");
        for (n, line) in code_lines(&text) {
            for word in IMPURE {
                if line.contains(word) {
                    found.push(format!(
                        "{}:{}: {word}: {}",
                        f.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn no_clock_socket_or_file_in_the_core() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = impurities(&src);
    assert!(
        found.is_empty(),
        "the core must stay pure:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_clock_and_a_socket() {
    let dir = std::env::temp_dir().join(format!("infscale-purity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp folder");
    std::fs::write(
        dir.join("bad.rs"),
        "//! fine: Instant in a comment\nfn f() { let _ = std::time::Instant::now(); }\nfn g() { std::net::TcpStream::connect(\"x\"); }\n#[cfg(test)]\nmod tests { fn t() { let _ = std::time::SystemTime::now(); } }\n",
    )
    .expect("a file");
    let found = impurities(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 3, "{found:?}");
}
