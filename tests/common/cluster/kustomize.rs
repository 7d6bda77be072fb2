//! `kubectl kustomize DIR` for what the repository's kustomizations use (resources, namespace,
//! configMapGenerator, JSON patches, images; no network, no kubectl), so a test renders the
//! shipped manifests and installs them as a user does (`super::apply`). Moved here from
//! tests/manifests.rs, whose checks of the rendered sets stay there.

use serde::Deserialize;
use serde_yaml::Value;
use std::path::Path;

/// The documents of a multi-document YAML file, empty ones left out.
pub fn load(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", file.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// A string field, or "".
fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// `metadata.name`, or "".
fn name(d: &Value) -> &str {
    s(&d["metadata"]["name"])
}

/// Applies one JSON patch op (`add`, `replace`, `remove`) at a JSON pointer.
fn patch_op(doc: &mut Value, op: &Value, at: &str) {
    let path = s(&op["path"]);
    let mut parts: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    let last = parts.pop().expect("a path");
    let mut node = doc;
    for p in &parts {
        node = match node {
            Value::Sequence(seq) => &mut seq[p.parse::<usize>().expect("an index")],
            Value::Mapping(map) => map
                .get_mut(p.as_str())
                .unwrap_or_else(|| panic!("{at}: patch path {path}: no {p}")),
            _ => panic!("{at}: patch path {path}: {p} is a scalar"),
        };
    }
    let kind = s(&op["op"]);
    match (node, kind) {
        (Value::Mapping(map), "add" | "replace") => {
            if kind == "replace" {
                assert!(
                    map.contains_key(last.as_str()),
                    "{at}: replace {path}: absent"
                );
            }
            map.insert(Value::from(last), op["value"].clone());
        }
        (Value::Mapping(map), "remove") => {
            assert!(
                map.remove(last.as_str()).is_some(),
                "{at}: remove {path}: absent"
            );
        }
        (Value::Sequence(seq), "replace") => {
            seq[last.parse::<usize>().unwrap()] = op["value"].clone()
        }
        (Value::Sequence(seq), "add") if last == "-" => seq.push(op["value"].clone()),
        (_, other) => panic!("{at}: patch op {other} at {path} not handled"),
    }
}

/// `kubectl kustomize DIR`, for what the repository's kustomizations use.
pub fn kustomize(dir: &Path) -> Vec<Value> {
    let at = dir.join("kustomization.yaml");
    let k = load(&at)
        .pop()
        .unwrap_or_else(|| panic!("{}: empty", at.display()));
    let at = at.display().to_string();
    for key in k.as_mapping().expect("a mapping").keys() {
        assert!(
            matches!(
                s(key),
                "apiVersion"
                    | "kind"
                    | "resources"
                    | "namespace"
                    | "configMapGenerator"
                    | "patches"
                    | "images"
            ),
            "{at}: {key:?} is not rendered by this test"
        );
    }
    let mut docs = Vec::new();
    for r in k["resources"].as_sequence().into_iter().flatten() {
        let path = dir.join(s(r));
        if path.is_dir() {
            docs.extend(kustomize(&path));
        } else {
            docs.extend(load(&path));
        }
    }
    for g in k["configMapGenerator"].as_sequence().into_iter().flatten() {
        let mut data = serde_yaml::Mapping::new();
        for f in g["files"].as_sequence().expect("files") {
            let (key, file) = s(f).split_once('=').unwrap_or((s(f), s(f)));
            let key = Path::new(key).file_name().unwrap().to_str().unwrap();
            let text = std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("{at}: generator file {file}: {e}"));
            data.insert(Value::from(key), Value::from(text));
        }
        let same = |d: &Value| s(&d["kind"]) == "ConfigMap" && name(d) == s(&g["name"]);
        match g["behavior"].as_str().unwrap_or("create") {
            "create" => assert!(!docs.iter().any(same), "{at}: {:?} exists", g["name"]),
            "replace" => {
                assert!(docs.iter().any(same), "{at}: {:?} to replace", g["name"]);
                docs.retain(|d| !same(d));
            }
            other => panic!("{at}: configMapGenerator behavior {other} is not rendered"),
        }
        let mut cm: Value = serde_yaml::from_str("{apiVersion: v1, kind: ConfigMap}").unwrap();
        cm["metadata"] = serde_yaml::from_str(&format!("{{name: {}}}", s(&g["name"]))).unwrap();
        cm["data"] = Value::Mapping(data);
        docs.push(cm);
    }
    for p in k["patches"].as_sequence().into_iter().flatten() {
        let (kind, name) = (s(&p["target"]["kind"]), s(&p["target"]["name"]));
        let ops: Vec<Value> = serde_yaml::from_str(s(&p["patch"])).expect("a JSON patch");
        let mut hit = 0;
        for d in docs
            .iter_mut()
            .filter(|d| s(&d["kind"]) == kind && s(&d["metadata"]["name"]) == name)
        {
            for op in &ops {
                patch_op(d, op, &at);
            }
            hit += 1;
        }
        assert_eq!(hit, 1, "{at}: patch target {kind}/{name}");
    }
    for i in k["images"].as_sequence().into_iter().flatten() {
        let mut found = false;
        for d in docs.iter_mut().filter(|d| s(&d["kind"]) == "Deployment") {
            for c in d["spec"]["template"]["spec"]["containers"]
                .as_sequence_mut()
                .into_iter()
                .flatten()
            {
                let image = s(&c["image"]).to_owned();
                let (name, tag) = image.rsplit_once(':').unwrap_or((&image, "latest"));
                if name == s(&i["name"]) {
                    let name = i["newName"].as_str().unwrap_or(name);
                    let tag = i["newTag"].as_str().unwrap_or(tag);
                    c["image"] = Value::from(format!("{name}:{tag}"));
                    found = true;
                }
            }
        }
        assert!(found, "{at}: image {:?} is in no Deployment", i["name"]);
    }
    if let Some(ns) = k["namespace"].as_str() {
        for d in &mut docs {
            if !matches!(
                s(&d["kind"]),
                "Namespace" | "ClusterRole" | "ClusterRoleBinding"
            ) {
                d["metadata"]["namespace"] = Value::from(ns);
            }
            for subject in d["subjects"].as_sequence_mut().into_iter().flatten() {
                if s(&subject["kind"]) == "ServiceAccount" {
                    subject["namespace"] = Value::from(ns);
                }
            }
        }
    }
    docs
}
