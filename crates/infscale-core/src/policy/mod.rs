//! What to scale on and how: the metric, its per-replica target, bounds, windows and rates.
//!
//! A [`Policy`] comes from a string (`queue:24,lookahead=90,min=0,cooldown=120,downpods=1`:
//! the metric and its per-replica target, then keys), from the flags of `decide` and `kube`, or
//! from a ScaledObject; all go through [`Policy::set`], which checks each value against the key
//! table in [`crate::policy::keys`], so a key means the same thing everywhere and is validated once.
//! Errors name the key and the value.
//!
//! The vocabulary the layers after it speak: [`behavior`] is the HPA's behaviour as a policy states
//! it (its algorithm is [`crate::control::hpa`]), [`exports`] what each server exports,
//! [`scaled_object`] a policy as a ScaledObject and back, [`suggest`] the nearest key to a typo.

pub mod behavior;
pub mod exports;
pub mod keys;
pub mod scaled_object;
pub mod suggest;

use crate::policy::behavior::{Behavior, Controller, Rules};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The start a reserve is measured over before one is learned, seconds (the default replica
/// model's cold start, rounded).
pub const PRIOR_START_S: f64 = 90.0;

/// The signal a policy scales on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Running + waiting requests (and held ones), per replica. The default.
    Queue,
    /// Waiting requests (and held ones), per replica.
    Waiting,
    /// Requests in the running batch, per replica.
    Running,
    /// KV-cache usage 0..1, averaged over replicas.
    Kv,
    /// CPU as a percentage of the pod's request, averaged over replicas.
    Cpu,
    /// The occupancy ratio R_needed: requests in flight over the fraction of replicas serving,
    /// in replicas.
    Occupancy,
    /// TTFT p95 over the target in seconds, as a utilisation.
    Ttft,
    /// The engine's work as a share of what one replica does at full speed, summed over
    /// replicas: prompt tokens prefilled per second (and the backlog waiting) over the prefill
    /// rate, plus output tokens per second over the full-batch decode rate. About 1 per replica
    /// at saturation whatever the mix, and, unlike a count of requests, it does not fall when
    /// replicas are added.
    Work,
}

impl Metric {
    pub const ALL: [Metric; 8] = [
        Metric::Queue,
        Metric::Waiting,
        Metric::Running,
        Metric::Kv,
        Metric::Cpu,
        Metric::Occupancy,
        Metric::Ttft,
        Metric::Work,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Queue => "queue",
            Metric::Waiting => "waiting",
            Metric::Running => "running",
            Metric::Kv => "kv",
            Metric::Cpu => "cpu",
            Metric::Occupancy => "occupancy",
            Metric::Ttft => "ttft",
            Metric::Work => "work",
        }
    }

    /// Requests held at an activator add to this metric (they are waiting work).
    pub fn counts_held(self) -> bool {
        matches!(self, Metric::Queue | Metric::Waiting | Metric::Occupancy)
    }

    /// At zero, whether a policy on this metric wakes the target: the metrics that count held
    /// requests, and `work`, whose wake is the held requests' (`IsActive`) and whose value starts
    /// with the first replica (the HPA keeps one until it has one).
    pub fn wakes_from_zero(self) -> bool {
        self.counts_held() || self == Metric::Work
    }

    /// Only a running pod can produce this metric, so it cannot wake a deployment from zero on
    /// its own.
    pub fn needs_a_pod(self) -> bool {
        matches!(self, Metric::Kv | Metric::Cpu | Metric::Work)
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Metric, PolicyError> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| PolicyError::UnknownMetric(s.to_owned()))
    }
}

/// A policy that cannot be used, naming what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "unknown metric {0:?}: expected queue, waiting, running, kv, cpu, occupancy, ttft or work"
    )]
    UnknownMetric(String),
    #[error("policy {0:?} has no target: write it as metric:target, e.g. queue:24")]
    MissingTarget(String),
    #[error("unknown policy key {0:?}{hint}; the keys are {names}", hint = did_you_mean(.0), names = key_names())]
    UnknownKey(String),
    #[error("{key}={value:?}: {expected}")]
    BadValue {
        key: String,
        value: String,
        expected: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// What `hold` holds through the gaps the traffic came back from ([`crate::control::hold`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HoldRule {
    /// Nothing.
    #[default]
    Off,
    /// Each replica count, and at one replica the target's activity.
    Auto,
    /// Only the last replica: an idle target stays active through the lulls it came back from,
    /// so it scales to zero only after a silence longer than those (a night).
    Idle,
}

