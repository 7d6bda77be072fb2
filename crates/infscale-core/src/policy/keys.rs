//! Every policy key once: its name in a policy string, where a ScaledObject carries it, its
//! command-line flag, unit, bounds and meaning.
//!
//! A policy reaches infscale three ways (a string such as `queue:24,lookahead=90`, the flags of
//! `decide` and `kube`, a ScaledObject) and leaves it one way (the YAML `tune` prints). All of
//! them read this table: [`crate::scaling::Policy::set`] checks a value against its bounds, the trigger
//! metadata parser maps metadata names to keys, the flags are built from it, and the ScaledObject
//! writer and reader put each key where KEDA or its HPA reads it. docs/reference.md's key table
//! is rendered from it ([`markdown_table`]; `tests/reference_pages.rs`).

/// A direction of the HPA's `behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

impl Direction {
    /// The `behavior` field of this direction.
    pub fn field(self) -> &'static str {
        match self {
            Direction::Up => "scaleUp",
            Direction::Down => "scaleDown",
        }
    }
}

/// Where a deployed ScaledObject carries a key, and so who reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// A key of the trigger's `metadata`: read by `infscale serve`.
    Trigger(&'static str),
    /// A field of the ScaledObject's `spec`: read by KEDA.
    Spec(&'static str),
    /// A field of `spec.advanced.horizontalPodAutoscalerConfig.behavior.<direction>`: read by
    /// the HPA. For rate policies, the `value` of the policy of that `type`.
    Behavior(Direction, &'static str),
    /// Whether `behavior` is there at all (`legacy`: an HPA without one).
    BehaviorBlock,
    /// A kube-controller-manager flag, the same for every HPA of the cluster. A ScaledObject
    /// can only set it per direction (`behavior.<direction>.tolerance`).
    Controller(&'static str),
}

/// What a value must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A number within `[min, max]`.
    Number { min: f64, max: f64 },
    /// A whole number within `[min, max]`.
    Whole { min: u32, max: u32 },
    /// One of these words (case-insensitive).
    Word(&'static [&'static str]),
    /// true or false.
    Flag,
}

/// One policy key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Key {
    /// The name in a policy string (`lookahead` in `queue:24,lookahead=90`).
    pub name: &'static str,
    pub home: Home,
    /// The long flag of `decide` and `kube`, without dashes.
    pub flag: &'static str,
    /// The value's unit, as shown in help texts.
    pub unit: &'static str,
    pub kind: Kind,
    /// The default, as written.
    pub default: &'static str,
    pub doc: &'static str,
}

impl Key {
    /// The trigger metadata name, for keys `serve` reads.
    pub fn metadata(&self) -> Option<&'static str> {
        match self.home {
            Home::Trigger(name) => Some(name),
            _ => None,
        }
    }

    /// What the value must be, for error messages.
    pub fn expected(&self) -> String {
        match self.kind {
            Kind::Number { min, max } if self.name == "lookahead" => {
                format!("expected a number from {min} to {max}, or auto")
            }
            Kind::Number { min, max } => format!("expected a number from {min} to {max}"),
            Kind::Whole { min, max } => format!("expected a whole number from {min} to {max}"),
            Kind::Word(words) => format!("expected one of {}", words.join(", ")),
            Kind::Flag => "expected true or false".to_owned(),
        }
    }
}

/// The longest window, period or lookahead, seconds (the HPA's bound on windows).
const HOUR: u32 = 3600;

const SELECT: &[&str] = &["Max", "Min", "Disabled"];

const fn number(min: f64, max: f64) -> Kind {
    Kind::Number { min, max }
}

