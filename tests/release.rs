//! One version per release: Cargo.toml's package version is the only place it is written, and
//! every other place a user installs from must name it. A kustomization's `images: newTag`, the
//! image tags in the release manifest (deploy/infscale.yaml), every
//! `ghcr.io/infscale/infscale:X.Y.Z` and every `releases/download/vX.Y.Z/` install line a
//! manifest or a doc shows, and the Helm chart's `version`/`appVersion`
//! (charts/infscale/Chart.yaml) must equal it: a version bump that misses one is a user pulling
//! an image or a file that does not exist.

use serde::Deserialize;
use std::path::{Path, PathBuf};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const IMAGE: &str = "ghcr.io/infscale/infscale";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Files under `dir` (recursively) whose name satisfies `keep`, sorted.
fn files(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every container image in a (multi-document) manifest.
fn images(yaml: &str) -> Vec<String> {
    fn walk(v: &serde_yaml::Value, out: &mut Vec<String>) {
        match v {
            serde_yaml::Value::Mapping(m) => {
                for (k, v) in m {
                    if k.as_str() == Some("image") {
                        if let Some(s) = v.as_str() {
                            out.push(s.to_owned());
                        }
                    }
                    walk(v, out);
                }
            }
            serde_yaml::Value::Sequence(s) => s.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = serde_yaml::Value::deserialize(doc).expect("manifest parses");
        walk(&value, &mut out);
    }
    out
}

#[test]
fn every_kustomization_pins_the_image_to_the_package_version() {
    let kustomizations = files(&root().join("manifests"), &|p| {
        p.file_name().is_some_and(|n| n == "kustomization.yaml")
    });
    let mut pinned = Vec::new();
    for path in &kustomizations {
        let k: serde_yaml::Value = serde_yaml::from_str(&read(path)).expect("kustomization parses");
        let Some(list) = k.get("images").and_then(|i| i.as_sequence()) else {
            continue;
        };
        for image in list {
            if image.get("name").and_then(|n| n.as_str()) != Some(IMAGE) {
                continue;
            }
            // A local override under another name (scripts/kind's `infscale:kind-demo`) is not
            // a release reference; the shipped bases never rename the image.
            assert!(
                image.get("newName").is_none(),
                "{} renames {IMAGE}: the shipped bases pull the released image",
                rel(path)
            );
            let tag = image.get("newTag").and_then(|t| t.as_str());
            assert_eq!(
                tag,
                Some(VERSION),
                "{}: images newTag for {IMAGE} must be Cargo.toml's version {VERSION}",
                rel(path)
            );
            pinned.push(rel(path));
        }
    }
    for base in [
        "manifests/scaler/kustomization.yaml",
        "manifests/activator/kustomization.yaml",
    ] {
        assert!(
            pinned.iter().any(|p| p == base),
            "{base} pins no {IMAGE} tag: {pinned:?}"
        );
    }
}

#[test]
fn the_release_manifest_pulls_the_package_version() {
    let manifest = read(&root().join("deploy/infscale.yaml"));
    let found = images(&manifest);
    assert!(
        found.len() >= 2,
        "deploy/infscale.yaml has the scaler's and the activator's image: {found:?}"
    );
    for image in &found {
        assert_eq!(
            image,
            &format!("{IMAGE}:{VERSION}"),
            "deploy/infscale.yaml pulls {image}; run scripts/release-manifest.sh"
        );
    }
    assert!(
        manifest.starts_with(&format!("# infscale {VERSION}:")),
        "deploy/infscale.yaml's header names another version; run scripts/release-manifest.sh"
    );
}

/// Manifests, the release manifest, docs and the README: wherever a user copies an install line
/// or an image reference from.
fn shown_pages() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for dir in ["manifests", "deploy", "docs"] {
        paths.extend(files(&root().join(dir), &|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "md")
        }));
    }
    paths.push(root().join("README.md"));
    paths
}

/// Every release number shown right after `prefix`, with the page it is on. Words that are not
/// release numbers (`kind-demo`, `${VERSION}`, `VERSION`) are left out.
fn shown_after(prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in shown_pages() {
        let text = read(&path);
        for (at, _) in text.match_indices(prefix) {
            let word: String = text[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
                .collect();
            if word.starts_with(|c: char| c.is_ascii_digit()) {
                out.push((rel(&path), word));
            }
        }
    }
    out
}

#[test]
fn every_shown_release_image_is_the_package_version() {
    let prefix = format!("{IMAGE}:");
    let shown = shown_after(&prefix);
    assert!(!shown.is_empty(), "no {prefix}X.Y.Z reference found at all");
    for (page, tag) in shown {
        // The release workflow's per-architecture tags, joined into VERSION, may be shown.
        let release = ["-amd64", "-arm64"]
            .iter()
            .find_map(|arch| tag.strip_suffix(arch))
            .unwrap_or(&tag);
        assert_eq!(
            release, VERSION,
            "{page} shows {prefix}{tag}; the release is {VERSION}"
        );
    }
}

#[test]
fn every_shown_release_download_is_the_package_version() {
    let prefix = "github.com/infscale/infscale/releases/download/v";
    let shown = shown_after(prefix);
    assert!(!shown.is_empty(), "no install line from a release is shown");
    for (page, version) in shown {
        assert_eq!(
            version, VERSION,
            "{page} installs from release v{version}; the release is {VERSION}"
        );
    }
}

#[test]
fn the_helm_chart_is_the_package_version() {
    let path = root().join("charts/infscale/Chart.yaml");
    let chart: serde_yaml::Value = serde_yaml::from_str(&read(&path)).expect("Chart.yaml parses");
    for key in ["version", "appVersion"] {
        let value = match chart.get(key) {
            Some(serde_yaml::Value::String(s)) => s.clone(),
            Some(other) => serde_yaml::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_owned(),
            None => panic!("charts/infscale/Chart.yaml has no {key}"),
        };
        assert_eq!(
            value, VERSION,
            "charts/infscale/Chart.yaml {key} must be Cargo.toml's version {VERSION}"
        );
    }
}
