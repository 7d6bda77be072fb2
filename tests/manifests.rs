//! The manifests in the repository: every file parses, every kustomization renders (a small
//! kustomize: resources, namespace, configMapGenerator, JSON patches, images; no network, no
//! kubectl), and within each rendered set and the examples the names, selectors, ports, service
//! accounts and RBAC references agree; every infscale trigger is metadata `serve` accepts, every
//! ScaledObject has a `fallback`, and the mutual-TLS objects name what `scripts/gen-certs.sh`
//! makes. The exact RBAC rules against the calls the code makes are in tests/security_manifests.rs.

mod common;

use common::cluster::kustomize::{kustomize, load};

use infscale::serve::metadata::{AllowedActivators, TargetSpec};
use serde_yaml::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files_named(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_named(&path, keep, out);
        } else if keep(&path) {
            out.push(path);
        }
    }
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files_named(
        dir,
        &|p| p.extension().is_some_and(|e| e == "yaml"),
        &mut out,
    );
    out.sort();
    out
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn kustomizations() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["manifests", "scripts"] {
        files_named(
            &root().join(dir),
            &|p| p.ends_with("kustomization.yaml"),
            &mut out,
        );
    }
    out.sort();
    out.into_iter()
        .map(|p| p.parent().unwrap().to_owned())
        .collect()
}

fn ns(d: &Value) -> &str {
    d["metadata"]["namespace"].as_str().unwrap_or("default")
}

fn name(d: &Value) -> &str {
    s(&d["metadata"]["name"])
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    serde_yaml::from_value(v.clone()).unwrap_or_default()
}

