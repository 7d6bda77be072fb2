//! Every policy key once: its name in a policy string, where a ScaledObject carries it, its
//! command-line flag, unit, bounds and meaning, and how it is read into a [`Policy`] and
//! written back out of one.
//!
//! A policy reaches infscale three ways (a string such as `queue:24,lookahead=90`, the flags of
//! `decide` and `kube`, a ScaledObject) and leaves it one way (the YAML `tune` prints). All of
//! them walk this table, in the shape of ripgrep's flags: each [`Key`] carries its own `parse`
//! (a value as written into the policy's field, bounds checked) and `render` (the policy's field
//! as written). [`Policy::set`] looks the key up and calls its `parse`; the ScaledObject writer
//! calls every trigger and spec key's `render`, the reader every key's `parse`, and
//! `deploy_difference` compares the renders; the flags are built from the table, and
//! docs/reference.md's key table is rendered from it ([`markdown_table`];
//! `tests/reference_pages.rs`). A new key is one entry in [`table`]; the tests below walk the
//! whole table, so an entry that does not read back what it writes, or a [`Policy`] field no key
//! sets, fails them.

mod table;
mod values;

pub use table::KEYS;
pub use values::num;

use crate::policy::{Policy, PolicyError};

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

/// One policy key: what it is called and means, and how it is read and written.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The name in a policy string (`lookahead` in `queue:24,lookahead=90`).
    pub name: &'static str,
    pub home: Home,
    /// The long flag of `decide` and `kube`, without dashes.
    pub flag: &'static str,
    /// The value's unit, as shown in help texts ([`SECONDS`] for a duration in seconds).
    pub unit: &'static str,
    pub kind: Kind,
    /// The default, as written.
    pub default: &'static str,
    pub doc: &'static str,
    /// Sets the policy's field from a value as written, checked against the key's bounds; the
    /// error names the key and the value. A bad value leaves the policy as it was.
    pub parse: fn(&Key, &mut Policy, &str) -> Result<(), PolicyError>,
    /// The policy's value as a ScaledObject writes it, or `None` where it leaves the key out
    /// (the key at its default, or not read by the policy's metrics): the reader then takes the
    /// same default.
    pub render: fn(&Policy) -> Option<String>,
}

/// The unit of a key whose value is a duration in seconds (the demo divides these by its time
/// compression).
pub const SECONDS: &str = "SECONDS";

/// The unit of a key whose value is a rate per second (the demo multiplies these by its time
/// compression).
pub const PER_SECOND: &str = "TOKENS/S";

/// The fields of [`Policy`] that no key sets on its own, and what sets them.
pub const DERIVED: &[(&str, &str)] = &[
    ("lookahead_auto", "`lookahead=auto`"),
    (
        "also",
        "the second and later entries of `metric` and `target`",
    ),
];

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

/// The key named `name` in a policy string.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The policy as one string [`Policy::parse`] reads back to it: its metrics and targets, then
/// every key a ScaledObject would write, in the table's order (what `decide --json` reports as
/// the policy it applied, flags and defaults included).
pub fn spec(policy: &Policy) -> String {
    let targets: Vec<String> = policy.metrics().iter().map(|m| num(m.1)).collect();
    let mut out = format!("{}:{}", policy.metric_list("+"), targets.join(","));
    for key in KEYS
        .iter()
        .filter(|k| !matches!(k.name, "metric" | "target"))
    {
        if let Some(value) = (key.render)(policy) {
            out.push_str(&format!(",{}={value}", key.name));
        }
    }
    out
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
mod tests;
