//! KEDA's operator and the HPA's sync loop, written once.
//!
//! `serve` answers KEDA; KEDA's operator and the HPA it creates act on the answers. The
//! simulator and the demo both play KEDA and the HPA, and `decide` (and the simulator's `hpa`
//! mode) plays the standalone HPA, so the loop they play lives here: a small state (the latest
//! evaluation's answers and what they were made of) and one function per event, each returning
//! the [`Action`] KEDA or the HPA would take, with a typed [`Cause`]. The callers keep their own
//! clocks and schedules (ticks in the simulator, the demo's compressed clock); the periods they
//! schedule by are here, once.
//!
//! One of `serve`'s collector rules is here too, so the simulator runs it as `serve` does: an
//! evaluation follows every scrape and every change of the held demand, and nothing else
//! ([`Cycle::wants_evaluation`]). The other, what a partly read activator's count is worth, is
//! [`crate::observe::counts::Counts::held_demand`].

use crate::control::activity::Activity;
use crate::control::decision::{decide, hpa_sync, Decision, Evaluation, ScalerState, Why};
use crate::control::keda;
use crate::policy::Policy;
use crate::project::demand::Observation;
use crate::reasons::{Step, Steps, Wake};

/// KEDA's default `pollingInterval`: how often its operator calls `IsActive`.
pub const POLLING_INTERVAL_S: f64 = 30.0;
/// The HPA controller's sync period (kube-controller-manager's
/// `--horizontal-pod-autoscaler-sync-period`).
pub const HPA_SYNC_PERIOD_S: f64 = 15.0;
/// How often `serve` scrapes a target's pods when its trigger names no interval.
pub const SCRAPE_INTERVAL_S: f64 = 5.0;

/// Who changed the replica count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// KEDA, on a `StreamIsActive` answer that turned true (an `external-push` trigger).
    Push,
    /// KEDA's operator, on its `IsActive` poll.
    Keda,
    /// The HPA KEDA created, on its sync.
    Hpa,
    /// The standalone HPA (`decide`, the simulator's `hpa` mode): the whole decision at once.
    Decide,
}

impl Actor {
    /// The name the timeline and the JSON carry.
    pub fn name(self) -> &'static str {
        match self {
            Actor::Push => "push",
            Actor::Keda => "keda",
            Actor::Hpa => "hpa",
            Actor::Decide => "decide",
        }
    }
}

/// Why the count changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cause {
    /// KEDA's activation from zero, and what woke it as the caller saw it.
    Activate { wake: Wake },
    /// KEDA takes the last replica away: idle this long (`None`: never active) past the cooldown.
    IdleToZero {
        idle_s: Option<f64>,
        cooldown_s: f64,
    },
    /// The HPA's reconcile.
    Hpa(Why),
}

impl Cause {
    /// Where the count ended, as a decision says it.
    pub fn why(&self) -> Why {
        match self {
            Cause::Activate { .. } => Why::Activate,
            Cause::IdleToZero { .. } => Why::IdleToZero,
            Cause::Hpa(why) => *why,
        }
    }

    /// The name the timeline and the JSON carry.
    pub fn name(&self) -> &'static str {
        self.why().name()
    }

    /// KEDA's step, as a reason (the HPA's steps are the decision's own).
    fn step(&self) -> Option<Step> {
        match *self {
            Cause::Activate { wake } => Some(Step::Woken(wake)),
            Cause::IdleToZero { idle_s, cooldown_s } => {
                Some(keda::to_zero_line(idle_s, cooldown_s))
            }
            Cause::Hpa(_) => None,
        }
    }
}

/// A replica count to set, who sets it, why, and the reasons to show for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub to: u32,
    pub by: Actor,
    pub cause: Cause,
    pub lines: Steps,
}

/// What KEDA and its HPA last heard from `serve`, and the collector's re-evaluation memory.
#[derive(Debug, Clone, Default)]
pub struct Cycle {
    /// The latest evaluation's value and activity; `None` before the first (`serve` answers
    /// with an error then, which KEDA takes as unknown).
    latest: Option<(Option<f64>, Activity)>,
    /// What the latest evaluation's answers were made of, kept only when `keep_lines`.
    latest_lines: Steps,
    keep_lines: bool,
    /// The held demand the last evaluation used (`None`: none yet).
    evaluated_held: Option<Option<f64>>,
}

