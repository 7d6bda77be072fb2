//! The Helm chart (charts/infscale) says what the code does: each value that sets a flag of
//! `infscale serve` or `infscale activator` defaults to that flag's default (or the chart says
//! why not), every value is documented, the chart is a v2 chart whose image tag follows its
//! appVersion (which tests/release.rs holds to the crate's version), and the files the chart
//! reads are the bases' own. The chart's objects against the kustomize bases are checked by
//! scripts/chart/check.sh, which renders both with real renderers.

use infscale::cli::chart_values::{default_of, documented, flag, FLAG_VALUES, VALUES_YAML};
use serde_yaml::Value;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn each_value_that_sets_a_flag_defaults_to_the_flag_or_says_why() {
    let mut wrong = Vec::new();
    for m in FLAG_VALUES {
        let (flag_default, _) = flag(m.command, m.flag)
            .unwrap_or_else(|| panic!("infscale {} has no --{}", m.command, m.flag));
        let value = default_of(m.value).unwrap_or_else(|| panic!("no value {}", m.value));
        let passed = (m.as_flag)(&value);
        match (passed == flag_default, m.differs) {
            (true, None) | (false, Some(_)) => {}
            (true, Some(why)) => wrong.push(format!(
                "{} now equals --{}'s default {flag_default:?}: drop the reason {why:?}",
                m.value, m.flag
            )),
            (false, None) => wrong.push(format!(
                "{} passes {passed:?} to infscale {} --{}, whose default is {flag_default:?}",
                m.value, m.command, m.flag
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_chart_passes_each_mapped_flag_from_its_value() {
    let templates = root().join("charts/infscale/templates");
    let scaler = std::fs::read_to_string(templates.join("scaler.yaml")).unwrap();
    let activator = std::fs::read_to_string(templates.join("activator.yaml")).unwrap();
    for m in FLAG_VALUES {
        let text = if m.command == "serve" {
            &scaler
        } else {
            &activator
        };
        let at = text
            .find(&format!("- --{}\n", m.flag))
            .unwrap_or_else(|| panic!("{}.yaml passes no --{}", m.command, m.flag));
        let next = text[at..].lines().nth(1).unwrap_or_default();
        let leaf = m.value.rsplit('.').next().unwrap_or_default();
        assert!(
            next.contains(&format!(".{leaf}")),
            "--{} is not given {} in {}.yaml: {next:?}",
            m.flag,
            m.value,
            m.command
        );
    }
}

/// Every leaf of the values file, as a dotted path.
fn leaves(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Mapping(m) if !m.is_empty() => {
            for (k, v) in m {
                let k = k.as_str().unwrap_or_default();
                let p = if path.is_empty() {
                    k.to_owned()
                } else {
                    format!("{path}.{k}")
                };
                leaves(v, &p, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

#[test]
fn every_value_is_documented_and_every_documented_value_exists() {
    let values: Value = serde_yaml::from_str(VALUES_YAML).unwrap();
    let docs = documented();
    for d in &docs {
        assert!(
            default_of(&d.path).is_some(),
            "documented {} is no value",
            d.path
        );
        assert!(!d.doc.is_empty(), "{}: an empty `# --` comment", d.path);
    }
    let mut all = Vec::new();
    leaves(&values, "", &mut all);
    let undocumented: Vec<_> = all
        .iter()
        .filter(|leaf| {
            !docs
                .iter()
                .any(|d| *leaf == &d.path || leaf.starts_with(&format!("{}.", d.path)))
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "values without a `# --` comment: {undocumented:?}"
    );
    let table = infscale::cli::chart_values::markdown_table();
    for needle in [
        "| `activator.namespaces` | `[]` |",
        "Sets `infscale serve --activator-ports` (its default `20000-29999`",
        "Sets `infscale activator --log-format` (its default `text`",
        "the chart's default differs",
    ] {
        assert!(table.contains(needle), "{needle} not in\n{table}");
    }
}

#[test]
fn the_chart_is_cut_from_this_release() {
    let chart: Value = serde_yaml::from_str(
        &std::fs::read_to_string(root().join("charts/infscale/Chart.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(chart["apiVersion"].as_str(), Some("v2"));
    // The image tag defaults to the appVersion. That the chart's version and appVersion, and the
    // bases' image tags, are Cargo.toml's version is tests/release.rs's, with every other place a
    // release is named.
    assert_eq!(
        default_of("image.tag").and_then(|t| t.as_str().map(str::to_owned)),
        Some(String::new())
    );
}

#[test]
fn the_files_the_chart_reads_are_the_bases_own() {
    for (inside, source) in [
        ("dashboard.json", "manifests/observability/dashboard.json"),
        ("alerts.yaml", "manifests/observability/alerts.yaml"),
        ("routes.yaml", "manifests/activator/routes.yaml"),
    ] {
        let link = root().join("charts/infscale/files").join(inside);
        let meta = std::fs::symlink_metadata(&link).unwrap();
        assert!(
            meta.file_type().is_symlink(),
            "charts/infscale/files/{inside} must link to {source}, not copy it"
        );
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            std::fs::canonicalize(root().join(source)).unwrap(),
            "charts/infscale/files/{inside}"
        );
    }
}
