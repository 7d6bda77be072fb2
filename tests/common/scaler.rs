//! The scaler under test, on loopback: its configuration and a running instance (KEDA's calls
//! to it are `common::keda`'s).

use super::keda::{client, next_push, Client};
use infscale::serve::discovery::ScrapeVia;
use infscale::serve::lease::LeaseSettings;
use infscale::serve::limits::Limits;
use infscale::serve::path_kube::ServeModeSettings;
use infscale::serve::server::{bind, Config};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub fn config() -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        tls: None,
        statics: HashMap::new(),
        allowed_activators: Vec::new(),
        kube_api: None,
        use_kube: false,
        scrape_via: Some(ScrapeVia::Direct),
        paths: None,
        serve_mode: Default::default(),
        limits: Limits::default(),
        state_dir: None,
    }
}

/// Serve mode's settings with leases of 1 s renewed every 200 ms, in namespace `infscale`: a
/// writer is chosen, and fails over, within a test's seconds.
pub fn quick_leases() -> ServeModeSettings {
    ServeModeSettings {
        lease: Some(LeaseSettings {
            namespace: "infscale".to_owned(),
            duration: Duration::from_secs(1),
            renew: Duration::from_millis(200),
            pod: "serve-0".to_owned(),
        }),
        // The activators of these tests listen on loopback.
        loopback_pods: true,
        ..ServeModeSettings::default()
    }
}

pub struct Running {
    pub grpc: SocketAddr,
    pub metrics: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Running {
    /// The scaler's own `/metrics` text.
    pub async fn metrics_text(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.metrics))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

pub async fn start(config: Config) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bound = bind(config).await.unwrap();
    let grpc = bound.grpc_addr().unwrap();
    let metrics = bound.metrics_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.run(async {
        let _ = stopped.await;
    }));
    Running {
        grpc,
        metrics,
        _stop: stop,
    }
}

/// A scaler that finds pods through the Kubernetes API at `api_url` (a stand-in), and a
/// client connected to it.
pub async fn with_kube(api_url: String) -> (Running, Client) {
    let running = start(Config {
        kube_api: Some(api_url),
        use_kube: true,
        ..config()
    })
    .await;
    let c = client(running.grpc).await;
    (running, c)
}

/// A port on 127.0.0.1 where nothing listens (connections are refused).
pub fn refused_url() -> String {
    format!("http://127.0.0.1:{}/metrics", free_port())
}

/// A port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How long after `hold` (which holds a request at an activator) `StreamIsActive` pushes
/// `true`; the stream's last message must have been `false`. Asserts under 100 ms.
pub async fn push_after_hold(
    stream: &mut tonic::Streaming<infscale::serve::proto::IsActiveResponse>,
    hold: impl FnOnce(),
) -> Duration {
    let held_at = Instant::now();
    hold();
    assert!(next_push(stream).await, "the push after the hold was false");
    let took = held_at.elapsed();
    // Promptness is what is tested, so the bound stays tight: the push must come well inside
    // the tests' 0.2 s scrape interval, or it could not be told from a poll.
    assert!(
        took < Duration::from_millis(100),
        "pushed true after {took:?}"
    );
    took
}
