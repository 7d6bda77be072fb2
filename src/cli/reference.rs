//! Reference pages written by the code, so they cannot drift from it: the policy keys and the
//! scaler's parameter list and authentication parameters (from their key tables, in
//! [`super::trigger_reference`]), every command's flags (from clap), the series `serve` and the
//! activator export (from their registries, as a scrape shows them), and the Helm chart's values
//! (from its values.yaml, with the flags they set).
//!
//! Each generated region of a page sits between `<!-- generated:NAME -->` and
//! `<!-- end generated:NAME -->`; `tests/reference_pages.rs` fails when a region differs from
//! what the code renders, and rewrites it with `INFSCALE_BLESS=1`.

use super::markdown::cell;
use super::{trigger_reference, Cli};
use crate::activator::hold::RouteState;
use crate::activator::routes::RouteSpec;
use crate::activator::telemetry::Telemetry as ActivatorTelemetry;
use crate::serve::metadata::TargetSpec;
use crate::serve::telemetry::{Telemetry as ScalerTelemetry, TriggerSeries};
use clap::CommandFactory;
use infscale_core::observe::metrics::exposition::collect;
use infscale_core::policy::keys;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A region of a page that the code writes.
pub struct Generated {
    /// The page, relative to the repository's root.
    pub page: &'static str,
    pub name: &'static str,
    pub render: fn() -> String,
}

/// Every generated region.
pub const GENERATED: &[Generated] = &[
    Generated {
        page: "docs/reference.md",
        name: "policy-keys",
        render: keys::markdown_table,
    },
    Generated {
        page: "docs/scaler.md",
        name: "parameter-list",
        render: trigger_reference::parameter_list,
    },
    Generated {
        page: "docs/scaler.md",
        name: "authentication-parameters",
        render: trigger_reference::authentication_parameters,
    },
    Generated {
        page: "docs/cli.md",
        name: "command-line",
        render: command_line,
    },
    Generated {
        page: "docs/operations.md",
        name: "exported-metrics",
        render: exported_metrics,
    },
    Generated {
        page: "docs/chart.md",
        name: "chart-values",
        render: super::chart_values::markdown_table,
    },
];

/// `text` with the region `name` replaced by `body`; an error when the markers are missing.
pub fn splice(text: &str, name: &str, body: &str) -> Result<String, String> {
    let open = format!("<!-- generated:{name} -->\n");
    let close = format!("<!-- end generated:{name} -->");
    let start = text
        .find(&open)
        .ok_or_else(|| format!("no {open:?} marker"))?
        + open.len();
    let end = text[start..]
        .find(&close)
        .ok_or_else(|| format!("no {close:?} marker"))?
        + start;
    Ok(format!("{}{body}{}", &text[..start], &text[end..]))
}

/// Every subcommand of `infscale` with its arguments, as `--help` shows them.
pub fn command_line() -> String {
    let cli = Cli::command();
    let mut out = String::from("## Options of every command\n\n");
    out.push_str(&arguments(&cli, true));
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        out.push_str(&format!("## infscale {name}\n\n"));
        if let Some(about) = sub.get_about() {
            out.push_str(&format!("{}\n\n", cell(&about.to_string())));
        }
        out.push_str(&arguments(sub, false));
        if sub.get_arguments().any(is_gpu) {
            out.push_str("With [the GPU model's flags](#the-gpu-models-flags).\n\n");
        }
        let help = sub
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        for example in help
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("infscale "))
        {
            out.push_str(&format!("Example: `{example}`\n\n"));
        }
    }
    if let Some(gpu) = cli.get_subcommands().find(|s| s.get_name() == "gpu") {
        out.push_str("## The GPU model's flags\n\n");
        out.push_str(
            "`gpu`, `simulate`, `tune` and `emulate` take these (under the help's \"GPU model\" \
             heading); each is also a field of `--gpu-file`.\n\n",
        );
        out.push_str(&table(gpu.get_arguments().filter(|a| is_gpu(a))));
    }
    out
}

/// Whether `arg` is one of the GPU model's flags.
fn is_gpu(arg: &clap::Arg) -> bool {
    arg.get_help_heading() == Some(super::gpu::HEADING)
}

/// A command's arguments as a table, without the GPU model's (listed once); `globals`: with
/// those every subcommand takes, shown once at the top.
fn arguments(command: &clap::Command, globals: bool) -> String {
    table(
        command
            .get_arguments()
            .filter(|a| (globals || !a.is_global_set()) && !is_gpu(a)),
    )
}

