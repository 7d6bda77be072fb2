//! One scrape round, from what each ready replica gave to the replicas that vote: the single
//! path from pages to an [`Observation`], shared by `serve`'s collectors, `parse` and `decide`,
//! the standalone mode and the simulator (which hands over the signals its model produces, as a
//! page would carry them).
//!
//! A page is read with the server's profile; a replica with an earlier reading gets rates
//! since it; a replica that gave no page, or a page without its server's series, is unread (it
//! does not vote and is never idle); a replica whose server says it sleeps is read but kept
//! apart (no capacity: it does not vote); a source where nothing listens is not a replica at
//! all.

use crate::observe::metrics::exposition::Scan;
use crate::observe::metrics::rates::{Rates, Snapshot};
use crate::observe::metrics::{read_page, PageRead, ProfileError, Replica, ServerChoice, Signals};
use crate::project::demand::Observation;
use std::collections::BTreeMap;

/// What one replica gave this round.
#[derive(Debug)]
pub enum Fetched<'a> {
    /// Its `/metrics` page.
    Page(&'a [u8]),
    /// Its page, already read with the round's server (by [`read_page`], as the page arrived:
    /// `serve` keeps no page past its scrape).
    Read(PageRead),
    /// Signals already read (the simulator's replicas).
    Signals(Signals),
    /// No page, and why (timeout, refused, status...).
    Failed(String),
    /// Nothing listens there: no replica runs at this address (a static URL at zero).
    Absent,
}

/// One replica's input to the round.
#[derive(Debug)]
pub struct Input<'a> {
    /// Its name: the pod, the source, the simulated replica.
    pub name: String,
    pub fetched: Fetched<'a>,
    /// Its last reading, for rates (`None`: no rates this round).
    pub earlier: Option<&'a Snapshot>,
    /// The pod's CPU request, cores.
    pub cpu_request_cores: f64,
}

/// Why a replica does not vote.
#[derive(Debug, Clone, PartialEq)]
pub enum Unread {
    /// No page.
    Fetch(String),
    /// A page without what its server's profile needs.
    Page(ProfileError),
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::Fetch(e) => f.write_str(e),
            Unread::Page(e) => write!(f, "{e}"),
        }
    }
}

/// One replica's outcome, in input order.
#[derive(Debug)]
pub struct ReplicaRead {
    pub name: String,
    /// The replica that votes, or why it does not; `None` when nothing listens there.
    pub vote: Option<Result<Replica, Unread>>,
    /// What the scan of its page saw (absent without a page).
    pub scan: Option<Scan>,
    /// Its reading now, for the next round's rates (absent without signals).
    pub snapshot: Option<Snapshot>,
}

/// The round: every replica's outcome, those that vote, and those read as asleep.
#[derive(Debug, Default)]
pub struct Fleet {
    pub outcomes: Vec<ReplicaRead>,
    /// The replicas that vote: read, and not asleep.
    pub replicas: Vec<Replica>,
    /// Replicas whose server says it sleeps: read, but no capacity.
    pub asleep: Vec<Replica>,
}

impl Fleet {
    /// A round with no replica (no scrape yet).
    pub const fn empty() -> Fleet {
        Fleet {
            outcomes: Vec::new(),
            replicas: Vec::new(),
            asleep: Vec::new(),
        }
    }

    /// Ready replicas that could not be read.
    pub fn unread(&self) -> u32 {
        self.outcomes
            .iter()
            .filter(|o| matches!(o.vote, Some(Err(_))))
            .count() as u32
    }

    /// The observation of this round at `now`, for `evaluate` or `decide`.
    pub fn observation(
        &self,
        now: f64,
        current: u32,
        status: Option<u32>,
        held: Option<f64>,
        scraped_at: Option<f64>,
    ) -> Observation<'_> {
        Observation {
            now,
            current,
            status,
            replicas: &self.replicas,
            missing: self.unread(),
            asleep: &self.asleep,
            held,
            scraped_at,
            starting_since: &[],
        }
    }

    /// Moves each replica's reading now into `counters`, by name, for the next round
    /// (replacing earlier ones).
    pub fn remember(&mut self, counters: &mut BTreeMap<String, Snapshot>) {
        for o in &mut self.outcomes {
            if let Some(s) = o.snapshot.take() {
                counters.insert(o.name.clone(), s);
            }
        }
    }
}

/// Reads one round at `now`: each input's page with `server`'s profile, rates against its
/// earlier reading.
pub fn read<'a>(
    inputs: impl IntoIterator<Item = Input<'a>>,
    server: ServerChoice,
    now: f64,
) -> Fleet {
    let mut fleet = Fleet::default();
    for input in inputs {
        let (signals, scan) = match input.fetched {
            Fetched::Absent => (None, None),
            Fetched::Failed(e) => (Some(Err(Unread::Fetch(e))), None),
            Fetched::Signals(s) => (Some(Ok(s)), None),
            Fetched::Page(page) => {
                let read = read_page(page, server);
                (Some(read.signals.map_err(Unread::Page)), Some(read.scan))
            }
            Fetched::Read(read) => (Some(read.signals.map_err(Unread::Page)), Some(read.scan)),
        };
        let mut snapshot = None;
        let vote = signals.map(|signals| {
            signals.map(|signals| {
                let rates = input
                    .earlier
                    .and_then(|p| Rates::between(&signals.counters, &p.counters, now - p.at));
                snapshot = Some(Snapshot {
                    at: now,
                    counters: signals.counters.clone(),
                });
                Replica {
                    name: input.name.clone(),
                    signals,
                    rates,
                    cpu_request_cores: input.cpu_request_cores,
                }
            })
        });
        match &vote {
            Some(Ok(r)) if r.signals.asleep == Some(true) => fleet.asleep.push(r.clone()),
            Some(Ok(r)) => fleet.replicas.push(r.clone()),
            _ => {}
        }
        fleet.outcomes.push(ReplicaRead {
            name: input.name,
            vote,
            scan,
            snapshot,
        });
    }
    fleet
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "vllm:num_requests_running{model_name=\"m\"} 3\nvllm:num_requests_waiting{model_name=\"m\"} 5\n";

    fn input<'a>(name: &str, fetched: Fetched<'a>) -> Input<'a> {
        Input {
            name: name.into(),
            fetched,
            earlier: None,
            cpu_request_cores: 1.0,
        }
    }

    #[test]
    fn pages_vote_failures_are_unread_and_absent_sources_are_no_replica() {
        let fleet = read(
            [
                input("a", Fetched::Page(PAGE.as_bytes())),
                input("b", Fetched::Failed("timed out".into())),
                input("c", Fetched::Absent),
                input("d", Fetched::Page(b"garbage{ 1\n")),
            ],
            ServerChoice::Auto,
            10.0,
        );
        assert_eq!(fleet.replicas.len(), 1);
        assert_eq!(fleet.unread(), 2);
        let obs = fleet.observation(10.0, 3, None, Some(0.0), Some(10.0));
        assert_eq!((obs.replicas.len(), obs.missing), (1, 2));
        assert!(fleet.outcomes[2].vote.is_none());
        let mut counters = BTreeMap::new();
        let mut fleet = fleet;
        fleet.remember(&mut counters);
        assert_eq!(counters.keys().collect::<Vec<_>>(), ["a"]);
    }
}
