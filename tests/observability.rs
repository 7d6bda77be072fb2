//! The operations files under manifests/observability/ query what the binaries export: every
//! metric and matcher label in the dashboard's and the alerts' PromQL is checked against the real
//! `/metrics` of a running scaler and activator on loopback, after traffic that creates their
//! labelled series. The dashboard parses with a title and a query on every panel, the rules pass
//! `promtool check rules` and their unit tests where promtool is installed, and the scrape
//! targets name the Services' real ports and labels.

mod common;

use common::fixture;
use common::keda::{client, metrics_request, object, value_when};
use common::model::{activator, upstream, wait_held};
use common::pods::{pod, Behaviour};
use common::promql::{exported, selectors, variable_selectors, Selector};
use common::scaler::{config, start};
use infscale::serve::server::Config;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Series the dashboard shows from kube-state-metrics, not from infscale.
const EXTERNAL: &[&str] = &[
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "kube_horizontalpodautoscaler_status_current_replicas",
];

/// Labels Prometheus adds to every scraped series (the target's, from service discovery).
const TARGET_LABELS: &[&str] = &["job", "instance", "namespace", "pod", "service", "endpoint"];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/observability")
}

fn dashboard() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("dashboard.json")).expect("dashboard.json");
    serde_json::from_str(&text).expect("dashboard.json parses")
}

fn yaml_docs(name: &str) -> Vec<serde_yaml::Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(dir().join(name)).expect(name);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect(name))
        .collect()
}

/// The alerts' rule groups, as a plain Prometheus rules file would hold them.
fn rule_groups() -> serde_yaml::Value {
    let docs = yaml_docs("alerts.yaml");
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["kind"], "PrometheusRule");
    docs[0]["spec"]["groups"].clone()
}

/// Every PromQL expression: (where, expression).
fn panel_queries(d: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        let title = p["title"].as_str().unwrap_or("").to_owned();
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push((format!("panel {title:?}"), e.to_owned()));
            }
        }
    }
    out
}

fn alert_queries() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for g in rule_groups().as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("");
            let expr = r["expr"].as_str().expect("expr");
            out.push((format!("rule {name}"), expr.to_owned()));
        }
    }
    out
}

/// What the dashboard and the alerts read: (where, selector).
fn queried() -> Vec<(String, Selector)> {
    let d = dashboard();
    let mut out = Vec::new();
    for (at, e) in panel_queries(&d).into_iter().chain(alert_queries()) {
        for s in selectors(&e) {
            out.push((at.clone(), s));
        }
    }
    for v in d["templating"]["list"].as_array().expect("templating") {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .expect("variable query");
        for s in variable_selectors(q) {
            out.push((format!("variable {}", v["name"]), s));
        }
    }
    out
}

#[test]
fn promql_selectors_are_read() {
    let got = selectors(
        r#"sum by (le, route) (rate(a_bucket{route=~"$route", x="}"}[$__rate_interval])) / on(route) group_left(z) b > 0 and absent(c:d) unless histogram_quantile(0.5, e{f!="1"}) offset 5m"#,
    );
    let named: Vec<(&str, Vec<&str>)> = got
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.labels.iter().map(|l| l.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        named,
        vec![
            ("a_bucket", vec!["route", "x"]),
            ("b", vec![]),
            ("c:d", vec![]),
            ("e", vec!["f"]),
        ]
    );
    let v = variable_selectors(r#"label_values(m{namespace="$namespace"}, scaledobject)"#);
    assert_eq!(v[0].name, "m");
    assert_eq!(v[0].labels, vec!["namespace", "scaledobject"]);
    let page = "# TYPE x counter\nx_total{a=\"p,q\",b=\"\\\"\"} 1\ny 2\n";
    let e = exported(page);
    assert_eq!(e[0].name, "x_total");
    assert_eq!(e[0].labels, vec!["a", "b"]);
    assert_eq!(e[1].name, "y");
}

#[test]
fn the_dashboard_parses_and_every_panel_has_a_title_and_a_query() {
    let d = dashboard();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "{} panels", panels.len());
    for p in panels {
        let title = p["title"].as_str().unwrap_or("");
        assert!(!title.trim().is_empty(), "a panel without a title: {p}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for t in targets {
            let e = t["expr"].as_str().unwrap_or("");
            assert!(!e.trim().is_empty(), "panel {title:?} has an empty query");
            assert_eq!(
                e.matches('(').count(),
                e.matches(')').count(),
                "panel {title:?}: {e}"
            );
        }
    }
    // Per target: the ScaledObject and the activator route are variables.
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for v in ["namespace", "scaledobject", "route"] {
        assert!(vars.contains(&v), "no ${v} variable: {vars:?}");
    }
    // The external series are marked as such in their panel's title.
    for p in panels {
        let uses_external = panel_queries(&serde_json::json!({"panels": [p]}))
            .iter()
            .any(|(_, e)| EXTERNAL.iter().any(|x| e.contains(x)));
        if uses_external {
            assert!(p["title"].as_str().unwrap_or("").contains("external"));
        }
    }
}

