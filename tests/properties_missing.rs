//! Properties of the missing-pod adjustment (`control::missing`, the HPA's rule for pods that gave
//! no metric) over extreme values: a replica read beside one that could not be read, with gauges
//! up to `f64::MAX` and every threshold a trigger accepts. The value the scaler would answer is
//! finite and never 0.0 (an unread pod beside a loaded one is never a reason to scale to
//! nothing), and on the way up it never asks the HPA for fewer replicas than the target has.
//! Issue 25 found the adjustment overflowing there: `count x target` in milli-units passed
//! `i64::MAX`, wrapped negative and was answered as 0.0 (a debug build panicked).

use infscale_core::control::hpa::replicas::ceil_replicas;
use infscale_core::control::missing::demand;
use infscale_core::limits::{metric_value, MAX_METRIC_VALUE, THRESHOLD};
use infscale_core::observe::metrics::{Counters, Replica, Server, Signals};
use infscale_core::policy::{Metric, Policy};
use infscale_core::project::demand::Observation;
use proptest::prelude::*;

fn replica(i: usize, running: f64) -> Replica {
    Replica::new(
        format!("pod-{i}"),
        Signals {
            server: Server::Vllm,
            running: Some(running),
            waiting: 0.0,
            kv: None,
            asleep: None,
            counters: Counters::default(),
        },
        None,
    )
}

/// A gauge from ordinary to absurd: small counts, powers of ten up to 1e300, and the edges of
/// what an f64 and KEDA's int64 milli-units hold.
fn gauge() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0..100.0f64,
        (0i32..=300).prop_map(|e| 10f64.powi(e)),
        Just(f64::MAX),
        Just(MAX_METRIC_VALUE),
        Just(i64::MAX as f64),
        Just(u64::MAX as f64),
    ]
}

/// A threshold anywhere in the range a trigger accepts, its ends included.
fn threshold() -> impl Strategy<Value = f64> {
    prop_oneof![
        THRESHOLD.0..THRESHOLD.1,
        Just(THRESHOLD.0),
        Just(THRESHOLD.1),
        Just(1.0),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn an_unread_pod_beside_extreme_values_never_answers_zero(
        loads in prop::collection::vec(gauge(), 1..6),
        missing in 1u32..6,
        extra in 0u32..1000,
        target in threshold(),
    ) {
        let pods: Vec<Replica> = loads.iter().enumerate().map(|(i, l)| replica(i, *l)).collect();
        let status = pods.len() as u32 + missing + extra;
        let obs = Observation {
            now: 0.0,
            current: status,
            status: Some(status),
            replicas: &pods,
            missing,
            held: Some(0.0),
            scraped_at: Some(0.0),
            asleep: &[],
            starting_since: &[],
        };
        let policy = Policy::new(Metric::Queue, target);
        let demand = demand(&policy, &obs);
        let sum: f64 = loads.iter().sum();
        if !sum.is_finite() {
            // The replicas' own sum is past what a double holds: no claim on the value but
            // that it is not a number the scaler would hand KEDA unchecked.
            return Ok(());
        }
        let value = demand.value.expect("a replica was read: there is a value");
        prop_assert!(value.is_finite() && value >= 0.0, "{value} from {:?}", demand.lines);
        let answered = metric_value(value);
        prop_assert!(answered > 0.0, "answered {answered} from {:?}", demand.lines);
        // On the way up (the replicas read ask for more than the target has), the HPA is never
        // asked for fewer replicas than it has, as far as KEDA's largest value can say.
        let alone = ceil_replicas(sum / target);
        let asked = ceil_replicas(answered / target);
        let sayable = ceil_replicas((MAX_METRIC_VALUE / target).floor());
        if alone > status {
            prop_assert!(
                asked >= status.min(sayable),
                "asked {asked} of {status} (alone {alone}): {:?}", demand.lines
            );
        }
    }
}
