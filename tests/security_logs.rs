//! Security review: no secret and no request body reaches the logs. The real binaries run with
//! `RUST_LOG=debug` and their stdout and stderr captured: `serve` with a TLS key, mutual TLS and
//! a kubeconfig bearer token (which the Kubernetes API stand-in sees arrive), and the activator
//! forwarding a request that carries an Authorization header, a key in its query and a body;
//! and a password written into an `activatorUrl`.

mod common;

use common::keda::{metrics_request, object};
use common::kube::Kube;
use common::scaler::free_port;
use common::tls::{temp_dir, write, Pki};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const TOKEN: &str = "sekrit-bearer-token-5d1c0ffee";
const CLIENT_TOKEN: &str = "sekrit-client-token-77ab";
const PROMPT: &str = "sekrit-prompt-body-9e3b";
const QUERY_TOKEN: &str = "sekrit-query-token-c4f1";

/// Files in `dir` for a child's stdout and stderr (files, not pipes: a full pipe nobody reads
/// would stall the child's logging).
fn log_files(dir: &Path) -> (Stdio, Stdio) {
    let open = |n: &str| std::fs::File::create(dir.join(n)).expect("log file");
    (open("stdout.log").into(), open("stderr.log").into())
}

/// Kills `child` (a process this test started) and returns its stdout and stderr.
fn output_of(mut child: Child, dir: &Path) -> String {
    let _ = child.kill();
    let _ = child.wait();
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap_or_default();
    read("stdout.log") + &read("stderr.log")
}

fn assert_clean(log: &str, secrets: &[&str]) {
    assert!(
        log.contains("DEBUG") || log.contains("\"level\":\"DEBUG\""),
        "no debug lines: the log level did not take:\n{log}"
    );
    for s in secrets {
        assert!(!log.contains(s), "{s:?} in the log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_no_key_and_no_token_at_debug() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = temp_dir("security-logs");
    let pki = Pki::new();
    let (cert, key) = pki.issue(&["localhost"]);
    let api = Kube::two_namespaces("127.0.0.2", "127.0.0.3", 9);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\"}}}}]\n\
         users: [{{name: u, user: {{token: {TOKEN}}}}}]\n\
         contexts: [{{name: x, context: {{cluster: c, user: u, namespace: llm}}}}]\n\
         current-context: x\n",
        api.server.url("")
    );
    let port = free_port();
    let (out, err) = log_files(&dir);
    let child = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", "none", "--scrape-via", "direct"])
        .arg("--tls-cert")
        .arg(write(&dir, "server.pem", &cert))
        .arg("--tls-key")
        .arg(write(&dir, "server.key", &key))
        .arg("--tls-client-ca")
        .arg(write(&dir, "ca.pem", &pki.ca_pem()))
        .env("RUST_LOG", "debug")
        .env("KUBECONFIG", write(&dir, "kubeconfig", &kubeconfig))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("serve starts");
    let (client_cert, client_key) = pki.issue(&["keda-operator"]);
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pki.ca_pem()))
        .domain_name("localhost")
        .identity(Identity::from_pem(&client_cert, &client_key));
    let deadline = Instant::now() + Duration::from_secs(15);
    let so = object("chat", &[("threshold", "4".to_owned())]);
    loop {
        let channel = Channel::from_shared(format!("https://127.0.0.1:{port}"))
            .expect("url")
            .tls_config(tls.clone())
            .expect("tls")
            .connect()
            .await;
        if let Ok(channel) = channel {
            let mut c = common::keda::client_over(channel);
            let mut req = tonic::Request::new(metrics_request(&so, "infscale-queue-chat"));
            req.metadata_mut().insert(
                "authorization",
                format!("Bearer {CLIENT_TOKEN}").parse().expect("header"),
            );
            let _ = c.get_metrics(req).await;
            if api.calls().iter().any(|c| c.query.contains("watch=true")) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "serve never watched the pods");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = output_of(child, &dir);
    let sent = api
        .calls()
        .iter()
        .filter_map(|c| c.authorization.clone())
        .collect::<Vec<_>>();
    assert!(
        sent.iter().any(|a| a == &format!("Bearer {TOKEN}")),
        "the token never reached the API: {sent:?}"
    );
    // The key's base64 lines, each long enough to be its own.
    let key_lines: Vec<&str> = key.lines().filter(|l| l.len() > 20).collect();
    let mut secrets = vec![TOKEN, CLIENT_TOKEN, "PRIVATE KEY"];
    secrets.extend(key_lines);
    assert_clean(&log, &secrets);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activator_logs_no_authorization_and_no_body_at_debug() {
    let up = common::http::serve("127.0.0.1:0", Duration::from_secs(60), |mut s, _, _| {
        common::http::respond(&mut s, 200, "application/json", b"{\"ok\":true}");
    });
    let dir = temp_dir("security-logs-activator");
    let routes = format!(
        "routes:\n  - upstream: http://{}\n    healthPath: /health\n",
        up.addr
    );
    let (port, admin) = (free_port(), free_port());
    let (out, err) = log_files(&dir);
    let child = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .arg("activator")
        .arg("--routes")
        .arg(write(&dir, "routes.yaml", &routes))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .env("RUST_LOG", "debug")
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("activator starts");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut answered = 0;
    while answered < 3 {
        let r = http
            .post(format!(
                "http://127.0.0.1:{port}/v1/completions?api_key={QUERY_TOKEN}"
            ))
            .header("authorization", format!("Bearer {CLIENT_TOKEN}"))
            .header("content-type", "application/json")
            .body(format!(
                "{{\"prompt\":\"{PROMPT}\",\"api_key\":\"{TOKEN}\"}}"
            ))
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        if r.is_ok_and(|r| r.status() == 200) {
            answered += 1;
        }
        assert!(Instant::now() < deadline, "the activator never forwarded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = output_of(child, &dir);
    assert_clean(&log, &[CLIENT_TOKEN, PROMPT, TOKEN, QUERY_TOKEN]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A password written into an `activatorUrl` is refused, and neither the error KEDA receives
/// (which KEDA logs and puts in the ScaledObject's events) nor `serve`'s log repeats it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_an_activator_url_is_refused_without_repeating_it() {
    const PASSWORD: &str = "sekrit-url-password-41d";
    let dir = temp_dir("security-logs-userinfo");
    let port = free_port();
    let (out, err) = log_files(&dir);
    let child = Command::new(env!("CARGO_BIN_EXE_infscale"))
        .args([
            "serve",
            "--no-kube",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .args(["--metrics-listen", "none"])
        .env("RUST_LOG", "debug")
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("serve starts");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut c = common::keda::client_when_up(addr, Duration::from_secs(15)).await;
    let mut errors = Vec::new();
    for url in [
        format!("http://keda:{PASSWORD}@infscale-activator.llm.svc:9092"),
        format!("ftp://keda:{PASSWORD}@infscale-activator.llm.svc:9092"),
        format!("http://keda:{PASSWORD}@infscale-activator.other.svc:9092/x?y"),
    ] {
        let so = object(
            "chat",
            &[("threshold", "4".to_owned()), ("activatorUrl", url)],
        );
        let status = common::keda::metric_spec(&mut c, &so)
            .await
            .expect_err("userinfo is refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        errors.push(status.message().to_owned());
    }
    let log = output_of(child, &dir);
    for e in &errors {
        assert!(!e.contains(PASSWORD), "KEDA is told the password: {e}");
    }
    assert_clean(&log, &[PASSWORD]);
    let _ = std::fs::remove_dir_all(&dir);
}
