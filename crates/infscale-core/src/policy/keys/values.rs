//! The readers and writers the key table's entries are built from: a value as written checked
//! against its key's bounds (every error naming the key and the value), and a field written back
//! in the form the readers take. Kept apart from the table so each entry stays a few lines.

use super::{Direction, Key, Kind};
use crate::policy::behavior::{Behavior, RateKind, RatePolicy, Rules, Select};
use crate::policy::{Metric, Policy, PolicyError};

/// A number as YAML and the policy parser read it back exactly (the shortest exact form).
pub fn num(v: f64) -> String {
    format!("{v}")
}

pub(super) fn bad_value(key: &Key, value: &str) -> PolicyError {
    PolicyError::BadValue {
        key: key.name.to_owned(),
        value: value.to_owned(),
        expected: key.expected(),
    }
}

/// A number within the key's bounds.
pub(super) fn number(key: &Key, value: &str) -> Result<f64, PolicyError> {
    let v: f64 = value.trim().parse().map_err(|_| bad_value(key, value))?;
    match key.kind {
        Kind::Number { min, max } if v.is_finite() && v >= min && v <= max => Ok(v),
        _ => Err(bad_value(key, value)),
    }
}

/// A whole number within the key's bounds.
pub(super) fn whole(key: &Key, value: &str) -> Result<u32, PolicyError> {
    let v: u32 = value.trim().parse().map_err(|_| bad_value(key, value))?;
    match key.kind {
        Kind::Whole { min, max } if (min..=max).contains(&v) => Ok(v),
        _ => Err(bad_value(key, value)),
    }
}

pub(super) fn boolean(key: &Key, value: &str) -> Result<bool, PolicyError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(bad_value(key, value)),
    }
}

/// The index of the key's word (case-insensitive) in its [`Kind::Word`] list.
pub(super) fn word(key: &Key, value: &str) -> Result<usize, PolicyError> {
    let Kind::Word(words) = key.kind else {
        return Err(bad_value(key, value));
    };
    words
        .iter()
        .position(|w| w.eq_ignore_ascii_case(value.trim()))
        .ok_or_else(|| bad_value(key, value))
}

/// `"true"` when set; a flag at its default (false) is left out.
pub(super) fn flag(on: bool) -> Option<String> {
    on.then(|| "true".to_owned())
}

pub(super) fn select(key: &Key, value: &str) -> Result<Select, PolicyError> {
    let all = [Select::Max, Select::Min, Select::Disabled];
    all.get(word(key, value)?)
        .copied()
        .ok_or_else(|| bad_value(key, value))
}

pub(super) fn select_name(select: Select) -> &'static str {
    match select {
        Select::Max => "Max",
        Select::Min => "Min",
        Select::Disabled => "Disabled",
    }
}

/// One direction's rules, adding the HPA's default `behavior` when the policy has none.
pub(super) fn rules_mut(policy: &mut Policy, direction: Direction) -> &mut Rules {
    let behavior = policy.behavior.get_or_insert_with(Behavior::default);
    match direction {
        Direction::Up => &mut behavior.scale_up,
        Direction::Down => &mut behavior.scale_down,
    }
}

/// One direction's rules, when the policy has a `behavior`.
pub(super) fn rules(policy: &Policy, direction: Direction) -> Option<&Rules> {
    let behavior = policy.behavior.as_ref()?;
    Some(match direction {
        Direction::Up => &behavior.scale_up,
        Direction::Down => &behavior.scale_down,
    })
}

/// The API's default rules of a direction.
pub(super) fn default_rules(direction: Direction) -> Rules {
    match direction {
        Direction::Up => Rules::default_up(),
        Direction::Down => Rules::default_down(),
    }
}

/// Sets the Pods or Percent limit of one direction. The first limit given by key replaces the
/// direction's defaults, as a user-given `policies` list does in an HPA; later ones are added
/// beside it.
pub(super) fn set_rate(
    key: &Key,
    policy: &mut Policy,
    value: &str,
    direction: Direction,
    kind: RateKind,
) -> Result<(), PolicyError> {
    let value = whole(key, value)?;
    let custom = &mut policy.custom_limits[usize::from(direction == Direction::Up)];
    let first = !std::mem::replace(custom, true);
    let rules = rules_mut(policy, direction);
    let period_s = rules.policies.first().map_or(15, |p| p.period_s);
    if first {
        rules.policies.clear();
    }
    rules.policies.retain(|p| p.kind != kind);
    rules.policies.push(RatePolicy {
        kind,
        value,
        period_s,
    });
    Ok(())
}

/// A direction's Pods or Percent limit, when its list is not the API's default.
pub(super) fn rate(policy: &Policy, direction: Direction, kind: RateKind) -> Option<String> {
    let rules = rules(policy, direction)?;
    if rules.policies == default_rules(direction).policies {
        return None;
    }
    let limit = rules.policies.iter().find(|p| p.kind == kind)?;
    Some(limit.value.to_string())
}

/// A direction's policies' period, when its list is not the API's default.
pub(super) fn period(policy: &Policy, direction: Direction) -> Option<String> {
    let rules = rules(policy, direction)?;
    if rules.policies == default_rules(direction).policies {
        return None;
    }
    Some(rules.policies.first()?.period_s.to_string())
}

/// Whether one of the policy's metrics is `work`, which reads the replica's rates.
pub(super) fn uses_work(policy: &Policy) -> bool {
    policy.metrics().iter().any(|m| m.0 == Metric::Work)
}
