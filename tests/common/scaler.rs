//! The scaler under test, on loopback: its configuration, a running instance, and KEDA's calls
//! made with a tonic client.

use infscale::serve::discovery::ScrapeVia;
use infscale::serve::limits::Limits;
use infscale::serve::proto::external_scaler_client::ExternalScalerClient;
use infscale::serve::proto::{GetMetricsRequest, ScaledObjectRef};
use infscale::serve::server::{bind, Config};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

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
        limits: Limits::default(),
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
pub async fn with_kube(api_url: String) -> (Running, ExternalScalerClient<Channel>) {
    let running = start(Config {
        kube_api: Some(api_url),
        use_kube: true,
        ..config()
    })
    .await;
    let c = client(running.grpc).await;
    (running, c)
}

pub async fn client(addr: SocketAddr) -> ExternalScalerClient<Channel> {
    ExternalScalerClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

/// A ScaledObject in namespace `llm` with this trigger metadata.
pub fn object(name: &str, metadata: &[(&str, String)]) -> ScaledObjectRef {
    ScaledObjectRef {
        name: name.to_owned(),
        namespace: "llm".to_owned(),
        scaler_metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

pub fn metrics_request(object: &ScaledObjectRef, name: &str) -> GetMetricsRequest {
    GetMetricsRequest {
        scaled_object_ref: Some(object.clone()),
        metric_name: name.to_owned(),
    }
}

/// GetMetrics until it answers with `expected` (or any value when `None`), for up to 10 s.
pub async fn value_when(
    c: &mut ExternalScalerClient<Channel>,
    req: &GetMetricsRequest,
    expected: Option<f64>,
) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(r) = c.get_metrics(req.clone()).await {
            let v = r.into_inner().metric_values[0].metric_value_float;
            if expected.is_none_or(|e| e == v) {
                return v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "GetMetrics never answered {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// IsActive until it answers `expected` (Ok(bool), or Err for any error), for up to `within`;
/// returns how long that took.
pub async fn active_when(
    c: &mut ExternalScalerClient<Channel>,
    so: &ScaledObjectRef,
    expected: Result<bool, ()>,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let got = c
            .is_active(so.clone())
            .await
            .map(|r| r.into_inner().result)
            .map_err(|_| ());
        if got == expected {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "IsActive answered {got:?}, never {expected:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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

/// The next `StreamIsActive` message, within 15 s.
pub async fn next_push(
    stream: &mut tonic::Streaming<infscale::serve::proto::IsActiveResponse>,
) -> bool {
    tokio::time::timeout(Duration::from_secs(15), stream.message())
        .await
        .expect("StreamIsActive sent nothing for 15 s")
        .expect("StreamIsActive failed")
        .expect("StreamIsActive ended")
        .result
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
    assert!(
        took < Duration::from_millis(100),
        "pushed true after {took:?}"
    );
    took
}
