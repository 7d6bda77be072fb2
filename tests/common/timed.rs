//! KEDA's calls to `serve`, each timed and held to KEDA's 3 s gRPC deadline, with the slowest
//! answer kept for the fault tests' `FAULT case | answer | max ms` lines.

use super::keda::{is_active, metric_value, Client};
use infscale::serve::proto::{GetMetricsRequest, IsActiveResponse, ScaledObjectRef};
use std::time::{Duration, Instant};

/// KEDA's deadline for each call to an external scaler.
pub const KEDA_DEADLINE: Duration = Duration::from_secs(3);

/// A client whose every call is timed.
pub struct Timed {
    pub c: Client,
    /// The slowest answer so far.
    pub max: Duration,
    /// Calls made.
    pub calls: usize,
}

/// What an answer was, in a few characters: the value, `true`/`false`, or the error's code.
pub fn said<T: std::fmt::Display>(r: &Result<T, tonic::Status>) -> String {
    match r {
        Ok(v) => v.to_string(),
        Err(e) => format!("{:?}", e.code()),
    }
}

impl Timed {
    pub fn new(c: Client) -> Timed {
        Timed {
            c,
            max: Duration::ZERO,
            calls: 0,
        }
    }

    fn took(&mut self, what: &str, started: Instant) {
        let took = started.elapsed();
        self.max = self.max.max(took);
        self.calls += 1;
        assert!(took < KEDA_DEADLINE, "{what} answered after {took:?}");
    }

    pub async fn metrics(&mut self, req: &GetMetricsRequest) -> Result<f64, tonic::Status> {
        let started = Instant::now();
        let r = tokio::time::timeout(KEDA_DEADLINE, metric_value(&mut self.c, req))
            .await
            .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("GetMetrics")));
        self.took("GetMetrics", started);
        r
    }

    pub async fn active(&mut self, so: &ScaledObjectRef) -> Result<bool, tonic::Status> {
        let started = Instant::now();
        let r = tokio::time::timeout(KEDA_DEADLINE, is_active(&mut self.c, so))
            .await
            .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("IsActive")));
        self.took("IsActive", started);
        r
    }

    /// Opens `StreamIsActive` and returns its first message, which must come within 3 s.
    pub async fn stream_first(
        &mut self,
        so: &ScaledObjectRef,
    ) -> (bool, tonic::Streaming<IsActiveResponse>) {
        let started = Instant::now();
        let mut stream = self
            .c
            .stream_is_active(so.clone())
            .await
            .expect("StreamIsActive refused")
            .into_inner();
        let first = tokio::time::timeout(KEDA_DEADLINE, stream.message())
            .await
            .unwrap_or_else(|_| panic!("StreamIsActive sent nothing within {KEDA_DEADLINE:?}"))
            .expect("StreamIsActive failed")
            .expect("StreamIsActive ended")
            .result;
        self.took("StreamIsActive", started);
        (first, stream)
    }
}

/// Prints the case's line for `scripts/faults.sh`.
pub fn report(case: &str, answered: &str, max: Duration) {
    println!("FAULT {case} | {answered} | {}", max.as_millis());
}