/// How the lookahead projects demand over its horizon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Forecast {
    /// The least-squares trend of the last `trend` seconds.
    #[default]
    Trend,
    /// The trend over a window as long as the horizon, and what the same time of day brought on
    /// earlier days ([`crate::project::forecast`]).
    History,
}

impl Forecast {
    pub fn name(self) -> &'static str {
        match self {
            Forecast::Trend => "trend",
            Forecast::History => "history",
        }
    }
}

/// The trend's window when a policy names none, seconds.
pub const DEFAULT_TREND_S: f64 = 30.0;

/// `max` when a policy names none (the HPA's maxReplicas has no default; KEDA's is 100).
pub const DEFAULT_MAX: u32 = 10;

/// A complete scaling policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub metric: Metric,
    /// Per-replica target, in the metric's unit (requests, fraction, percent, seconds, replicas).
    pub target: f64,
    pub min: u32,
    pub max: u32,
    /// KEDA activation: active while requests in flight (running + waiting + held) exceed it.
    pub activation: f64,
    /// KEDA `cooldownPeriod`: idle seconds before the last replica goes (min 0 only).
    pub cooldown_s: f64,
    /// How far ahead to project demand from its recent trend (the cold start), seconds.
    pub lookahead_s: f64,
    /// `lookahead=auto`: the horizon is the learned cold start where one is known (`serve`
    /// learns it from the pods, [`crate::project::cold_start`]); `lookahead_s` is then the prior.
    #[serde(default)]
    pub lookahead_auto: bool,
    /// How much recent history the trend is fitted over, seconds.
    pub trend_window_s: f64,
    /// How the lookahead projects.
    #[serde(default)]
    pub forecast: Forecast,
    /// The SLO-aware floor's first-token budget, seconds; 0 is off.
    #[serde(default)]
    pub slo_s: f64,
    /// The Little's-law scale-down guard.
    #[serde(default)]
    pub guard: bool,
    /// Credit for replicas already starting.
    #[serde(default)]
    pub credit: bool,
    /// What to hold through the gaps the traffic came back from ([`crate::control::hold`]).
    #[serde(default)]
    pub hold: HoldRule,
    /// Keep standing the level bursts reached faster than a start ([`crate::control::reserve`]).
    #[serde(default)]
    pub reserve: bool,
    /// The start learned from the pods, seconds, when one is (set by [`Policy::with_horizon`]).
    #[serde(skip)]
    pub learned_start_s: Option<f64>,
    /// Prompt tokens one replica prefills per second, for the `work` metric.
    #[serde(default = "default_prefill_rate")]
    pub prefill_rate: f64,
    /// Output tokens one replica decodes per second at a full batch, for the `work` metric.
    #[serde(default = "default_decode_rate")]
    pub decode_rate: f64,
    /// Keep each Ready pod's deletion cost at its in-flight requests while a scale-down is near
    /// (`control::deletion_cost`).
    #[serde(default)]
    pub deletion_cost: bool,
    /// The deletion-cost writes allowed per target per minute.
    #[serde(default = "default_cost_writes")]
    pub deletion_cost_writes: u32,
    /// More metrics, each with its per-replica target (`queue+kv:48,0.8`, or `metric: queue,kv`
    /// with `threshold: 48,0.8`): the HPA proposes a count per metric and takes the largest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<(Metric, f64)>,
    /// `None` runs the HPA's legacy path (an HPA without `behavior`).
    pub behavior: Option<Behavior>,
    /// The HPA controller's flags.
    pub controller: Controller,
    /// Whether scale-up / scale-down limits were given by key (they then replace the defaults).
    #[serde(skip)]
    custom_limits: [bool; 2],
}

fn default_prefill_rate() -> f64 {
    DEFAULT_PREFILL_RATE
}

fn default_decode_rate() -> f64 {
    DEFAULT_DECODE_RATE
}

