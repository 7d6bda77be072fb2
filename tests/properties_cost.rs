//! Properties of the deletion-cost planner (`control::deletion_cost`) over random rounds of pod
//! loads, scale-down signals and times: no 60 s window ever holds more writes than the budget;
//! nothing is written unless a scale-down is near; a write names a pod of the round, at its
//! in-flight requests, and only where that differs from what the pod carries; and once the
//! writes settle, from any stale costs, a pod with twice another's load carries the higher
//! cost.

use infscale_core::control::deletion_cost::{plan, Budget, PodCost};
use proptest::prelude::*;
use std::collections::HashMap;

/// One round: the pods' loads (by pod index), whether a scale-down is near, and the seconds
/// since the previous round.
fn rounds() -> impl Strategy<Value = Vec<(Vec<u32>, bool, f64)>> {
    prop::collection::vec(
        (
            prop::collection::vec(0u32..200, 1..8),
            any::<bool>(),
            0.0f64..20.0,
        ),
        1..60,
    )
}

/// Pods `p0`, `p1`, ... with these loads, each carrying what was written to it.
fn pods_at(loads: &[u32], carried: &HashMap<String, i32>) -> Vec<PodCost> {
    loads
        .iter()
        .enumerate()
        .map(|(i, &l)| PodCost {
            pod: format!("p{i}"),
            in_flight: l,
            carried: carried.get(&format!("p{i}")).copied(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn writes_keep_to_the_budget_and_the_loads(per_minute in 1u32..20, rounds in rounds()) {
        let mut budget = Budget::new(per_minute);
        let mut carried: HashMap<String, i32> = HashMap::new();
        let mut written_at: Vec<f64> = Vec::new();
        let mut now = 0.0;
        for (loads, near, gap) in rounds {
            now += gap;
            let pods = pods_at(&loads, &carried);
            let writes = plan(&pods, near, &mut budget, now);
            if !near {
                prop_assert!(writes.is_empty());
            }
            for (pod, cost) in &writes {
                let p = pods.iter().find(|p| &p.pod == pod);
                prop_assert!(p.is_some(), "{pod} is not a pod of the round");
                let p = p.unwrap();
                prop_assert_eq!(i64::from(*cost), i64::from(p.in_flight));
                prop_assert_ne!(p.carried.unwrap_or(0), *cost, "rewrote what {} carries", pod);
                carried.insert(pod.clone(), *cost);
                written_at.push(now);
            }
            let in_window = written_at.iter().filter(|&&t| now - t < 60.0).count();
            prop_assert!(in_window <= per_minute as usize, "{in_window} writes within 60 s");
        }
    }

    #[test]
    fn settled_costs_order_pods_whose_loads_differ_well(
        pods in prop::collection::vec((0u32..1000, prop::option::of(0i32..1000)), 2..10),
    ) {
        // Each pod starts with a stale cost (or none); rounds of the same loads run until
        // nothing more is written. A cost within a quarter of the load is left as it is, so
        // two pods close in load may keep either order, but a pod with twice the load (and 2
        // more) always carries the higher cost.
        let loads: Vec<u32> = pods.iter().map(|p| p.0).collect();
        let mut carried: HashMap<String, i32> = pods
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((format!("p{i}"), p.1?)))
            .collect();
        let mut budget = Budget::new(600);
        for round in 0..10 {
            let now = pods_at(&loads, &carried);
            let writes = plan(&now, true, &mut budget, f64::from(round));
            if writes.is_empty() {
                break;
            }
            carried.extend(writes);
        }
        let cost = |i: usize| carried.get(&format!("p{i}")).copied().unwrap_or(0);
        for a in 0..loads.len() {
            for b in 0..loads.len() {
                if loads[b] >= 2 * loads[a] + 2 {
                    prop_assert!(cost(a) < cost(b), "loads {:?}, costs {:?}", loads, carried);
                }
            }
        }
    }
}