/// Every alert has a summary, a description and a runbook.
#[test]
fn every_alert_says_what_happened_and_what_to_do() {
    let groups = rule_groups();
    let mut alerts = BTreeSet::new();
    for g in groups.as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            let name = r["alert"].as_str().expect("alert").to_owned();
            for key in ["summary", "description", "runbook"] {
                assert!(
                    r["annotations"][key]
                        .as_str()
                        .is_some_and(|s| s.trim().len() > 10),
                    "{name}: no {key}"
                );
            }
            assert!(r["labels"]["severity"].as_str().is_some(), "{name}");
            alerts.insert(name);
        }
    }
    for a in [
        "InfscaleTargetAllPodsFailingScrape",
        "InfscaleActivatorCountsStale",
        "InfscaleHoldTimeouts",
        "InfscaleErrorsAnsweredToKeda",
    ] {
        assert!(alerts.contains(a), "no {a}: {alerts:?}");
    }
}

async fn text(url: String) -> String {
    reqwest::get(url)
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body")
}

/// The real activator after a request held then timed out (504), one refused while the route
/// was full (503) and one forwarded (200).
async fn activator_after_traffic() -> common::model::Running {
    let ready = Arc::new(AtomicBool::new(false));
    let up = upstream(ready.clone()).await;
    let a = activator(up, 1, 2.0).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let url = format!("http://{}/seq", a.proxy);
    let held = tokio::spawn(http.get(&url).send());
    wait_held(a.admin, 1).await;
    let full = http.get(&url).send().await.expect("refused");
    assert_eq!(full.status(), 503);
    let timed_out = held.await.expect("task").expect("answered");
    assert_eq!(timed_out.status(), 504);
    ready.store(true, Ordering::SeqCst);
    let ok = http.get(&url).send().await.expect("forwarded");
    assert_eq!(ok.status(), 200);
    a
}

fn page(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("fixture")
}

