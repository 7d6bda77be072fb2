//! The README stays a front page, and the links in it and in `docs/` resolve: every relative
//! link names a file that exists, and every `#anchor` a heading of the page it points to.

mod doc_pages;

use doc_pages::{pages, root};
use std::collections::HashSet;
use std::path::Path;

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> HashSet<String> {
    text.lines()
        .filter_map(|l| {
            let hashes = l.chars().take_while(|c| *c == '#').count();
            (1..=6)
                .contains(&hashes)
                .then(|| l[hashes..].strip_prefix(' '))
                .flatten()
                .map(slug)
        })
        .collect()
}

/// Every `](target)` in `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.contains(char::is_whitespace) {
                out.push(target.to_owned());
            }
        }
    }
    out
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: manuals belong in docs/"
    );
    assert!(
        readme.len() <= 8 * 1024,
        "README.md is {} bytes: a front page is 8 KB at most; manuals, reference and benchmarks belong in docs/",
        readme.len()
    );
    assert!(readme.lines().take(6).any(|l| l.contains("-- demo")));
    assert!(readme.lines().take(6).any(|l| l.contains("cargo test")));
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap_or(Path::new("."));
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                page.clone()
            } else {
                dir.join(path)
            };
            if !target.exists() {
                bad.push(format!("{}: {link}", page.display()));
                continue;
            }
            if !anchor.is_empty() && target.extension().is_some_and(|x| x == "md") {
                let there = std::fs::read_to_string(&target).unwrap();
                if !anchors(&there).contains(anchor) {
                    bad.push(format!("{}: {link} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// `mdbook build docs` renders only the pages `docs/SUMMARY.md` lists: none may be left out.
#[test]
fn every_page_is_in_the_books_summary() {
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).unwrap();
    let listed: HashSet<String> = links(&summary).into_iter().collect();
    let missing: Vec<String> = pages()
        .iter()
        .filter(|p| p.parent() == Some(root().join("docs").as_path()))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| n != "SUMMARY.md" && !listed.contains(n))
        .collect();
    assert!(missing.is_empty(), "not in docs/SUMMARY.md: {missing:?}");
}
