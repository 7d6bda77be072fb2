//! The Helm chart's values reference (docs/chart.md), written from `charts/infscale/values.yaml`
//! itself so it cannot drift from it: each value's `# --` comment and default, and for a value
//! that sets a flag of `infscale serve` or `infscale activator`, that flag's default and help as
//! clap has them (the tables docs/cli.md is written from). `tests/chart.rs` checks that each
//! mapped value's default is the flag's, or that the chart says why it is not.

use super::markdown::cell;
use super::Cli;
use clap::CommandFactory;
use serde_yaml::Value;

/// The chart's values file, as shipped.
pub const VALUES_YAML: &str = include_str!("../../charts/infscale/values.yaml");

/// One documented value: its dotted path, its `# --` comment, and its default.
#[derive(Debug, Clone)]
pub struct ChartValue {
    pub path: String,
    pub doc: String,
    pub default: Value,
}

/// A value that sets a flag: the chart passes `as_flag(value)` as the flag's argument.
pub struct FlagValue {
    pub value: &'static str,
    pub command: &'static str,
    pub flag: &'static str,
    pub as_flag: fn(&Value) -> String,
    /// Why the chart's default is not the flag's, where it is not.
    pub differs: Option<&'static str>,
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_owned(),
    }
}

/// A port, listened on every address.
fn any_address(v: &Value) -> String {
    format!("0.0.0.0:{}", plain(v))
}

/// A list of namespaces, or `all` when empty.
fn namespaces(v: &Value) -> String {
    let names: Vec<String> = v
        .as_sequence()
        .map(|s| s.iter().map(plain).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "all".to_owned()
    } else {
        names.join(",")
    }
}

const JSON_LOGS: &str = "in a cluster, logs are read by a collector: one JSON object a line";

/// The values that set flags, as charts/infscale/templates/scaler.yaml and activator.yaml pass
/// them.
pub const FLAG_VALUES: &[FlagValue] = &[
    FlagValue {
        value: "logFormat",
        command: "serve",
        flag: "log-format",
        as_flag: plain,
        differs: Some(JSON_LOGS),
    },
    FlagValue {
        value: "logFormat",
        command: "activator",
        flag: "log-format",
        as_flag: plain,
        differs: Some(JSON_LOGS),
    },
    FlagValue {
        value: "modelPorts",
        command: "serve",
        flag: "activator-ports",
        as_flag: plain,
        differs: None,
    },
    FlagValue {
        value: "modelPorts",
        command: "activator",
        flag: "model-ports",
        as_flag: plain,
        differs: None,
    },
    FlagValue {
        value: "scaler.grpcPort",
        command: "serve",
        flag: "listen",
        as_flag: any_address,
        differs: None,
    },
    FlagValue {
        value: "scaler.metricsPort",
        command: "serve",
        flag: "metrics-listen",
        as_flag: any_address,
        differs: None,
    },
    FlagValue {
        value: "activator.httpPort",
        command: "activator",
        flag: "listen",
        as_flag: any_address,
        differs: None,
    },
    FlagValue {
        value: "activator.adminPort",
        command: "activator",
        flag: "admin-listen",
        as_flag: any_address,
        differs: None,
    },
    FlagValue {
        value: "activator.namespaces",
        command: "activator",
        flag: "namespaces",
        as_flag: namespaces,
        differs: None,
    },
];

/// A flag's default (values joined by commas; empty when it has none) and help, from clap.
pub fn flag(command: &str, long: &str) -> Option<(String, String)> {
    let cli = Cli::command();
    let sub = cli.find_subcommand(command)?;
    let arg = sub.get_arguments().find(|a| a.get_long() == Some(long))?;
    let default = arg
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(",");
    let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    Some((default, help))
}

/// The values file, parsed.
fn values() -> Value {
    serde_yaml::from_str(VALUES_YAML).unwrap_or(Value::Null)
}

/// The value at a dotted path of `root`.
fn at(root: &Value, path: &str) -> Option<Value> {
    path.split('.').try_fold(root, |v, k| v.get(k)).cloned()
}

/// The value at a dotted path of the values file.
pub fn default_of(path: &str) -> Option<Value> {
    at(&values(), path)
}

/// The key a line of the values file sets, with its indentation; none for other lines.
fn key_of(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start().len();
    let rest = line.trim_start();
    let (key, _) = rest.split_once(':')?;
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    plain.then_some((indent, key))
}

/// Every value with a `# --` comment, in the file's order. A `# --` comment and the `#` lines
/// after it document the key on the next line.
pub fn documented() -> Vec<ChartValue> {
    let root = values();
    let mut out = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut doc: Option<String> = None;
    for line in VALUES_YAML.lines() {
        let trimmed = line.trim_start();
        if let Some(text) = trimmed.strip_prefix("# --") {
            doc = Some(text.trim().to_owned());
            continue;
        }
        if let Some(text) = trimmed.strip_prefix('#') {
            if let Some(d) = doc.as_mut() {
                d.push(' ');
                d.push_str(text.trim());
            }
            continue;
        }
        let Some((indent, key)) = key_of(line) else {
            doc = None;
            continue;
        };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        stack.push((indent, key.to_owned()));
        if let Some(doc) = doc.take() {
            let path = stack
                .iter()
                .map(|(_, k)| k.as_str())
                .collect::<Vec<_>>()
                .join(".");
            let default = at(&root, &path).unwrap_or(Value::Null);
            out.push(ChartValue { path, doc, default });
        }
    }
    out
}

/// A default as the values file would write it, on one line.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) if s.is_empty() => "`\"\"`".to_owned(),
        Value::Mapping(_) | Value::Sequence(_) => serde_json::to_string(v)
            .map(|j| format!("`{j}`"))
            .unwrap_or_default(),
        other => format!("`{}`", plain(other)),
    }
}

/// docs/chart.md's `chart-values` region: one row per documented value.
pub fn markdown_table() -> String {
    let mut out = String::from("| value | default | meaning |\n|---|---|---|\n");
    for v in documented() {
        let mut meaning = v.doc.clone();
        for m in FLAG_VALUES.iter().filter(|m| m.value == v.path) {
            let (default, help) = flag(m.command, m.flag).unwrap_or_default();
            let help = help.trim_end_matches('.');
            let default = if default.is_empty() {
                "none".to_owned()
            } else {
                format!("`{default}`")
            };
            meaning.push_str(&format!(
                " Sets `infscale {} --{}` (its default {default}: {help})",
                m.command, m.flag
            ));
            if let Some(why) = m.differs {
                meaning.push_str(&format!("; the chart's default differs: {why}"));
            }
            meaning.push('.');
        }
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            v.path,
            cell(&shown(&v.default)),
            cell(&meaning)
        ));
    }
    out
}
