//! What the shipped manifests start `serve` and the activator with, read from the files a user
//! applies: a test wires the parts as they are shipped, not its own way.

use infscale::serve::metadata::AllowedActivators;

fn manifest(rel: &str) -> serde_yaml::Value {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The first container's args of the Deployment in `rel`.
pub fn args(rel: &str) -> Vec<String> {
    manifest(rel)["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{rel}: no args"))
        .iter()
        .map(|a| a.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The value of `flag` in `args`, if given.
pub fn flag(args: &[String], flag: &str) -> Option<String> {
    args.windows(2).find(|w| w[0] == flag).map(|w| w[1].clone())
}

/// The activators the shipped `serve` accepts besides Services in a ScaledObject's namespace.
pub fn allowed_activators() -> AllowedActivators {
    let args = args("manifests/scaler/deployment.yaml");
    let allowed: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--allow-activator")
        .map(|w| w[1].clone())
        .collect();
    AllowedActivators::parse(&allowed).unwrap_or_else(|e| panic!("{e}"))
}

/// The shipped activator admin Service's name, namespace and admin port.
pub fn activator_admin() -> (String, String, u16) {
    let svc = manifest("manifests/activator/service-admin.yaml");
    let kustomization = manifest("manifests/activator/kustomization.yaml");
    let name = svc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ns = kustomization["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let port = svc["spec"]["ports"]
        .as_sequence()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "admin")
        .and_then(|p| p["port"].as_u64())
        .unwrap_or_default();
    (name, ns, port as u16)
}