/// The mean prompt and output of the default replica model's mix, tokens: what a request is
/// taken to cost before the replicas have said (a server without a request counter).
pub const NOMINAL_REQUEST_TOKENS: (f64, f64) = (1000.0, 250.0);

/// `prefillrate` when a policy names none: the default replica model's (an 8B model in BF16 on
/// one H100-class card at 40% MFU; `infscale gpu` prints it for other models and cards).
pub const DEFAULT_PREFILL_RATE: f64 = 24_750.0;

/// `decoderate` when a policy names none: the default replica model's output tokens per second
/// at a full batch of 256 with 1,000-token contexts (`infscale gpu`).
pub const DEFAULT_DECODE_RATE: f64 = 12_114.0;

/// `deletioncostwrites` when a policy names none: pod-deletion-cost writes per target per minute.
pub const DEFAULT_WRITES_PER_MINUTE: u32 = 60;

fn default_cost_writes() -> u32 {
    DEFAULT_WRITES_PER_MINUTE
}

/// `; did you mean "lookahead"?` for a key near a known one, else nothing.
fn did_you_mean(typed: &str) -> String {
    suggest::nearest(typed, keys::KEYS.iter().map(|k| k.name))
        .map_or_else(String::new, |k| format!("; did you mean {k:?}?"))
}