const fn whole(min: u32, max: u32) -> Kind {
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
    },
    Key {
        name: "target",
        home: Home::Trigger("threshold"),
        flag: "target",
        unit: "VALUE",
        kind: number(crate::limits::THRESHOLD.0, crate::limits::THRESHOLD.1),
        default: "",
        doc: "per-replica target in the metric's unit (requests, 0..1, percent, replicas, seconds); with a metric list, one per metric in its order (48,0.8)",
    },
    Key {
        name: "min",
        home: Home::Spec("minReplicaCount"),
        flag: "min",
        unit: "REPLICAS",
        kind: whole(0, 10_000),
        default: "1",
        doc: "fewest replicas; 0 allows scale to zero (KEDA's step) for queue, waiting, occupancy, ttft",
    },
    Key {
        name: "max",
        home: Home::Spec("maxReplicaCount"),
        flag: "max",
        unit: "REPLICAS",
        kind: whole(1, 10_000),
        default: "10",
        doc: "most replicas",
    },
    Key {
        name: "activation",
        home: Home::Trigger("activationThreshold"),
        flag: "activation",
        unit: "REQUESTS",
        kind: number(0.0, 1e9),
        default: "0",
        doc: "active while requests running, waiting or held exceed it",
    },
    Key {
        name: "cooldown",
        home: Home::Spec("cooldownPeriod"),
        flag: "cooldown",
        unit: "SECONDS",
        kind: number(0.0, crate::limits::MAX_SECONDS),
        default: "300",
        doc: "KEDA's cooldownPeriod: idle seconds before the last replica goes (min 0 only)",
    },
    Key {
        name: "lookahead",
        home: Home::Trigger("lookaheadSeconds"),
        flag: "lookahead",
        unit: "SECONDS",
        kind: number(0.0, HOUR as f64),
        default: "0",
        doc: "how far ahead demand is projected along its trend (the cold start); `auto`: the cold start `serve` learns from the pods, `coldStartSeconds` (else 0) until one is seen",
    },
    Key {
        name: "trend",
        home: Home::Trigger("trendSeconds"),
        flag: "trend",
        unit: "SECONDS",
        kind: number(1.0, HOUR as f64),
        default: "30",
        doc: "how much history the trend is fitted over",
    },
    Key {
        name: "forecast",
        home: Home::Trigger("forecast"),
        flag: "forecast",
        unit: "HOW",
        kind: Kind::Word(&["trend", "history"]),
        default: "trend",
        doc: "how the lookahead projects: the recent trend, or history (a fit over the horizon and the same time on earlier days)",
    },
    Key {
        name: "slo",
        home: Home::Trigger("sloSeconds"),
        flag: "slo",
        unit: "SECONDS",
        kind: number(0.0, HOUR as f64),
        default: "0 (off)",
        doc: "SLO-aware floor: enough replicas that the first-token time the queue implies (waiting over the admission rate) drains within it",
    },
    Key {
        name: "guard",
        home: Home::Trigger("scaleDownGuard"),
        flag: "guard",
        unit: "BOOL",
        kind: Kind::Flag,
        default: "false",
        doc: "no step down while the request rate per replica it would leave exceeds the highest rate a replica was seen carrying within the target",
    },
    Key {
        name: "prefillrate",
        home: Home::Trigger("prefillTokensPerSecond"),
        flag: "prefill-rate",
        unit: "TOKENS/S",
        kind: number(1.0, 1e9),
        default: "24750",
        doc: "prompt tokens one replica prefills per second, for the work metric (`infscale gpu` prints it for a model and card; 24750 is an 8B model on one H100 at 40% MFU)",
    },
    Key {
        name: "decoderate",
        home: Home::Trigger("decodeTokensPerSecond"),
        flag: "decode-rate",
        unit: "TOKENS/S",
        kind: number(1.0, 1e9),
        default: "12114",
        doc: "output tokens one replica decodes per second at a full batch, for the work metric (`infscale gpu` prints it; 12114 is an 8B model on one H100 at a batch of 256)",
    },
    Key {
        name: "hold",
        home: Home::Trigger("hold"),
        flag: "hold",
        unit: "HOW",
        kind: Kind::Word(&["off", "auto"]),
        default: "off",
        doc: "auto: after the replicas needed fall, hold each count for as long as the longest gap the traffic came back from within the last hour (x1.25, at least the lookahead, at most 30 min); at one replica it keeps IsActive true, so bursts minutes apart keep a replica and a long silence goes to zero",
    },
    Key {
        name: "credit",
        home: Home::Trigger("creditStarting"),
        flag: "credit",
        unit: "BOOL",
        kind: Kind::Flag,
        default: "false",
        doc: "count replicas already starting by their expected ready time: demand they will absorb before the horizon does not order more",
    },
    Key {
        name: "deletioncost",
        home: Home::Trigger("deletionCost"),
        flag: "deletion-cost",
        unit: "BOOL",
        kind: Kind::Flag,
        default: "false",
        doc: "keep each Ready pod's controller.kubernetes.io/pod-deletion-cost at its in-flight requests while a scale-down is near, so the ReplicaSet removes the least busy pod (needs patch on pods: manifests/scaler/rbac-deletion-cost.yaml)",
    },
    Key {
        name: "deletioncostwrites",
        home: Home::Trigger("deletionCostWritesPerMinute"),
        flag: "deletion-cost-writes",
        unit: "N",
        kind: whole(1, 600),
        default: "60",
        doc: "at most this many deletion-cost annotation writes per target in any minute",
    },
    Key {
        name: "tolerance",
        home: Home::Controller("--horizontal-pod-autoscaler-tolerance"),
        flag: "tolerance",
        unit: "FRACTION",
        kind: number(0.0, 10.0),
        default: "0.1",
        doc: "the HPA controller's tolerance; a ScaledObject carries it as both directions' tolerance (above 0: for none, give uptolerance=0,downtolerance=0)",
    },
    Key {
        name: "uptolerance",
        home: Home::Behavior(Direction::Up, "tolerance"),
        flag: "up-tolerance",
        unit: "FRACTION",
        kind: number(0.0, 10.0),
        default: "the controller's",
        doc: "scale-up tolerance (behavior.scaleUp.tolerance, Kubernetes 1.33+)",
    },
    Key {
        name: "downtolerance",
        home: Home::Behavior(Direction::Down, "tolerance"),
        flag: "down-tolerance",
        unit: "FRACTION",
        kind: number(0.0, 10.0),
        default: "the controller's",
        doc: "scale-down tolerance (behavior.scaleDown.tolerance, Kubernetes 1.33+)",
    },
    Key {
        name: "upwindow",
        home: Home::Behavior(Direction::Up, "stabilizationWindowSeconds"),
        flag: "up-window",
        unit: "SECONDS",
        kind: whole(0, HOUR),
        default: "0",
        doc: "scale-up stabilisation window",
    },
    Key {
        name: "downwindow",
        home: Home::Behavior(Direction::Down, "stabilizationWindowSeconds"),
        flag: "down-window",
        unit: "SECONDS",
        kind: whole(0, HOUR),
        default: "300",
        doc: "scale-down stabilisation window",
    },
    Key {
        name: "uppods",
        home: Home::Behavior(Direction::Up, "Pods"),
        flag: "up-pods",
        unit: "PODS",
        kind: whole(1, 10_000),
        default: "4 pods or 100% per 15 s",
        doc: "scale-up policy: at most this many pods per period (any given replaces the default pair)",
    },
    Key {
        name: "uppercent",
        home: Home::Behavior(Direction::Up, "Percent"),
        flag: "up-percent",
        unit: "PERCENT",
        kind: whole(1, 100_000),
        default: "4 pods or 100% per 15 s",
        doc: "scale-up policy: at most this percent per period (any given replaces the default pair)",
    },
    Key {
        name: "upperiod",
        home: Home::Behavior(Direction::Up, "periodSeconds"),
        flag: "up-period",
        unit: "SECONDS",
        kind: whole(1, 1800),
        default: "15",
        doc: "the period of the scale-up policies",
    },
    Key {
        name: "upselect",
        home: Home::Behavior(Direction::Up, "selectPolicy"),
        flag: "up-select",
        unit: "WHICH",
        kind: Kind::Word(SELECT),
        default: "Max",
        doc: "which scale-up policy wins: Max, Min or Disabled",
    },
    Key {
        name: "downpods",
        home: Home::Behavior(Direction::Down, "Pods"),
        flag: "down-pods",
        unit: "PODS",
        kind: whole(1, 10_000),
        default: "100% per 15 s",
        doc: "scale-down policy: at most this many pods per period (any given replaces the default)",
    },
    Key {
        name: "downpercent",
        home: Home::Behavior(Direction::Down, "Percent"),
        flag: "down-percent",
        unit: "PERCENT",
        kind: whole(1, 100),
        default: "100% per 15 s",
        doc: "scale-down policy: at most this percent per period (any given replaces the default)",
    },
    Key {
        name: "downperiod",
        home: Home::Behavior(Direction::Down, "periodSeconds"),
        flag: "down-period",
        unit: "SECONDS",
        kind: whole(1, 1800),
        default: "15",
        doc: "the period of the scale-down policies",
    },
    Key {
        name: "downselect",
        home: Home::Behavior(Direction::Down, "selectPolicy"),
        flag: "down-select",
        unit: "WHICH",
        kind: Kind::Word(SELECT),
        default: "Max",
        doc: "which scale-down policy wins: Max, Min or Disabled",
    },
    Key {
        name: "legacy",
        home: Home::BehaviorBlock,
        flag: "legacy",
        unit: "",
        kind: Kind::Flag,
        default: "false",
        doc: "an HPA without behavior: the 2x or 4-pod scale-up cap and one down window",
    },
];

