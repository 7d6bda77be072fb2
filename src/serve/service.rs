//! The `externalscaler.ExternalScaler` gRPC service KEDA calls.
//!
//! Every call reads the trigger's metadata, finds (or starts) the target's collector, and answers
//! from the collector's latest reading: memory only, never a scrape (a call in a new collector's
//! first second waits for its first reading that answers, the held count within milliseconds). `GetMetricSpec` answers from
//! the metadata alone, so KEDA's `fallback` can always apply. A value or an activity that
//! cannot be told answers with an error (KEDA then keeps the current replica count, and neither
//! wakes nor sleeps the target), never with zero.

use super::collector::{Reading, Report};
use super::metadata::{AllowedActivators, TargetSpec};
use super::proto::external_scaler_server::ExternalScaler;
use super::proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use super::registry::{Call, Registry, Target};
use super::telemetry::Telemetry;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The service: the registry of targets and what the metadata may name.
pub struct Scaler {
    pub registry: Arc<Registry>,
    pub allowed: AllowedActivators,
    pub telemetry: Arc<Telemetry>,
    /// Becomes true at shutdown: every open stream ends.
    pub closing: tokio::sync::watch::Receiver<bool>,
    /// How often `StreamIsActive` repeats the current answer when nothing changes.
    pub heartbeat: Duration,
    /// How long after a collector starts its calls may wait for a reading that answers.
    pub first_answer_wait: Duration,
}

type IsActiveStream = Pin<Box<dyn Stream<Item = Result<IsActiveResponse, Status>> + Send>>;
type SpecStream = Pin<Box<dyn Stream<Item = Result<GetMetricSpecResponse, Status>> + Send>>;

impl Scaler {
    /// The target a reading call asks about.
    fn target(&self, r: &ScaledObjectRef) -> Result<Arc<Target>, Status> {
        let spec =
            TargetSpec::from_metadata(&r.name, &r.namespace, &r.scaler_metadata, &self.allowed)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.registry
            .target(spec, Call::Read)
            .map_err(|full| Status::resource_exhausted(full.to_string()))
    }

    /// The answer `pick` takes from the target's latest reading. In a collector's first moments
    /// (until `first_answer_wait` after it started) a call waits for a reading that answers, so
    /// the first call after a ScaledObject appears is answered (from the held demand, say) and
    /// not refused for want of a first reading; every later call answers from memory at once.
    async fn answer<T>(
        &self,
        target: &Target,
        pick: impl Fn(&Report) -> Result<T, String>,
    ) -> Result<T, Status> {
        let until = target.started + self.first_answer_wait;
        let mut reading = target.reading.clone();
        loop {
            let now = match &*reading.borrow_and_update() {
                Reading::Ready(r) => pick(r).map_err(|why| Self::unavailable(target, &why)),
                Reading::Pending => Err(Self::unavailable(target, "nothing read yet")),
            };
            if now.is_ok() {
                return now;
            }
            match tokio::time::timeout_at(until, reading.changed()).await {
                Ok(Ok(())) => continue,
                // The wait is over (or the collector stopped): the latest answer stands.
                _ => return now,
            }
        }
    }

    /// UNAVAILABLE with why, bounded ([`infscale_core::limits::ERROR_TEXT_BYTES`]): the text names
    /// pods and activators, and KEDA shows it in logs and events.
    fn unavailable(target: &Target, why: &str) -> Status {
        let text = format!("{}: {why}", target.spec.label());
        Status::unavailable(infscale_core::limits::cut(
            &text,
            infscale_core::limits::ERROR_TEXT_BYTES,
        ))
    }

    fn count<T>(&self, method: &str, result: Result<T, Status>) -> Result<T, Status> {
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(s) => s.code(),
        };
        self.telemetry.call(method, code);
        result
    }
}

/// A metric value as KEDA reads it: the double, and the deprecated int64 rounded up; clamped to
/// what KEDA's milli-unit conversion holds (`limits::MAX_METRIC_VALUE`).
pub fn metric_value(name: String, value: f64) -> MetricValue {
    let value = infscale_core::limits::metric_value(value);
    MetricValue {
        metric_name: name,
        metric_value: value.ceil() as i64,
        metric_value_float: value,
    }
}

