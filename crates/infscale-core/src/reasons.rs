//! Reasons as data: each step a decision takes, with the numbers it reports, and the typed causes
//! of "no value" and of the `IsActive` answer.
//!
//! Evaluating builds these values and no text: only what reads them renders them (`decide`'s
//! output, the simulator's timeline, a debug log, the error KEDA receives), through the
//! `Display` impls, which all live in [`wording`] so every reason's words are in one file.

use crate::observe::metrics::Server;
use crate::policy::behavior::Limited;
use crate::policy::Metric;

mod wording;

pub use wording::no_value_text;

/// A number as the reasons print it: whole numbers without decimals, others to 3 places.
pub fn fmt(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// Why the metric has no value (KEDA's HPA then keeps the current count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoValue {
    /// No pod list yet, or no scrape of it, and nothing held to stand for the demand.
    PodsUnknown,
    /// No ready replica, and the activator's held count cannot be read.
    ActivatorUnread,
    /// Every ready replica failed its scrape.
    NoReplicaRead { missing: u32 },
    /// The replicas read observed no first token in the interval.
    NoTtftSample,
    /// No ready replica, and the metric needs one.
    NoReadyReplica { metric: Metric },
    /// The pods' server exports nothing the metric is made of.
    MetricMissing {
        metric: Metric,
        server: Server,
        lacks: &'static str,
    },
    /// The replicas read gave no sample (rates need two scrapes).
    NoSample { metric: Metric },
}

/// Why `IsActive` answers what it does (the rule of [`crate::control::activity`] that applied).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ActivityCause {
    /// Requests running, waiting or held above the activation level.
    InFlight { in_flight: f64, activation: f64 },
    /// Ready replicas that could not be read may be busy.
    ReplicasUnread { missing: u32 },
    /// Nothing active read, and the activator's held count unread.
    HeldUnread,
    /// Nothing held, and the pods not known yet.
    PodsUnknown,
    /// Held requests were released, and no scrape has begun since.
    Released,
    /// Everything read, nothing above the activation level.
    Idle { in_flight: f64, activation: f64 },
    /// Idle, but within the hold of one replica (`hold=auto` or `hold=idle`).
    WithinHold {
        hold_s: f64,
        learned_gap_s: Option<f64>,
    },
}

/// How the measured value was made from the replicas that reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measured {
    Queue {
        sum: f64,
        running: f64,
        waiting: f64,
        reporting: u32,
    },
    /// `waiting` or `running`: a sum.
    Count {
        metric: Metric,
        sum: f64,
        reporting: u32,
    },
    /// `kv`, `cpu`, `work`: a sum of per-replica shares.
    Average {
        metric: Metric,
        mean: f64,
        sum: f64,
        reporting: u32,
    },
    Ttft {
        p95: f64,
        reporting: u32,
        value: f64,
    },
    Occupancy {
        in_flight: f64,
        reporting: u32,
        serving: f64,
        needed: f64,
    },
}

/// Which way the HPA's rule for pods without a metric went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingRule {
    /// The direction flipped: the current count is kept.
    Kept { status: u32 },
    /// Counted at 0 on the way up.
    Up { count: u32 },
    /// Counted at the target on the way down.
    Down { count: u32 },
}

/// The stabilisation window that held the count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// `behavior`'s scale-down window (the highest recommendation).
    ScaleDown { window_s: u32 },
    /// `behavior`'s scale-up window (the lowest recommendation).
    ScaleUp { window_s: u32 },
    /// The controller's window, without `behavior`.
    Default { window_s: u32 },
}

/// What woke a target from zero, where the caller (simulator, demo) saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A poll answered active with requests held.
    Held { held: usize },
    /// The push stream said active.
    Stream,
    /// A poll's answer (`None`: the call failed).
    Answer { answer: Option<bool> },
}

