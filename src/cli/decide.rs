//! `infscale decide`: a replica count from pages, held requests and a policy, with its reasons.

use super::checks::{held_flag, now_flag, replicas_flag};
use super::policy_args::PolicyArgs;
use super::read::{read_all, SourceArgs};
use super::state_file::{load_state, save_state};
use super::table;
use anyhow::bail;
use infscale_core::control::cycle::standalone;
use infscale_core::control::decision::Decision;
use infscale_core::policy::Policy;
use infscale_core::project::fleet::ReplicaRead;
use infscale_core::reasons::Steps;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// /metrics pages of the ready replicas: files, or http(s):// URLs (none: only held requests).
    #[arg(value_name = "FILE|URL")]
    pub sources: Vec<String>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Replicas the target has now (spec.replicas) [default: the number of sources].
    #[arg(long)]
    pub current: Option<u32>,
    /// Pods that exist, ready or starting (status.replicas) [default: --current].
    #[arg(long)]
    pub status: Option<u32>,
    /// Requests held at the activator.
    #[arg(long, default_value_t = 0.0)]
    pub held: f64,
    /// JSON file that keeps the HPA's memory, the last activity and counters between runs.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// The time of this decision in seconds [default: now, as Unix time].
    #[arg(long, value_name = "SECONDS")]
    pub now: Option<f64>,
    /// Print the decision as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub read: SourceArgs,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let policy = args.policy.policy()?;
    infscale_core::policy::exports::check(args.read.server, &policy)?;
    let held = held_flag(args.held)?;
    let now = now_flag(args.now)?;
    let current_flag = replicas_flag("--current", args.current)?;
    let status = replicas_flag("--status", args.status)?;
    let mut state = load_state(args.state.as_deref())?;
    let counters = args.state.as_ref().map(|_| &mut state.counters);
    let fleet = read_all(&args.sources, &args.read, counters, now).await?;
    for read in &fleet.outcomes {
        if let Some(Err(e)) = &read.vote {
            // A URL that gave no page does not vote; a file that gave no replica is an error.
            if !crate::edge::source::Reader::is_url(&read.name) {
                bail!("{}: {e}", read.name);
            }
            eprintln!("{}: {e}: this replica does not vote", read.name);
        }
        for error in read.scan.iter().flat_map(|s| &s.errors) {
            eprintln!("{} (line skipped)", error.at(&read.name));
        }
    }
    let current = current_flag.unwrap_or(fleet.outcomes.len() as u32);
    let observation = fleet.observation(now, current, status, Some(held), Some(now));
    // The standalone HPA's one step: the decision, and the action with its reasons.
    let (decision, action) = standalone(&policy, &observation, &mut state);
    save_state(args.state.as_deref(), &state)?;
    if args.json {
        let json = serde_json::json!({
            "policy": infscale_core::policy::keys::spec(&policy),
            "current": decision.current,
            "desired": decision.desired,
            "value": decision.value,
            "active": decision.activity.is_active(),
            "activity": decision.activity,
            "proposal": decision.proposal,
            "why": decision.why,
            "reasons": action.lines.render(),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        if !fleet.outcomes.is_empty() {
            print!("{}", table::render(&fleet.outcomes));
        }
        print(&decision, &action.lines, &policy);
    }
    Ok(read_anything(&fleet.outcomes))
}

/// Exit 1 when pages were named and none gave a replica: the decision above is the fault rule's
/// (a replica not read keeps the target active), not a reading of the fleet.
fn read_anything(outcomes: &[ReplicaRead]) -> ExitCode {
    if outcomes.is_empty() || outcomes.iter().any(|r| matches!(r.vote, Some(Ok(_)))) {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "error: none of the {} sources gave a replica's metrics; the decision is the fault rule's",
        outcomes.len()
    );
    ExitCode::from(1)
}

/// The decision's headline and reasons, as `decide` and `kube` print them.
pub(super) fn print(decision: &Decision, lines: &Steps, policy: &Policy) {
    println!("{}", decision.headline(policy));
    for line in lines {
        println!("  {line}");
    }
}
