//! The benchmark of days no single generator owns (`simulate --suite`): families of days, each
//! judged on its own seeds, so that advice is judged by its worst family, not by the mean of
//! the day it was tuned on.
//!
//! The families: the built-in day over many seeds; the same day on perturbed engines (prefill
//! and decode slower, prompts and outputs longer, a random balancer, spread cold starts, and a
//! mix of all of them drawn per seed); burstier arrivals (overdispersed counts, bursts with idle
//! gaps); prefill-heavy and decode-heavy length mixes; and each production trace given, played
//! as the seed's story ([`Story::seed_day`]) from a different point of the trace per seed, warm
//! started with the replicas the bound holds at time 0.

use super::anchors::{self, Anchors, FamilyAnchors, Point};
use super::cluster::Balancer;
use super::gpu::GpuModel;
use super::replica::Hardware;
use super::rng::{Lengths, Rng};
use super::run::{Settings, Start};
use super::seeds::{Day, Judged, Judgement};
use super::trace::replay::{self, Story};
use super::trace::{Bursts, Scenario, Trace, TraceError};
use crate::table::{Align::*, Names, Table};
use serde_json::{json, Value};
use std::fmt::Write;

/// A family of days and what sets it apart.
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub about: String,
    pub days: Vec<Day>,
    /// The most replicas for policies that set none, where the family sets its own (a trace
    /// whose peak needs more than the suite's `--max`); `None`: the suite's.
    pub max: Option<u32>,
}

/// A production trace to build story days from.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// A short name for the table (the file's stem).
    pub name: String,
    pub trace: Trace,
    /// Its own `max`, as an operator sets one for a model this busy (`None`: the suite's).
    pub max: Option<u32>,
}

/// The names of the generated families, in the order the suite runs them.
pub const GENERATED: [&str; 13] = [
    "default",
    "mfu-15",
    "bandwidth-15",
    "prompts+20",
    "outputs+20",
    "random-balancer",
    "cold-spread",
    "engine-mix",
    "overdispersed",
    "on-off",
    "prefill-heavy",
    "decode-heavy",
    "long-cold-start",
];

/// One generated family: its description, and how a seed's day differs from the default day.
/// How a seed's day of a family differs from the default day: the scenario, the engine and
/// the loop's settings, changed in place.
type Change = fn(u64, &mut Scenario, &mut GpuModel, &mut Settings);

fn generated(name: &str) -> Option<(&'static str, Change)> {
    Some(match name {
        "default" => ("the built-in day", |_, _, _, _| {}),
        "mfu-15" => ("prefill 15% slower (MFU x0.85)", |_, _, g, _| g.mfu *= 0.85),
        "bandwidth-15" => ("decode 15% slower (bandwidth x0.85)", |_, _, g, _| {
            g.bandwidth_efficiency *= 0.85
        }),
        "prompts+20" => ("prompts 20% longer", |_, s, _, _| {
            s.prompt = s.prompt.scaled(1.2)
        }),
        "outputs+20" => ("outputs 20% longer", |_, s, _, _| {
            s.output = s.output.scaled(1.2)
        }),
        "random-balancer" => (
            "a plain Service: each request to a random ready replica",
            |_, _, _, st| st.balancer = Balancer::Random,
        ),
        "cold-spread" => (
            "cold starts spread log-normally (sigma 0.4)",
            |_, _, _, st| st.cold_start_spread = 0.4,
        ),
        "long-cold-start" => (
            "cold starts 50% longer (a slower image pull)",
            |_, _, g, _| g.image_pull_s *= 2.0,
        ),
        "engine-mix" => (
            "per seed: MFU, bandwidth, prompt and output means each x0.8..1.2, balancer and \
             cold-start spread drawn",
            mix,
        ),
        "overdispersed" => (
            "arrivals overdispersed: the rate x a log-normal factor (sigma 0.4) every 30 s",
            |_, s, _, _| {
                s.bursts = Some(Bursts::Overdispersed {
                    block: 30.0,
                    sigma: 0.4,
                })
            },
        ),
        "on-off" => (
            "bursts of 90 s on average at 1.5 times the rate, idle gaps of 45 s on average",
            |_, s, _, _| {
                s.bursts = Some(Bursts::OnOff {
                    on: 90.0,
                    off: 45.0,
                })
            },
        ),
        "prefill-heavy" => (
            "code completion: prompts mean 2,000 tokens, outputs mean 30",
            |_, s, _, _| {
                s.prompt = Lengths::Lognormal {
                    mean: 2000.0,
                    sigma: 0.9,
                    min: 16,
                    max: 8192,
                };
                s.output = Lengths::Lognormal {
                    mean: 30.0,
                    sigma: 1.0,
                    min: 1,
                    max: 1024,
                };
            },
        ),
        "decode-heavy" => (
            "long answers: prompts mean 300 tokens, outputs mean 600",
            |_, s, _, _| {
                s.prompt = Lengths::Lognormal {
                    mean: 300.0,
                    sigma: 0.8,
                    min: 8,
                    max: 4096,
                };
                s.output = Lengths::Lognormal {
                    mean: 600.0,
                    sigma: 0.8,
                    min: 8,
                    max: 4096,
                };
            },
        ),
        _ => return None,
    })
}

