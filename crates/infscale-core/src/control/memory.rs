//! What a decision remembers between calls: the HPA's recommendations and scale events, the
//! last active time, the trends, the learned rates and the further metrics' own memories. Every
//! evaluation reads and writes it, `decide` keeps it in its state file, and a further metric
//! (`several`) keeps one of its own inside it, so the two types live here together.

use crate::control::activity::HeldMemory;
use crate::control::hold::Hold;
use crate::control::hpa;
use crate::control::reserve::Reserve;
use crate::observe::metrics::rates::Snapshot;
use crate::project::capacity::Capacity;
use crate::project::forecast::{self, Daily};
use crate::project::lookahead::Point;
use crate::project::work::WorkMemory;
use crate::reasons::NoValue;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Everything a decision remembers between runs; serialises to JSON (`--state FILE`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScalerState {
    /// The HPA controller's memory: recommendations and scale events.
    #[serde(default)]
    pub hpa: hpa::State,
    /// When requests were last in flight (KEDA's last active poll).
    #[serde(default)]
    pub last_active: Option<f64>,
    /// Recent metric values, for the lookahead's trend.
    #[serde(default)]
    pub trend: Vec<Point>,
    /// Each source's counters at its last scrape, for rates on the next.
    #[serde(default)]
    pub counters: BTreeMap<String, Snapshot>,
    /// The held count last read, and when requests were last held (the release rule).
    #[serde(default)]
    pub held: HeldMemory,
    /// Rates per replica the replicas sustained, for the guard, the credit and the forecast.
    #[serde(default)]
    pub capacity: Capacity,
    /// Recent admission rates, for `forecast=history`'s floor.
    #[serde(default)]
    pub rate_trend: Vec<Point>,
    /// The value over the daily cycle, for `forecast=history`.
    #[serde(default)]
    pub daily: Daily,
    /// The admitted rate over the daily cycle, for `forecast=history`'s floor.
    #[serde(default)]
    pub rate_daily: Daily,
    /// The `work` metric's readings over its window.
    #[serde(default)]
    pub work: WorkMemory,
    /// The gaps each replica count the admitted rate needed came back from, for `hold=auto`.
    #[serde(default)]
    pub hold: Hold,
    /// The idle gaps the traffic came back from (count 1: anything in flight), for `hold=auto`
    /// and `hold=idle`.
    #[serde(default)]
    pub idle: Hold,
    /// The bursts that outran the policy, for `reserve=auto`.
    #[serde(default)]
    pub reserve: Reserve,
    /// The memory and last value of each further metric (`policy.also`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<OtherMetric>,
}

impl ScalerState {
    /// What outlasts a restart or a day, for what comes after (its times `seconds` earlier): the
    /// bursts and the peak `reserve=auto` learned, the gaps `hold` learned and the daily cycles
    /// `forecast=history` learned, its own and each further metric's; the rest is this run's.
    pub fn carried(&self, seconds: f64) -> ScalerState {
        self.carried_with(|r| r.earlier_by(seconds, seconds), seconds, seconds)
    }

    /// What outlasts a whole day, for the day after it: as [`ScalerState::carried`], the reserve
    /// counts one more day behind it ([`Reserve::after_a_day`]), and the daily cycles are a
    /// whole cycle behind (the simulator's days are shorter than a real one, and each is one).
    pub fn after_a_day(&self, day_s: f64) -> ScalerState {
        self.carried_with(
            |r| r.after_a_day(day_s, forecast::DAY_S),
            day_s,
            forecast::DAY_S,
        )
    }

    fn carried_with(
        &self,
        reserve: impl Fn(&Reserve) -> Reserve + Copy,
        seconds: f64,
        cycle_seconds: f64,
    ) -> ScalerState {
        ScalerState {
            reserve: reserve(&self.reserve),
            hold: self.hold.earlier_by(seconds),
            idle: self.idle.earlier_by(seconds),
            daily: self.daily.earlier_by(cycle_seconds),
            rate_daily: self.rate_daily.earlier_by(cycle_seconds),
            others: self
                .others
                .iter()
                .map(|o| OtherMetric {
                    state: o.state.carried_with(reserve, seconds, cycle_seconds),
                    ..OtherMetric::default()
                })
                .collect(),
            ..ScalerState::default()
        }
    }
}

/// What one further metric remembers: its own decision memory, and its last value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OtherMetric {
    #[serde(default)]
    pub state: ScalerState,
    /// The value of the last evaluation; `None` when it had none.
    #[serde(default)]
    pub value: Option<f64>,
    /// Why there was no value, when there was none (the error KEDA is given for this metric;
    /// not kept between runs: the next evaluation says it again).
    #[serde(skip)]
    pub no_value: Option<NoValue>,
}
