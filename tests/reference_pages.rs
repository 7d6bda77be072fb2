//! The reference pages say what the code does: each generated region of `docs/` (policy keys,
//! trigger metadata, command-line flags, exported series) equals what the code renders now.
//! `INFSCALE_BLESS=1 cargo test --test reference_pages` rewrites the regions that differ.

use infscale::cli::reference::{splice, GENERATED};
use std::path::PathBuf;

#[test]
fn generated_regions_equal_the_code() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("INFSCALE_BLESS").is_some();
    let mut stale = Vec::new();
    for g in GENERATED {
        let path = root.join(g.page);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", g.page));
        let want =
            splice(&text, g.name, &(g.render)()).unwrap_or_else(|e| panic!("{}: {e}", g.page));
        if want != text {
            if bless {
                std::fs::write(&path, want).unwrap();
            } else {
                stale.push(format!("{} ({})", g.page, g.name));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "generated regions differ from the code: {}; rerun with INFSCALE_BLESS=1 to rewrite them",
        stale.join(", ")
    );
}

#[test]
fn every_command_and_series_is_in_the_pages() {
    let flags = infscale::cli::reference::command_line();
    for command in [
        "parse",
        "decide",
        "serve",
        "kube",
        "activator",
        "load",
        "emulate",
        "demo",
        "gpu",
        "simulate",
        "tune",
    ] {
        assert!(
            flags.contains(&format!("## infscale {command}\n")),
            "{command}"
        );
    }
    assert!(flags.contains("--max-connections-per-client"));
    let series = infscale::cli::reference::exported_metrics();
    for name in [
        "infscale_target_value",
        "infscale_grpc_calls_total",
        "infscale_scrape_duration_seconds",
        "infscale_activator_held",
        "infscale_activator_abandoned_total",
        "infscale_activator_rejected_total",
    ] {
        assert!(
            series.contains(&format!("`{name}`")),
            "{name} not in\n{series}"
        );
    }
    assert!(
        series.contains("`reason`") && series.contains("`route`"),
        "{series}"
    );
}
