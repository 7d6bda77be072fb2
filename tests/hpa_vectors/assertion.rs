//! The `integration_step` assertions: Kubernetes' integration tests wait up to ten resync
//! periods for a deployment condition (`atLeastReplicas`, `noMoreThanReplicas`, `equalReplicas`
//! in `test/integration/podautoscaler/util.go`) and either expect it to be met (a test case's
//! `expected`) or expect it never to be met (its `unexpected`, as `TestHPAWithTolerance`'s
//! `scale_up_in_tolerance` and `scale_down_in_tolerance` cases do).
//!
//! Read from a vector's `expected`:
//! * `assertion`: an object of conditions that must each be met at some sync, e.g.
//!   `{"atLeastReplicas": 37}`. A key written `never<Condition>` (also `not<Condition>`) must be
//!   met at no sync: `{"neverAtLeastReplicas": 38}` (the count never reaches 38),
//!   `{"neverNoMoreThanReplicas": 9}` (it never drops to 9). `neverReaches: N`,
//!   `neverDropsTo: L` and `neverDropsBelow: L` (every count is at least L) say the same in
//!   words. A nested `{"unexpected": {...}}` (also `never`, `not`) holds conditions never met.
//! * `unexpected` (also `unexpectedAssertion`): conditions never met, as `assertion` holds them.
//!
//! A condition may also be written as Go writes it, `"atLeastReplicas(37)"`, and a list of
//! conditions stands for each of them. Anything else is an error naming the form, so an
//! assertion the harness cannot read fails rather than passes.

use serde_json::Value;

/// One deployment condition on `spec.replicas`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Condition {
    /// `atLeastReplicas(n)`: `r >= n`.
    AtLeast(i64),
    /// `noMoreThanReplicas(n)`: `r <= n`.
    NoMoreThan(i64),
    /// `equalReplicas(n)`: `r == n`.
    Equal(i64),
    /// `r < n`: only ever asserted never met (`neverDropsBelow`).
    Below(i64),
}

impl Condition {
    fn holds(self, r: u32) -> bool {
        let r = i64::from(r);
        match self {
            Condition::AtLeast(n) => r >= n,
            Condition::NoMoreThan(n) => r <= n,
            Condition::Equal(n) => r == n,
            Condition::Below(n) => r < n,
        }
    }

    /// The condition util.go names `name`, as a function of its count.
    fn builder(name: &str) -> Option<fn(i64) -> Condition> {
        match name {
            "atLeastReplicas" => Some(Condition::AtLeast),
            "noMoreThanReplicas" => Some(Condition::NoMoreThan),
            "equalReplicas" => Some(Condition::Equal),
            _ => None,
        }
    }
}

/// A condition and whether it must be met at some sync (`true`) or at none (`false`).
pub type Assertion = (Condition, bool);

/// The keys of an integration step's `expected` that hold assertions, with whether they are
/// met (`true`) or never met (`false`).
pub const CONTAINERS: [(&str, bool); 3] = [
    ("assertion", true),
    ("unexpected", false),
    ("unexpectedAssertion", false),
];

/// Every assertion of an integration step's `expected`.
pub fn read(expected: &Value) -> Result<Vec<Assertion>, String> {
    let mut all = Vec::new();
    for (key, met) in CONTAINERS {
        if let Some(v) = expected.get(key) {
            container(v, met, &mut all).map_err(|e| format!("{key}: {e}"))?;
        }
    }
    Ok(all)
}

/// Conditions held by an object, a `"name(n)"` string, or a list of them.
fn container(v: &Value, met: bool, out: &mut Vec<Assertion>) -> Result<(), String> {
    match v {
        Value::Object(map) => {
            for (key, value) in map {
                entry(key, value, met, out)?;
            }
            Ok(())
        }
        Value::String(s) => {
            out.push((go_call(s)?, met));
            Ok(())
        }
        Value::Array(list) => list.iter().try_for_each(|x| container(x, met, out)),
        other => Err(format!("unknown assertion form {other}")),
    }
}

fn entry(key: &str, value: &Value, met: bool, out: &mut Vec<Assertion>) -> Result<(), String> {
    if matches!(key, "unexpected" | "never" | "not") {
        return container(value, !met, out).map_err(|e| format!("{key}: {e}"));
    }
    let (condition, negated): (fn(i64) -> Condition, bool) = match key {
        "neverReaches" | "neverReachesReplicas" => (Condition::AtLeast, true),
        "neverDropsTo" | "neverDropsToReplicas" => (Condition::NoMoreThan, true),
        "neverDropsBelow" | "neverDropsBelowReplicas" | "neverBelowReplicas" => {
            (Condition::Below, true)
        }
        _ => {
            let (negated, name) = match key
                .strip_prefix("never")
                .or_else(|| key.strip_prefix("not"))
            {
                Some(rest) => (true, lower_first(rest)),
                None => (false, key.to_string()),
            };
            let build =
                Condition::builder(&name).ok_or_else(|| format!("unknown assertion {key:?}"))?;
            (build, negated)
        }
    };
    let n = count(value).ok_or_else(|| format!("{key}: {value} is not a replica count"))?;
    out.push((condition(n), met != negated));
    Ok(())
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn count(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// `atLeastReplicas(37)` as Go writes it.
fn go_call(s: &str) -> Result<Condition, String> {
    let unknown = || format!("unknown assertion {s:?}");
    let (name, rest) = s.trim().split_once('(').ok_or_else(unknown)?;
    let n = rest
        .strip_suffix(')')
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(unknown)?;
    Condition::builder(name.trim())
        .map(|b| b(n))
        .ok_or_else(unknown)
}

/// Checks each assertion against the counts seen at each sync.
pub fn check(assertions: &[Assertion], seen: &[u32]) -> Result<(), String> {
    if assertions.is_empty() {
        return Err("no assertion".into());
    }
    for &(condition, met) in assertions {
        let at_some = seen.iter().any(|&r| condition.holds(r));
        if met && !at_some {
            return Err(format!("{condition:?} never met: {seen:?}"));
        }
        if !met && at_some {
            return Err(format!("{condition:?} met, asserted never: {seen:?}"));
        }
    }
    Ok(())
}
