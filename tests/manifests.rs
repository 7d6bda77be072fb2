//! The manifests in the repository parse, and every infscale trigger in them is metadata the
//! scaler accepts.

use infscale::serve::metadata::{AllowedActivators, TargetSpec};
use serde::Deserialize;
use std::collections::HashMap;

fn yaml_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

#[test]
fn manifests_parse_and_triggers_are_accepted() {
    let mut files = Vec::new();
    yaml_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests"),
        &mut files,
    );
    assert!(files.len() >= 10);
    let mut triggers = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = serde_yaml::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if v["kind"] != "ScaledObject" {
                continue;
            }
            let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
            let name = v["metadata"]["name"].as_str().unwrap();
            for t in v["spec"]["triggers"].as_sequence().unwrap() {
                if !matches!(t["type"].as_str(), Some("external" | "external-push")) {
                    continue;
                }
                let meta: HashMap<String, String> =
                    serde_yaml::from_value(t["metadata"].clone()).unwrap();
                TargetSpec::from_metadata(name, ns, &meta, &AllowedActivators::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                triggers += 1;
            }
        }
    }
    assert!(triggers >= 1);
}