/// `engine-mix`: each seed's engine and lengths drawn around the defaults.
fn mix(seed: u64, s: &mut Scenario, g: &mut GpuModel, st: &mut Settings) {
    let mut rng = Rng::new(seed ^ 0x5eed_f00d);
    let mut around = || 0.8 + 0.4 * rng.uniform();
    g.mfu *= around();
    g.bandwidth_efficiency *= around();
    s.prompt = s.prompt.scaled(around());
    s.output = s.output.scaled(around());
    if around() > 1.0 {
        st.balancer = Balancer::Random;
    }
    st.cold_start_spread = 0.4 * (around() - 0.8) / 0.4;
}

/// What the suite is built from.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Days per family: seeds first..first+seeds (for a trace, as many starting points in it).
    pub seeds: u64,
    /// The first seed.
    pub first: u64,
    /// The engine and loop every family starts from.
    pub gpu: GpuModel,
    pub settings: Settings,
    /// Production traces, one family each.
    pub recorded: Vec<Recorded>,
    /// Only these families (all when empty).
    pub only: Vec<String>,
}

impl Plan {
    /// The seeds of the plan's days.
    pub fn seed_range(&self) -> std::ops::RangeInclusive<u64> {
        let first = self.first.max(1);
        first..=first.saturating_add(self.seeds.max(1) - 1)
    }
}

/// Every family of the plan, its days generated.
pub fn families(plan: &Plan) -> Result<Vec<Family>, TraceError> {
    let wanted = |name: &str| plan.only.is_empty() || plan.only.iter().any(|o| o == name);
    for o in &plan.only {
        let known = generated(o).is_some() || plan.recorded.iter().any(|r| trace_family(r) == *o);
        if !known {
            return Err(TraceError(format!(
                "no family {o:?}: the families are {}{}",
                GENERATED.join(", "),
                plan.recorded
                    .iter()
                    .map(|r| format!(", {}", trace_family(r)))
                    .collect::<String>()
            )));
        }
    }
    let mut out = Vec::new();
    for name in GENERATED.iter().filter(|n| wanted(n)) {
        let Some((about, change)) = generated(name) else {
            continue;
        };
        let days = plan
            .seed_range()
            .map(|seed| {
                let mut scenario = Scenario {
                    seed,
                    ..Scenario::default_day()
                };
                let (mut gpu, mut settings) = (plan.gpu.clone(), plan.settings.clone());
                change(seed, &mut scenario, &mut gpu, &mut settings);
                Ok(Day {
                    trace: scenario.generate()?,
                    hw: Hardware::new(gpu),
                    settings,
                })
            })
            .collect::<Result<Vec<Day>, TraceError>>()?;
        out.push(Family {
            name: (*name).to_owned(),
            about: about.to_owned(),
            days,
            max: None,
        });
    }
    for r in plan.recorded.iter().filter(|r| wanted(&trace_family(r))) {
        out.push(story_family(r, plan)?);
    }
    Ok(out)
}

fn trace_family(r: &Recorded) -> String {
    format!("trace:{}", r.name)
}