/// One step of an evaluation or a decision, with the numbers it reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// The measurement gave no value.
    NoValue(NoValue),
    /// Pods unknown: what the activator holds is the value.
    HeldBeforePods {
        metric: Metric,
        held: f64,
    },
    /// No ready replica: what the activator holds is the value.
    HeldAtZero {
        metric: Metric,
        held: f64,
    },
    /// No ready replica and nothing held, for a metric made of the replicas alone: nothing
    /// arrives, so 0 (an error here would fire KEDA's `fallback`, which applies at zero since
    /// v2.19, and wake the target every few polls).
    IdleAtZero {
        metric: Metric,
    },
    Measured(Measured),
    /// Replicas without a sample counted as the HPA counts missing pods.
    CountedMissing {
        not_voting: u32,
        reporting: u32,
        alone: u32,
        rule: MissingRule,
        value: f64,
        count: u32,
        target: f64,
    },
    /// The activator's held count unread, with replicas ready: counted as 0.
    HeldUnreadAsZero,
    /// Requests held at the activator added to the value.
    PlusHeld {
        held: f64,
        value: f64,
    },
    /// Requests waiting on replicas read as asleep, added as held ones are.
    AsleepRequests {
        requests: f64,
        value: f64,
    },
    /// `work`'s demand on its fitted line.
    Work {
        now: f64,
        window_s: f64,
        per_request: f64,
        slope: f64,
        lookahead_s: f64,
        queued: f64,
        drain_s: f64,
        value: f64,
    },
    /// No lookahead through a value that stands for unread replicas.
    NoLookahead,
    /// `forecast=history`'s projection.
    Forecast {
        lookahead_s: f64,
        pattern: Option<f64>,
        daily: Option<f64>,
        from: f64,
        to: f64,
    },
    /// The trend's projection over the lookahead.
    Lookahead {
        slope: f64,
        window_s: f64,
        lookahead_s: f64,
        from: f64,
        to: f64,
    },
    TrendNotRising {
        value: f64,
    },
    OnePoint,
    /// The credit for replicas starting cut the value to the current count.
    Credit {
        ready: u32,
        arriving: u32,
        carried: f64,
        safe: f64,
        admitted: f64,
        from: f64,
        to: f64,
        current: u32,
    },
    /// `forecast=history`'s floor from the admitted rate.
    RateForecast {
        admitted: f64,
        ahead: f64,
        lookahead_s: f64,
        /// The rise the time of day brought on earlier days, req/s, and over how many seconds
        /// (a start, or the lookahead if longer); `None` before a day of history.
        time_of_day: Option<(f64, f64)>,
        safe: f64,
        needed: u32,
        /// The peak need of the last two weeks capped the forecast at `needed`.
        capped_at_peak: bool,
        floor: f64,
        target: f64,
    },
    /// The SLO-aware floor.
    Slo {
        waiting: f64,
        admitted: f64,
        implied: f64,
        slo_s: f64,
        needed: u32,
        floor: f64,
        target: f64,
    },
    /// The scale-down guard.
    Guard {
        admitted: f64,
        safe: f64,
        keep: u32,
        ready: u32,
        floor: f64,
        target: f64,
    },
    /// `work` saturated: no fewer than the current count.
    Saturated {
        waiting: f64,
        current: u32,
        floor: f64,
        target: f64,
    },
    /// `hold=auto`'s floor.
    Hold {
        need: u32,
        count: u32,
        hold_s: f64,
        learned_gap_s: Option<f64>,
        floor: f64,
        target: f64,
    },
    /// `reserve=auto`'s floor: the level learned bursts reached, over the replicas needed now.
    Reserve {
        need: f64,
        level: u32,
        since: f64,
        floor: f64,
        target: f64,
    },
    /// The `IsActive` answer and its rule.
    /// Replicas read as asleep: no capacity, one target's worth each kept in the count.
    Asleep {
        asleep: u32,
        target: f64,
        value: f64,
    },
    Activity(ActivityCause),
    /// A further metric's value, or why it has none.
    Also {
        metric: Metric,
        value: Option<f64>,
        no_value: Option<NoValue>,
    },
    /// The HPA's `AverageValue` proposal.
    Proposal {
        metric: Metric,
        value: f64,
        target: f64,
        replicas: u32,
    },
    /// A proposal within the tolerance: the status count.
    WithinTolerance {
        value: f64,
        target: f64,
        status: u32,
        ratio: f64,
        replicas: u32,
    },
    /// The largest of several metrics' proposals.
    Largest {
        metrics: usize,
        replicas: u32,
    },
    /// The HPA does not act at zero.
    HpaAtZero,
    AboveMax {
        max: u32,
    },
    BelowMin {
        min: u32,
    },
    /// No value: the HPA keeps the count.
    NoValueKept,
    Stabilised {
        window: Window,
        count: u32,
    },
    /// A rate limit or the bounds cut the stabilised count.
    Limited {
        from: u32,
        to: u32,
        limit: Limited,
    },
    /// At zero below a minimum: KEDA restores it.
    RestoreMin {
        min: u32,
    },
    /// KEDA activates from zero, then its HPA asks for `wanted`.
    Activates {
        in_flight: f64,
        to: u32,
        wanted: Option<u32>,
    },
    CappedAtMax {
        max: u32,
    },
    AtZeroUnknown,
    AtZeroIdle,
    /// KEDA takes the last replica away.
    ToZero {
        idle_s: Option<f64>,
        cooldown_s: f64,
    },
    /// Activity unknown: KEDA never scales to zero on an error.
    UnknownNeverZero,
    /// Idle within the cooldown: at least one replica stays.
    IdleWithinCooldown {
        idle_s: f64,
        cooldown_s: f64,
    },
    /// KEDA woke the target (simulator, demo).
    Woken(Wake),
}

/// The steps of an evaluation or a decision, in order; rendered to one line each only where
/// read ([`Steps::render`], or `Debug`, which shows the lines as a list).
#[derive(Clone, Default, PartialEq)]
pub struct Steps(Vec<Step>);

impl Steps {
    pub fn push(&mut self, step: Step) {
        self.0.push(step);
    }

    /// One line per step, as `decide` prints them.
    pub fn render(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

impl From<Vec<Step>> for Steps {
    fn from(steps: Vec<Step>) -> Self {
        Steps(steps)
    }
}

impl std::ops::Deref for Steps {
    type Target = [Step];
    fn deref(&self) -> &[Step] {
        &self.0
    }
}

impl FromIterator<Step> for Steps {
    fn from_iter<I: IntoIterator<Item = Step>>(iter: I) -> Self {
        Steps(iter.into_iter().collect())
    }
}

impl Extend<Step> for Steps {
    fn extend<I: IntoIterator<Item = Step>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl<'a> IntoIterator for &'a Steps {
    type Item = &'a Step;
    type IntoIter = std::slice::Iter<'a, Step>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl std::fmt::Debug for Steps {
    /// The rendered lines, as a list: what a debug log or a failed assertion shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(ToString::to_string))
            .finish()
    }
}