impl Cycle {
    /// A loop that keeps each evaluation's reasons for the actions that follow it (a timeline
    /// wants them; a run that only counts does not).
    pub fn new(keep_lines: bool) -> Cycle {
        Cycle {
            keep_lines,
            ..Cycle::default()
        }
    }

    /// A loop whose collector already holds this held demand: an activator's watch reports
    /// changes, not the value it started from, so nothing is evaluated for it.
    pub fn having_seen_held(mut self, held: Option<f64>) -> Cycle {
        self.evaluated_held = Some(held);
        self
    }

    /// `serve`'s collector rule: evaluate after every scrape round, and on the last round
    /// whenever the held demand changed (a change of the activator's counts that leaves it as
    /// it was, as `RequestCount` grows with every request, evaluates nothing).
    pub fn wants_evaluation(&mut self, scraped: bool, held: Option<f64>) -> bool {
        if !scraped && self.evaluated_held == Some(held) {
            return false;
        }
        self.evaluated_held = Some(held);
        true
    }

    /// The next event evaluates whatever it is (the answer may change for a reason the held
    /// demand does not show, as the activator becoming reachable through a Service).
    pub fn forget_evaluation(&mut self) {
        self.evaluated_held = None;
    }

    /// Takes an evaluation's answers as `serve` publishes them. Returns whether `IsActive`
    /// turned true, which `StreamIsActive` sends at once.
    pub fn evaluated(&mut self, eval: &Evaluation) -> bool {
        let was_active = self.latest.is_some_and(|l| l.1.is_active());
        self.latest = Some((eval.value, eval.activity));
        if self.keep_lines {
            self.latest_lines.clone_from(&eval.lines);
        }
        eval.activity.is_active() && !was_active
    }

    /// What `IsActive` answers now (unknown before the first evaluation).
    pub fn activity(&self) -> Activity {
        self.latest.map_or(Activity::Unknown, |l| l.1)
    }

    /// What `GetMetrics` answers now (`None`: an error).
    pub fn value(&self) -> Option<f64> {
        self.latest.and_then(|l| l.0)
    }

    /// KEDA receives `StreamIsActive` true: it acts on it at once, as on a poll that answered
    /// active. `wake` is what the caller saw, for the reasons.
    pub fn push(
        &mut self,
        policy: &Policy,
        state: &mut ScalerState,
        current: u32,
        wake: Wake,
        now: f64,
    ) -> Option<Action> {
        self.keda(
            Actor::Push,
            policy,
            state,
            current,
            Activity::Active,
            wake,
            now,
        )
    }

    /// KEDA's operator polls `IsActive` and gets `activity`: it activates a target at zero, or
    /// takes its last replica away after the cooldown. Records the activity in `state`.
    #[allow(clippy::too_many_arguments)]
    pub fn poll(
        &mut self,
        policy: &Policy,
        state: &mut ScalerState,
        current: u32,
        activity: Activity,
        wake: Wake,
        now: f64,
    ) -> Option<Action> {
        self.keda(Actor::Keda, policy, state, current, activity, wake, now)
    }

    #[allow(clippy::too_many_arguments)]
    fn keda(
        &self,
        by: Actor,
        policy: &Policy,
        state: &mut ScalerState,
        current: u32,
        activity: Activity,
        wake: Wake,
        now: f64,
    ) -> Option<Action> {
        let poll = keda::poll(
            policy.min,
            policy.cooldown_s,
            current,
            activity,
            &mut state.last_active,
            now,
        );
        let (to, cause) = match poll {
            keda::Poll::Activate { to } => (to, Cause::Activate { wake }),
            keda::Poll::ToZero { idle_s } => (
                0,
                Cause::IdleToZero {
                    idle_s,
                    cooldown_s: policy.cooldown_s,
                },
            ),
            keda::Poll::Keep { .. } => return None,
        };
        // KEDA's step, then what the answer it acted on was made of.
        let mut lines = Steps::default();
        lines.extend(cause.step());
        lines.extend(self.latest_lines.iter().copied());
        Some(Action {
            to,
            by,
            cause,
            lines,
        })
    }

