//! The pages the documentation tests read (the README, then every page of `docs/` in name order),
//! and their fenced blocks.

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn pages() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut pages = vec![root().join("README.md")];
    pages.extend(docs);
    pages
}

/// A fenced block of a page: where its fence and body lines are, and what is above it.
// Each test that reads pages uses some of this.
#[allow(dead_code)]
pub struct Fence {
    /// Index of the opening fence's line.
    pub fence: usize,
    /// Indices of the body's lines, `[start, end)`.
    pub start: usize,
    pub end: usize,
    /// The fence's info string (`sh`, `console`, `yaml`, ...), trimmed.
    pub info: String,
    /// The nearest non-blank line above the fence, trimmed.
    pub above: String,
}

/// The fenced blocks of a page's lines, in order.
#[allow(dead_code)]
pub fn fences(lines: &[&str]) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let above = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
            .unwrap_or_default();
        let fence = i;
        i += 1;
        let start = i;
        while i < lines.len() && !lines[i].starts_with("```") {
            i += 1;
        }
        out.push(Fence {
            fence,
            start,
            end: i,
            info: info.trim().to_owned(),
            above,
        });
        i += 1;
    }
    out
}
