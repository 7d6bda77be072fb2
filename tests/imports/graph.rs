//! The uses between the files of one crate, read from its sources: every path written from
//! `crate::`, `super::`, `self::` or a child module, resolved to the file that defines it
//! (following a facade's `pub use` to the file behind it). `pub use` lines are re-exports, not
//! uses, and `mod` lines declare the tree. Shared by `tests/import_cycles.rs` (no cycle among
//! files) and `tests/layers.rs` (no folder imports one above its own).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path (`["control", "decision"]`) to the file that holds it, and back.
pub struct Tree {
    files: BTreeMap<Vec<String>, PathBuf>,
}

pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src`: `a/b.rs` and `a/b/mod.rs` are `a::b`, `lib.rs` the root.
pub fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    Some(parts)
}

/// A file's code without comments, and without its tests (`#[cfg(test)]` to the end of the
/// file) unless `tests`.
pub fn code_of(text: &str, tests: bool) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if !tests && trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

pub fn is_test_file(file: &Path) -> bool {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    name.is_some_and(|n| n == "tests.rs" || n.ends_with("_tests.rs"))
        || file.components().any(|c| c.as_os_str() == "tests")
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path written from `start` in `code`: `a::b::c`, and a group `a::{b, c::d}` as
/// `a::b` and `a::c::d`.
fn paths_at(code: &str, start: usize) -> Vec<Vec<String>> {
    let bytes: Vec<char> = code[start..].chars().collect();
    let mut prefix = Vec::new();
    let mut i = 0;
    loop {
        let s = i;
        while i < bytes.len() && ident_char(bytes[i]) {
            i += 1;
        }
        if s == i {
            break;
        }
        prefix.push(bytes[s..i].iter().collect::<String>());
        if bytes.get(i) == Some(&':') && bytes.get(i + 1) == Some(&':') {
            i += 2;
            if bytes.get(i) == Some(&'{') {
                let mut depth = 0;
                let mut item = String::new();
                let mut items = Vec::new();
                for &c in &bytes[i..] {
                    match c {
                        '{' => {
                            depth += 1;
                            if depth == 1 {
                                continue;
                            }
                        }
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                items.push(std::mem::take(&mut item));
                                break;
                            }
                        }
                        ',' if depth == 1 => {
                            items.push(std::mem::take(&mut item));
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 1 {
                        item.push(c);
                    }
                }
                let mut out = Vec::new();
                for item in items {
                    let head: Vec<String> = item
                        .trim()
                        .split("::")
                        .map(|s| s.trim().chars().take_while(|c| ident_char(*c)).collect())
                        .take_while(|s: &String| !s.is_empty())
                        .collect();
                    let mut p = prefix.clone();
                    if head.first().is_some_and(|h| h != "self") {
                        p.extend(head);
                    }
                    out.push(p);
                }
                return out;
            }
            continue;
        }
        break;
    }
    vec![prefix]
}

impl Tree {
    /// The file a path from module `here` names, through re-exports; `None` outside the crate.
    fn resolve(&self, here: &[String], path: &[String], depth: u32) -> Option<PathBuf> {
        let mut base: Vec<String> = match path.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self") => here.to_vec(),
            Some("super") => here.to_vec(),
            _ => return None,
        };
        let mut rest = &path[1..];
        if path[0] == "super" {
            base.pop();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        let mut module = base.clone();
        let mut at = 0;
        for (k, seg) in rest.iter().enumerate() {
            let mut next = module.clone();
            next.push(seg.clone());
            if self.files.contains_key(&next) {
                module = next;
                at = k + 1;
            } else {
                break;
            }
        }
        // An item the module re-exports: the file behind it.
        if let (Some(item), true) = (rest.get(at), depth < 8) {
            if let Some(target) = self.reexport(&module, item) {
                return self.resolve(&module, &target, depth + 1);
            }
        }
        if module.is_empty() {
            return None; // the crate root declares modules, nothing else
        }
        self.files.get(&module).cloned()
    }

    /// Where `module` re-exports `item` from, as a path relative to `module`.
    fn reexport(&self, module: &[String], item: &str) -> Option<Vec<String>> {
        let text = std::fs::read_to_string(self.files.get(module)?).ok()?;
        let code = code_of(&text, false);
        for (pos, _) in code.match_indices("pub use ") {
            for p in paths_at(&code, pos + "pub use ".len()) {
                if p.last().is_some_and(|l| l == item) {
                    let mut rel = p;
                    if !matches!(rel[0].as_str(), "crate" | "self" | "super") {
                        rel.insert(0, "self".to_owned());
                    }
                    return Some(rel);
                }
            }
        }
        None
    }
}

/// The uses between files of one crate's `src`.
pub fn edges(src: &Path, tests: bool) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut all = Vec::new();
    rust_files(src, &mut all);
    let mut tree = Tree {
        files: BTreeMap::new(),
    };
    for f in &all {
        if let Some(m) = module_of(src, f) {
            if tests || !is_test_file(f) {
                tree.files.insert(m, f.clone());
            }
        }
    }
    let mut graph = BTreeMap::new();
    for (module, file) in &tree.files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let code = code_of(&text, tests);
        let mut to = BTreeSet::new();
        for key in ["crate::", "super::", "self::"] {
            for (pos, _) in code.match_indices(key) {
                let before = code[..pos].chars().next_back();
                if before.is_some_and(ident_char) {
                    continue;
                }
                // A re-export is not a use.
                let line_start = code[..pos].rfind('\n').map_or(0, |i| i + 1);
                if code[line_start..pos].trim_start().starts_with("pub use") {
                    continue;
                }
                for p in paths_at(&code, pos) {
                    if let Some(target) = tree.resolve(module, &p, 0) {
                        if &target != file {
                            to.insert(target);
                        }
                    }
                }
            }
        }
        // `use child::...`: a path from a module of this one's own.
        for (pos, _) in code.match_indices("use ") {
            let before = code[..pos].chars().next_back();
            if before.is_some_and(ident_char) || code[..pos].ends_with("pub ") {
                continue;
            }
            for p in paths_at(&code, pos + "use ".len()) {
                let Some(first) = p.first() else { continue };
                let mut child = module.clone();
                child.push(first.clone());
                if tree.files.contains_key(&child) {
                    let mut path = vec!["self".to_owned()];
                    path.extend(p);
                    if let Some(target) = tree.resolve(module, &path, 0) {
                        if &target != file {
                            to.insert(target);
                        }
                    }
                }
            }
        }
        graph.insert(file.clone(), to);
    }
    graph
}