/// A production trace as the seed's story, from `seeds` starting points spread over the trace
/// (the golden ratio apart, so any count covers it evenly), warm started from the bound.
fn story_family(r: &Recorded, plan: &Plan) -> Result<Family, TraceError> {
    let story = Story::seed_day();
    let span = r.trace.requests.last().map_or(0.0, |q| q.arrival);
    let hw = Hardware::new(plan.gpu.clone());
    let settings = Settings {
        start: Start::Bound,
        ..plan.settings.clone()
    };
    let days = plan
        .seed_range()
        .map(|seed| {
            let offset = ((seed - 1) as f64 * 0.618_033_988_75).fract() * span;
            Ok(Day {
                trace: replay::day(&r.trace, &story, offset, seed)?,
                hw: hw.clone(),
                settings: settings.clone(),
            })
        })
        .collect::<Result<Vec<Day>, TraceError>>()?;
    let rate = r.trace.requests.len() as f64 / span.max(1.0);
    Ok(Family {
        name: trace_family(r),
        about: format!(
            "{} ({:.1} req/s): 20 min at its rate, 10 at x3, 6 silent, 4 at x0.2; warm start{}",
            r.name,
            rate,
            r.max.map_or_else(String::new, |m| format!("; max {m}"))
        ),
        days,
        max: r.max,
    })
}

/// The table of one family: per policy the mean, p95 and worst per-day miss %, cuts,
/// replica-minutes and the mean ratio to each day's bound; with the family's anchors, their
/// lines and per policy its cost over the best search point's and whether the best fixed fleet
/// dominates it. Long policies show by their role in `roles` or a number, the full strings
/// below.
pub fn family_table(
    f: &Family,
    j: &Judgement,
    anchors: Option<&FamilyAnchors>,
    roles: &[(&str, &str)],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {}; {} days, bound {:.1} replica-min on average{}",
        f.name,
        f.about,
        j.bounds.len(),
        j.bound_mean(),
        match j.bound_miss_pct_mean() {
            m if m > 0.0 => format!(" (the bound itself misses {m:.2}%)"),
            _ => String::new(),
        }
    );
    let names = Names::of(j.policies.iter().map(|p| p.policy.as_str()), roles);
    let mut table = super::seeds::rows(&j.policies, &names);
    if let Some(a) = anchors {
        let _ = writeln!(
            out,
            "  best fixed fleet:   {}\n  best of the search: {}",
            anchors::describe(&a.best_fixed, true),
            anchors::describe(&a.best_search, false)
        );
        table.column("x best search", Right);
        table.column("fleet dominates", Left);
        for (i, p) in j.policies.iter().enumerate() {
            let against = a.against(&Point::of(p));
            table.set(i, 7, format!("{:.2}x", against.x_best_search));
            let dominated = if against.dominated_by_fixed {
                "yes"
            } else {
                "no"
            };
            table.set(i, 8, dominated);
        }
    }
    out + &table.render() + &names.key()
}

/// Per policy, its worst family on each figure: the mean miss % and the worst day's miss %,
/// each in excess of what the days' bounds miss themselves (requests no replica count serves
/// in time), and the mean ratio to the bound; with anchors, the mean over families of its cost
/// over each family's best search point's and how many families' best fixed fleet dominates it.
pub fn worst_table(
    judged: &[(Family, Judgement)],
    anchors: Option<&Anchors>,
    roles: &[(&str, &str)],
) -> String {
    let Some((f0, first)) = judged.first() else {
        return String::new();
    };
    let names = Names::of(first.policies.iter().map(|p| p.policy.as_str()), roles);
    let mut t = Table::new([
        ("policy".to_owned(), Left),
        ("worst mean excess %".to_owned(), Right),
        (format!("worst of {} days: excess %", f0.days.len()), Right),
        ("worst x bound".to_owned(), Right),
        ("cut max".to_owned(), Right),
    ]);
    let paired = anchors.map(|a| paired(judged, a));
    if paired.is_some() {
        t.column("mean x best search (families)", Right);
        t.column("fleet dominates", Right);
    }
    for (i, name) in names.shown.iter().enumerate() {
        let each = || judged.iter().map(move |(f, j)| (&f.name, &j.policies[i]));
        let worst = |f: &dyn Fn(&Judged) -> f64| {
            each()
                .map(|(n, j)| (f(j), n.as_str()))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .unwrap_or((f64::NAN, ""))
        };
        let (mean, mean_at) = worst(&Judged::excess_miss_pct_mean);
        let (max, max_at) = worst(&Judged::excess_miss_pct_max);
        let (ratio, ratio_at) = worst(&Judged::bound_ratio);
        let (cut, _) = worst(&Judged::cut_mean);
        t.row([
            name.clone(),
            format!("{mean:.2}% {mean_at}"),
            format!("{max:.2}% {max_at}"),
            format!("{ratio:.2}x {ratio_at}"),
            format!("{cut:.1}"),
        ]);
        if let Some(pairs) = &paired {
            let s = anchors::summary(pairs, i);
            t.push_cell(format!(
                "{:.2}x ({})",
                s.x_best_search_mean, s.x_best_search_families
            ));
            t.push_cell(format!("{} of {}", s.dominated_in.len(), pairs.len()));
        }
    }
    t.render() + &names.key()
}

