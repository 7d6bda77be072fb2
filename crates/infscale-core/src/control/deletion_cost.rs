//! Pod deletion cost: which annotations to write so a scale-down removes the idle replica, not
//! the one streaming forty answers.
//!
//! When the HPA lowers a Deployment's replicas, the ReplicaSet controller picks the victims, and
//! it reads one hint: `controller.kubernetes.io/pod-deletion-cost` (lower goes first). With
//! `deletionCost: true` a target's pods carry their in-flight requests (running + waiting) as
//! that cost. A write is a PATCH on the API server, so [`plan`] writes only when a scale-down is
//! near ([`scale_down_near`]: the HPA's proposal for the value just computed is below the ready
//! count, and its stabilization window then holds the step for minutes: time to write), only
//! pods whose cost moved meaningfully ([`meaningful`]: the ReplicaSet compares costs, so a few
//! requests either way on a busy pod change nothing), the largest moves first, and no more than
//! the target's budget per minute ([`Budget`]). `serve` and the simulator call the same
//! functions. Pure: times are parameters, nothing here does I/O.

use crate::control::decision::ScalerState;
use crate::policy::Policy;
use crate::project::fleet::Fleet;
use std::collections::VecDeque;

/// The annotation the ReplicaSet controller reads when it picks pods to delete.
pub const ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// One Ready pod: its in-flight requests now and the cost it carries (`None`: no annotation,
/// which the ReplicaSet reads as 0).
#[derive(Debug, Clone, PartialEq)]
pub struct PodCost {
    pub pod: String,
    pub in_flight: u32,
    pub carried: Option<i32>,
}

/// The writes allowed per target: at most `per_minute` in any 60 s.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    per_minute: u32,
    spent: VecDeque<f64>,
}

impl Budget {
    pub fn new(per_minute: u32) -> Budget {
        Budget {
            per_minute,
            spent: VecDeque::new(),
        }
    }

    /// Writes still allowed at `now`.
    pub fn left(&mut self, now: f64) -> usize {
        while self.spent.front().is_some_and(|&t| now - t >= 60.0) {
            self.spent.pop_front();
        }
        (self.per_minute as usize).saturating_sub(self.spent.len())
    }

    fn spend(&mut self, now: f64) {
        self.spent.push_back(now);
    }
}

/// Whether the HPA would propose fewer than `ready` replicas for these metric values, each with
/// its per-replica target (`ceil(value / target)`, the largest over the metrics). A value not
/// known is never near: nothing is written on a guess.
pub fn scale_down_near(values: &[(Option<f64>, f64)], ready: u32) -> bool {
    if ready <= 1 || values.is_empty() {
        return false;
    }
    values.iter().all(|&(value, target)| match value {
        Some(v) if v.is_finite() && target > 0.0 => (v / target).ceil() < f64::from(ready),
        _ => false,
    })
}

/// Each metric's latest value beside its per-replica target: `value` is the first metric's,
/// the further metrics' (`metric: queue,kv`) are those the evaluation kept in `state`.
pub fn metric_values(
    policy: &Policy,
    value: Option<f64>,
    state: &ScalerState,
) -> Vec<(Option<f64>, f64)> {
    policy
        .metrics()
        .into_iter()
        .enumerate()
        .map(|(i, (_, target))| match i {
            0 => (value, target),
            _ => (state.others.get(i - 1).and_then(|o| o.value), target),
        })
        .collect()
}

/// What one scrape round says: each replica read, with its in-flight requests (running +
/// waiting, as read) and the cost it carries, and whether a scale-down is near (judged on the
/// Ready count: those read, asleep or not, and those not read; the value keeps the sleeping
/// ones). `carried(pod)` is `None` for a pod that may not be written (nothing vouches for it),
/// else the cost it carries. A replica not read keeps its cost: its load is not known.
pub fn round(
    fleet: &Fleet,
    values: &[(Option<f64>, f64)],
    carried: impl Fn(&str) -> Option<Option<i32>>,
) -> (Vec<PodCost>, bool) {
    let ready = (fleet.replicas.len() + fleet.asleep.len()) as u32 + fleet.unread();
    let pods = fleet
        .replicas
        .iter()
        .chain(&fleet.asleep)
        .filter_map(|r| {
            let in_flight = r.running().unwrap_or(0.0) + r.waiting();
            Some(PodCost {
                carried: carried(&r.name)?,
                pod: r.name.clone(),
                in_flight: in_flight.round().clamp(0.0, f64::from(u32::MAX)) as u32,
            })
        })
        .collect();
    (pods, scale_down_near(values, ready))
}