fn key_names() -> String {
    keys::KEYS
        .iter()
        .map(|k| k.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Policy {
    /// A request's work in replicas' worth of seconds at the nominal mix, for the `work` metric
    /// before the replicas have said what a request costs.
    pub fn nominal_request_work(&self) -> f64 {
        let (prompt, output) = NOMINAL_REQUEST_TOKENS;
        prompt / self.prefill_rate + output / self.decode_rate
    }
    /// A policy with infscale's defaults: min 1, max 10, KEDA's 300 s cooldown, no lookahead (a
    /// 30 s trend when one is asked for), the HPA's default behavior (300 s down window, 100% or
    /// 4 pods up per 15 s).
    pub fn new(metric: Metric, target: f64) -> Policy {
        Policy {
            metric,
            target,
            min: 1,
            max: DEFAULT_MAX,
            activation: 0.0,
            cooldown_s: 300.0,
            lookahead_s: 0.0,
            lookahead_auto: false,
            trend_window_s: DEFAULT_TREND_S,
            forecast: Forecast::Trend,
            slo_s: 0.0,
            guard: false,
            credit: false,
            hold: HoldRule::Off,
            reserve: false,
            learned_start_s: None,
            prefill_rate: DEFAULT_PREFILL_RATE,
            decode_rate: DEFAULT_DECODE_RATE,
            deletion_cost: false,
            deletion_cost_writes: DEFAULT_WRITES_PER_MINUTE,
            also: Vec::new(),
            behavior: Some(Behavior::default()),
            controller: Controller::default(),
            custom_limits: [false; 2],
        }
    }

    /// Parses `metric:target[,key=value...]` and validates the result. Several metrics are joined
    /// by `+`, their targets following in the same order: `queue+kv:48,0.8,min=1`.
    pub fn parse(spec: &str) -> Result<Policy, PolicyError> {
        Self::parse_with_max(spec, DEFAULT_MAX)
    }

    /// [`Policy::parse`] with `max` as the default a spec's own `max=` overrides.
    pub fn parse_with_max(spec: &str, max: u32) -> Result<Policy, PolicyError> {
        let mut parts = spec.split(',');
        let head = parts.next().unwrap_or_default().trim();
        let (metric, target) = head
            .split_once(':')
            .ok_or_else(|| PolicyError::MissingTarget(spec.to_owned()))?;
        let metrics: Vec<&str> = metric.split('+').collect();
        let mut targets = vec![target];
        for _ in 1..metrics.len() {
            targets.push(parts.next().unwrap_or_default());
        }
        let mut policy = Policy::new(Metric::Queue, 0.0);
        policy.set("metric", &metrics.join(","))?;
        policy.set("target", &targets.join(","))?;
        policy.max = max;
        for part in parts.map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| PolicyError::BadValue {
                key: part.to_owned(),
                value: String::new(),
                expected: "expected key=value".to_owned(),
            })?;
            policy.set(key.trim(), value.trim())?;
        }
        policy.validate()?;
        Ok(policy)
    }

    /// Sets one key, its value checked against the key's bounds by the key's own entry in
    /// [`keys::KEYS`]. Scale-up or scale-down policies given by key replace that direction's
    /// default list, as a user-given `policies` list does in an HPA.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), PolicyError> {
        let key = keys::key(name).ok_or_else(|| PolicyError::UnknownKey(name.to_owned()))?;
        (key.parse)(key, self, value)
    }

    /// Checks the whole policy; every message names the key at fault.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |msg: String| Err(PolicyError::Invalid(msg));
        if !(self.target.is_finite() && self.target > 0.0) {
            return bad(format!("target {} must be a positive number", self.target));
        }
        for (i, (m, t)) in self.also.iter().enumerate() {
            if !(t.is_finite() && *t > 0.0) {
                return bad(format!(
                    "metric {m} has no positive target: give one target per metric, in order \
                     (queue+kv:48,0.8, or threshold 48,0.8)"
                ));
            }
            if *m == self.metric || self.also[..i].iter().any(|o| o.0 == *m) {
                return bad(format!(
                    "metric {m} is named twice, or there are more targets than metrics"
                ));
            }
        }
        if self.max == 0 {
            return bad("max must be at least 1".into());
        }
        if self.reserve && !self.metrics().iter().any(|m| m.0 == Metric::Work) {
            return bad(
                "reserve=auto learns from the arriving work: add the work metric \
                 (queue+work:192,1.0,reserve=auto)"
                    .into(),
            );
        }
        if self.min > self.max {
            return bad(format!("min {} is above max {}", self.min, self.max));
        }
        let pod_only = self.metrics().into_iter().find(|m| m.0.needs_a_pod());
        let wakes = self.metrics().iter().any(|m| m.0.wakes_from_zero());
        if let (0, Some((metric, _)), false) = (self.min, pod_only, wakes) {
            return bad(format!(
                "{metric} cannot scale from zero: with no pod there is no sample, so min=0 would \
                 never wake up; use min >= 1, or beside it a metric that counts held requests \
                 (queue, waiting, occupancy)"
            ));
        }
        let non_negative = [
            ("activation", self.activation),
            ("cooldown", self.cooldown_s),
            ("lookahead", self.lookahead_s),
            ("slo", self.slo_s),
            ("tolerance", self.controller.tolerance),
        ];
        for (key, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{key} {v} must be a number >= 0"));
            }
        }
        // The controller reads a tolerance of 0 as its default (0.1), but a ScaledObject carries
        // the key as both directions' tolerance, where 0 is none: the two would disagree.
        if self.controller.tolerance == 0.0 {
            return bad(
                "tolerance 0 is read as the controller's default 0.1; for no tolerance give \
                 uptolerance=0,downtolerance=0"
                    .into(),
            );
        }
        if !(self.trend_window_s.is_finite() && self.trend_window_s > 0.0) {
            return bad(format!(
                "trend {} must be a positive number of seconds",
                self.trend_window_s
            ));
        }
        if let Some(behavior) = &self.behavior {
            for (dir, rules) in [("up", &behavior.scale_up), ("down", &behavior.scale_down)] {
                validate_rules(dir, rules)?;
            }
        }
        Ok(())
    }

    /// Every metric with its target, the first (`metric`, `target`) first.
    pub fn metrics(&self) -> Vec<(Metric, f64)> {
        let mut all = vec![(self.metric, self.target)];
        all.extend(self.also.iter().copied());
        all
    }

    /// The metrics' names joined by `sep` (`queue,kv`).
    pub fn metric_list(&self, sep: &str) -> String {
        let names: Vec<&str> = self.metrics().iter().map(|m| m.0.name()).collect();
        names.join(sep)
    }

    /// The policy on the `i`th metric alone (0 is `metric`), everything else the same.
    pub fn single(&self, i: usize) -> Policy {
        let mut p = self.clone();
        if let Some(&(metric, target)) = self.also.get(i.wrapping_sub(1)) {
            p.metric = metric;
            p.target = target;
        }
        p.also.clear();
        p
    }

    /// Whether demand is projected at all (a lookahead set, or learned).
    pub fn looks_ahead(&self) -> bool {
        self.lookahead_s > 0.0 || self.lookahead_auto
    }

    /// The policy with the horizon `auto` stands for: the learned cold start, if any.
    pub fn with_horizon(&self, learned: Option<f64>) -> std::borrow::Cow<'_, Policy> {
        match learned {
            Some(h) if (self.lookahead_auto || self.reserve) && h.is_finite() && h >= 0.0 => {
                let mut p = self.clone();
                if self.lookahead_auto {
                    p.lookahead_s = h;
                }
                p.learned_start_s = Some(h);
                std::borrow::Cow::Owned(p)
            }
            _ => std::borrow::Cow::Borrowed(self),
        }
    }

    /// The start a replica takes from its order to Ready: the learned one, or the prior.
    pub fn start_s(&self) -> f64 {
        self.learned_start_s.unwrap_or(PRIOR_START_S)
    }

    /// The scale-down stabilisation window, seconds (the controller's default without one).
    pub fn down_window_s(&self) -> f64 {
        self.behavior
            .as_ref()
            .and_then(|b| b.scale_down.window_s)
            .unwrap_or(self.controller.downscale_window_s)
            .into()
    }

    /// The HPA's minimum: KEDA never lets its HPA go below 1; 0 <-> 1 is KEDA's own step.
    pub fn hpa_min(&self) -> u32 {
        self.min.max(1)
    }
}