/// Each judged family beside its anchors (a family the anchors lack is left out).
pub fn paired<'a>(
    judged: &'a [(Family, Judgement)],
    anchors: &'a Anchors,
) -> Vec<(&'a FamilyAnchors, &'a Judgement)> {
    judged
        .iter()
        .filter_map(|(f, j)| Some((anchors.of(&f.name)?, j)))
        .collect()
}

/// The suite as JSON: per family its days' bound, its anchors and each policy's figures (with
/// anchors, against them too).
pub fn to_json(judged: &[(Family, Judgement)], anchors: Option<&Anchors>) -> Value {
    Value::Array(
        judged
            .iter()
            .map(|(f, j)| {
                let a = anchors.and_then(|a| a.of(&f.name));
                json!({
                    "family": f.name,
                    "about": f.about,
                    "days": f.days.len(),
                    "clairvoyant_replica_minutes": j.bound_mean(),
                    "clairvoyant_miss_pct": j.bound_miss_pct_mean(),
                    "best_fixed": a.map(|a| &a.best_fixed),
                    "best_search": a.map(|a| &a.best_search),
                    "policies": j.policies.iter().map(|p| {
                        let mut v = p.to_json();
                        if let Value::Object(m) = &mut v {
                            m.insert("excess_miss_pct".into(), json!(p.excess_miss_pct_mean()));
                            m.insert("excess_miss_pct_max".into(), json!(p.excess_miss_pct_max()));
                            if let Some(a) = a {
                                let against = a.against(&Point::of(p));
                                m.insert("dominated_by_fixed".into(), json!(against.dominated_by_fixed));
                                m.insert("x_best_search".into(), json!(against.x_best_search));
                            }
                        }
                        v
                    }).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

/// Per policy its [`anchors::Summary`] over the families the anchors hold.
pub fn summaries(judged: &[(Family, Judgement)], anchors: &Anchors) -> Vec<anchors::Summary> {
    let pairs = paired(judged, anchors);
    let n = judged.first().map_or(0, |(_, j)| j.policies.len());
    (0..n).map(|i| anchors::summary(&pairs, i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(seeds: u64, only: &[&str]) -> Plan {
        Plan {
            seeds,
            first: 1,
            gpu: GpuModel::default(),
            settings: Settings::default(),
            recorded: Vec::new(),
            only: only.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn every_generated_family_builds_and_differs_from_the_default() {
        let all = families(&plan(2, &[])).unwrap();
        assert_eq!(all.len(), GENERATED.len());
        let default = &all[0].days[0];
        for f in &all[1..] {
            assert_eq!(f.days.len(), 2, "{}", f.name);
            let d = &f.days[0];
            let same = d.trace == default.trace
                && d.hw.gpu == default.hw.gpu
                && d.settings == default.settings;
            assert!(!same, "{} is the default day", f.name);
        }
    }

    #[test]
    fn an_unknown_family_is_named() {
        let e = families(&plan(1, &["sunny"])).unwrap_err().to_string();
        assert!(e.contains("\"sunny\"") && e.contains("on-off"), "{e}");
    }

    #[test]
    fn a_trace_family_plays_the_story_from_spread_points_warm() {
        let trace = Scenario::steady(2.0, 3600.0, 3).generate().unwrap();
        let mut p = plan(3, &["trace:steady"]);
        p.recorded.push(Recorded {
            name: "steady".to_owned(),
            trace,
            max: Some(12),
        });
        let all = families(&p).unwrap();
        assert_eq!(all.len(), 1);
        let f = &all[0];
        assert_eq!(f.days.len(), 3);
        assert!(f.days.iter().all(|d| d.settings.start == Start::Bound));
        assert_ne!(f.days[0].trace.requests, f.days[1].trace.requests);
        assert_eq!(f.days[0].trace.duration, Story::seed_day().duration());
        assert_eq!(f.max, Some(12));
        assert!(f.about.ends_with("; max 12"), "{}", f.about);
    }
}
