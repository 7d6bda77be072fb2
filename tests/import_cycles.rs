//! No import cycle among files, in either crate of the workspace.
//!
//! A file that uses another through `crate::`, `super::` or `self::` depends on it; a cycle of
//! such uses means neither file can be read, tested or moved without the other. This reads every
//! source file of the shell (`src/`) and of the core (`crates/infscale-core/src/`), resolves each
//! path to the file that defines it (following a facade's `pub use` to the file behind it), and
//! fails naming every cycle it finds. Test code (`#[cfg(test)]` to the end of a file, and files
//! of tests) is left out: a test module reads its parent by design. `pub use` lines are
//! re-exports, not uses, and `mod` lines declare the tree.

#[path = "imports/graph.rs"]
mod graph;

use graph::edges;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The strongly connected components of more than one file (Tarjan).
fn cycles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a PathBuf) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        w.on_stack.insert(v);
        if let Some(next) = w.graph.get(v) {
            for u in next {
                let Some((u, _)) = w.graph.get_key_value(u) else {
                    continue;
                };
                if !w.index.contains_key(u) {
                    visit(w, u);
                    let low = w.low[v].min(w.low[u]);
                    w.low.insert(v, low);
                } else if w.on_stack.contains(u) {
                    let low = w.low[v].min(w.index[u]);
                    w.low.insert(v, low);
                }
            }
        }
        if w.low[v] == w.index[v] {
            let mut scc = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                scc.push(u.clone());
                if u == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                w.found.push(scc);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found
}

fn check(src: &Path) -> Vec<String> {
    let graph = edges(src, false);
    assert!(graph.len() > 10, "{} has too few files", src.display());
    cycles(&graph)
        .into_iter()
        .map(|scc| {
            let names: Vec<String> = scc
                .iter()
                .map(|p| p.strip_prefix(src).unwrap_or(p).display().to_string())
                .collect();
            let mut uses = Vec::new();
            for from in &scc {
                for to in graph[from].iter().filter(|t| scc.contains(t)) {
                    let short =
                        |p: &PathBuf| p.strip_prefix(src).unwrap_or(p).display().to_string();
                    uses.push(format!("    {} uses {}", short(from), short(to)));
                }
            }
            format!(
                "{}: {}\n{}",
                src.display(),
                names.join(" <-> "),
                uses.join("\n")
            )
        })
        .collect()
}

#[test]
fn no_file_imports_itself_through_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = check(&root.join("src"));
    found.extend(check(&root.join("crates/infscale-core/src")));
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle_through_a_facade() {
    let dir = std::env::temp_dir().join(format!("infscale-cycles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let layer = dir.join("layer");
    std::fs::create_dir_all(&layer).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod layer;\npub mod facade;\n").unwrap();
    std::fs::write(layer.join("mod.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(dir.join("facade.rs"), "pub use crate::layer::b::B;\n").unwrap();
    std::fs::write(layer.join("a.rs"), "use crate::facade::B;\npub struct A;\n").unwrap();
    std::fs::write(layer.join("b.rs"), "use super::{a::A, b};\npub struct B;\n").unwrap();
    let graph = edges(&dir, false);
    let found = cycles(&graph);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 2, "{found:?}");
}
