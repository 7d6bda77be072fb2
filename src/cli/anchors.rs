//! The suite's anchors on the command line (crates/infscale-core/src/sim/anchors.rs): the
//! bounded search judged beside the policies (`simulate --suite`) or alone
//! (`tune --suite --per-family`), and a search saved as JSON read back (`--anchors FILE`), so
//! that the suite reruns with other policies without searching again.

use super::seeds::progress;
use super::simulate::{SimArgs, BOUND_CAP};
use crate::edge::files::read_text;
use anyhow::{bail, Context};
use infscale_core::limits;
use infscale_core::sim::anchors::{self, Anchors, BAR};
use infscale_core::sim::seeds::{self, Judgement};
use infscale_core::sim::suite::{Family, Plan};
use serde_json::Value;
use std::path::Path;
use std::process::ExitCode;

/// The judged families, and the anchors when the search ran.
pub type Judged = (Vec<(Family, Judgement)>, Option<Anchors>);

/// Every policy of `specs` judged on every family and, with `search` (how many points of the
/// search's grid to sample, 0: all), the search's points on the same days (sharing their
/// bounds), split off as each family's anchors. A family with a `max` of its own runs the
/// policies that set none, its fixed fleets and its search up to it.
pub fn judge(
    families: Vec<Family>,
    specs: &[String],
    sim: &SimArgs,
    search: Option<usize>,
    days_per_family: u64,
    quiet: bool,
) -> anyhow::Result<Judged> {
    let searched = |max: u32| search.map_or_else(Vec::new, |n| anchors::search_points(max, n));
    let runs: usize = families
        .iter()
        .map(|f| f.days.len() * (specs.len() + searched(f.max.unwrap_or(sim.max)).len() + 1))
        .sum();
    let points = searched(sim.max).len();
    let what = if points == 0 {
        "runs and bounds".to_owned()
    } else {
        format!("runs and bounds ({points} of the search's points)")
    };
    let bar = progress(runs as u64, &what, quiet)?;
    let mut found = Vec::new();
    let mut judged = Vec::new();
    for f in families {
        let max = f.max.unwrap_or(sim.max);
        let all: Vec<String> = specs.iter().cloned().chain(searched(max)).collect();
        let policies = sim.policies_with_max(&all, max)?;
        let mut j = seeds::judge(&all, &policies, &f.days, BOUND_CAP, &|| bar.inc(1));
        let search = Judgement {
            policies: j.policies.split_off(specs.len()),
            ..j.clone()
        };
        found.push(anchors::of_family(&f.name, &search, &BAR));
        judged.push((f, j));
    }
    bar.finish_and_clear();
    let anchors = search.map(|_| Anchors {
        bar: BAR,
        days_per_family,
        points,
        families: found,
    });
    Ok((judged, anchors))
}

/// What the anchors' heading adds when a family has a `max` of its own: its fleets and its
/// search go up to it.
pub fn own_max_note(judged: &[(Family, Judgement)]) -> &'static str {
    if judged.iter().any(|(f, _)| f.max.is_some()) {
        "; a family with a max of its own (named in its heading) has fleets and a search up to it"
    } else {
        ""
    }
}

/// The anchors saved in `path` (the JSON of `tune --suite --per-family` or of
/// `simulate --suite`), checked to be of the judged families' very days.
pub fn read(path: &Path, judged: &[(Family, Judgement)]) -> anyhow::Result<Anchors> {
    let name = path.display();
    let text = read_text(path, limits::MAX_CONFIG_FILE_BYTES)?;
    let mut v: Value = serde_json::from_str(&text).with_context(|| format!("{name}: not JSON"))?;
    if let Some(inner) = v.get_mut("anchors") {
        v = inner.take();
    }
    let anchors: Anchors = serde_json::from_value(v).with_context(|| {
        format!("{name}: not the anchors `tune --suite --per-family --json` prints")
    })?;
    for (f, j) in judged {
        let Some(a) = anchors.of(&f.name) else {
            bail!(
                "{name}: no anchors for family {:?} (it holds {}): search it with `tune --suite --per-family --json`",
                f.name,
                anchors.families.iter().map(|a| a.family.as_str()).collect::<Vec<_>>().join(", ")
            );
        };
        let (theirs, ours) = (a.clairvoyant_replica_minutes, j.bound_mean());
        if a.days != f.days.len() || (theirs - ours).abs() > 1e-9 * ours.abs().max(1.0) {
            bail!(
                "{name}: family {:?} was searched on other days ({} days, bound {theirs:.3} replica-min on average; here {} days, {ours:.3}): search with the same days, traces and flags",
                f.name,
                a.days,
                f.days.len()
            );
        }
    }
    Ok(anchors)
}

/// `tune --suite --per-family`: the search on every family of `plan`, each family's best
/// fixed fleet and best point, as a table or as the JSON `--anchors` reads.
pub fn per_family(
    plan: &Plan,
    sim: &SimArgs,
    sample: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let families = infscale_core::sim::suite::families(plan)?;
    let (judged, anchors) = judge(families, &[], sim, Some(sample), plan.seeds, json)?;
    let Some(anchors) = anchors else {
        bail!("the search did not run");
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&anchors)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} points (fixed fleets 1..{} and the recommendation's neighbourhood{}) on {} families x {} days, {} loop; per family the cheapest with at most {}% misses on average and {}% on the worst of {} days, in excess of the bound's own:",
        anchors.points,
        sim.max,
        own_max_note(&judged),
        judged.len(),
        plan.seeds,
        sim.mode,
        BAR.mean_pct,
        BAR.day_pct,
        plan.seeds
    );
    for a in &anchors.families {
        println!(
            "\n{} ({} days, bound {:.1} replica-min)",
            a.family, a.days, a.clairvoyant_replica_minutes
        );
        println!(
            "  best fixed fleet:   {}",
            anchors::describe(&a.best_fixed, true)
        );
        println!(
            "  best of the search: {}",
            anchors::describe(&a.best_search, false)
        );
    }
    Ok(ExitCode::SUCCESS)
}
