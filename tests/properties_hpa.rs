//! Properties of the HPA's reconcile (`control/hpa`) over random sequences of proposals and
//! times: the stabilisation windows and the scale rate limits hold, and the count stays within
//! [min, max], whatever the order and spacing of the proposals. A rate limit counts from the
//! count its period started at, as Kubernetes does: 2 -> 3 at 98 s then 3 -> 1 at 99 s is one
//! pod down from the 2 of 60 s earlier, within `downpods=1`.

use infscale_core::control::hpa::{self, reconcile, Spec};
use infscale_core::policy::Policy;
use proptest::prelude::*;

/// Behaviours with a window each way and a Pods rate limit each way, one policy per direction.
fn behaviour() -> impl Strategy<Value = (String, u32, u32, u32, u32, u32, u32)> {
    (
        1u32..6,
        1u32..20,
        0u32..4,
        0u32..120,
        0u32..120,
        1u32..4,
        1u32..4,
    )
        .prop_map(|(min, extra, _, up_w, down_w, up_pods, down_pods)| {
            let max = min + extra;
            let spec = format!(
                "queue:10,min={min},max={max},upwindow={up_w},downwindow={down_w},\
                 uppods={up_pods},upperiod=60,downpods={down_pods},downperiod=60"
            );
            (spec, min, max, up_w, down_w, up_pods, down_pods)
        })
}

/// Steps: seconds since the previous reconcile, and the proposal (`None`: no metric read).
fn steps() -> impl Strategy<Value = Vec<(u32, Option<u32>)>> {
    prop::collection::vec((1u32..45, prop::option::weighted(0.9, 0u32..40)), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn windows_and_rate_limits_hold_over_any_sequence(
        (spec, min, max, up_w, down_w, up_pods, down_pods) in behaviour(),
        start_extra in 0u32..20,
        steps in steps(),
    ) {
        let policy = Policy::parse(&spec).expect("generated policy parses");
        let hpa_spec = Spec {
            min: policy.hpa_min(),
            max: policy.max,
            behavior: policy.behavior.clone(),
        };
        let mut state = hpa::State::default();
        let mut current = min + start_extra.min(max - min);
        let mut now = 0.0;
        // (time, proposal) seen so far, and (time, count after) of every change.
        let mut seen: Vec<(f64, u32)> = Vec::new();
        let mut changes: Vec<(f64, u32, u32)> = Vec::new();
        for (dt, proposal) in steps {
            now += f64::from(dt);
            let r = reconcile(&policy.controller, &hpa_spec, &mut state, current, proposal, now);
            let d = r.desired;
            prop_assert!(d >= min && d <= max, "{spec}: {current} -> {d} at {now}");
            match proposal {
                None => prop_assert_eq!(d, current, "no metric: keep"),
                Some(p) => {
                    seen.push((now, p));
                    let within = |w: u32| {
                        seen.iter().filter(move |(at, _)| now - at < f64::from(w)).map(|s| s.1)
                    };
                    if d < current {
                        // Scale-down window: never below the highest proposal in the window.
                        let highest = within(down_w).max().unwrap_or(p).min(max);
                        prop_assert!(d >= highest.max(min).min(current),
                            "{spec}: down to {d} below {highest} in {down_w} s");
                    }
                    if d > current {
                        // Scale-up window: never above the lowest proposal in the window.
                        let lowest = within(up_w).min().unwrap_or(p);
                        prop_assert!(d <= lowest.max(min),
                            "{spec}: up to {d} above {lowest} in {up_w} s");
                    }
                }
            }
            if d == current {
                current = d;
                continue;
            }
            changes.push((now, current, d));
            // Rate limits: a change takes at most the Pods allowed each way from the count the
            // last 60 s started at (Kubernetes' `periodStartReplicas`).
            let base = changes
                .iter()
                .find(|(at, _, _)| now - at < 60.0)
                .map_or(d, |c| c.1);
            if d > current {
                prop_assert!(d <= base + up_pods, "{spec}: {base} -> {d} in 60 s: {changes:?}");
            } else {
                prop_assert!(d + down_pods >= base, "{spec}: {base} -> {d} in 60 s: {changes:?}");
            }
            current = d;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// An HPA without `behavior`: up at most to max(2 x current, 4) per reconcile, and never
    /// below the highest proposal of the controller's 300 s window on the way down.
    #[test]
    fn the_legacy_path_caps_scale_up_and_holds_the_window(
        min in 1u32..4,
        extra in 1u32..40,
        start_extra in 0u32..20,
        steps in steps(),
    ) {
        let max = min + extra;
        let spec = format!("queue:10,min={min},max={max},legacy=true");
        let policy = Policy::parse(&spec).expect("generated policy parses");
        prop_assert!(policy.behavior.is_none(), "{spec} has a behavior");
        let hpa_spec = Spec { min: policy.hpa_min(), max: policy.max, behavior: None };
        let mut state = hpa::State::default();
        let mut current = min + start_extra.min(max - min);
        let mut now = 0.0;
        let mut seen: Vec<(f64, u32)> = Vec::new();
        for (dt, proposal) in steps {
            now += f64::from(dt);
            let r = reconcile(&policy.controller, &hpa_spec, &mut state, current, proposal, now);
            let d = r.desired;
            prop_assert!(d >= min && d <= max, "{spec}: {current} -> {d}");
            if let Some(p) = proposal {
                seen.push((now, p));
            }
            if d > current {
                prop_assert!(d <= (2 * current).max(4), "{spec}: {current} -> {d} in one step");
            }
            if d < current {
                let highest = seen
                    .iter()
                    .filter(|(at, _)| now - at < 300.0)
                    .map(|s| s.1)
                    .max()
                    .unwrap_or(d);
                prop_assert!(d >= highest.clamp(min, max).min(current),
                    "{spec}: down to {d} below {highest} within 300 s");
            }
            current = d;
        }
    }
}
