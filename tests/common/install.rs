//! infscale installed as the install guide installs it, on loopback: the release manifest
//! `deploy/infscale.yaml` as `kubectl apply -f` applies it (the file a release attaches, rendered
//! by the real kustomize from the bases and checked against them by `scripts/release-check.sh`)
//! into the Kubernetes API stand-in, then each Deployment's pods run as the real `serve` and the
//! real activator, started from the very arguments their shipped Deployments give (parsed by the
//! binary's own command line), with only what a loopback cluster must change: each pod's address
//! (its own loopback IP, the ports as shipped), the API server's URL, the mounted routes file's
//! path (the ConfigMap's text in a file), and what the Deployments give through the downward API
//! (the pod's name and namespace). ClusterIPs, kube-proxy, the EndpointSlice controller and the
//! model Deployments' pods are [`super::cluster`]'s; KEDA too, started by the test from the
//! ScaledObject it applies.

use super::cluster::{apply, Models, Net, Options};
use super::kube::{Cluster, Kube};
use infscale::cli::{configured, Configured};
use serde_yaml::Value;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The loopback address pools of one installation (tests of one binary run at once: each its
/// own). Each is three octets and a dot.
#[derive(Clone, Debug)]
pub struct Pools {
    pub cluster_ips: &'static str,
    pub models: &'static str,
    pub activators: &'static str,
    pub scalers: &'static str,
}

/// Flags a test sets on the shipped args, besides those a loopback cluster must change.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub activator: Vec<(&'static str, String)>,
    pub scaler: Vec<(&'static str, String)>,
}

/// One pod of the activator's or the scaler's Deployment, running on a runtime of its own
/// (a process of its own, as far as its tasks go: killing it drops every one of them at once).
pub struct Process {
    pub ip: IpAddr,
    pub name: String,
    /// The ports it listens on (the activator's proxy and admin; serve's gRPC and metrics).
    pub main: SocketAddr,
    pub second: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    kill: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a pod runs: bound, then served until its stop resolves.
type Run = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl Process {
    /// Starts `name` on a runtime of its own: `start` binds (on that runtime) and returns the
    /// two addresses and what serves them until the given stop resolves.
    fn spawn<F, Fut>(name: String, ip: IpAddr, start: F) -> Process
    where
        F: FnOnce(tokio::sync::oneshot::Receiver<()>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = (SocketAddr, SocketAddr, Run)> + Send,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("a runtime");
                let crashed = rt.block_on(async move {
                    let (main, second, run) = start(stopped).await;
                    let _ = bound_tx.send((main, second));
                    tokio::select! {
                        _ = run => false,
                        _ = killed => true,
                    }
                });
                if crashed {
                    // Every task dropped now, none run again: nothing is said to anyone.
                    rt.shutdown_background();
                }
            })
            .expect("a pod's thread");
        let (main, second) = bound_rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{name} never listened"));
        Process {
            ip,
            name,
            main,
            second,
            stop: Some(stop),
            kill: Some(kill),
            thread: Some(thread),
        }
    }

    /// Stops it gracefully (SIGTERM: it answers what it holds and lets go of its leases).
    pub async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }

    /// Kills it: every task of it dropped at once, nothing said to anyone.
    pub fn kill(&mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Whether it runs.
    pub fn running(&self) -> bool {
        self.thread.is_some()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The installation.
pub struct Install {
    pub kube: Kube,
    pub cluster: Cluster,
    pub net: Net,
    pub models: Models,
    pub activators: Vec<Process>,
    pub scalers: Vec<Process>,
    /// The routes file the activators read (the ConfigMap's text).
    pub routes_file: PathBuf,
    /// The shipped activator and scaler Deployments, as rendered.
    pub deployments: (Value, Value),
    _dir: TempDir,
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| s(&d["kind"]) == kind && s(&d["metadata"]["name"]) == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the shipped manifests"))
}

/// The container args of a Deployment, with `--flag value` pairs replaced (or added) by
/// `set`, and flags `add`ed.
fn args_of(deployment: &Value, set: &[(&str, String)]) -> Vec<String> {
    let mut args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_sequence()
        .expect("the Deployment's args")
        .iter()
        .map(|a| s(a).to_owned())
        .collect();
    for (flag, value) in set {
        match args.iter().position(|a| a == flag) {
            Some(i) => args[i + 1] = value.clone(),
            None => {
                args.push((*flag).to_owned());
                args.push(value.clone());
            }
        }
    }
    args
}

/// The Pod object of a Deployment's pod `name` at `ip`, Ready, as the kubelet reports it.
fn pod_object(deployment: &Value, name: &str, ip: IpAddr) -> serde_json::Value {
    let template: serde_json::Value =
        serde_json::to_value(&deployment["spec"]["template"]).expect("the pod template");
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": deployment["metadata"]["namespace"].as_str(),
            "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
        "status": {"phase": "Running", "podIP": ip.to_string(),
            "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn replicas(deployment: &Value) -> u64 {
    deployment["spec"]["replicas"].as_u64().unwrap_or(1)
}

impl Install {
    /// Applies the shipped scaler and activator, and `docs` (a model: its Deployment and
    /// Service), runs the model Deployments `models`, the activator's pods and the scaler's
    /// pods (as many as their Deployments say), and waits for each to listen. `flags.scaler`
    /// and `flags.activator` are set on every such pod's args besides the loopback ones (say,
    /// a shorter lease).
    pub async fn start(
        pools: Pools,
        docs: &[Value],
        models: &[(&str, &str)],
        options: Options,
        flags: Flags,
    ) -> Install {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cluster = Cluster::default();
        let kube = Kube::serve(cluster.clone());
        // One file, the scaler and the activator: what `kubectl apply -f infscale.yaml` applies.
        let release = shipped("deploy/infscale.yaml");
        apply(&cluster, &release);
        apply(&cluster, docs);
        let net = Net::start(&cluster, pools.cluster_ips);
        let models = Models::start(&cluster, options, models);
        let dir = std::env::temp_dir().join(format!(
            "infscale-install-{}-{}",
            std::process::id(),
            pools.activators.trim_end_matches('.')
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        // The activator's routes file: its ConfigMap's text, as the volume mounts it.
        let cm = find(&release, "ConfigMap", "infscale-activator-routes");
        let routes_file = dir.join("routes.yaml");
        std::fs::write(&routes_file, s(&cm["data"]["routes.yaml"])).expect("the routes file");
        let mut install = Install {
            kube,
            cluster,
            net,
            models,
            activators: Vec::new(),
            scalers: Vec::new(),
            routes_file,
            deployments: (Value::Null, Value::Null),
            _dir: TempDir(dir),
        };
        let act = find(&release, "Deployment", "infscale-activator").clone();
        for i in 0..replicas(&act) {
            install
                .start_activator(&act, &pools, i as u8 + 1, &flags.activator)
                .await;
        }
        let serve = find(&release, "Deployment", "infscale").clone();
        for i in 0..replicas(&serve) {
            install
                .start_scaler(&serve, &pools, i as u8 + 1, &flags.scaler)
                .await;
        }
        install.deployments = (act, serve);
        install
    }

    /// Runs activator pod `n` (its IP the pool's `n`), from the shipped args with `flags` set.
    pub async fn start_activator(
        &mut self,
        deployment: &Value,
        pools: &Pools,
        n: u8,
        flags: &[(&str, String)],
    ) {
        let ip: IpAddr = format!("{}{n}", pools.activators).parse().unwrap();
        let mut set = vec![
            ("--listen", format!("{ip}:8080")),
            ("--admin-listen", format!("{ip}:9092")),
            ("--routes", self.routes_file.display().to_string()),
            ("--kube-api", self.kube.url()),
        ];
        set.extend(flags.iter().cloned());
        let args = args_of(deployment, &set);
        let Configured::Activator(config) =
            configured(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
        else {
            panic!("not the activator: {args:?}");
        };
        let name = format!("infscale-activator-{n}");
        let process = Process::spawn(name.clone(), ip, move |stopped| async move {
            let bound = infscale::activator::server::bind(*config)
                .await
                .unwrap_or_else(|e| panic!("activator {ip}: {e}"));
            let (main, second) = (bound.proxy_addr().unwrap(), bound.admin_addr().unwrap());
            let run: Run = Box::pin(async move {
                let _ = bound
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
            (main, second, run)
        });
        self.cluster.put(pod_object(deployment, &name, ip));
        self.activators.push(process);
    }

    /// Runs scaler pod `n` (its IP the pool's `n`), from the shipped args with `flags` set.
    pub async fn start_scaler(
        &mut self,
        deployment: &Value,
        pools: &Pools,
        n: u8,
        flags: &[(&str, String)],
    ) {
        let ip: IpAddr = format!("{}{n}", pools.scalers).parse().unwrap();
        let name = format!("infscale-{n}");
        let mut set = vec![
            ("--listen", format!("{ip}:9090")),
            ("--metrics-listen", format!("{ip}:9091")),
            ("--kube-api", self.kube.url()),
            // Pods are on this machine's loopback: scraped at their addresses, as in a cluster.
            ("--scrape-via", "direct".to_owned()),
            // POD_NAMESPACE, from the downward API.
            (
                "--namespace",
                s(&deployment["metadata"]["namespace"]).to_owned(),
            ),
        ];
        set.extend(flags.iter().cloned());
        let args = args_of(deployment, &set);
        let Configured::Serve(mut config) =
            configured(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
        else {
            panic!("not serve: {args:?}");
        };
        // Pods on this machine's loopback: their addresses are loopback ones.
        config.serve_mode.loopback_pods = true;
        // POD_NAME, from the downward API.
        if let Some(lease) = config.serve_mode.lease.as_mut() {
            lease.pod = name.clone();
        }
        let process = Process::spawn(name.clone(), ip, move |stopped| async move {
            let bound = infscale::serve::server::bind(*config)
                .await
                .unwrap_or_else(|e| panic!("serve {ip}: {e}"));
            let main = bound.grpc_addr().unwrap();
            let second = bound.metrics_addr().unwrap();
            let run: Run = Box::pin(async move {
                let _ = bound
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
            (main, second, run)
        });
        self.cluster.put(pod_object(deployment, &name, ip));
        self.scalers.push(process);
    }

    /// Where KEDA reaches the scaler: the `infscale` Service's ClusterIP, as `scalerAddress`
    /// names it.
    pub fn scaler_address(&self) -> SocketAddr {
        self.net
            .addr("infscale", "infscale", 9090)
            .expect("the scaler's Service has a ClusterIP")
    }

    /// Requests held for `key` over every activator pod.
    pub async fn held(&self, key: &str) -> u64 {
        let mut sum = 0;
        for a in &self.activators {
            if !a.running() {
                continue;
            }
            let doc: serde_json::Value =
                match reqwest::get(format!("http://{}/queue", a.second)).await {
                    Ok(r) => r.json().await.unwrap_or_default(),
                    Err(_) => continue,
                };
            sum += doc[key]["Held"].as_u64().unwrap_or(0);
        }
        sum
    }

    /// Whether infscale's slice for `service` in `ns` is there, with a ready endpoint.
    pub fn in_path(&self, ns: &str, service: &str) -> bool {
        self.cluster
            .get("EndpointSlice", ns, &format!("{service}-infscale"))
            .is_some_and(|s| {
                s["endpoints"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| e["conditions"]["ready"] != false)
            })
    }
}

impl Install {
    /// Takes scaler pod `i` out: its Pod object goes (kube-proxy stops sending to it), and the
    /// process is killed (`crash`) or stopped as a rolling update stops it.
    pub async fn remove_scaler(&mut self, i: usize, crash: bool) {
        let p = &mut self.scalers[i];
        self.cluster.delete("Pod", "infscale", &p.name);
        if crash {
            p.kill();
        } else {
            p.stop().await;
        }
    }
}

/// A shipped file, loaded.
pub fn shipped(rel: &str) -> Vec<Value> {
    super::cluster::kustomize::load(Path::new(&root().join(rel)))
}

/// A shipped example as `kubectl apply -n NS -f` puts it: each document in namespace `ns`. The
/// examples name none (the model's namespace is the user's); one that did would be refused.
pub fn example_in(rel: &str, ns: &str) -> Vec<Value> {
    let mut docs = shipped(rel);
    for d in &mut docs {
        assert!(
            d["metadata"]["namespace"].is_null(),
            "{rel}: an example names no namespace"
        );
        d["metadata"]["namespace"] = Value::from(ns);
    }
    docs
}