/// The names and numbers of a Deployment's container ports.
fn container_ports(d: &Value) -> (BTreeSet<String>, BTreeSet<u64>) {
    let (mut names, mut numbers) = (BTreeSet::new(), BTreeSet::new());
    for c in d["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap()
    {
        for p in c["ports"].as_sequence().into_iter().flatten() {
            let n = s(&p["name"]);
            assert!(
                !n.is_empty(),
                "Deployment {}: an unnamed container port",
                name(d)
            );
            names.insert(n.to_owned());
            numbers.insert(p["containerPort"].as_u64().expect("containerPort"));
        }
    }
    (names, numbers)
}

fn port_exists(ports: &(BTreeSet<String>, BTreeSet<u64>), p: &Value) -> bool {
    match p {
        Value::String(n) => ports.0.contains(n),
        Value::Number(n) => n.as_u64().is_some_and(|n| ports.1.contains(&n)),
        _ => false,
    }
}

fn trigger_metadata(t: &Value) -> HashMap<String, String> {
    serde_yaml::from_value(t["metadata"].clone()).unwrap()
}

/// The shipped scaler's `--allow-activator` entries, as its Deployment starts it.
fn shipped_allowed() -> AllowedActivators {
    common::shipped::allowed_activators()
}

/// Cross-references within one set of objects applied together; `what` names the set.
fn check_set(what: &str, docs: &[Value]) {
    let of = |kind: &'static str| docs.iter().filter(move |d| s(&d["kind"]) == kind);
    let deployments: Vec<&Value> = of("Deployment").collect();
    let find_deployment = |n: &str, namespace: &str| {
        deployments
            .iter()
            .find(|d| name(d) == n && ns(d) == namespace)
            .copied()
    };
    let accounts: BTreeSet<(String, String)> = of("ServiceAccount")
        .map(|a| (ns(a).to_owned(), name(a).to_owned()))
        .collect();
    for d in &deployments {
        let at = format!("{what}: Deployment {}", name(d));
        let pod = labels(&d["spec"]["template"]["metadata"]["labels"]);
        let selector = labels(&d["spec"]["selector"]["matchLabels"]);
        assert!(!selector.is_empty(), "{at}: no selector");
        assert!(
            selector.iter().all(|(k, v)| pod.get(k) == Some(v)),
            "{at}: selector {selector:?} is not the pod's labels {pod:?}"
        );
        if let Some(sa) = d["spec"]["template"]["spec"]["serviceAccountName"].as_str() {
            assert!(
                accounts.contains(&(ns(d).to_owned(), sa.to_owned())),
                "{at}: ServiceAccount {sa} is not in the set"
            );
        }
        let ports = container_ports(d);
        for c in d["spec"]["template"]["spec"]["containers"]
            .as_sequence()
            .unwrap()
        {
            for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
                let p = &c[probe];
                for kind in ["httpGet", "tcpSocket", "grpc"] {
                    if !p[kind].is_null() {
                        assert!(
                            port_exists(&ports, &p[kind]["port"]),
                            "{at}: {probe} port {:?}",
                            p[kind]["port"]
                        );
                    }
                }
            }
        }
        if what.contains("manifests/examples") {
            let c = &d["spec"]["template"]["spec"]["containers"][0];
            assert!(
                c["readinessProbe"].is_mapping() && c["livenessProbe"].is_mapping(),
                "{at}: probes"
            );
        }
    }
    for svc in of("Service") {
        let at = format!("{what}: Service {}", name(svc));
        let selector = labels(&svc["spec"]["selector"]);
        let backing: Vec<&&Value> = deployments
            .iter()
            .filter(|d| ns(d) == ns(svc))
            .filter(|d| {
                let pod = labels(&d["spec"]["template"]["metadata"]["labels"]);
                !selector.is_empty() && selector.iter().all(|(k, v)| pod.get(k) == Some(v))
            })
            .collect();
        assert_eq!(
            backing.len(),
            1,
            "{at}: selector {selector:?} matches {} Deployments",
            backing.len()
        );
        let ports = container_ports(backing[0]);
        for p in svc["spec"]["ports"].as_sequence().unwrap() {
            let target = if p["targetPort"].is_null() {
                &p["port"]
            } else {
                &p["targetPort"]
            };
            assert!(
                port_exists(&ports, target),
                "{at}: targetPort {target:?} is no container port of {}",
                name(backing[0])
            );
        }
    }
    let roles: BTreeSet<(String, String, String)> = of("Role")
        .map(|r| ("Role".to_owned(), ns(r).to_owned(), name(r).to_owned()))
        .chain(
            of("ClusterRole")
                .map(|r| ("ClusterRole".to_owned(), String::new(), name(r).to_owned())),
        )
        .collect();
    for r in of("Role").chain(of("ClusterRole")) {
        for rule in r["rules"].as_sequence().expect("rules") {
            for k in ["apiGroups", "resources", "verbs", "resourceNames"] {
                for v in rule[k].as_sequence().into_iter().flatten() {
                    assert!(
                        !s(v).contains('*'),
                        "{what}: {} {}: a wildcard in {k}",
                        s(&r["kind"]),
                        name(r)
                    );
                }
            }
        }
    }
    let mut bound = BTreeSet::new();
    for b in of("RoleBinding").chain(of("ClusterRoleBinding")) {
        let at = format!("{what}: {} {}", s(&b["kind"]), name(b));
        let kind = s(&b["roleRef"]["kind"]);
        let role_ns = if kind == "Role" {
            ns(b).to_owned()
        } else {
            String::new()
        };
        assert!(
            roles.contains(&(
                kind.to_owned(),
                role_ns,
                s(&b["roleRef"]["name"]).to_owned()
            )),
            "{at}: roleRef names no role in the set"
        );
        for subject in b["subjects"].as_sequence().expect("subjects") {
            let key = (
                subject["namespace"].as_str().unwrap_or(ns(b)).to_owned(),
                s(&subject["name"]).to_owned(),
            );
            assert!(
                accounts.contains(&key),
                "{at}: subject {key:?} is not a ServiceAccount in the set"
            );
            bound.insert(key);
        }
    }
    for r in &roles {
        let used = of("RoleBinding")
            .chain(of("ClusterRoleBinding"))
            .any(|b| s(&b["roleRef"]["name"]) == r.2 && s(&b["roleRef"]["kind"]) == r.0);
        assert!(used, "{what}: {r:?} is bound to nothing");
    }
    for a in &accounts {
        let used = deployments.iter().any(|d| {
            ns(d) == a.0
                && d["spec"]["template"]["spec"]["serviceAccountName"].as_str() == Some(&a.1)
        });
        assert!(
            used,
            "{what}: ServiceAccount {a:?} is used by no Deployment"
        );
    }
    let auths: BTreeSet<(String, String)> = of("TriggerAuthentication")
        .map(|a| (ns(a).to_owned(), name(a).to_owned()))
        .collect();
    for so in of("ScaledObject") {
        let at = format!("{what}: ScaledObject {}", name(so));
        let target = s(&so["spec"]["scaleTargetRef"]["name"]);
        let d = find_deployment(target, ns(so))
            .unwrap_or_else(|| panic!("{at}: scaleTargetRef {target} is no Deployment in the set"));
        let f = &so["spec"]["fallback"];
        assert!(
            f["failureThreshold"].as_u64().is_some() && f["replicas"].as_u64().is_some(),
            "{at}: no fallback"
        );
        assert_eq!(s(&f["behavior"]), "currentReplicasIfHigher", "{at}");
        for t in so["spec"]["triggers"].as_sequence().unwrap() {
            if !matches!(s(&t["type"]), "external" | "external-push") {
                continue;
            }
            let meta = trigger_metadata(t);
            TargetSpec::from_metadata(name(so), ns(so), &meta, &shipped_allowed())
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(
                meta.get("deployment").map(String::as_str),
                Some(target),
                "{at}: deployment"
            );
            let port: u64 = meta["metricsPort"].parse().unwrap();
            assert!(
                container_ports(d).1.contains(&port),
                "{at}: metricsPort {port} is no container port of {target}"
            );
            if let Some(auth) = t["authenticationRef"]["name"].as_str() {
                assert!(
                    auths.contains(&(ns(so).to_owned(), auth.to_owned())),
                    "{at}: TriggerAuthentication {auth}"
                );
            }
        }
    }
}

