//! Security review of what ships: the Deployments run non-root on a read-only root filesystem
//! with no privilege escalation, no capabilities and the runtime's seccomp profile; the image's
//! user is not root; and the RBAC rules grant exactly the verbs on the resources the code calls,
//! as a recording Kubernetes API stand-in sees `serve` and the activator call them. Serve mode
//! writes only its own slice, removes one a crashed scaler left, and never lets a target go
//! idle while the activator is not seen answering through the Service.

mod common;

use common::activator::activator_on;
use common::keda::{metrics_request, object};
use common::kube::Kube;
use common::scaler::with_kube;
use infscale::activator::routes::RouteSpec;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

type Rule = common::rbac::Rule;
use common::rbac::{docs, granted};

fn called(calls: &[common::kube::Call]) -> BTreeSet<Rule> {
    calls.iter().filter_map(|c| c.rbac()).collect()
}

#[test]
fn deployments_run_non_root_read_only_without_privileges() {
    for rel in [
        "manifests/scaler/deployment.yaml",
        "manifests/activator/deployment.yaml",
    ] {
        for d in docs(rel) {
            if d["kind"] != "Deployment" {
                continue;
            }
            let pod = &d["spec"]["template"]["spec"];
            let psc = &pod["securityContext"];
            assert_eq!(psc["runAsNonRoot"].as_bool(), Some(true), "{rel}");
            assert!(psc["runAsUser"].as_u64().is_some_and(|u| u > 0), "{rel}");
            assert_eq!(
                psc["seccompProfile"]["type"].as_str(),
                Some("RuntimeDefault"),
                "{rel}: the pod's seccompProfile"
            );
            for c in pod["containers"].as_sequence().expect("containers") {
                let sc = &c["securityContext"];
                assert_eq!(
                    sc["allowPrivilegeEscalation"].as_bool(),
                    Some(false),
                    "{rel}"
                );
                assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true), "{rel}");
                let drop: Vec<&str> = sc["capabilities"]["drop"]
                    .as_sequence()
                    .expect("capabilities.drop")
                    .iter()
                    .filter_map(|v| v.as_str())
                    .collect();
                assert_eq!(drop, ["ALL"], "{rel}");
                assert!(sc["capabilities"]["add"].is_null(), "{rel}");
                assert!(sc["privileged"].as_bool() != Some(true), "{rel}");
            }
        }
    }
}