/// The key named `name` in a policy string.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The key `serve` reads from the trigger metadata name `name`.
pub fn by_metadata(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.metadata() == Some(name))
}

impl Home {
    /// Where a ScaledObject carries the key, as docs/reference.md's table says it.
    pub fn describe(&self) -> String {
        match self {
            Home::Trigger(name) => format!("trigger metadata `{name}`"),
            Home::Spec(name) => format!("`spec.{name}`"),
            Home::Behavior(d, "Pods" | "Percent") => format!("`behavior.{}.policies`", d.field()),
            Home::Behavior(d, "periodSeconds") => {
                format!("`behavior.{}.policies[].periodSeconds`", d.field())
            }
            Home::Behavior(d, name) => format!("`behavior.{}.{name}`", d.field()),
            Home::BehaviorBlock => "no `behavior` block".to_owned(),
            Home::Controller(_) => "both directions' `behavior.*.tolerance`".to_owned(),
        }
    }
}

/// The policy key table of docs/reference.md, from this table.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| key | flag | in a ScaledObject | values | default | meaning |\n|---|---|---|---|---|---|\n",
    );
    for k in KEYS {
        let values = match k.kind {
            Kind::Number { min, max } => format!("{min} to {max}"),
            Kind::Whole { min, max } => format!("{min} to {max}, whole"),
            Kind::Word(words) => words.join(", "),
            Kind::Flag => "true, false".to_owned(),
        };
        let default = if k.default.is_empty() {
            "required"
        } else {
            k.default
        };
        out.push_str(&format!(
            "| `{}` | `--{}` | {} | {values} | {default} | {} |\n",
            k.name,
            k.flag,
            k.home.describe(),
            k.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_flags_and_metadata_names_are_unique() {
        for (i, a) in KEYS.iter().enumerate() {
            for b in &KEYS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.flag, b.flag);
                if let (Some(x), Some(y)) = (a.metadata(), b.metadata()) {
                    assert_ne!(x, y);
                }
            }
        }
        assert_eq!(by_metadata("threshold").map(|k| k.name), Some("target"));
        assert_eq!(key("downwindow").map(|k| k.flag), Some("down-window"));
    }
}