#[test]
fn manifests_parse_and_triggers_are_accepted() {
    let files = yaml_files(&root().join("manifests"));
    assert!(files.len() >= 10);
    let mut triggers = 0;
    for file in &files {
        for v in load(file) {
            if v["kind"] != "ScaledObject" {
                continue;
            }
            let at = file.display();
            assert!(
                v["spec"]["fallback"].is_mapping(),
                "{at}: {} has no fallback",
                name(&v)
            );
            for t in v["spec"]["triggers"].as_sequence().unwrap() {
                if !matches!(s(&t["type"]), "external" | "external-push") {
                    continue;
                }
                TargetSpec::from_metadata(
                    name(&v),
                    ns(&v),
                    &trigger_metadata(t),
                    &shipped_allowed(),
                )
                .unwrap_or_else(|e| panic!("{at}: {e}"));
                triggers += 1;
            }
        }
    }
    assert!(triggers >= 6, "{triggers} triggers");
}

#[test]
fn every_kustomization_renders_and_agrees_with_itself() {
    let dirs = kustomizations();
    assert!(dirs.len() >= 3, "{dirs:?}");
    for dir in dirs {
        let docs = kustomize(&dir);
        assert!(!docs.is_empty(), "{}", dir.display());
        check_set(&dir.display().to_string(), &docs);
    }
}

