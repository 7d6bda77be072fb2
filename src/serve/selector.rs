//! Kubernetes label selectors, parsed and matched here, because every target in a namespace
//! shares one pod watch of the whole namespace and picks its own pods from it.
//!
//! The grammar is the API server's: requirements joined by commas, each `key=value`,
//! `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key` (exists) or `!key`
//! (does not exist).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// A parsed label selector; the empty selector matches every pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(text)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("{text:?}: an empty requirement"));
            }
            requirements.push(requirement(part).map_err(|e| format!("{text:?}: {e}"))?);
        }
        Ok(Selector(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

/// The requirements, split on commas outside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("{text:?}: unbalanced parentheses"));
        }
    }
    if depth != 0 {
        return Err(format!("{text:?}: unbalanced parentheses"));
    }
    if !text.trim().is_empty() {
        parts.push(&text[start..]);
    }
    Ok(parts)
}

fn requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::Absent(key_of(key)?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key_of(k)?, value_of(v)?));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(key_of(k)?, value_of(v)?));
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    match words.as_slice() {
        [key] => Ok(Requirement::Exists(key_of(key)?)),
        [key, rest] => {
            let rest = rest.trim();
            let (op, set) = if let Some(s) = rest.strip_prefix("notin") {
                ("notin", s)
            } else if let Some(s) = rest.strip_prefix("in") {
                ("in", s)
            } else {
                return Err(format!("{part:?}: expected in or notin"));
            };
            let set = set
                .trim()
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("{part:?}: expected a set in parentheses"))?;
            let values = set
                .split(',')
                .map(|v| value_of(v.trim()))
                .collect::<Result<Vec<_>, _>>()?;
            let key = key_of(key)?;
            Ok(if op == "in" {
                Requirement::In(key, values)
            } else {
                Requirement::NotIn(key, values)
            })
        }
        _ => Err(format!("{part:?} is not a requirement")),
    }
}

fn key_of(k: &str) -> Result<String, String> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.len() <= 253
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    ok.then(|| k.to_owned())
        .ok_or_else(|| format!("{k:?} is not a label key"))
}

fn value_of(v: &str) -> Result<String, String> {
    let v = v.trim();
    let ok = v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    ok.then(|| v.to_owned())
        .ok_or_else(|| format!("{v:?} is not a label value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality_and_sets() {
        let s =
            Selector::parse("app=chat,tier in (gpu, big),!canary,zone notin (a),model").unwrap();
        let pod = labels(&[("app", "chat"), ("tier", "gpu"), ("model", "x")]);
        assert!(s.matches(&pod));
        let canary = labels(&[
            ("app", "chat"),
            ("tier", "gpu"),
            ("model", "x"),
            ("canary", "1"),
        ]);
        assert!(!s.matches(&canary));
        let zone_a = labels(&[
            ("app", "chat"),
            ("tier", "big"),
            ("model", "x"),
            ("zone", "a"),
        ]);
        assert!(!s.matches(&zone_a));
        assert!(!s.matches(&labels(&[("app", "chat"), ("tier", "cpu"), ("model", "x")])));
        let ne = Selector::parse("app==chat,env!=prod").unwrap();
        assert!(ne.matches(&labels(&[("app", "chat")])));
        assert!(!ne.matches(&labels(&[("app", "chat"), ("env", "prod")])));
        assert!(Selector::parse("").unwrap().matches(&labels(&[])));
    }

    #[test]
    fn bad_selectors_are_errors() {
        for bad in [
            "a=b,,c",
            "x in a,b",
            "(",
            "app=chat)",
            "k in (a",
            "a b c",
            "a=b c",
        ] {
            let parsed = Selector::parse(bad);
            assert!(parsed.is_err(), "{bad:?} parsed as {parsed:?}");
        }
        // An empty value is a value.
        assert!(Selector::parse("app=")
            .unwrap()
            .matches(&labels(&[("app", "")])));
    }
}