    /// The HPA syncs on a target with `current` replicas: `value` is what `GetMetrics` gave for
    /// the first metric and `others` for each further one (`None`: the values the evaluations
    /// left in `state`). Nothing to do at zero: KEDA owns 0 <-> 1.
    pub fn sync(
        &mut self,
        policy: &Policy,
        state: &mut ScalerState,
        current: u32,
        value: Option<f64>,
        others: Option<&[Option<f64>]>,
        now: f64,
    ) -> Option<Action> {
        if current == 0 {
            return None;
        }
        if let Some(values) = others {
            state
                .others
                .resize_with(policy.also.len(), Default::default);
            for (other, v) in state.others.iter_mut().zip(values) {
                other.value = *v;
            }
        }
        // What the value was made of, then the HPA's steps on it.
        let mut lines = self.latest_lines.clone();
        let sync = hpa_sync(policy, state, current, current, value, now, &mut lines);
        Some(Action {
            to: sync.desired,
            by: Actor::Hpa,
            cause: Cause::Hpa(sync.why),
            lines,
        })
    }
}

/// The standalone HPA (`decide`, the simulator's `hpa` mode): the whole decision on one
/// observation, and the action it takes. The decision keeps its value and numbers; its reasons
/// move to the action.
pub fn standalone(
    policy: &Policy,
    obs: &Observation<'_>,
    state: &mut ScalerState,
) -> (Decision, Action) {
    let mut d = decide(policy, obs, state);
    let action = Action {
        to: d.desired,
        by: Actor::Decide,
        cause: Cause::Hpa(d.why),
        lines: std::mem::take(&mut d.lines),
    };
    (d, action)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Wake = Wake::Answer {
        answer: Some(false),
    };

    fn policy(spec: &str) -> Policy {
        Policy::parse(spec).unwrap()
    }

    #[test]
    fn a_push_at_zero_activates_and_keda_says_why() {
        let p = policy("queue:8,min=0,cooldown=60");
        let mut state = ScalerState::default();
        let mut cycle = Cycle::new(true);
        let held = Wake::Held { held: 3 };
        let a = cycle.push(&p, &mut state, 0, held, 10.0).unwrap();
        assert_eq!(
            (a.to, a.by, a.cause),
            (1, Actor::Push, Cause::Activate { wake: held })
        );
        assert_eq!(a.lines[0], Step::Woken(held));
        assert_eq!(state.last_active, Some(10.0));
    }

    #[test]
    fn a_poll_takes_the_last_replica_only_after_the_cooldown_and_never_on_unknown() {
        let p = policy("queue:8,min=0,cooldown=60");
        let mut state = ScalerState {
            last_active: Some(0.0),
            ..ScalerState::default()
        };
        let mut cycle = Cycle::new(false);
        assert_eq!(
            cycle.poll(&p, &mut state, 1, Activity::Idle, IDLE, 30.0),
            None
        );
        assert_eq!(
            cycle.poll(&p, &mut state, 1, Activity::Unknown, IDLE, 90.0),
            None
        );
        let a = cycle
            .poll(&p, &mut state, 1, Activity::Idle, IDLE, 90.0)
            .unwrap();
        assert_eq!(a.to, 0);
        assert_eq!(a.by, Actor::Keda);
        assert_eq!(
            a.cause,
            Cause::IdleToZero {
                idle_s: Some(90.0),
                cooldown_s: 60.0
            }
        );
        assert_eq!(a.cause.name(), "idle-to-zero");
    }

    #[test]
    fn the_hpa_leaves_zero_to_keda_and_scales_on_the_value() {
        let p = policy("queue:8,min=0");
        let mut state = ScalerState::default();
        let mut cycle = Cycle::new(false);
        assert_eq!(cycle.sync(&p, &mut state, 0, Some(80.0), None, 0.0), None);
        let a = cycle
            .sync(&p, &mut state, 1, Some(80.0), None, 0.0)
            .unwrap();
        // Ten wanted; the default scale-up rule allows four more pods per 15 s.
        assert_eq!((a.to, a.by), (5, Actor::Hpa));
        assert_eq!(a.cause, Cause::Hpa(Why::ScaleUpLimit));
    }

    #[test]
    fn an_evaluation_follows_a_scrape_or_a_change_of_the_held_demand() {
        let mut cycle = Cycle::new(false).having_seen_held(Some(0.0));
        assert!(!cycle.wants_evaluation(false, Some(0.0)));
        assert!(cycle.wants_evaluation(false, Some(2.0)));
        assert!(!cycle.wants_evaluation(false, Some(2.0)));
        assert!(cycle.wants_evaluation(true, Some(2.0)));
        assert!(cycle.wants_evaluation(false, None));
        cycle.forget_evaluation();
        assert!(cycle.wants_evaluation(false, None));
        assert!(Cycle::new(false).wants_evaluation(false, Some(0.0)));
    }
}
