//! The demo's KEDA and HPA: a client of `serve`'s gRPC protocol that acts as KEDA's operator and
//! the HPA it creates would, with the same core code the simulator applies.
//!
//! It asks `GetMetricSpec` once, follows `StreamIsActive` (a `true` at zero activates at once, as
//! KEDA does for an `external-push` trigger), polls `IsActive` every pollingInterval (KEDA's step
//! to and from zero, `keda::poll`), and every HPA period reads `GetMetrics` for each metric of the
//! spec and runs the HPA's reconcile on the values, the largest count winning. Each of those steps
//! is the core's control loop (`control::cycle`), the one the simulator plays. Periods and the
//! policy are in simulated seconds; the calls happen on the wall clock.

use super::clock::SimClock;
use super::deployment::Deployment;
use crate::serve::proto::external_scaler_client::ExternalScalerClient;
use crate::serve::proto::{GetMetricsRequest, ScaledObjectRef};
use infscale_core::control::activity::Activity;
use infscale_core::control::cycle::{Action, Cycle, HPA_SYNC_PERIOD_S, POLLING_INTERVAL_S};
use infscale_core::control::decision::ScalerState;
use infscale_core::policy::Policy;
use infscale_core::reasons::Wake;
use infscale_core::sim::run::{SeriesPoint, TimelineEntry};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

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

/// The first time after `now` on the grid of `period` through `due`: a step that ran late does
/// not push every later one back, and a period missed whole is skipped. The demo's loop wakes
/// every quarter of a simulated second, so a period counted from when it ran would drift an
/// eighth of a second a sync on average (over ten seconds in a day), shifting the syncs against
/// `serve`'s scrapes as a cluster's do not: its HPA controller requeues a target a period after
/// its last sync, late only by its own milliseconds of work.
fn next_on_grid(due: f64, now: f64, period: f64) -> f64 {
    let missed = ((now - due) / period).floor().max(0.0);
    due + (missed + 1.0) * period
}

pub struct Driver {
    client: ExternalScalerClient<Channel>,
    so: ScaledObjectRef,
    /// The spec's metric names, in order: the policy's metric, then each further one.
    metrics: Vec<String>,
    policy: Policy,
    state: ScalerState,
    /// KEDA's operator and the HPA, as the simulator plays them.
    cycle: Cycle,
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
            cycle: Cycle::new(false),
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

    fn apply(&mut self, d: &mut Deployment, action: Action, now: f64) {
        let from = d.current();
        if action.to != from {
            self.record
                .timeline
                .push(TimelineEntry::of(&action, from, now));
        }
        d.scale(action.to, now);
    }

    /// One pass at simulated time `now`: the push stream, KEDA's poll, the HPA's sync.
    pub async fn step(&mut self, d: &mut Deployment, clock: &SimClock, in_flight: u32) {
        let now = clock.now();
        let pushed = *self.pushed.borrow_and_update();
        if pushed && d.current() == 0 {
            if let Some(action) =
                self.cycle
                    .push(&self.policy, &mut self.state, 0, Wake::Stream, now)
            {
                self.apply(d, action, now);
            }
        }
        if now >= self.next_poll {
            self.next_poll = next_on_grid(self.next_poll, now, POLLING_INTERVAL_S);
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
            let wake = Wake::Answer { answer: active };
            if let Some(action) =
                self.cycle
                    .poll(&self.policy, &mut self.state, current, activity, wake, now)
            {
                self.apply(d, action, now);
            }
        }
        if now >= self.next_hpa {
            if self.next_hpa > 0.0 {
                self.record.hpa_late.push(now - self.next_hpa);
            }
            self.next_hpa = next_on_grid(self.next_hpa, now, HPA_SYNC_PERIOD_S);
            let mut values = Vec::with_capacity(self.metrics.len());
            for name in self.metrics.clone() {
                values.push(self.metric_value(name).await);
            }
            let value = values.first().copied().flatten();
            self.latest.value = value;
            // The further metrics' values too: the HPA takes the largest proposal.
            let current = d.current();
            let others = values.get(1..).unwrap_or_default();
            let synced = self.cycle.sync(
                &self.policy,
                &mut self.state,
                current,
                value,
                Some(others),
                now,
            );
            if let Some(action) = synced {
                self.apply(d, action, now);
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

#[cfg(test)]
mod tests {
    use super::next_on_grid;

    /// A sync run late keeps the next one on the grid; one run a period and more late skips
    /// the period it missed.
    #[test]
    fn a_late_sync_keeps_the_next_on_the_grid() {
        assert_eq!(next_on_grid(0.0, 0.0, 15.0), 15.0);
        assert_eq!(next_on_grid(15.0, 15.2, 15.0), 30.0);
        assert_eq!(next_on_grid(15.0, 29.9, 15.0), 30.0);
        assert_eq!(next_on_grid(15.0, 31.0, 15.0), 45.0);
    }
}
