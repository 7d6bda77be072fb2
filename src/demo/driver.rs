//! The demo's KEDA and HPA: a client of `serve`'s gRPC protocol that acts as KEDA's operator and
//! the HPA it creates would, with the same `scaling` code the simulator applies.
//!
//! It asks `GetMetricSpec` once, follows `StreamIsActive` (a `true` at zero activates at once, as
//! KEDA does for an `external-push` trigger), polls `IsActive` every pollingInterval (KEDA's step
//! to and from zero, `keda::poll`), and every HPA period reads `GetMetrics` and runs the HPA's
//! reconcile (`hpa_sync`) on the value. Periods and the policy are in simulated seconds; the
//! calls happen on the wall clock.

use super::clock::SimClock;
use super::deployment::Deployment;
use crate::scaling::activity::Activity;
use crate::scaling::{hpa_sync, keda, Policy, ScalerState};
use crate::serve::proto::external_scaler_client::ExternalScalerClient;
use crate::serve::proto::{GetMetricsRequest, ScaledObjectRef};
use crate::sim::run::{SeriesPoint, TimelineEntry};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

/// KEDA's pollingInterval and the HPA's sync period, simulated seconds.
pub const POLLING_INTERVAL_S: f64 = 30.0;
pub const HPA_PERIOD_S: f64 = 15.0;

/// What the driver saw and did, for the summary and the plot.
#[derive(Debug, Default)]
pub struct Record {
    pub timeline: Vec<TimelineEntry>,
    pub series: Vec<SeriesPoint>,
    pub min_replicas_seen: Option<u32>,
}

/// The scaler's answers as last read.
#[derive(Debug, Default, Clone, Copy)]
pub struct Latest {
    pub value: Option<f64>,
    pub active: Option<bool>,
}

pub struct Driver {
    client: ExternalScalerClient<Channel>,
    so: ScaledObjectRef,
    metric: String,
    policy: Policy,
    state: ScalerState,
    pub latest: Latest,
    pub record: Record,
    next_poll: f64,
    next_hpa: f64,
    pushed: tokio::sync::watch::Receiver<bool>,
}

impl Driver {
    /// Connects to `serve`, asks for the metric spec and starts following `StreamIsActive`.
    pub async fn connect(
        grpc: String,
        so: ScaledObjectRef,
        policy: Policy,
    ) -> anyhow::Result<Driver> {
        let mut client = ExternalScalerClient::connect(grpc).await?;
        let spec = client.get_metric_spec(so.clone()).await?.into_inner();
        let metric = spec
            .metric_specs
            .first()
            .map(|m| m.metric_name.clone())
            .ok_or_else(|| anyhow::anyhow!("GetMetricSpec returned no metric"))?;
        let (tx, pushed) = tokio::sync::watch::channel(false);
        let mut stream = client.stream_is_active(so.clone()).await?.into_inner();
        tokio::spawn(async move {
            while let Some(Ok(r)) = stream.next().await {
                if tx.send(r.result).is_err() {
                    break;
                }
            }
        });
        Ok(Driver {
            client,
            so,
            metric,
            policy,
            // KEDA counts the ScaledObject's creation as its last active time.
            state: ScalerState {
                last_active: Some(0.0),
                ..ScalerState::default()
            },
            latest: Latest::default(),
            record: Record::default(),
            next_poll: 0.0,
            next_hpa: 0.0,
            pushed,
        })
    }

    fn apply(
        &mut self,
        d: &mut Deployment,
        to: u32,
        now: f64,
        by: &'static str,
        why: &str,
        lines: Vec<String>,
    ) {
        let from = d.current();
        if to != from {
            self.record.timeline.push(TimelineEntry {
                t: now,
                by,
                from,
                to,
                why: why.to_owned(),
                lines,
            });
        }
        d.scale(to, now);
    }

    /// One pass at simulated time `now`: the push stream, KEDA's poll, the HPA's sync.
    pub async fn step(&mut self, d: &mut Deployment, clock: &SimClock, in_flight: u32) {
        let now = clock.now();
        let pushed = *self.pushed.borrow_and_update();
        if pushed && d.current() == 0 {
            let poll = keda::poll(
                self.policy.min,
                self.policy.cooldown_s,
                0,
                Activity::Active,
                &mut self.state.last_active,
                now,
            );
            if let keda::Poll::Activate { to } = poll {
                let line = "StreamIsActive true at zero: KEDA activates".to_owned();
                self.apply(d, to, now, "push", "activate", vec![line]);
            }
        }
        if now >= self.next_poll {
            self.next_poll = now + POLLING_INTERVAL_S;
            let active = self
                .client
                .is_active(self.so.clone())
                .await
                .ok()
                .map(|r| r.into_inner().result);
            self.latest.active = active;
            let activity = match active {
                Some(true) => Activity::Active,
                Some(false) => Activity::Idle,
                None => Activity::Unknown,
            };
            let current = d.current();
            match keda::poll(
                self.policy.min,
                self.policy.cooldown_s,
                current,
                activity,
                &mut self.state.last_active,
                now,
            ) {
                keda::Poll::Activate { to } => {
                    let line = format!("IsActive {active:?} at zero: KEDA activates");
                    self.apply(d, to, now, "keda", "activate", vec![line]);
                }
                keda::Poll::ToZero { idle_s } => {
                    let line = keda::to_zero_line(idle_s, self.policy.cooldown_s);
                    self.apply(d, 0, now, "keda", "idle-to-zero", vec![line]);
                }
                keda::Poll::Keep { .. } => {}
            }
        }
        if now >= self.next_hpa {
            self.next_hpa = now + HPA_PERIOD_S;
            let request = GetMetricsRequest {
                scaled_object_ref: Some(self.so.clone()),
                metric_name: self.metric.clone(),
            };
            let value = self.client.get_metrics(request).await.ok().and_then(|r| {
                r.into_inner().metric_values.first().map(|v| {
                    if v.metric_value_float != 0.0 {
                        v.metric_value_float
                    } else {
                        v.metric_value as f64
                    }
                })
            });
            self.latest.value = value;
            let current = d.current();
            if current > 0 {
                let mut lines = Vec::new();
                let sync = hpa_sync(
                    &self.policy,
                    &mut self.state,
                    current,
                    current,
                    value,
                    now,
                    &mut lines,
                );
                self.apply(d, sync.desired, now, "hpa", sync.why.name(), lines);
            }
            let point = SeriesPoint {
                t: now,
                replicas: d.billed(),
                ready: d.ready(),
                in_flight,
            };
            self.record.series.push(point);
        }
        let ready = d.ready();
        self.record.min_replicas_seen = Some(
            self.record
                .min_replicas_seen
                .map_or(ready, |m| m.min(ready)),
        );
    }
}
