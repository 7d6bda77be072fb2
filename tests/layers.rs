//! The core's folders are layers, and no file imports a layer above its own; the shell's too.
//!
//! `crates/infscale-core/src/lib.rs` declares the layers in the order a value flows through
//! them, and this test holds the same order in [`LAYERS`]: a file may use its own layer and
//! those before it, never one after. The shell's folders keep an order of their own
//! ([`SHELL_LAYERS`]). It reads every source file of the core, tests included
//! (a test is code a reader follows too), resolves each use to the file that defines it
//! ([`graph::edges`]), and fails naming each use that runs back up, and each folder or root
//! file the order does not place. There is no list of exceptions.

#[path = "imports/graph.rs"]
mod graph;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The core's layers, bottom first: the bounds on outside input and the table writer, which use
/// nothing; what the servers say (`observe`); the vocabulary every layer above speaks (the
/// policy and its keys, the HPA's behaviour configuration, the ScaledObject), then the reasons
/// as data; the projection from signals to demand; what KEDA and the HPA do with it; the
/// simulator that runs it all.
const LAYERS: [&str; 8] = [
    "limits", "table", "observe", "policy", "reasons", "project", "control", "sim",
];

/// The shell's folders, bottom first: the edge every server stands on (listeners, fetching,
/// the Kubernetes client), the emulated model server and the load generator, the activator,
/// the scaler (which reads the activator's header names), the demo that runs them together,
/// the fuzzing entry points into both, and the command line over everything.
const SHELL_LAYERS: [&str; 8] = [
    "edge",
    "emulate",
    "load",
    "activator",
    "serve",
    "demo",
    "fuzzing",
    "cli",
];

/// The layer of a file: its first folder under `src`, or its own name for a file at the root
/// (`limits.rs`, `reasons.rs` beside `reasons/`); `None` for a crate root.
fn layer_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (name != "lib" && name != "main").then_some(name)
}

/// Every use against `layers`, and every layer they do not place, in words.
fn violations(
    src: &Path,
    graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    layers: &[&str],
) -> Vec<String> {
    let rank = |layer: &str| layers.iter().position(|l| *l == layer);
    let short = |p: &Path| p.strip_prefix(src).unwrap_or(p).display().to_string();
    let mut found = Vec::new();
    let mut unplaced = BTreeSet::new();
    for (from, uses) in graph {
        let Some(from_layer) = layer_of(src, from) else {
            continue;
        };
        let Some(from_rank) = rank(&from_layer) else {
            unplaced.insert(from_layer);
            continue;
        };
        for to in uses {
            let Some(to_layer) = layer_of(src, to) else {
                continue;
            };
            match rank(&to_layer) {
                Some(to_rank) if to_rank > from_rank => found.push(format!(
                    "{} ({from_layer}) uses {} ({to_layer}), a layer above its own",
                    short(from),
                    short(to)
                )),
                Some(_) => {}
                None => {
                    unplaced.insert(to_layer);
                }
            }
        }
    }
    found.extend(
        unplaced
            .into_iter()
            .map(|l| format!("{l}: a layer the order does not place (add it to the order)")),
    );
    found
}

/// Asserts that no file under `dir` (from the workspace root) uses a layer after its own in
/// `layers`, naming every one that does.
fn assert_layered(dir: &str, layers: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let graph = graph::edges(&src, true);
    assert!(graph.len() > 50, "{} has too few files", src.display());
    let found = violations(&src, &graph, layers);
    assert!(
        found.is_empty(),
        "uses against the layers of {dir}:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_core_file_imports_a_layer_above_its_own() {
    assert_layered("crates/infscale-core/src", &LAYERS);
}

#[test]
fn no_shell_file_imports_a_layer_above_its_own() {
    assert_layered("src", &SHELL_LAYERS);
}

#[test]
fn every_layer_is_a_module_the_core_declares() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/infscale-core/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for layer in LAYERS {
        assert!(
            lib.contains(&format!("pub mod {layer};")),
            "lib.rs declares no module {layer}"
        );
        assert!(
            lib.contains(&format!("[`{layer}`]")),
            "lib.rs's map does not name {layer}"
        );
    }
}

/// docs/architecture.md's map lists the layers as they are: each at the start of a line of the
/// core's block, in the order, and every folder of the core among them.
#[test]
fn the_architecture_map_lists_the_layers_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let start = doc.find("crates/infscale-core/src").unwrap();
    let block = &doc[start..start + doc[start..].find("\nsrc ").unwrap()];
    let named: Vec<&str> = block
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .map(|w| w.trim_end_matches('/'))
        .collect();
    let order: Vec<&str> = named
        .iter()
        .copied()
        .filter(|w| LAYERS.contains(w))
        .collect();
    assert_eq!(order, LAYERS, "the map's layers: {named:?}");
    let src = root.join("crates/infscale-core/src");
    for entry in std::fs::read_dir(&src).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let name = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
        assert!(
            name == "lib" || block.contains(&format!("  {name}")),
            "docs/architecture.md's map does not name {name}"
        );
    }
}

#[test]
fn the_checker_names_a_use_that_runs_back_up() {
    let dir = std::env::temp_dir().join(format!("infscale-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let project = dir.join("project");
    let control = dir.join("control");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&control).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "pub mod project;\npub mod control;\npub mod extra;\n",
    )
    .unwrap();
    std::fs::write(project.join("mod.rs"), "pub mod demand;\n").unwrap();
    std::fs::write(control.join("mod.rs"), "pub mod hpa;\n").unwrap();
    std::fs::write(control.join("hpa.rs"), "pub fn replicas() {}\n").unwrap();
    std::fs::write(dir.join("extra.rs"), "pub struct E;\n").unwrap();
    // Down is fine; up, even from a test module, is named.
    std::fs::write(
        project.join("demand.rs"),
        "pub fn measure() {}\n#[cfg(test)]\nmod tests {\n    use crate::control::hpa::replicas;\n    use crate::extra::E;\n}\n",
    )
    .unwrap();
    let graph = graph::edges(&dir, true);
    let found = violations(&dir, &graph, &LAYERS);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("project/demand.rs (project) uses control/hpa.rs (control)"),
        "{found:?}"
    );
    assert!(
        found[1].starts_with("extra: a layer the order does not place"),
        "{found:?}"
    );
}