#[tonic::async_trait]
impl ExternalScaler for Scaler {
    async fn is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        let result = match self.target(request.get_ref()) {
            Ok(t) => self
                .answer(&t, |r| r.active.clone())
                .await
                .map(|active| Response::new(IsActiveResponse { result: active })),
            Err(e) => Err(e),
        };
        self.count("IsActive", result)
    }

    type StreamIsActiveStream = IsActiveStream;

    async fn stream_is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<Self::StreamIsActiveStream>, Status> {
        let target = self.count("StreamIsActive", self.target(request.get_ref()))?;
        let registry = self.registry.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut closing = self.closing.clone();
        let heartbeat = self.heartbeat;
        tokio::spawn(async move {
            let mut reading = target.reading.clone();
            let mut sent: Option<bool> = None;
            let mut heartbeat = tokio::time::interval(heartbeat);
            heartbeat.tick().await;
            loop {
                let active = match &*reading.borrow_and_update() {
                    Reading::Ready(r) => r.active.clone().ok(),
                    Reading::Pending => None,
                };
                // Only a known answer is pushed (and repeated): while activity cannot be told,
                // the stream is silent, so a `true` is never repeated past its truth.
                if active.is_none() {
                    sent = None;
                }
                if let Some(active) = active {
                    if sent != Some(active) {
                        if tx
                            .send(Ok(IsActiveResponse { result: active }))
                            .await
                            .is_err()
                        {
                            return;
                        }
                        sent = Some(active);
                    }
                }
                tokio::select! {
                    changed = reading.changed() => if changed.is_err() { return },
                    _ = heartbeat.tick() => {
                        registry.touch(&target);
                        if let Some(active) = sent {
                            if tx.send(Ok(IsActiveResponse { result: active })).await.is_err() {
                                return;
                            }
                        }
                    }
                    _ = tx.closed() => return,
                    _ = closing.changed() => return,
                }
            }
        });
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        // From the metadata alone: KEDA's fallback only applies once it has a spec
        // (kedacore/keda#8056), so nothing else (pods, API, activator, --max-targets) may fail
        // this call. The collector is started here when there is room (never making room: a
        // spec-only collector is a head start, and stops soon), so GetMetrics has a reading
        // sooner.
        let r = request.get_ref();
        let result =
            TargetSpec::from_metadata(&r.name, &r.namespace, &r.scaler_metadata, &self.allowed)
                .map_err(|e| Status::invalid_argument(e.to_string()))
                .map(|spec| {
                    let _ = self.registry.target(spec.clone(), Call::Spec);
                    // One spec per metric (`metric: queue,kv`): KEDA's HPA takes the largest
                    // of their proposals.
                    let metric_specs = spec
                        .metric_names()
                        .into_iter()
                        .map(|(metric_name, target)| MetricSpec {
                            metric_name,
                            target_size: target.ceil() as i64,
                            target_size_float: target,
                        })
                        .collect();
                    Response::new(GetMetricSpecResponse { metric_specs })
                });
        self.count("GetMetricSpec", result)
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let result = async {
            let req = request.get_ref();
            let r = req
                .scaled_object_ref
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("GetMetrics without a scaledObjectRef"))?;
            let target = self.target(r)?;
            // KEDA asks for one metric name at a time, one of those GetMetricSpec declared.
            let names: Vec<String> = target
                .spec
                .metric_names()
                .into_iter()
                .map(|n| n.0)
                .collect();
            let Some(index) = names.iter().position(|n| *n == req.metric_name) else {
                let asked = infscale_core::limits::cut(
                    &req.metric_name,
                    infscale_core::limits::FAILURE_TEXT_BYTES,
                );
                return Err(Status::not_found(format!(
                    "metric {asked:?}: this trigger's metrics are {names:?}"
                )));
            };
            let value = self
                .answer(&target, |report| match index.checked_sub(1) {
                    None => report.value.clone(),
                    Some(i) => report.others.get(i).cloned().unwrap_or_else(|| {
                        Err(format!("{} is not evaluated yet", req.metric_name))
                    }),
                })
                .await?;
            Ok(Response::new(GetMetricsResponse {
                metric_values: vec![metric_value(req.metric_name.clone(), value)],
            }))
        }
        .await;
        self.count("GetMetrics", result)
    }

    type StreamMetricSpecStream = SpecStream;

    async fn stream_metric_spec(
        &self,
        _request: Request<ScaledObjectRef>,
    ) -> Result<Response<Self::StreamMetricSpecStream>, Status> {
        self.count(
            "StreamMetricSpec",
            Err(Status::unimplemented(
                "StreamMetricSpec is not implemented: KEDA falls back to GetMetricSpec",
            )),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_values_fill_both_fields() {
        let v = metric_value("m".into(), 12.2);
        assert_eq!((v.metric_value, v.metric_value_float), (13, 12.2));
        let zero = metric_value("m".into(), 0.0);
        assert_eq!((zero.metric_value, zero.metric_value_float), (0, 0.0));
        let bad = metric_value("m".into(), f64::NAN);
        assert_eq!((bad.metric_value, bad.metric_value_float), (0, 0.0));
        let huge = metric_value("m".into(), 18_446_744_073_709_551_615.0);
        assert_eq!(huge.metric_value, 1 << 53);
        assert!(huge.metric_value_float * 1000.0 < i64::MAX as f64);
    }
}