/// Polls `url` until its text has every one of `wanted`, for up to 20 s.
async fn metrics_with(url: &str, wanted: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = text(url.to_owned()).await;
        if wanted.iter().all(|w| t.contains(w)) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "{url} never showed all of {wanted:?}:\n{t}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_metric_the_dashboard_and_alerts_query_is_exported() {
    let act = activator_after_traffic().await;
    let admin = format!("http://{}", act.admin);
    // Pods: one serving vLLM's page, one failing (500); one serving SGLang's page to a trigger
    // configured for vLLM (a configuration error).
    let good = pod("127.0.0.1:0", Behaviour::Page(page("vllm-busy.prom")));
    let failing = pod("127.0.0.1:0", Behaviour::Status(500));
    let other = pod("127.0.0.1:0", Behaviour::Page(page("sglang.prom")));
    let mut statics = HashMap::new();
    statics.insert("chat".to_owned(), vec![good.url(), failing.url()]);
    statics.insert("wrong".to_owned(), vec![other.url()]);
    let running = start(Config {
        statics,
        allowed_activators: vec![admin.clone()],
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let meta = |d: &str| {
        vec![
            ("deployment", d.to_owned()),
            ("threshold", "24".to_owned()),
            ("scrapeIntervalSeconds", "0.2".to_owned()),
            ("scrapeTimeoutSeconds", "2".to_owned()),
        ]
    };
    let mut chat = meta("chat");
    chat.push(("activatorUrl", admin.clone()));
    // Its writes counter exists from the start (with no Kubernetes API, nothing is written).
    chat.push(("deletionCost", "true".to_owned()));
    let chat = object("chat", &chat);
    let mut wrong = meta("wrong");
    wrong.push(("server", "vllm".to_owned()));
    let wrong = object("wrong", &wrong);
    // A serve-mode trigger: its activator route series (0 here: with no Kubernetes API there
    // is no slice to write, so no activator can hold the model).
    let mut served = meta("chat");
    served.push(("activatorUrl", admin.clone()));
    served.push(("serveMode", "true".to_owned()));
    let served = object("served", &served);
    for so in [&chat, &wrong, &served] {
        let spec = c.get_metric_spec(so.clone()).await.expect("GetMetricSpec");
        let name = spec.into_inner().metric_specs[0].metric_name.clone();
        let _ = c.get_metrics(metrics_request(so, &name)).await;
    }
    value_when(&mut c, &metrics_request(&chat, "infscale-queue-chat"), None).await;
    c.is_active(chat.clone()).await.expect("IsActive");
    // An error answered to KEDA: metadata it refuses.
    let bad = object("bad", &[("threshold", "nope".to_owned())]);
    assert!(c.is_active(bad).await.is_err());

    let serve_page = metrics_with(
        &format!("http://{}/metrics", running.metrics),
        &[
            "infscale_scrape_errors_total{",
            "infscale_config_errors{",
            "infscale_activator_up{",
            "infscale_target_value{",
            "infscale_target_active{",
            "infscale_activator_route{",
            "code=\"InvalidArgument\"",
        ],
    )
    .await;
    let activator_page = metrics_with(
        &format!("{admin}/metrics"),
        &[
            "infscale_activator_held{",
            "infscale_activator_rejected_total{",
            "infscale_activator_unrouted_total{",
        ],
    )
    .await;

    let mut series = exported(&serve_page);
    series.extend(exported(&activator_page));
    let mut names: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for s in &series {
        let labels = names.entry(s.name.as_str()).or_default();
        labels.extend(s.labels.iter().map(|l| l.as_str()));
    }
    let queried = queried();
    let mut read = BTreeSet::new();
    let mut problems = Vec::new();
    for (at, s) in &queried {
        if EXTERNAL.contains(&s.name.as_str()) {
            continue;
        }
        read.insert(s.name.clone());
        let Some(labels) = names.get(s.name.as_str()) else {
            problems.push(format!("{at}: {} is not exported", s.name));
            continue;
        };
        for l in &s.labels {
            if !labels.contains(l.as_str()) && !TARGET_LABELS.contains(&l.as_str()) {
                problems.push(format!("{at}: {} has no label {l}", s.name));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nexported: {:?}",
        problems.join("\n"),
        names.keys().collect::<BTreeSet<_>>()
    );
    // The expressions were read, not skipped: both binaries' series are queried.
    assert!(read.len() >= 15, "only {read:?}");
    assert!(read.iter().any(|n| n.starts_with("infscale_activator_")));
    assert!(read.contains("infscale_scrape_errors_total"));
    eprintln!(
        "{} selectors over {} exported metric names checked",
        queried.len(),
        read.len()
    );
    drop(act);
}

/// Runs promtool when it is installed; a note and no failure when it is not.
fn promtool(args: &[&str], at: &Path) -> Option<std::process::Output> {
    match std::process::Command::new("promtool")
        .args(args)
        .current_dir(at)
        .output()
    {
        Ok(out) => Some(out),
        Err(e) => {
            eprintln!("NOTE: promtool not run ({e}); install Debian's prometheus package");
            None
        }
    }
}

/// A fresh directory for promtool's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("infscale-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

#[test]
fn the_rules_pass_promtool() {
    let d = scratch("rules");
    let rules = serde_yaml::to_string(&serde_yaml::Mapping::from_iter([(
        "groups".into(),
        rule_groups(),
    )]))
    .expect("rules");
    std::fs::write(d.join("rules.yml"), rules).expect("write rules");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/observability/alerts-test.yml"),
        d.join("alerts-test.yml"),
    )
    .expect("copy the rule tests");
    for args in [
        &["check", "rules", "rules.yml"][..],
        &["test", "rules", "alerts-test.yml"][..],
    ] {
        let Some(out) = promtool(args, &d) else {
            return;
        };
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "promtool {args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

fn repo_yaml(path: &str) -> serde_yaml::Value {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect(path);
    serde_yaml::from_str(&text).expect(path)
}

/// A Service's labels, as `name;component`, and its port names.
fn service(path: &str) -> (String, Vec<String>) {
    let s = repo_yaml(path);
    let labels = &s["metadata"]["labels"];
    let key = format!(
        "{};{}",
        labels["app.kubernetes.io/name"]
            .as_str()
            .expect("name label"),
        labels["app.kubernetes.io/component"]
            .as_str()
            .expect("component label")
    );
    let ports = s["spec"]["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .map(|p| p["name"].as_str().expect("port name").to_owned())
        .collect();
    (key, ports)
}

#[test]
fn the_scrape_targets_name_the_services_ports_and_labels() {
    let scaler = service("manifests/scaler/service.yaml");
    let act = service("manifests/activator/service-admin.yaml");
    // ServiceMonitors: selector labels and port name of the scaler's and activator's Services.
    let monitors = yaml_docs("servicemonitor.yaml");
    assert_eq!(monitors.len(), 2);
    for (m, (key, ports), port, honor) in [
        (&monitors[0], &scaler, "metrics", true),
        (&monitors[1], &act, "admin", false),
    ] {
        assert_eq!(m["kind"], "ServiceMonitor");
        let sel = &m["spec"]["selector"]["matchLabels"];
        let got = format!(
            "{};{}",
            sel["app.kubernetes.io/name"].as_str().unwrap_or(""),
            sel["app.kubernetes.io/component"].as_str().unwrap_or("")
        );
        assert_eq!(&got, key);
        let ep = &m["spec"]["endpoints"][0];
        assert_eq!(ep["port"].as_str(), Some(port));
        assert!(ports.iter().any(|p| p == port), "{ports:?}");
        assert_eq!(ep["path"].as_str(), Some("/metrics"));
        assert_eq!(ep["honorLabels"].as_bool().unwrap_or(false), honor);
    }
    // The plain scrape config keeps the same Services' same ports.
    let plain = repo_yaml("manifests/observability/prometheus-scrape.yml");
    let jobs = plain["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs");
    assert_eq!(jobs.len(), 2);
    for (job, (key, _), port, honor) in [
        (&jobs[0], &scaler, "metrics", true),
        (&jobs[1], &act, "admin", false),
    ] {
        assert!(job["kubernetes_sd_configs"][0]["role"] == "endpoints");
        assert_eq!(job["honor_labels"].as_bool().unwrap_or(false), honor);
        let keep = job["relabel_configs"]
            .as_sequence()
            .expect("relabel_configs")
            .iter()
            .find(|r| r["action"] == "keep")
            .expect("a keep rule");
        assert_eq!(
            keep["regex"].as_str(),
            Some(format!("{key};{port}").as_str())
        );
    }
    // The kustomization holds the monitors, the alerts and the dashboard; manifests/scaler does
    // not include it (it needs the Prometheus Operator's CRDs).
    let k = repo_yaml("manifests/observability/kustomization.yaml");
    let resources: Vec<&str> = k["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    assert_eq!(resources, vec!["servicemonitor.yaml", "alerts.yaml"]);
    assert_eq!(
        k["configMapGenerator"][0]["files"][0].as_str(),
        Some("dashboard.json")
    );
    let scaler_k = repo_yaml("manifests/scaler/kustomization.yaml");
    assert!(!serde_yaml::to_string(&scaler_k)
        .expect("yaml")
        .contains("observability"));
}

/// Where kubectl is installed, the kustomization renders the monitors, the rule and the
/// dashboard's ConfigMap with the dashboard as it is on disk.
#[test]
fn the_kustomization_renders() {
    let out = match std::process::Command::new("kubectl")
        .args(["kustomize", "manifests/observability"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("NOTE: kubectl not run ({e}); the kustomization is not rendered");
            return;
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use serde::Deserialize;
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect("rendered yaml"))
        .collect();
    let kinds: BTreeSet<String> = docs
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    let want: BTreeSet<String> = [
        "ConfigMap/infscale-dashboard",
        "PrometheusRule/infscale",
        "ServiceMonitor/infscale",
        "ServiceMonitor/infscale-activator",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(kinds, want);
    for d in &docs {
        assert_eq!(d["metadata"]["namespace"], "infscale");
        if d["kind"] == "ConfigMap" {
            assert_eq!(d["metadata"]["labels"]["grafana_dashboard"], "1");
            let json: serde_json::Value =
                serde_json::from_str(d["data"]["dashboard.json"].as_str().expect("data"))
                    .expect("dashboard in the ConfigMap");
            assert_eq!(json, dashboard());
        }
    }
}