#[test]
fn the_image_runs_as_a_non_root_user() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile");
    let text = std::fs::read_to_string(path).expect("Dockerfile reads");
    let last_stage = text.rsplit("\nFROM ").next().expect("a stage");
    let user = last_stage
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("USER "))
        .expect("the final stage sets USER");
    let uid: u32 = user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .expect("a numeric uid (runAsNonRoot can only check a number)");
    assert!(uid > 0, "USER {user}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scalers_rbac_is_exactly_what_serve_calls() {
    let act = activator_on("chat", "127.0.0.2:0");
    act.set_held(2);
    let api = Kube::two_namespaces("127.0.0.2", "127.0.0.3", act.server.addr.port());
    let (running, mut c) = with_kube(api.server.url("")).await;
    let so = object(
        "chat",
        &[
            ("threshold", "24".into()),
            ("scrapeIntervalSeconds", "0.2".into()),
            (
                "activatorUrl",
                "http://infscale-activator.llm.svc:9092".into(),
            ),
        ],
    );
    let req = metrics_request(&so, "infscale-queue-chat");
    // Every path taken: the Deployment, its pods (listed and watched), the activator Service and
    // its EndpointSlices (listed and watched). The pod itself does not answer: no value, but
    // the held count has been read once IsActive is true.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let _ = c.get_metrics(req.clone()).await;
        let active = c
            .is_active(so.clone())
            .await
            .map(|r| r.into_inner().result)
            .map_err(|_| ());
        let seen = called(&api.calls());
        let watched = seen.iter().filter(|r| r.2 == "watch").count();
        if active == Ok(true) && watched >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{active:?} {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(running);
    assert_eq!(
        called(&api.calls()),
        granted("manifests/scaler/rbac.yaml"),
        "manifests/scaler/rbac.yaml against the calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activators_rbac_is_exactly_what_it_calls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = Kube::two_namespaces("127.0.0.2", "127.0.0.3", 9);
    let route = RouteSpec {
        service: Some("infscale-activator".into()),
        counts_host: Some("chat".into()),
        ..RouteSpec::to_upstream("http://127.0.0.2:9")
    }
    .check(0, "llm")
    .expect("route");
    let bound = infscale::activator::server::bind(infscale::activator::server::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        routes: vec![route],
        reload: None,
        learn: None,
        namespace_cap: None,
        kube_api: Some(api.server.url("")),
        limits: common::model::limits(),
    })
    .await
    .expect("activator binds");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(bound.run(async {
        let _ = stopped.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(15);
    while called(&api.calls())
        .iter()
        .filter(|r| r.2 == "watch")
        .count()
        == 0
    {
        assert!(Instant::now() < deadline, "{:?}", api.calls());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), done).await;
    assert_eq!(
        called(&api.calls()),
        granted("manifests/activator/rbac.yaml"),
        "manifests/activator/rbac.yaml against the calls"
    );
}

#[test]
fn deletion_cost_adds_only_patch_on_pods_in_a_namespace() {
    let rel = "manifests/scaler/rbac-deletion-cost.yaml";
    let rule = |g: &str, r: &str, v: &str| (g.to_owned(), r.to_owned(), v.to_owned());
    assert_eq!(granted(rel), BTreeSet::from([rule("", "pods", "patch")]));
    for d in docs(rel) {
        assert_ne!(
            d["kind"].as_str(),
            Some("ClusterRole"),
            "{rel}: namespaced only"
        );
        assert_ne!(d["kind"].as_str(), Some("ClusterRoleBinding"), "{rel}");
    }
    let base = granted("manifests/scaler/rbac.yaml");
    assert!(
        !base.iter().any(|r| r.2 == "patch" && r.1 == "pods"),
        "the base RBAC writes pods: {base:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_mode_writes_only_its_slice_never_idles_without_it_and_adds_exactly_its_rbac() {
    use common::kube::{Cluster, ADMIN_SERVICE};
    use common::pods::{pod, vllm_running, Behaviour};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let slices = Cluster::default();
    // A slice a crashed scaler left behind (owned by the Service, as infscale writes it; the
    // stand-in gives Service `chat` the uid `uid-chat`).
    slices.put(
        serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "chat-infscale", "namespace": "llm",
            "labels": {"kubernetes.io/service-name": "chat",
                "endpointslice.kubernetes.io/managed-by": "infscale.io"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "chat",
                "uid": "uid-chat"}]},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["127.0.0.9"], "conditions": {"ready": true}}]}),
    );
    let kube = Kube::serve_mode(slices.clone());
    // `serviceUrl` is the Service's ClusterIP at one of its ports (the only address it may be).
    let nothing = common::scaler::free_port();
    slices.put(serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "chat", "namespace": "llm",
            "labels": {"infscale.io/serve-mode": "true"}},
        "spec": {"clusterIP": "127.0.0.1",
            "ports": [{"name": "http", "port": nothing, "targetPort": "http"}]}}));
    let busy = pod("127.0.0.2:0", Behaviour::Page(vllm_running(5)));
    // The activator as the manifests find it: the ready pod its admin Service selects, which
    // the operator allowed (`--allow-activator`).
    let act = activator_on("chat", "127.0.0.3:0");
    slices.activator_installed(&[act.server.addr]);
    let running = common::scaler::start(infscale::serve::server::Config {
        statics: std::collections::HashMap::from([("chat".to_owned(), vec![busy.url()])]),
        kube_api: Some(kube.server.url("")),
        use_kube: true,
        allowed_activators: vec![format!("http://{ADMIN_SERVICE}.llm.svc:9092")],
        // Renewed within the test, so every lease call it makes is made; `activatorPort`
        // 8080 among the activator's ports.
        serve_mode: infscale::serve::path_kube::ServeModeSettings {
            ports: 8000..=8999,
            ..common::scaler::quick_leases()
        },
        ..common::scaler::config()
    })
    .await;
    let mut c = common::keda::client(running.grpc).await;
    let so = object(
        "chat",
        &[
            ("deployment", "chat".into()),
            ("threshold", "4".into()),
            ("scrapeIntervalSeconds", "0.1".into()),
            (
                "activatorUrl",
                format!("http://{ADMIN_SERVICE}.llm.svc:9092"),
            ),
            ("activatorHost", "chat".into()),
            ("serveMode", "true".into()),
            ("service", "chat".into()),
            // Nothing answers here: the activator is never seen through the Service.
            ("serviceUrl", format!("http://127.0.0.1:{nothing}")),
            ("activatorPort", "8080".into()),
            ("serveModeSettleSeconds", "0.2".into()),
        ],
    );
    let within = |what: &'static str, ok: &dyn Fn() -> bool| {
        let end = Instant::now() + Duration::from_secs(10);
        while !ok() {
            assert!(Instant::now() < end, "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The API cannot write: idle, the target stays active (the activator is not in the path).
    slices.refuse_writes(true);
    common::keda::active_when(&mut c, &so, Ok(true), Duration::from_secs(10)).await;
    busy.set(Behaviour::Page(vllm_running(0)));
    for _ in 0..10 {
        let active = c.is_active(so.clone()).await.map(|r| r.into_inner().result);
        assert_eq!(
            active.ok(),
            Some(true),
            "idle while the slice cannot be written"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    slices.refuse_writes(false);
    busy.set(Behaviour::Page(vllm_running(5)));
    // Busy with a Ready pod: the slice left behind goes once the settle has passed.
    common::keda::active_when(&mut c, &so, Ok(true), Duration::from_secs(10)).await;
    within("the stale slice removed", &|| !slices.ours("chat"));
    // Idle: the activator's slice comes back, but no activator answers through the Service, so
    // the target stays active (KEDA keeps the last replica).
    busy.set(Behaviour::Page(vllm_running(0)));
    within("the slice written", &|| slices.ours("chat"));
    let written = slices
        .of_service("chat")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "chat-infscale")
        .expect("infscale's slice");
    assert_eq!(written["ports"][0]["port"], 8080, "{written}");
    assert_eq!(
        written["endpoints"][0]["addresses"][0], "127.0.0.3",
        "the activator's address: {written}"
    );
    assert_eq!(written["metadata"]["ownerReferences"][0]["kind"], "Service");
    for _ in 0..10 {
        let active = c.is_active(so.clone()).await.map(|r| r.into_inner().result);
        assert_eq!(active.ok(), Some(true), "idle before the activator answers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(running);
    // What serve mode adds to the scaler's RBAC is what it called: no more, no less.
    let called = kube.rbac();
    let opt_in = granted("manifests/scaler/rbac-serve-mode.yaml");
    let base = granted("manifests/scaler/rbac.yaml");
    assert!(
        called
            .iter()
            .all(|r| base.contains(r) || opt_in.contains(r)),
        "serve called what no manifest grants: {called:?}"
    );
    let added: BTreeSet<Rule> = called.difference(&base).cloned().collect();
    assert_eq!(
        added, opt_in,
        "manifests/scaler/rbac-serve-mode.yaml against the calls"
    );
    // Serve mode writes EndpointSlices only: patch (server-side apply) and delete, in any
    // namespace a model is in, so that a model in a new namespace is one applied ScaledObject.
    let slices = |v: &str| {
        (
            "discovery.k8s.io".to_owned(),
            "endpointslices".to_owned(),
            v.to_owned(),
        )
    };
    let leases = |v: &str| {
        (
            "coordination.k8s.io".to_owned(),
            "leases".to_owned(),
            v.to_owned(),
        )
    };
    assert_eq!(
        opt_in,
        BTreeSet::from([
            slices("delete"),
            slices("get"),
            slices("patch"),
            leases("create"),
            leases("get"),
            leases("update")
        ])
    );
    // Its one-writer-per-Service leases are in the scaler's own namespace, never a model's.
    for d in docs("manifests/scaler/rbac-serve-mode.yaml") {
        let rules = d["rules"].as_sequence().cloned().unwrap_or_default();
        let leases = rules.iter().any(|r| {
            r["resources"]
                .as_sequence()
                .is_some_and(|rs| rs.iter().any(|x| x == "leases"))
        });
        if leases {
            assert_eq!(
                d["kind"], "Role",
                "leases are granted in the scaler's namespace only"
            );
        }
    }
}
