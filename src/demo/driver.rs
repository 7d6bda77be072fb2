//! The demo's KEDA and HPA: a client of `serve`'s gRPC protocol that acts as KEDA's operator and
//! the HPA it creates would, with the same `scaling` code the simulator applies.
//!
//! It asks `GetMetricSpec` once, follows `StreamIsActive` (a `true` at zero activates at once, as
//! KEDA does for an `external-push` trigger), polls `IsActive` every pollingInterval (KEDA's step
//! to and from zero, `keda::poll`), and every HPA period reads `GetMetrics` for each metric of the
//! spec and runs the HPA's reconcile (`hpa_sync`) on the values, the largest count winning. Periods and the policy are in simulated seconds; the
//! calls happen on the wall clock.

use super::clock::SimClock;
use super::deployment::Deployment;
use crate::scaling::activity::Activity;
use crate::scaling::reasons::{Step, Steps, Wake};
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
    /// How late each HPA sync ran past its period, simulated seconds.
    pub hpa_late: Vec<f64>,
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
    /// The spec's metric names, in order: the policy's metric, then each further one.
    metrics: Vec<String>,
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
        let metrics: Vec<String> = spec
            .metric_specs
            .iter()
            .map(|m| m.metric_name.clone())
            .collect();
        if metrics.is_empty() {
            anyhow::bail!("GetMetricSpec returned no metric");
        }
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
            metrics,
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

    /// One metric's value from `GetMetrics` (`None` when `serve` has none to give).
    async fn metric_value(&mut self, metric_name: String) -> Option<f64> {
        let request = GetMetricsRequest {
            scaled_object_ref: Some(self.so.clone()),
            metric_name,
        };
        let reply = self.client.get_metrics(request).await.ok()?.into_inner();
        reply.metric_values.first().map(|v| {
            if v.metric_value_float != 0.0 {
                v.metric_value_float
            } else {
                v.metric_value as f64
            }
        })
    }

    fn apply(
        &mut self,
        d: &mut Deployment,
        to: u32,
        now: f64,
        by: &'static str,
        why: &str,
        lines: Steps,
    ) {
        let from = d.current();
        if to != from {
            self.record.timeline.push(TimelineEntry {
                t: now,
                by,
                from,
                to,
                why: why.to_owned(),
                lines: lines.render(),
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
                let line = Step::Woken(Wake::Stream);
                self.apply(d, to, now, "push", "activate", Steps::from(vec![line]));
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
                    let line = Step::Woken(Wake::Answer { answer: active });
                    self.apply(d, to, now, "keda", "activate", Steps::from(vec![line]));
                }
                keda::Poll::ToZero { idle_s } => {
                    let line = keda::to_zero_line(idle_s, self.policy.cooldown_s);
                    self.apply(d, 0, now, "keda", "idle-to-zero", Steps::from(vec![line]));
                }
                keda::Poll::Keep { .. } => {}
            }
        }
        if now >= self.next_hpa {
            if self.next_hpa > 0.0 {
                self.record.hpa_late.push(now - self.next_hpa);
            }
            self.next_hpa = now + HPA_PERIOD_S;
            let mut values = Vec::with_capacity(self.metrics.len());
            for name in self.metrics.clone() {
                values.push(self.metric_value(name).await);
            }
            let value = values.first().copied().flatten();
            self.latest.value = value;
            // The further metrics' values, where `hpa_sync` takes the largest proposal.
            self.state
                .others
                .resize_with(self.policy.also.len(), Default::default);
            for (other, v) in self.state.others.iter_mut().zip(values.iter().skip(1)) {
                other.value = *v;
            }
            let current = d.current();
            if current > 0 {
                let mut lines = Steps::default();
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
