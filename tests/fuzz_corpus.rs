//! Replays every kept fuzz input on stable: each file of `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/` through the same `infscale::fuzzing` function the cargo-fuzz
//! target calls, so a crash the fuzzer found once stays fixed without the nightly toolchain.

use std::path::Path;

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_kept_fuzz_input_replays_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut failures = Vec::new();
    for (name, body) in infscale::fuzzing::TARGETS {
        let corpus = files(&root.join("corpus").join(name));
        assert!(
            !corpus.is_empty(),
            "fuzz/corpus/{name}/ is empty: every target keeps a seed corpus"
        );
        let regressions = files(&root.join("regressions").join(name));
        for path in corpus.iter().chain(&regressions) {
            let data = std::fs::read(path).expect("read a corpus file");
            if std::panic::catch_unwind(|| body(&data)).is_err() {
                failures.push(path.display().to_string());
            }
        }
    }
    assert!(failures.is_empty(), "inputs that panic: {failures:#?}");
}

#[test]
fn every_target_has_a_fuzz_target_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    for (name, _) in infscale::fuzzing::TARGETS {
        let file = root.join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&file).expect("read a fuzz target");
        assert!(
            text.contains(&format!("infscale::fuzzing::{name}(")),
            "{} does not call infscale::fuzzing::{name}",
            file.display()
        );
    }
}
