//! Every ScaledObject and TriggerAuthentication the README and `docs/` show is one the repository
//! ships, never a hand copy that drifts from it.
//!
//! A fenced block holding `kind: ScaledObject` or `kind: TriggerAuthentication` carries a marker
//! on the nearest non-blank line above its fence: `<!-- shipped:PATH -->` (the whole file) or
//! `<!-- shipped:PATH#KIND/NAME -->` (the document of that kind and `metadata.name`, the file
//! split at its `---` lines), and its text equals that file or document exactly, comments
//! included. A block without a marker fails, naming the page and line; so does a marker that
//! names no file or document, or that no block follows. `INFSCALE_BLESS=1 cargo test --test
//! doc_shipped` rewrites each marked block from its file.
//!
//! One exemption, and only one: a `console` block that `tests/doc_commands.rs` runs (no
//! `<!-- cmd: needs ... -->` above it) shows a command and its output, which that test compares
//! with what the command prints now; a ScaledObject there (`infscale tune --max-miss` writes one)
//! is that command's tested output, not a copy of a file.

mod doc_pages;

use doc_pages::{fences, pages, root, Fence};

const MARKER: &str = "<!-- shipped:";
const KINDS: [&str; 2] = ["kind: ScaledObject", "kind: TriggerAuthentication"];

/// The text a marker names: `PATH` or `PATH#KIND/NAME`, without its trailing newlines.
fn shipped(reference: &str) -> Result<String, String> {
    let (path, document) = match reference.split_once('#') {
        Some((path, doc)) => (path, Some(doc)),
        None => (reference, None),
    };
    let text = std::fs::read_to_string(root().join(path)).map_err(|e| format!("{path}: {e}"))?;
    let Some(document) = document else {
        return Ok(text.trim_end_matches('\n').to_owned());
    };
    let (kind, name) = document
        .split_once('/')
        .ok_or_else(|| format!("{reference}: a document is named KIND/NAME"))?;
    let mut found = Vec::new();
    let mut current = Vec::new();
    for line in text.lines().chain(std::iter::once("---")) {
        if line == "---" {
            let doc = current.join("\n");
            let value: serde_yaml::Value =
                serde_yaml::from_str(&doc).map_err(|e| format!("{path}: {e}"))?;
            let names = (
                value["kind"].as_str().unwrap_or_default().to_owned(),
                value["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            if names == (kind.to_owned(), name.to_owned()) {
                return Ok(doc.trim_end_matches('\n').to_owned());
            }
            found.push(format!("{}/{}", names.0, names.1));
            current.clear();
        } else {
            current.push(line);
        }
    }
    Err(format!(
        "{path} has no document {document} (it has {})",
        found.join(", ")
    ))
}

/// Whether a block shows a manifest this test holds to a shipped file.
fn shows_a_manifest(lines: &[&str], b: &Fence) -> bool {
    lines[b.start..b.end]
        .iter()
        .any(|l| KINDS.contains(&l.trim()))
}

/// Whether a block is a command's output that tests/doc_commands.rs runs and compares.
fn tested_output(b: &Fence) -> bool {
    b.info == "console" && !b.above.starts_with("<!-- cmd: ")
}

#[test]
fn every_scaled_object_shown_is_the_shipped_one() {
    let bless = std::env::var_os("INFSCALE_BLESS").is_some();
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let name = page
            .strip_prefix(root())
            .unwrap_or(&page)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let found = fences(&lines);
        // Markers that no block follows.
        for (i, l) in lines.iter().enumerate() {
            if l.trim().starts_with(MARKER) && !found.iter().any(|b| b.above == l.trim()) {
                bad.push(format!(
                    "{name}:{}: a shipped marker with no block under it",
                    i + 1
                ));
            }
        }
        let mut rewritten: Vec<(usize, usize, String)> = Vec::new();
        for b in &found {
            let at = format!("{name}:{}", b.fence + 1);
            let marker = b
                .above
                .strip_prefix(MARKER)
                .and_then(|m| m.strip_suffix("-->"))
                .map(str::trim);
            let Some(reference) = marker else {
                if shows_a_manifest(&lines, b) && !tested_output(b) {
                    bad.push(format!(
                        "{at}: a ScaledObject or TriggerAuthentication with no \
                         <!-- shipped:PATH[#KIND/NAME] --> marker above it: show the shipped file"
                    ));
                }
                continue;
            };
            checked += 1;
            let want = match shipped(reference) {
                Ok(want) => want,
                Err(e) => {
                    bad.push(format!("{at}: {e}"));
                    continue;
                }
            };
            let shown = lines[b.start..b.end].join("\n");
            if shown != want {
                if bless {
                    rewritten.push((b.start, b.end, want));
                } else {
                    let line = shown
                        .lines()
                        .zip(want.lines())
                        .position(|(s, w)| s != w)
                        .unwrap_or(shown.lines().count().min(want.lines().count()));
                    bad.push(format!(
                        "{at}: differs from {reference} from its line {} on; \
                         INFSCALE_BLESS=1 rewrites it",
                        line + 1
                    ));
                }
            }
        }
        if !rewritten.is_empty() {
            let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
            for (start, end, want) in rewritten.into_iter().rev() {
                out.splice(start..end, want.lines().map(str::to_owned));
            }
            let mut joined = out.join("\n");
            if text.ends_with('\n') {
                joined.push('\n');
            }
            std::fs::write(&page, joined).unwrap();
        }
    }
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
    assert!(checked > 0, "no page shows a shipped manifest");
}

#[test]
fn a_document_is_found_by_kind_and_name() {
    let path = "manifests/examples/vllm-scaledobject-tls.yaml";
    let auth = shipped(&format!("{path}#TriggerAuthentication/infscale-tls")).unwrap();
    assert!(auth.contains("kind: TriggerAuthentication") && !auth.contains("---"));
    let so = shipped(&format!("{path}#ScaledObject/chat")).unwrap();
    assert!(so.starts_with("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject"));
    let e = shipped(&format!("{path}#ScaledObject/other")).unwrap_err();
    assert!(
        e.contains("TriggerAuthentication/infscale-tls, ScaledObject/chat"),
        "{e}"
    );
}

#[test]
fn an_unmarked_copy_is_named_by_page_and_line_and_tune_output_is_exempt() {
    let page = "text\n\n```yaml\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\n```\n\
                \n```console\n$ infscale tune --max-miss 0.5\nkind: ScaledObject\n```\n";
    let lines: Vec<&str> = page.lines().collect();
    let found = fences(&lines);
    let flagged: Vec<usize> = found
        .iter()
        .filter(|b| shows_a_manifest(&lines, b) && !tested_output(b))
        .map(|b| b.fence + 1)
        .collect();
    assert_eq!(flagged, [3]);
}