/// Whether a pod carrying `carried` should be rewritten to `now`: any change while either is
/// small (one stream is the difference between idle and busy), else a change of a quarter.
pub fn meaningful(carried: i32, now: i32) -> bool {
    let change = i64::from(now).abs_diff(i64::from(carried));
    let scale = i64::from(now.max(carried)).max(0) as u64;
    change >= 1.max(scale / 4)
}

/// The writes to make now, `(pod, cost)`, largest moves first, within the budget; each one
/// planned is counted against the budget. Nothing unless `near`.
pub fn plan(pods: &[PodCost], near: bool, budget: &mut Budget, now: f64) -> Vec<(String, i32)> {
    if !near {
        return Vec::new();
    }
    let mut moves: Vec<(u64, &PodCost, i32)> = pods
        .iter()
        .filter_map(|p| {
            let cost = i32::try_from(p.in_flight).unwrap_or(i32::MAX);
            let carried = p.carried.unwrap_or(0);
            let change = i64::from(cost).abs_diff(i64::from(carried));
            meaningful(carried, cost).then_some((change, p, cost))
        })
        .collect();
    moves.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.pod.cmp(&b.1.pod)));
    let allowed = budget.left(now);
    moves
        .into_iter()
        .take(allowed)
        .map(|(_, p, cost)| {
            budget.spend(now);
            (p.pod.clone(), cost)
        })
        .collect()
}

/// The annotation's value as the ReplicaSet reads it: an int32, else absent.
pub fn parse(value: &str) -> Option<i32> {
    value.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, in_flight: u32, carried: Option<i32>) -> PodCost {
        PodCost {
            pod: name.to_owned(),
            in_flight,
            carried,
        }
    }

    #[test]
    fn near_means_every_metric_proposes_fewer_than_ready() {
        assert!(scale_down_near(&[(Some(40.0), 24.0)], 3));
        assert!(!scale_down_near(&[(Some(50.0), 24.0)], 3));
        assert!(!scale_down_near(&[(None, 24.0)], 3));
        assert!(
            !scale_down_near(&[(Some(0.0), 24.0)], 1),
            "one pod: nothing to choose"
        );
        // Two metrics: the larger proposal decides.
        assert!(!scale_down_near(&[(Some(10.0), 24.0), (Some(2.9), 1.0)], 3));
        assert!(scale_down_near(&[(Some(10.0), 24.0), (Some(1.5), 1.0)], 3));
    }

    #[test]
    fn small_moves_on_busy_pods_are_not_worth_a_write() {
        assert!(meaningful(0, 1));
        assert!(meaningful(3, 4));
        assert!(!meaningful(40, 45));
        assert!(meaningful(40, 55));
        assert!(!meaningful(40, 50));
        assert!(!meaningful(7, 7));
    }

    #[test]
    fn writes_wait_for_a_scale_down_and_keep_to_the_budget() {
        let pods = [
            pod("a", 40, None),
            pod("b", 2, None),
            pod("c", 0, None),
            pod("d", 9, None),
        ];
        let mut budget = Budget::new(2);
        assert!(plan(&pods, false, &mut budget, 0.0).is_empty());
        let first = plan(&pods, true, &mut budget, 0.0);
        assert_eq!(first, [("a".to_owned(), 40), ("d".to_owned(), 9)]);
        assert!(plan(&pods, true, &mut budget, 30.0).is_empty(), "spent");
        let later = plan(&pods, true, &mut budget, 60.0);
        assert_eq!(later, [("a".to_owned(), 40), ("d".to_owned(), 9)]);
        // An idle pod without the annotation already reads as 0: nothing to write.
        let settled = [pod("a", 40, Some(40)), pod("c", 0, None)];
        assert!(plan(&settled, true, &mut Budget::new(5), 0.0).is_empty());
    }

    #[test]
    fn a_bad_annotation_reads_as_none() {
        assert_eq!(parse(" 12 "), Some(12));
        assert_eq!(parse("-3"), Some(-3));
        assert_eq!(parse("lots"), None);
        assert_eq!(parse("99999999999"), None);
    }
}