/// Every server's example, applied beside the shipped scaler and activator (`kubectl apply -k
/// manifests/scaler`, `kubectl apply -k manifests/activator`): each agrees with itself; each
/// ScaledObject is in serve mode for its own Service, with no route to add anywhere (the
/// activator learns it from the slice), its activator the shipped activator's admin Service as
/// the shipped scaler allows it, and the range of ports serve gives models the range the
/// shipped activator takes them on.
#[test]
fn the_examples_agree_with_themselves_and_the_activator() {
    let examples = yaml_files(&root().join("manifests/examples"));
    let mut all = Vec::new();
    for f in &examples {
        all.extend(load(f));
    }
    let servers: BTreeSet<String> = all
        .iter()
        .filter(|d| s(&d["kind"]) == "ScaledObject")
        .flat_map(|so| {
            so["spec"]["triggers"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|t| s(&t["metadata"]["server"]).to_owned())
        })
        .collect();
    for want in ["vllm", "llamacpp", "sglang", "trtllm"] {
        assert!(servers.contains(want), "no example for {want}: {servers:?}");
    }
    let activator = kustomize(&root().join("manifests/activator"));
    let scaler = kustomize(&root().join("manifests/scaler"));
    // Each ScaledObject with the Deployment and Service it scales (from any example file).
    for so in all.iter().filter(|d| s(&d["kind"]) == "ScaledObject") {
        let mut set: Vec<Value> = all
            .iter()
            .filter(|d| {
                matches!(
                    s(&d["kind"]),
                    "Deployment" | "Service" | "TriggerAuthentication"
                )
            })
            .cloned()
            .collect();
        set.push(so.clone());
        check_set(&format!("manifests/examples ({})", name(so)), &set);
    }
    let args = |docs: &[Value], deployment: &str| -> Vec<String> {
        let d = docs
            .iter()
            .find(|d| s(&d["kind"]) == "Deployment" && name(d) == deployment)
            .unwrap_or_else(|| panic!("no Deployment {deployment}"));
        d["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| s(a).to_owned())
            .collect()
    };
    let flag = |args: &[String], f: &str| -> Option<String> {
        args.windows(2).find(|w| w[0] == f).map(|w| w[1].clone())
    };
    let act_args = args(&activator, "infscale-activator");
    let serve_args = args(&scaler, "infscale");
    assert_eq!(
        flag(&act_args, "--model-ports"),
        flag(&serve_args, "--activator-ports"),
        "the ports serve gives models are the ports the activator takes them on"
    );
    assert_eq!(flag(&act_args, "--namespaces").as_deref(), Some("all"));
    let act_svc = activator
        .iter()
        .find(|d| s(&d["kind"]) == "Service" && name(d) == "infscale-activator-admin")
        .expect("the activator's admin Service");
    let client_svc = activator
        .iter()
        .find(|d| s(&d["kind"]) == "Service" && name(d) == "infscale-activator")
        .expect("the activator's client Service");
    let client_ports = client_svc["spec"]["ports"].as_sequence().unwrap();
    assert!(
        client_ports
            .iter()
            .all(|p| p["port"].as_u64() != Some(9092)),
        "the admin port is on the Service clients call"
    );
    for so in all.iter().filter(|d| s(&d["kind"]) == "ScaledObject") {
        let meta = trigger_metadata(&so["spec"]["triggers"][0]);
        let spec = TargetSpec::from_metadata(name(so), ns(so), &meta, &shipped_allowed())
            .unwrap_or_else(|e| panic!("{}: {e}", name(so)));
        let mode = spec
            .serve_mode
            .unwrap_or_else(|| panic!("{}: not in serve mode", name(so)));
        assert!(
            all.iter()
                .any(|d| s(&d["kind"]) == "Service" && name(d) == mode.service),
            "{}: no Service {}",
            name(so),
            mode.service
        );
        assert!(
            !meta.contains_key("activatorHost") && mode.activator_port.is_none(),
            "{}: the activator's host and port are serve's to choose",
            name(so)
        );
        let activator = spec.activator.expect("an activator");
        assert_eq!(
            activator.host,
            format!("{}.{}.svc", mode.service, ns(so)),
            "the key the activator counts a learned model under"
        );
        let url = &meta["activatorUrl"];
        assert!(
            url.starts_with(&format!("http://{}.{}.svc:", name(act_svc), ns(act_svc))),
            "{url}"
        );
        let act_port: u64 = url.rsplit(':').next().unwrap().parse().unwrap();
        assert!(
            act_svc["spec"]["ports"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|p| p["port"].as_u64() == Some(act_port)),
            "{url}"
        );
    }
}

/// The TriggerAuthentication and the TLS scaler name the Secrets and keys that the commands
/// scripts/gen-certs.sh prints create. Run as a user would, from another directory with a model
/// namespace of their own: each printed command names files by absolute paths that exist, the
/// server's Secret goes to the install's namespace (infscale) and the client's to the model
/// namespace given, where the example's TriggerAuthentication is applied (`kubectl apply -n`).
#[test]
fn the_tls_objects_name_what_gen_certs_makes() {
    let model_ns = "team-a";
    let base = std::env::temp_dir().join(format!("infscale-gen-certs-{}", std::process::id()));
    let elsewhere = base.join("cwd");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = std::process::Command::new("bash")
        .arg(root().join("scripts/gen-certs.sh"))
        .arg("../certs")
        .arg(model_ns)
        .current_dir(&elsewhere)
        .output()
        .expect("bash runs scripts/gen-certs.sh (it needs openssl)");
    assert!(
        out.status.success(),
        "gen-certs.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    // (namespace, secret) -> keys, from the `kubectl create secret` lines it prints.
    let mut secrets: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for line in printed
        .lines()
        .filter(|l| l.contains("create secret generic"))
    {
        let words: Vec<&str> = line.split_whitespace().collect();
        let namespace = words[words.iter().position(|w| *w == "-n").unwrap() + 1];
        let secret = words[words.iter().position(|w| *w == "generic").unwrap() + 1];
        let mut keys = BTreeSet::new();
        for f in words.iter().filter_map(|w| w.strip_prefix("--from-file=")) {
            let (key, file) = f.split_once('=').unwrap_or_else(|| panic!("{line}"));
            let file = Path::new(file);
            assert!(
                file.is_absolute() && file.is_file(),
                "{line}: {} is not a file from any directory",
                file.display()
            );
            keys.insert(key.to_owned());
        }
        secrets.insert((namespace.to_owned(), secret.to_owned()), keys);
    }
    let _ = std::fs::remove_dir_all(&base);
    assert_eq!(secrets.len(), 2, "{secrets:?}");
    let mut auths = 0;
    for f in yaml_files(&root().join("manifests/examples")) {
        for d in load(&f)
            .iter()
            .filter(|d| s(&d["kind"]) == "TriggerAuthentication")
        {
            let mut params = BTreeSet::new();
            for r in d["spec"]["secretTargetRef"].as_sequence().unwrap() {
                assert!(d["metadata"]["namespace"].is_null(), "{}", f.display());
                let keys = secrets
                    .get(&(model_ns.to_owned(), s(&r["name"]).to_owned()))
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: Secret {:?} is not made by gen-certs.sh",
                            f.display(),
                            r["name"]
                        )
                    });
                assert!(
                    keys.contains(s(&r["key"])),
                    "{}: key {:?}",
                    f.display(),
                    r["key"]
                );
                params.insert(s(&r["parameter"]).to_owned());
            }
            let want: BTreeSet<String> = ["caCert", "tlsClientCert", "tlsClientKey"]
                .map(String::from)
                .into();
            assert_eq!(params, want);
            auths += 1;
        }
    }
    assert!(auths >= 1);
    let scaler = kustomize(&root().join("manifests/scaler-tls"));
    let d = scaler
        .iter()
        .find(|d| s(&d["kind"]) == "Deployment")
        .unwrap();
    let spec = &d["spec"]["template"]["spec"];
    let secret = s(&spec["volumes"][0]["secret"]["secretName"]);
    let keys = &secrets[&(ns(d).to_owned(), secret.to_owned())];
    let mount = s(&spec["containers"][0]["volumeMounts"][0]["mountPath"]);
    let args: Vec<&str> = spec["containers"][0]["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    for flag in ["--tls-cert", "--tls-key", "--tls-client-ca"] {
        let file = args[args.iter().position(|a| *a == flag).unwrap() + 1];
        let key = file
            .strip_prefix(&format!("{mount}/"))
            .unwrap_or_else(|| panic!("{flag} {file}"));
        assert!(keys.contains(key), "{flag} {file}: {keys:?}");
    }
}

