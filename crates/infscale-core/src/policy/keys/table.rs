//! The policy key table itself: one [`Key`] entry per key, each with its own reader and
//! writer. Adding a key is adding an entry here (the tests of [`super`] walk every entry).

use super::values::{
    boolean, default_rules, flag, num, number, period, rate, rules, rules_mut, select, select_name,
    set_rate, uses_work, whole, word,
};
use super::{Direction, Home, Key, Kind, PER_SECOND, SECONDS};
use crate::policy::behavior::{Behavior, Controller, RateKind};
use crate::policy::DEFAULT_WRITES_PER_MINUTE;
use crate::policy::{
    Forecast, HoldRule, Metric, DEFAULT_DECODE_RATE, DEFAULT_PREFILL_RATE, DEFAULT_TREND_S,
};

/// The longest window, period or lookahead, seconds (the HPA's bound on windows).
const HOUR: u32 = 3600;

const SELECT: &[&str] = &["Max", "Min", "Disabled"];

const fn within(min: f64, max: f64) -> Kind {
    Kind::Number { min, max }
}

const fn whole_within(min: u32, max: u32) -> Kind {
    Kind::Whole { min, max }
}

/// Every key, in the order help texts list them.
pub const KEYS: &[Key] = &[
    Key {
        name: "metric",
        home: Home::Trigger("metric"),
        flag: "metric",
        unit: "NAME",
        kind: Kind::Word(&[
            "queue",
            "waiting",
            "running",
            "kv",
            "cpu",
            "occupancy",
            "ttft",
            "work",
        ]),
        default: "queue",
        doc: "what to scale on: queue, waiting, running, kv, cpu, occupancy, ttft or work; a list (queue,kv) scales on each, the HPA taking the largest count",
        parse: |_, p, v| {
            let mut list = v.split(['+', ',']);
            let first: Metric = list.next().unwrap_or_default().parse()?;
            let rest = list.map(str::parse).collect::<Result<Vec<Metric>, _>>()?;
            let old = std::mem::take(&mut p.also);
            p.metric = first;
            p.also = rest
                .into_iter()
                .enumerate()
                .map(|(i, m)| (m, old.get(i).map_or(f64::NAN, |o| o.1)))
                .collect();
            Ok(())
        },
        render: |p| Some(p.metric_list(",")),
    },
    Key {
        name: "target",
        home: Home::Trigger("threshold"),
        flag: "target",
        unit: "VALUE",
        kind: within(crate::limits::THRESHOLD.0, crate::limits::THRESHOLD.1),
        default: "",
        doc: "per-replica target in the metric's unit (requests, 0..1, percent, replicas, seconds); with a metric list, one per metric in its order (48,0.8)",
        parse: |k, p, v| {
            let list = v.split(',').map(|t| number(k, t));
            let targets = list.collect::<Result<Vec<f64>, _>>()?;
            for (i, t) in targets.into_iter().enumerate() {
                match i.checked_sub(1) {
                    None => p.target = t,
                    Some(i) => match p.also.get_mut(i) {
                        Some(slot) => slot.1 = t,
                        // More targets than metrics so far: the metric list may come later.
                        None => p.also.push((p.metric, t)),
                    },
                }
            }
            Ok(())
        },
        render: |p| {
            let targets: Vec<String> = p.metrics().iter().map(|m| num(m.1)).collect();
            Some(targets.join(","))
        },
    },
    Key {
        name: "min",
        home: Home::Spec("minReplicaCount"),
        flag: "min",
        unit: "REPLICAS",
        kind: whole_within(0, 10_000),
        default: "1",
        doc: "fewest replicas; 0 allows scale to zero (KEDA's step) for queue, waiting, occupancy, ttft",
        parse: |k, p, v| whole(k, v).map(|x| p.min = x),
        render: |p| Some(p.min.to_string()),
    },
    Key {
        name: "max",
        home: Home::Spec("maxReplicaCount"),
        flag: "max",
        unit: "REPLICAS",
        kind: whole_within(1, 10_000),
        default: "10",
        doc: "most replicas",
        parse: |k, p, v| whole(k, v).map(|x| p.max = x),
        render: |p| Some(p.max.to_string()),
    },
    Key {
        name: "activation",
        home: Home::Trigger("activationThreshold"),
        flag: "activation",
        unit: "REQUESTS",
        kind: within(0.0, 1e9),
        default: "0",
        doc: "active while requests running, waiting or held exceed it",
        parse: |k, p, v| number(k, v).map(|x| p.activation = x),
        render: |p| Some(num(p.activation)),
    },
    Key {
        name: "cooldown",
        home: Home::Spec("cooldownPeriod"),
        flag: "cooldown",
        unit: SECONDS,
        kind: within(0.0, crate::limits::MAX_SECONDS),
        default: "300",
        doc: "KEDA's cooldownPeriod: idle seconds before the last replica goes (min 0 only)",
        parse: |k, p, v| number(k, v).map(|x| p.cooldown_s = x),
        render: |p| Some(num(p.cooldown_s)),
    },
    Key {
        name: "lookahead",
        home: Home::Trigger("lookaheadSeconds"),
        flag: "lookahead",
        unit: SECONDS,
        kind: within(0.0, HOUR as f64),
        default: "0",
        doc: "how far ahead demand is projected along its trend (the cold start); `auto`: the cold start `serve` learns from the pods, `coldStartSeconds` (else 0) until one is seen",
        parse: |k, p, v| {
            if v.trim().eq_ignore_ascii_case("auto") {
                p.lookahead_auto = true;
            } else {
                p.lookahead_s = number(k, v)?;
                p.lookahead_auto = false;
            }
            Ok(())
        },
        render: |p| match p.lookahead_auto {
            true => Some("auto".to_owned()),
            false => (p.lookahead_s > 0.0).then(|| num(p.lookahead_s)),
        },
    },
    Key {
        name: "trend",
        home: Home::Trigger("trendSeconds"),
        flag: "trend",
        unit: SECONDS,
        kind: within(1.0, HOUR as f64),
        default: "30",
        doc: "how much history the trend is fitted over",
        parse: |k, p, v| number(k, v).map(|x| p.trend_window_s = x),
        render: |p| {
            let written = p.looks_ahead() || p.trend_window_s != DEFAULT_TREND_S;
            written.then(|| num(p.trend_window_s))
        },
    },
    Key {
        name: "forecast",
        home: Home::Trigger("forecast"),
        flag: "forecast",
        unit: "HOW",
        kind: Kind::Word(&["trend", "history"]),
        default: "trend",
        doc: "how the lookahead projects: the recent trend, or history (a fit over the horizon and the same time on earlier days; its floor from the admitted rate also orders, a start ahead, the step the time of day brought on earlier days)",
        parse: |k, p, v| {
            let history = word(k, v)? == 1;
            p.forecast = if history {
                Forecast::History
            } else {
                Forecast::Trend
            };
            Ok(())
        },
        render: |p| (p.forecast != Forecast::Trend).then(|| p.forecast.name().to_owned()),
    },
    Key {
        name: "slo",
        home: Home::Trigger("sloSeconds"),
        flag: "slo",
        unit: SECONDS,
        kind: within(0.0, HOUR as f64),
        default: "0 (off)",
        doc: "SLO-aware floor: enough replicas that the first-token time the queue implies (waiting over the admission rate) drains within it",
        parse: |k, p, v| number(k, v).map(|x| p.slo_s = x),
        render: |p| (p.slo_s > 0.0).then(|| num(p.slo_s)),
    },
    Key {
        name: "guard",
        home: Home::Trigger("scaleDownGuard"),
        flag: "guard",
        unit: "BOOL",
        kind: Kind::Flag,
        default: "false",
        doc: "no step down while the request rate per replica it would leave exceeds the highest rate a replica was seen carrying within the target",
        parse: |k, p, v| boolean(k, v).map(|x| p.guard = x),
        render: |p| flag(p.guard),
    },
    Key {
        name: "prefillrate",
        home: Home::Trigger("prefillTokensPerSecond"),
        flag: "prefill-rate",
        unit: PER_SECOND,
        kind: within(1.0, 1e9),
        default: "24750",
        doc: "prompt tokens one replica prefills per second, for the work metric (`infscale gpu` prints it for a model and card; 24750 is an 8B model on one H100 at 40% MFU)",
        parse: |k, p, v| number(k, v).map(|x| p.prefill_rate = x),
        render: |p| {
            let written = uses_work(p) && p.prefill_rate != DEFAULT_PREFILL_RATE;
            written.then(|| num(p.prefill_rate))
        },
    },
    Key {
        name: "decoderate",
        home: Home::Trigger("decodeTokensPerSecond"),
        flag: "decode-rate",
        unit: PER_SECOND,
        kind: within(1.0, 1e9),
        default: "12114",
        doc: "output tokens one replica decodes per second at a full batch, for the work metric (`infscale gpu` prints it; 12114 is an 8B model on one H100 at a batch of 256)",
        parse: |k, p, v| number(k, v).map(|x| p.decode_rate = x),
        render: |p| {
            let written = uses_work(p) && p.decode_rate != DEFAULT_DECODE_RATE;
            written.then(|| num(p.decode_rate))
        },
    },
    Key {
        name: "hold",
        home: Home::Trigger("hold"),
        flag: "hold",
        unit: "HOW",
        kind: Kind::Word(&["off", "auto", "idle"]),
        default: "off",
        doc: "auto: after the replicas needed fall, hold each count for as long as the longest gap the traffic came back from within the last hour (x1.25, at least the lookahead, at most 30 min); at one replica it keeps IsActive true, so bursts minutes apart keep a replica and a long silence goes to zero. idle: only that last part, the step to zero: an idle target stays active through the lulls it came back from, and above one replica the policy scales as without",
        parse: |k, p, v| word(k, v).map(|i| p.hold = [HoldRule::Off, HoldRule::Auto, HoldRule::Idle][i]),
        render: |p| match p.hold {
            HoldRule::Off => None,
            HoldRule::Auto => Some("auto".to_owned()),
            HoldRule::Idle => Some("idle".to_owned()),
        },
    },
    Key {
        name: "reserve",
        home: Home::Trigger("reserve"),
        flag: "reserve",
        unit: "HOW",
        kind: Kind::Word(&["off", "auto"]),
        default: "off",
        doc: "auto: keep standing the replicas bursts need that a start cannot follow: for 30 minutes after the last burst (a need above what was Ready: what the policy alone would have had, ordered a start earlier, and no more than were; or a rise that repeats within 10 minutes), the highest need of the last 30 minutes; and, a start ahead, what the same minutes needed both the day before and a week before (two days before until a week is known). Smooth traffic keeps none beyond its own need, and what is held falls when the traffic falls. Once a week is learned, forecast=history's floor orders no more than the highest need of the two weeks; where the fleet ran over 4x that need, nothing is capped and a need is also the requests running and waiting over 1.5x what a saturated replica runs",
        parse: |k, p, v| word(k, v).map(|i| p.reserve = i == 1),
        render: |p| p.reserve.then(|| "auto".to_owned()),
    },
    Key {
        name: "credit",
        home: Home::Trigger("creditStarting"),
        flag: "credit",
        unit: "BOOL",
        kind: Kind::Flag,
        default: "false",
        doc: "count replicas already starting by their expected ready time: demand they will absorb before the horizon does not order more",
        parse: |k, p, v| boolean(k, v).map(|x| p.credit = x),
        render: |p| flag(p.credit),
    },
    Key {
        name: "deletioncost",
        home: Home::Trigger("deletionCost"),
        flag: "deletion-cost",
        unit: "BOOL",
        kind: Kind::Flag,
        default: "false",
        doc: "keep each Ready pod's controller.kubernetes.io/pod-deletion-cost at its in-flight requests while a scale-down is near, so the ReplicaSet removes the least busy pod (needs patch on pods: manifests/scaler/rbac-deletion-cost.yaml)",
        parse: |k, p, v| boolean(k, v).map(|x| p.deletion_cost = x),
        render: |p| flag(p.deletion_cost),
    },
    Key {
        name: "deletioncostwrites",
        home: Home::Trigger("deletionCostWritesPerMinute"),
        flag: "deletion-cost-writes",
        unit: "N",
        kind: whole_within(1, 600),
        default: "60",
        doc: "at most this many deletion-cost annotation writes per target in any minute",
        parse: |k, p, v| whole(k, v).map(|x| p.deletion_cost_writes = x),
        render: |p| {
            let written = p.deletion_cost && p.deletion_cost_writes != DEFAULT_WRITES_PER_MINUTE;
            written.then(|| p.deletion_cost_writes.to_string())
        },
    },
    Key {
        name: "tolerance",
        home: Home::Controller("--horizontal-pod-autoscaler-tolerance"),
        flag: "tolerance",
        unit: "FRACTION",
        kind: within(0.0, 10.0),
        default: "0.1",
        doc: "the HPA controller's tolerance; a ScaledObject carries it as both directions' tolerance (above 0: for none, give uptolerance=0,downtolerance=0)",
        parse: |k, p, v| number(k, v).map(|x| p.controller.tolerance = x),
        render: |p| {
            let written = p.controller.tolerance != Controller::default().tolerance;
            written.then(|| num(p.controller.tolerance))
        },
    },
    Key {
        name: "uptolerance",
        home: Home::Behavior(Direction::Up, "tolerance"),
        flag: "up-tolerance",
        unit: "FRACTION",
        kind: within(0.0, 10.0),
        default: "the controller's",
        doc: "scale-up tolerance (behavior.scaleUp.tolerance, Kubernetes 1.33+)",
        parse: |k, p, v| {
            let t = number(k, v)?;
            rules_mut(p, Direction::Up).tolerance = Some(t);
            Ok(())
        },
        render: |p| rules(p, Direction::Up)?.tolerance.map(num),
    },
    Key {
        name: "downtolerance",
        home: Home::Behavior(Direction::Down, "tolerance"),
        flag: "down-tolerance",
        unit: "FRACTION",
        kind: within(0.0, 10.0),
        default: "the controller's",
        doc: "scale-down tolerance (behavior.scaleDown.tolerance, Kubernetes 1.33+)",
        parse: |k, p, v| {
            let t = number(k, v)?;
            rules_mut(p, Direction::Down).tolerance = Some(t);
            Ok(())
        },
        render: |p| rules(p, Direction::Down)?.tolerance.map(num),
    },
    Key {
        name: "upwindow",
        home: Home::Behavior(Direction::Up, "stabilizationWindowSeconds"),
        flag: "up-window",
        unit: SECONDS,
        kind: whole_within(0, HOUR),
        default: "0",
        doc: "scale-up stabilisation window",
        parse: |k, p, v| {
            let w = whole(k, v)?;
            rules_mut(p, Direction::Up).window_s = Some(w);
            Ok(())
        },
        render: |p| {
            let w = rules(p, Direction::Up)?.window_s;
            w.filter(|w| Some(*w) != default_rules(Direction::Up).window_s)
                .map(|w| w.to_string())
        },
    },
    Key {
        name: "downwindow",
        home: Home::Behavior(Direction::Down, "stabilizationWindowSeconds"),
        flag: "down-window",
        unit: SECONDS,
        kind: whole_within(0, HOUR),
        default: "300",
        doc: "scale-down stabilisation window",
        parse: |k, p, v| {
            let w = whole(k, v)?;
            rules_mut(p, Direction::Down).window_s = Some(w);
            Ok(())
        },
        render: |p| {
            let w = rules(p, Direction::Down)?.window_s;
            w.filter(|w| Some(*w) != default_rules(Direction::Down).window_s)
                .map(|w| w.to_string())
        },
    },
    Key {
        name: "uppods",
        home: Home::Behavior(Direction::Up, "Pods"),
        flag: "up-pods",
        unit: "PODS",
        kind: whole_within(1, 10_000),
        default: "4 pods or 100% per 15 s",
        doc: "scale-up policy: at most this many pods per period (any given replaces the default pair)",
        parse: |k, p, v| set_rate(k, p, v, Direction::Up, RateKind::Pods),
        render: |p| rate(p, Direction::Up, RateKind::Pods),
    },
    Key {
        name: "uppercent",
        home: Home::Behavior(Direction::Up, "Percent"),
        flag: "up-percent",
        unit: "PERCENT",
        kind: whole_within(1, 100_000),
        default: "4 pods or 100% per 15 s",
        doc: "scale-up policy: at most this percent per period (any given replaces the default pair)",
        parse: |k, p, v| set_rate(k, p, v, Direction::Up, RateKind::Percent),
        render: |p| rate(p, Direction::Up, RateKind::Percent),
    },
    Key {
        name: "upperiod",
        home: Home::Behavior(Direction::Up, "periodSeconds"),
        flag: "up-period",
        unit: SECONDS,
        kind: whole_within(1, 1800),
        default: "15",
        doc: "the period of the scale-up policies",
        parse: |k, p, v| {
            let period = whole(k, v)?;
            let rules = rules_mut(p, Direction::Up);
            rules.policies.iter_mut().for_each(|r| r.period_s = period);
            Ok(())
        },
        render: |p| period(p, Direction::Up),
    },
    Key {
        name: "upselect",
        home: Home::Behavior(Direction::Up, "selectPolicy"),
        flag: "up-select",
        unit: "WHICH",
        kind: Kind::Word(SELECT),
        default: "Max",
        doc: "which scale-up policy wins: Max, Min or Disabled",
        parse: |k, p, v| {
            let s = select(k, v)?;
            rules_mut(p, Direction::Up).select = s;
            Ok(())
        },
        render: |p| {
            let s = rules(p, Direction::Up)?.select;
            (s != default_rules(Direction::Up).select).then(|| select_name(s).to_owned())
        },
    },
    Key {
        name: "downpods",
        home: Home::Behavior(Direction::Down, "Pods"),
        flag: "down-pods",
        unit: "PODS",
        kind: whole_within(1, 10_000),
        default: "100% per 15 s",
        doc: "scale-down policy: at most this many pods per period (any given replaces the default)",
        parse: |k, p, v| set_rate(k, p, v, Direction::Down, RateKind::Pods),
        render: |p| rate(p, Direction::Down, RateKind::Pods),
    },
    Key {
        name: "downpercent",
        home: Home::Behavior(Direction::Down, "Percent"),
        flag: "down-percent",
        unit: "PERCENT",
        kind: whole_within(1, 100),
        default: "100% per 15 s",
        doc: "scale-down policy: at most this percent per period (any given replaces the default)",
        parse: |k, p, v| set_rate(k, p, v, Direction::Down, RateKind::Percent),
        render: |p| rate(p, Direction::Down, RateKind::Percent),
    },
    Key {
        name: "downperiod",
        home: Home::Behavior(Direction::Down, "periodSeconds"),
        flag: "down-period",
        unit: SECONDS,
        kind: whole_within(1, 1800),
        default: "15",
        doc: "the period of the scale-down policies",
        parse: |k, p, v| {
            let period = whole(k, v)?;
            let rules = rules_mut(p, Direction::Down);
            rules.policies.iter_mut().for_each(|r| r.period_s = period);
            Ok(())
        },
        render: |p| period(p, Direction::Down),
    },
    Key {
        name: "downselect",
        home: Home::Behavior(Direction::Down, "selectPolicy"),
        flag: "down-select",
        unit: "WHICH",
        kind: Kind::Word(SELECT),
        default: "Max",
        doc: "which scale-down policy wins: Max, Min or Disabled",
        parse: |k, p, v| {
            let s = select(k, v)?;
            rules_mut(p, Direction::Down).select = s;
            Ok(())
        },
        render: |p| {
            let s = rules(p, Direction::Down)?.select;
            (s != default_rules(Direction::Down).select).then(|| select_name(s).to_owned())
        },
    },
    Key {
        name: "legacy",
        home: Home::BehaviorBlock,
        flag: "legacy",
        unit: "",
        kind: Kind::Flag,
        default: "false",
        doc: "an HPA without behavior: the 2x or 4-pod scale-up cap and one down window",
        parse: |k, p, v| {
            if boolean(k, v)? {
                p.behavior = None;
            } else if p.behavior.is_none() {
                p.behavior = Some(Behavior::default());
            }
            Ok(())
        },
        render: |p| flag(p.behavior.is_none()),
    },
];