fn validate_rules(dir: &str, rules: &Rules) -> Result<(), PolicyError> {
    let bad = |msg: String| Err(PolicyError::Invalid(msg));
    if rules.window_s.is_some_and(|w| w > 3600) {
        return bad(format!("{dir}window must be between 0 and 3600 seconds"));
    }
    if let Some(t) = rules.tolerance {
        if !(t.is_finite() && t >= 0.0) {
            return bad(format!("{dir}tolerance {t} must be a number >= 0"));
        }
    }
    for p in &rules.policies {
        if p.value == 0 {
            return bad(format!("{dir} policy values must be above 0"));
        }
        if !(1..=1800).contains(&p.period_s) {
            return bad(format!("{dir}period must be between 1 and 1800 seconds"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::behavior::{RateKind, RatePolicy};

    #[test]
    fn a_zero_tolerance_is_refused_where_it_would_deploy_other_than_it_decides() {
        // Found by the policy fuzz target (fuzz/regressions/policy/tolerance-zero): `decide`
        // read tolerance=0 as 0.1 while the ScaledObject `tune` writes carried 0.
        let err = Policy::parse("waiting:3.5,activation=2,tolerance=0,upperiod=30").unwrap_err();
        assert!(
            err.to_string().contains("uptolerance=0,downtolerance=0"),
            "{err}"
        );
        let p = Policy::parse("waiting:3.5,uptolerance=0,downtolerance=0").unwrap();
        let none = p.controller.tolerances(p.behavior.as_ref());
        assert_eq!((none.scale_up, none.scale_down), (0.0, 0.0));
    }

    #[test]
    fn lookahead_auto() {
        let p = Policy::parse("queue:24,lookahead=auto").unwrap();
        assert!(p.lookahead_auto && p.looks_ahead());
        assert_eq!(p.lookahead_s, 0.0, "no prior given");
        assert_eq!(p.with_horizon(Some(45.0)).lookahead_s, 45.0);
        let fixed = Policy::parse("queue:24,lookahead=90").unwrap();
        assert_eq!(fixed.with_horizon(Some(45.0)).lookahead_s, 90.0);
        let reserve = Policy::parse("queue+work:192,1.0,reserve=auto").unwrap();
        let learned = reserve.with_horizon(Some(45.0));
        assert_eq!((learned.lookahead_s, learned.start_s()), (0.0, 45.0));
        let err = Policy::parse("queue:24,reserve=auto")
            .unwrap_err()
            .to_string();
        assert!(err.contains("add the work metric"), "{err}");
        let e = Policy::parse("queue:24,lookahead=soon").unwrap_err();
        assert!(e.to_string().contains("or auto"), "{e}");
    }

    #[test]
    fn parses_policy_strings() {
        let p = Policy::parse("queue:24,lookahead=90").unwrap();
        assert_eq!(
            (p.metric, p.target, p.lookahead_s),
            (Metric::Queue, 24.0, 90.0)
        );
        let p = Policy::parse("queue:24,min=0,cooldown=120").unwrap();
        assert_eq!((p.min, p.cooldown_s), (0, 120.0));
        let p = Policy::parse("cpu:60").unwrap();
        assert_eq!((p.metric, p.target, p.min), (Metric::Cpu, 60.0, 1));
        assert_eq!(
            Policy::parse("occupancy:2").unwrap().metric,
            Metric::Occupancy
        );
        assert_eq!(Policy::parse("ttft:1.5").unwrap().target, 1.5);
    }

    #[test]
    fn down_policies_replace_the_default_list() {
        let p = Policy::parse("queue:24,downpods=1").unwrap();
        let down = &p.behavior.unwrap().scale_down;
        assert_eq!(
            down.policies,
            vec![RatePolicy {
                kind: RateKind::Pods,
                value: 1,
                period_s: 15
            }]
        );
        for spec in [
            "queue:24,downpods=1,downpercent=50,downperiod=60",
            "queue:24,downperiod=60,downpercent=50,downpods=1",
        ] {
            let p = Policy::parse(spec).unwrap();
            let down = &p.behavior.unwrap().scale_down;
            assert_eq!(down.policies.len(), 2, "{spec}");
            assert!(down.policies.iter().all(|p| p.period_s == 60), "{spec}");
        }
        // Re-stating the default keeps it, beside the new limit.
        let p = Policy::parse("queue:24,downpercent=100,downpods=1").unwrap();
        assert_eq!(p.behavior.unwrap().scale_down.policies.len(), 2);
    }

    #[test]
    fn parses_several_metrics() {
        let p = Policy::parse("queue+kv:48,0.8,min=2").unwrap();
        assert_eq!(p.metrics(), vec![(Metric::Queue, 48.0), (Metric::Kv, 0.8)]);
        assert_eq!(p.min, 2);
        assert_eq!(p.single(1).metrics(), vec![(Metric::Kv, 0.8)]);
        assert_eq!(p.single(0).metrics(), vec![(Metric::Queue, 48.0)]);
        // Through keys, in either order (trigger metadata, flags).
        let mut q = Policy::new(Metric::Queue, 1.0);
        q.set("target", "48,0.8").unwrap();
        q.set("metric", "queue,kv").unwrap();
        assert_eq!(q.metrics(), p.metrics());
        assert!(Policy::parse("queue+kv:48").is_err());
        assert!(Policy::parse("queue+queue:4,5").is_err());
        // kv alone cannot wake a target from zero; beside queue, the held requests wake it.
        assert!(Policy::parse("kv:0.8,min=0").is_err());
        assert!(Policy::parse("queue+kv:4,0.8,min=0").is_ok());
        let mut r = Policy::new(Metric::Queue, 1.0);
        r.set("target", "4,5").unwrap();
        assert!(r.validate().is_err(), "more targets than metrics");
    }

    #[test]
    fn legacy_drops_behavior() {
        assert_eq!(Policy::parse("queue:4,legacy=true").unwrap().behavior, None);
    }

    #[test]
    fn errors_name_the_key() {
        let e = Policy::parse("queue:4,min=lots").unwrap_err().to_string();
        assert!(e.contains("min=\"lots\""), "{e}");
        let e = Policy::parse("queue:4,colour=red").unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        let e = Policy::parse("gpu:4").unwrap_err().to_string();
        assert!(e.contains("gpu"), "{e}");
        assert!(matches!(
            Policy::parse("queue"),
            Err(PolicyError::MissingTarget(_))
        ));
        let e = Policy::parse("queue:4,downselect=sometimes")
            .unwrap_err()
            .to_string();
        assert!(e.contains("downselect"), "{e}");
    }

    #[test]
    fn refuses_what_cannot_work() {
        for spec in ["cpu:60,min=0", "kv:0.8,min=0"] {
            let e = Policy::parse(spec).unwrap_err().to_string();
            assert!(e.contains("cannot scale from zero"), "{e}");
        }
        assert!(Policy::parse("queue:0").is_err());
        assert!(Policy::parse("queue:4,min=5,max=3").is_err());
        assert!(Policy::parse("queue:4,downperiod=0,downpods=1").is_err());
        assert!(Policy::parse("queue:4,upwindow=4000").is_err());
        assert!(Policy::parse("queue:24,min=0").is_ok());
    }
}
