//! No shipped manifest names a model's namespace: a user copies the examples into namespaces of
//! their own, so a hardcoded one (`llm`) either lands the model somewhere else or makes
//! `kubectl apply -n team-a` refuse the file. The rule, for every YAML file under manifests/
//! (and the chart's templates, where there is one):
//! - an example (manifests/examples) names no namespace: `kubectl apply -n NS -f` gives it;
//! - anything else names either no namespace or `infscale`, the install's own: a kustomize base
//!   gets it from its kustomization's `namespace:`, which is `infscale`; a file applied on its
//!   own (the opt-in RBAC) names `infscale` for the objects that live beside the scaler;
//! - a chart template names no literal namespace (`{{ .Release.Namespace }}` or a value).

use serde::Deserialize;
use serde_yaml::Value;
use std::path::{Path, PathBuf};

const INSTALL_NAMESPACE: &str = "infscale";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, ext: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, ext, out);
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| ext.contains(&e))
        {
            out.push(p);
        }
    }
}

fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|d| !d.is_null())
        .collect()
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

#[test]
fn no_manifest_names_a_model_namespace() {
    let mut yaml = Vec::new();
    files(&root().join("manifests"), &["yaml", "yml"], &mut yaml);
    assert!(yaml.len() > 10, "{yaml:?}");
    let mut wrong = Vec::new();
    let mut examples = 0;
    for f in &yaml {
        let example = f.starts_with(root().join("manifests/examples"));
        for d in docs(f) {
            let kind = d["kind"].as_str().unwrap_or("?");
            let name = d["metadata"]["name"].as_str().unwrap_or("?");
            if kind == "Kustomization" || f.ends_with("kustomization.yaml") {
                let ns = d["namespace"].as_str();
                if ns.is_some_and(|n| n != INSTALL_NAMESPACE) {
                    wrong.push(format!("{}: kustomization namespace {ns:?}", rel(f)));
                }
                continue;
            }
            let Some(ns) = d["metadata"]["namespace"].as_str() else {
                continue;
            };
            if example {
                wrong.push(format!(
                    "{}: {kind} {name} names namespace {ns}; an example takes the user's (-n)",
                    rel(f)
                ));
            } else if ns != INSTALL_NAMESPACE {
                wrong.push(format!(
                    "{}: {kind} {name} names namespace {ns}, not the install's ({INSTALL_NAMESPACE})",
                    rel(f)
                ));
            }
        }
        examples += usize::from(example);
    }
    assert!(examples >= 7, "{examples} example files");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A chart's templates (charts/*/templates) set `metadata.namespace` only from the release or a
/// value, never a literal.
#[test]
fn no_chart_template_names_a_literal_namespace() {
    let mut templates = Vec::new();
    files(
        &root().join("charts"),
        &["yaml", "yml", "tpl"],
        &mut templates,
    );
    let mut wrong = Vec::new();
    for f in templates
        .iter()
        .filter(|f| f.components().any(|c| c.as_os_str() == "templates"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        let mut in_metadata = false;
        for (i, line) in text.lines().enumerate() {
            if !line.starts_with(' ') && !line.trim().is_empty() {
                in_metadata = line.starts_with("metadata:");
                continue;
            }
            let Some(value) = line.strip_prefix("  namespace:") else {
                continue;
            };
            if in_metadata && !value.contains("{{") {
                wrong.push(format!("{}:{}: {}", rel(f), i + 1, line.trim()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
