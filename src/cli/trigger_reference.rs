//! The scaler page's trigger reference in the shape KEDA documents each scaler: a parameter list
//! (`- \`key\` - Meaning. (Values: ..., Default: ..., Optional)`) and the authentication
//! parameters, rendered from the three key tables the metadata reader itself walks (KEDA's own
//! keys, the target's, the policy's), so the page cannot list a key the scaler does not read, or
//! a default it does not apply.

use crate::serve::metadata::{KedaKey, KedaPlace, TargetKey, TargetKind, KEDA_KEYS, TARGET_KEYS};
use infscale_core::policy::keys::{Key, Kind, KEYS};

/// One entry of a KEDA-style parameter list.
struct Entry<'a> {
    name: &'a str,
    doc: &'a str,
    values: String,
    default: String,
    required: bool,
}

impl Entry<'_> {
    fn render(&self) -> String {
        let mut notes = Vec::new();
        if !self.values.is_empty() {
            notes.push(format!("Values: {}", self.values));
        }
        if !self.default.is_empty() {
            notes.push(format!("Default: {}", self.default));
        }
        notes.push(
            if self.required {
                "Required"
            } else {
                "Optional"
            }
            .to_owned(),
        );
        format!(
            "- `{}` - {} ({})\n",
            self.name,
            sentence(self.doc),
            notes.join(", ")
        )
    }
}

/// A key's meaning as a sentence: capitalised, joined onto one line, ending in a full stop.
fn sentence(doc: &str) -> String {
    let text = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = text.chars();
    let mut out = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
        None => String::new(),
    };
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

/// A default as code; a default with a remark after it (`0 (off)`) keeps the remark as text; no
/// default, nothing.
fn code(default: &str) -> String {
    if default.is_empty() {
        return String::new();
    }
    match default.split_once(' ') {
        Some((value, rest)) if value.parse::<f64>().is_ok() => format!("`{value}` {rest}"),
        _ => format!("`{default}`"),
    }
}

fn kedas(k: &KedaKey) -> Entry<'_> {
    let choices: Vec<&str> = k.values.split(", ").filter(|v| !v.is_empty()).collect();
    Entry {
        name: k.name,
        doc: k.doc,
        values: words(&choices),
        default: code(k.default),
        required: k.required,
    }
}

fn targets(k: &TargetKey) -> Entry<'_> {
    let values = match k.kind {
        TargetKind::Text => String::new(),
        TargetKind::Port => "a port from 1 to 65535".to_owned(),
        TargetKind::Seconds { min, max } => format!("seconds from {min} to {max}"),
        TargetKind::Count { min, max } => format!("a whole number from {min} to {max}"),
        TargetKind::Flag => words(&["true", "false"]),
    };
    Entry {
        name: k.name,
        doc: k.doc,
        values,
        default: code(k.default),
        required: false,
    }
}

/// Words as code, comma-separated.
fn words(words: &[&str]) -> String {
    let coded: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    coded.join(", ")
}

/// A policy key `serve` reads from the trigger, under its metadata name.
fn policys<'a>(name: &'a str, k: &'a Key) -> Entry<'a> {
    let values = match k.kind {
        Kind::Word(choices) => words(choices),
        Kind::Flag => words(&["true", "false"]),
        // What the reader's errors say a number must be (`lookahead` also takes `auto`).
        Kind::Number { .. } | Kind::Whole { .. } => {
            let expected = k.expected();
            expected
                .strip_prefix("expected ")
                .unwrap_or(&expected)
                .replace(", or auto", ", or `auto`")
        }
    };
    Entry {
        name,
        doc: k.doc,
        values,
        default: code(k.default),
        required: k.default.is_empty(),
    }
}

/// The trigger's parameter list: `scalerAddress`, the target's keys, the policy's, then KEDA's
/// TLS switches.
pub fn parameter_list() -> String {
    let trigger = |k: &&KedaKey| k.place == KedaPlace::Trigger;
    let mut out = String::new();
    for k in KEDA_KEYS.iter().filter(trigger).filter(|k| k.required) {
        out.push_str(&kedas(k).render());
    }
    for k in TARGET_KEYS {
        out.push_str(&targets(k).render());
    }
    for k in KEYS {
        if let Some(name) = k.metadata() {
            out.push_str(&policys(name, k).render());
        }
    }
    for k in KEDA_KEYS.iter().filter(trigger).filter(|k| !k.required) {
        out.push_str(&kedas(k).render());
    }
    out
}

/// The TriggerAuthentication parameters KEDA uses to dial the scaler.
pub fn authentication_parameters() -> String {
    KEDA_KEYS
        .iter()
        .filter(|k| k.place == KedaPlace::Authentication)
        .map(|k| kedas(k).render())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_reader_takes_is_listed_once() {
        let list = parameter_list();
        for name in crate::serve::metadata::keys() {
            let entry = format!("- `{name}` - ");
            assert_eq!(list.matches(&entry).count(), 1, "{name}");
        }
        assert!(list.contains(
            "- `threshold` - Per-replica target in the metric's unit (requests, 0..1, percent, \
             replicas, seconds); with a metric list, one per metric in its order (48,0.8). \
             (Values: a number from 0.001 to 1000000000, Required)"
        ));
        assert!(list.contains(
            "- `metricsPort` - The port of each pod's metrics page. (Values: a port from 1 to \
             65535, Default: `8000`, Optional)"
        ));
        assert!(
            list.contains("(Values: a number from 0 to 3600, or `auto`, Default: `0`, Optional)")
        );
        assert!(list.contains("(Values: `off`, `auto`, Default: `off`, Optional)"));
        assert!(list.contains("Default: `0` (off), Optional)"));
        assert!(list.starts_with("- `scalerAddress` - "));
    }

    #[test]
    fn the_authentication_parameters_are_keda_s_certificates() {
        let auth = authentication_parameters();
        let names: Vec<&str> = auth
            .lines()
            .filter_map(|l| l.strip_prefix("- `")?.split('`').next())
            .collect();
        assert_eq!(names, ["caCert", "tlsClientCert", "tlsClientKey"]);
    }
}
