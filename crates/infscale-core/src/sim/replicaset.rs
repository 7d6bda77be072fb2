//! Which Ready replica a scale-down removes: the ReplicaSet controller's ranking, as Kubernetes
//! (1.31+, `LogarithmicScaleDown` on) applies it to pods that are all scheduled, running and
//! Ready, each on its own node.
//!
//! The controller deletes the pod that ranks first by, in order: the lower
//! `controller.kubernetes.io/pod-deletion-cost` (absent is 0); the shorter time since Ready, in
//! powers of two of nanoseconds (a pod Ready 3 minutes ago and one Ready 4 minutes ago share a
//! rank); then the pod UID, which is random. Restart counts and creation times come between in
//! the controller but are equal here (no restarts; creation time follows readiness). Without
//! the annotation that removes a recent replica chosen by chance, whatever it is streaming; with
//! it, the one with the fewest requests as of the last write.

use super::replica::SimReplica;

/// The rank of a time since Ready, as the controller buckets it: `log2` of the nanoseconds
/// (-1 for none).
fn ready_rank(ready_since: f64, now: f64) -> i64 {
    let nanos = (now - ready_since) * 1e9;
    if nanos >= 1.0 {
        nanos.log2().floor() as i64
    } else {
        -1
    }
}

/// A stand-in for the pod's UID: a fixed scramble of its id, so ties fall as by chance but
/// every run falls the same way.
fn uid(id: u32) -> u64 {
    let mut x = u64::from(id).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A Ready pod the controller may delete: where it is in its list, its deletion cost, when it
/// became Ready, and a number standing for its UID.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub index: usize,
    pub cost: Option<i32>,
    pub ready_since: f64,
    pub id: u32,
}

/// The candidate the controller deletes first at `now`, if any.
pub fn pick(candidates: impl IntoIterator<Item = Candidate>, now: f64) -> Option<usize> {
    candidates
        .into_iter()
        .min_by_key(|c| {
            (
                c.cost.unwrap_or(0),
                ready_rank(c.ready_since, now),
                uid(c.id),
            )
        })
        .map(|c| c.index)
}

/// The index of the Ready replica the controller deletes first at `now`, if any is Ready.
pub fn victim(replicas: &[SimReplica], now: f64) -> Option<usize> {
    let ready = replicas.iter().enumerate().filter(|(_, r)| r.is_ready());
    pick(
        ready.map(|(index, r)| Candidate {
            index,
            cost: r.deletion_cost,
            ready_since: r.ready_since,
            id: r.id,
        }),
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::replica::Phase;

    fn ready(id: u32, since: f64, cost: Option<i32>) -> SimReplica {
        let mut r = SimReplica::new(id, Phase::Ready);
        r.ready_since = since;
        r.deletion_cost = cost;
        r
    }

    #[test]
    fn the_lowest_cost_goes_first_then_the_most_recently_ready() {
        let now = 10_000.0;
        let rs = [
            ready(0, 0.0, None),
            ready(1, 9_000.0, None),
            ready(2, 5_000.0, None),
        ];
        assert_eq!(victim(&rs, now), Some(1), "ready 1000 s ago, the newest");
        let rs = [ready(0, 0.0, Some(-1)), ready(1, 9_000.0, None)];
        assert_eq!(victim(&rs, now), Some(0), "a lower cost beats recency");
        let rs = [ready(0, 0.0, Some(3)), ready(1, 9_000.0, Some(40))];
        assert_eq!(victim(&rs, now), Some(0));
    }

    #[test]
    fn times_in_one_power_of_two_share_a_rank_and_the_uid_decides() {
        // 180 s and 240 s: both within [2^37, 2^38) ns (137 s .. 275 s).
        assert_eq!(ready_rank(820.0, 1000.0), ready_rank(760.0, 1000.0));
        assert_ne!(ready_rank(990.0, 1000.0), ready_rank(760.0, 1000.0));
        let rs = [ready(0, 820.0, None), ready(1, 760.0, None)];
        let expected = if uid(0) < uid(1) { 0 } else { 1 };
        assert_eq!(victim(&rs, 1000.0), Some(expected));
        assert_eq!(victim(&[], 1.0), None);
    }
}
