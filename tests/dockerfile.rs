//! The Dockerfile builds what `cargo build` builds: every file the release binary's sources read
//! at compile time (`include_str!`, `include_bytes!` with a path relative to the source) is
//! copied into its build stage, so `docker build` does not fail on a file this checkout has and
//! the image's context lacks (the chart's values, read by the values reference, once did).

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The literal paths a source includes, resolved against its folder, relative to the root.
fn included(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for mac in ["include_str!(\"", "include_bytes!(\""] {
        for (at, _) in text.match_indices(mac) {
            let rest = &text[at + mac.len()..];
            let Some(end) = rest.find('"') else { continue };
            let path = file.parent().unwrap().join(&rest[..end]);
            let path = path
                .canonicalize()
                .unwrap_or_else(|e| panic!("{}: {}: {e}", file.display(), path.display()));
            let rel = path.strip_prefix(root().canonicalize().unwrap()).unwrap();
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    out
}

/// The sources the `COPY` lines of the build stage bring in.
fn copied() -> Vec<String> {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    dockerfile
        .lines()
        .take_while(|l| !l.starts_with("FROM ") || l.contains(" AS build"))
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let mut words: Vec<&str> = l.split_whitespace().collect();
            words.pop();
            words.into_iter().map(str::to_owned).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_file_the_binary_includes_is_copied_into_the_build_stage() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("crates/infscale-core/src"), &mut files);
    let copied = copied();
    assert!(copied.iter().any(|c| c == "src"), "{copied:?}");
    let mut missing = Vec::new();
    for file in &files {
        for path in included(file) {
            let covered = copied
                .iter()
                .any(|c| path == *c || path.starts_with(&format!("{}/", c.trim_end_matches('/'))));
            if !covered {
                missing.push(format!("{} includes {path}", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the Dockerfile's build stage does not COPY: {missing:#?}"
    );
}