/// Arguments as a table of flag, default and meaning.
fn table<'a>(args: impl Iterator<Item = &'a clap::Arg>) -> String {
    let mut out = String::from("| argument | default | meaning |\n|---|---|---|\n");
    for arg in args.filter(|a| !a.is_hide_set()) {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let values = arg
            .get_value_names()
            .map(|v| {
                v.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| id.to_uppercase());
        let takes_value = arg.get_action().takes_values();
        let shown = match arg.get_long() {
            Some(long) if takes_value => format!("`--{long} {values}`"),
            Some(long) => format!("`--{long}`"),
            None => format!("`{values}`"),
        };
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .filter(|d| takes_value && !d.is_empty())
            .collect();
        let default = if defaults.is_empty() {
            String::new()
        } else {
            format!("`{}`", defaults.join(","))
        };
        let mut help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let possible = arg.get_possible_values();
        if !possible.is_empty() && takes_value {
            let words: Vec<_> = possible
                .iter()
                .map(|p| format!("`{}`", p.get_name()))
                .collect();
            help.push_str(&format!(" (one of {})", words.join(", ")));
        }
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            cell(&shown),
            cell(&default),
            cell(&help)
        ));
    }
    out.push('\n');
    out
}

/// One exported family: its type, help and the labels its series carry.
#[derive(Default)]
struct Family {
    kind: String,
    help: String,
    labels: Vec<String>,
    /// The name as a scrape shows it (counters end in `_total`).
    shown: String,
}

/// Families of an exposition page, by name, with the labels seen on their samples (read by the
/// project's own exposition parser; `# HELP` and `# TYPE` lines by hand, which it skips).
fn families(page: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.entry(name.to_owned()).or_default().help = help.to_owned();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let f = out.entry(name.to_owned()).or_default();
            f.kind = kind.to_owned();
            f.shown = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
        }
    }
    let (samples, _) = collect(page.as_bytes());
    for sample in samples {
        let name = sample.name.as_str();
        let family = ["_total", "_bucket", "_sum", "_count", "_created"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| out.contains_key(*f)))
            .unwrap_or(name);
        if let Some(f) = out.get_mut(family) {
            for (label, _) in sample.labels {
                if label != "le" && !f.labels.contains(&label) {
                    f.labels.push(label);
                }
            }
        }
    }
    out
}

fn metrics_table(page: &str) -> String {
    let mut out = String::from("| series | type | labels | meaning |\n|---|---|---|---|\n");
    for f in families(page).values() {
        let labels: Vec<_> = f.labels.iter().map(|l| format!("`{l}`")).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.shown,
            f.kind,
            labels.join(", "),
            cell(&f.help)
        ));
    }
    out
}

/// A scaler page with one trigger that has done everything a trigger does.
fn scaler_page() -> String {
    let telemetry = Arc::new(ScalerTelemetry::new());
    let metadata = HashMap::from([("threshold".to_owned(), "24".to_owned())]);
    let labels = TargetSpec::from_metadata("chat", "llm", &metadata, &Default::default())
        .map(|spec| spec.series_labels())
        .unwrap_or_default();
    let path = crate::serve::telemetry::PathSeries::new(&telemetry, labels.clone());
    path.write_failed("forbidden");
    let series = TriggerSeries::new(&telemetry, labels);
    series.scraped(0.01);
    series.scrape_failed("timeout");
    series.config_error("server", "vllm");
    series.report(Some(1.0), Some(true));
    series.cold_start(90.0);
    series.wake(0.5);
    series.write_counter("ok").inc();
    series.activator_up(true);
    series.activator_route(true);
    telemetry.call("GetMetrics", tonic::Code::Ok);
    let page = telemetry.render();
    drop(path);
    page
}

/// An activator page with one route that has done everything a route does.
fn activator_page() -> String {
    let spec = RouteSpec {
        health_path: Some("/health".to_owned()),
        ..RouteSpec::to_upstream("http://127.0.0.1:8000")
    };
    let route = match spec.check(0, "default") {
        Ok(route) => route,
        Err(e) => return format!("(the sample route is refused: {e})"),
    };
    let telemetry = ActivatorTelemetry::new();
    let host = route.counts_host.clone();
    let counters = telemetry.for_route(&host);
    let state = RouteState::with(
        route,
        Arc::new(tokio::sync::watch::channel(0).0),
        counters.clone(),
        None,
    );
    counters.forwarded.inc();
    counters.timed_out.inc();
    counters.upstream_errors.inc();
    counters.resent.inc();
    counters.held_seconds.observe(0.1);
    counters.abandoned.inc();
    telemetry.reject(&host, "full");
    telemetry.unrouted("unknown_host");
    telemetry.routes_in_use(1, 0);
    telemetry.reloaded(true);
    telemetry.refused_model("namespace");
    let counts = [(host, state.counts())].into_iter().collect();
    telemetry.render(&counts)
}

/// The series `serve` (port 9091) and the activator (its admin port, 9092) export.
pub fn exported_metrics() -> String {
    format!(
        "`infscale serve`, on its metrics port:\n\n{}\nThe activator, on its admin port:\n\n{}",
        metrics_table(&scaler_page()),
        metrics_table(&activator_page())
    )
}
