//! The RBAC rules a manifest grants, for holding them to the calls the code makes.

use serde::Deserialize;
use std::collections::BTreeSet;

/// `(apiGroup, resource, verb)`.
pub type Rule = (String, String, String);

/// The YAML documents of a file in the repository.
pub fn docs(rel: &str) -> Vec<serde_yaml::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&path).expect("manifest reads");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect("manifest parses"))
        .collect()
}

/// Every (apiGroup, resource, verb) a Role or ClusterRole in `rel` grants.
pub fn granted(rel: &str) -> BTreeSet<Rule> {
    let mut out = BTreeSet::new();
    for d in docs(rel) {
        if !matches!(d["kind"].as_str(), Some("Role" | "ClusterRole")) {
            continue;
        }
        for rule in d["rules"].as_sequence().expect("rules") {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_sequence()
                    .expect("a list")
                    .iter()
                    .map(|v| v.as_str().expect("a string").to_owned())
                    .collect()
            };
            for g in list("apiGroups") {
                for r in list("resources") {
                    for v in list("verbs") {
                        out.insert((g.clone(), r.clone(), v));
                    }
                }
            }
        }
    }
    out
}