/// How one example model server drains on scale-down, in seconds: the preStop pause before the
/// drain (while the endpoint removal propagates) and the drain itself, and whether the drain
/// ends before the grace period does (a server flag, or a bounded wait in the hook) or is ended
/// by the kill at the end of it.
struct Drain {
    pause: u64,
    drain: u64,
    grace: u64,
    ends_by_itself: bool,
}

fn flag_value(args: &[&str], flag: &str) -> Option<u64> {
    let at = args.iter().position(|a| *a == flag)?;
    args.get(at + 1)?.parse().ok()
}

/// The drain an example model-server Deployment configures, by its server (the container's
/// name); a server this does not know fails, so a new example says how it drains.
fn drain_of(at: &str, d: &Value) -> Drain {
    let spec = &d["spec"]["template"]["spec"];
    let grace = spec["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("{at}: no terminationGracePeriodSeconds"));
    let c = &spec["containers"][0];
    let hook = &c["lifecycle"]["preStop"];
    let sleep = hook["sleep"]["seconds"].as_u64();
    let args: Vec<&str> = c["args"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(s)
        .collect();
    match s(&c["name"]) {
        // vLLM: --shutdown-timeout (default 0: in-flight requests are aborted at SIGTERM).
        "vllm" => Drain {
            pause: sleep.unwrap_or_else(|| panic!("{at}: no preStop sleep")),
            drain: flag_value(&args, "--shutdown-timeout")
                .unwrap_or_else(|| panic!("{at}: no --shutdown-timeout")),
            grace,
            ends_by_itself: true,
        },
        // SGLang and trtllm-serve finish what they hold at SIGTERM, without limit.
        "sglang" | "trtllm-serve" => {
            let pause = sleep.unwrap_or_else(|| panic!("{at}: no preStop sleep"));
            Drain {
                pause,
                drain: grace.saturating_sub(pause),
                grace,
                ends_by_itself: false,
            }
        }
        // llama-server cuts running slots at SIGTERM: the hook pauses, then waits for idle.
        "llama-server" => {
            let script = hook["exec"]["command"][2]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: no preStop script"));
            let pause = script
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("sleep "))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{at}: the hook does not start with a sleep"));
            let drain = script
                .lines()
                .find_map(|l| l.strip_prefix("end=$(( $(date +%s) + "))
                .and_then(|l| l.strip_suffix(" ))"))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{at}: the hook's wait has no bound"));
            for series in ["llamacpp:requests_(processing|deferred) ", ":8080/metrics"] {
                assert!(
                    script.contains(series),
                    "{at}: the hook does not read {series}"
                );
            }
            Drain {
                pause,
                drain,
                grace,
                ends_by_itself: true,
            }
        }
        // `infscale emulate` drops open streams at SIGTERM, and its image has no shell: one sleep
        // is both the pause and the drain.
        "emulate" => Drain {
            pause: 0,
            drain: sleep.unwrap_or_else(|| panic!("{at}: no preStop sleep")),
            grace,
            ends_by_itself: true,
        },
        other => panic!("{at}: how does {other} drain?"),
    }
}

/// Every example model server drains on scale-down for at least the drain the simulator ships
/// (`infscale_core::sim::run::DEFAULT_DRAIN_S`): a removed pod serves what it holds that long before
/// what is left is cut, and the grace period is not the one to cut a drain that ends by itself.
#[test]
fn the_examples_drain_as_long_as_the_simulator_models() {
    let shipped = infscale_core::sim::run::DEFAULT_DRAIN_S;
    let mut servers = BTreeSet::new();
    for f in yaml_files(&root().join("manifests/examples")) {
        for d in load(&f).iter().filter(|d| s(&d["kind"]) == "Deployment") {
            let at = format!("{}: Deployment {}", f.display(), name(d));
            let drain = drain_of(&at, d);
            assert!(
                drain.drain as f64 >= shipped,
                "{at}: drains {} s, the simulator models {shipped} s",
                drain.drain
            );
            if drain.ends_by_itself {
                assert!(
                    drain.grace > drain.pause + drain.drain,
                    "{at}: terminationGracePeriodSeconds {} is not above the preStop pause {} + the drain {}",
                    drain.grace,
                    drain.pause,
                    drain.drain
                );
            }
            servers.insert(s(&d["spec"]["template"]["spec"]["containers"][0]["name"]).to_owned());
        }
    }
    for want in ["vllm", "sglang", "llama-server", "trtllm-serve", "emulate"] {
        assert!(
            servers.contains(want),
            "no example Deployment runs {want}: {servers:?}"
        );
    }
}

/// The `preStop` pause the simulator and the demo bill a removed pod for
/// (`infscale_core::sim::settings::SHIPPED_PRE_STOP_S`) is the pause every example model server
/// takes before its drain (`emulate`'s one sleep is its drain, and has no pause apart).
#[test]
fn the_examples_pause_as_long_as_the_simulator_bills() {
    let shipped = infscale_core::sim::settings::SHIPPED_PRE_STOP_S;
    let mut paused = 0;
    for f in yaml_files(&root().join("manifests/examples")) {
        for d in load(&f).iter().filter(|d| s(&d["kind"]) == "Deployment") {
            let at = format!("{}: Deployment {}", f.display(), name(d));
            let drain = drain_of(&at, d);
            if s(&d["spec"]["template"]["spec"]["containers"][0]["name"]) == "emulate" {
                continue;
            }
            assert_eq!(
                drain.pause as f64, shipped,
                "{at}: pauses {} s before its drain, the simulator bills {shipped} s",
                drain.pause
            );
            paused += 1;
        }
    }
    assert!(paused >= 4, "{paused} example model servers pause");
}

/// A GPU model server's cold start (an image pull, weights into memory) takes minutes: each
/// example gives it a startup probe of at least ten minutes, and its liveness probe no initial
/// delay that a slower load would outlast.
#[test]
fn model_servers_have_a_startup_probe_that_fits_a_cold_start() {
    for f in yaml_files(&root().join("manifests/examples")) {
        for d in load(&f).iter().filter(|d| s(&d["kind"]) == "Deployment") {
            let c = &d["spec"]["template"]["spec"]["containers"][0];
            if s(&c["name"]) == "emulate" {
                continue;
            }
            let at = format!("{}: Deployment {}", f.display(), name(d));
            let startup = &c["startupProbe"];
            let budget = startup["periodSeconds"].as_u64().unwrap_or(10)
                * startup["failureThreshold"].as_u64().unwrap_or(3);
            assert!(
                !startup.is_null() && budget >= 600,
                "{at}: a startup probe of {budget} s cannot wait out a cold start"
            );
            assert!(
                c["livenessProbe"]["initialDelaySeconds"].is_null(),
                "{at}: the startup probe, not an initial delay, covers the cold start"
            );
        }
    }
}

/// Examples are copied into production: every image in `manifests/` names a version, never
/// `:latest` or no tag at all.
#[test]
fn every_image_is_pinned() {
    let mut seen = 0;
    for dir in [
        "manifests/scaler",
        "manifests/activator",
        "manifests/examples",
        "manifests/scaler-tls",
    ] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            for line in text
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("image:"))
            {
                let image = line.trim_start_matches("image:").trim();
                let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("");
                assert!(
                    !tag.is_empty() && tag != "latest" && !tag.contains('/'),
                    "{}: {image} is not pinned",
                    e.path().display()
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 7, "only {seen} images found");
}

/// Every example's container image is a row of scripts/examples/pins.tsv, the table that
/// scripts/examples/check-flags.sh checks the example's flags against: a pin changes in the
/// manifest and the table together, or the check would read another version's source.
#[test]
fn every_example_image_is_in_the_pins_table() {
    let table = std::fs::read_to_string(root().join("scripts/examples/pins.tsv")).unwrap();
    let pinned: BTreeSet<&str> = table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    let mut images = 0;
    for f in yaml_files(&root().join("manifests/examples")) {
        for d in load(&f).iter().filter(|d| s(&d["kind"]) == "Deployment") {
            for c in d["spec"]["template"]["spec"]["containers"]
                .as_sequence()
                .unwrap()
            {
                let image = s(&c["image"]);
                assert!(
                    pinned.contains(image),
                    "{}: image {image} is not in scripts/examples/pins.tsv",
                    f.display()
                );
                images += 1;
            }
        }
    }
    assert!(images >= 5, "{images}");
}
