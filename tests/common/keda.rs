//! KEDA's side of the gRPC conversation with `serve`, as every test makes it: a tonic
//! `ExternalScalerClient` connected to the scaler, the `ScaledObjectRef` with its trigger
//! metadata, and the IsActive, GetMetricSpec, GetMetrics and StreamIsActive calls, read as KEDA
//! reads their answers.

use infscale::serve::proto::external_scaler_client::ExternalScalerClient;
use infscale::serve::proto::{GetMetricsRequest, IsActiveResponse, ScaledObjectRef};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// KEDA's client of an external scaler.
pub type Client = ExternalScalerClient<Channel>;

/// A client connected to the scaler's gRPC listener at `addr`.
pub async fn client(addr: SocketAddr) -> Client {
    ExternalScalerClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

/// A client on `channel` (TLS, or one channel shared by several clients).
pub fn client_over(channel: Channel) -> Client {
    ExternalScalerClient::new(channel)
}

/// A client of a scaler that is still starting (a process): connects until it listens, for up
/// to `within`.
pub async fn client_when_up(addr: SocketAddr, within: Duration) -> Client {
    let deadline = Instant::now() + within;
    loop {
        match ExternalScalerClient::connect(format!("http://{addr}")).await {
            Ok(c) => return c,
            Err(e) => assert!(
                Instant::now() < deadline,
                "the scaler never listened at {addr}: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A ScaledObject `name` in namespace `ns` with this trigger metadata.
pub fn object_in(ns: &str, name: &str, metadata: &[(&str, String)]) -> ScaledObjectRef {
    ScaledObjectRef {
        name: name.to_owned(),
        namespace: ns.to_owned(),
        scaler_metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

/// A ScaledObject in namespace `llm` with this trigger metadata.
pub fn object(name: &str, metadata: &[(&str, String)]) -> ScaledObjectRef {
    object_in("llm", name, metadata)
}

/// KEDA's GetMetrics request for metric `name` of `object`.
pub fn metrics_request(object: &ScaledObjectRef, name: &str) -> GetMetricsRequest {
    GetMetricsRequest {
        scaled_object_ref: Some(object.clone()),
        metric_name: name.to_owned(),
    }
}

/// IsActive's answer.
pub async fn is_active(c: &mut Client, so: &ScaledObjectRef) -> Result<bool, tonic::Status> {
    c.is_active(so.clone()).await.map(|r| r.into_inner().result)
}

/// GetMetricSpec's first spec: the metric name and its target.
pub async fn metric_spec(
    c: &mut Client,
    so: &ScaledObjectRef,
) -> Result<(String, f64), tonic::Status> {
    c.get_metric_spec(so.clone()).await.map(|r| {
        let s = &r.into_inner().metric_specs[0];
        (s.metric_name.clone(), s.target_size_float)
    })
}

/// GetMetrics's first value.
pub async fn metric_value(c: &mut Client, req: &GetMetricsRequest) -> Result<f64, tonic::Status> {
    c.get_metrics(req.clone())
        .await
        .map(|r| r.into_inner().metric_values[0].metric_value_float)
}

/// GetMetrics until it answers with `expected` (or any value when `None`), for up to 10 s.
pub async fn value_when(c: &mut Client, req: &GetMetricsRequest, expected: Option<f64>) -> f64 {
    value_until(c, req, &format!("{expected:?}"), |v| {
        expected.is_none_or(|e| e == v)
    })
    .await
}

/// GetMetrics until its value passes `ok` (`wanted` says what, for the failure), for up to 10 s.
pub async fn value_until(
    c: &mut Client,
    req: &GetMetricsRequest,
    wanted: &str,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = metric_value(c, req).await;
        if let Ok(v) = answer {
            if ok(v) {
                return v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "GetMetrics never answered {wanted} (last: {answer:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// IsActive until it answers `expected` (Ok(bool), or Err for any error), for up to `within`;
/// returns how long that took.
pub async fn active_when(
    c: &mut Client,
    so: &ScaledObjectRef,
    expected: Result<bool, ()>,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let got = is_active(c, so).await.map_err(|_| ());
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

/// The next `StreamIsActive` message, within 15 s.
pub async fn next_push(stream: &mut tonic::Streaming<IsActiveResponse>) -> bool {
    tokio::time::timeout(Duration::from_secs(15), stream.message())
        .await
        .expect("StreamIsActive sent nothing for 15 s")
        .expect("StreamIsActive failed")
        .expect("StreamIsActive ended")
        .result
}
