//! The standby pool: a warm start path beside the cold one.
//!
//! A replica that a scale-down gives back can go to sleep instead of being deleted (vLLM's sleep
//! mode, llama.cpp's `--sleep-idle-seconds`, a snapshot kept to restore), up to the pool's size;
//! a scale-up wakes sleepers first, each Ready after the wake time, and cold-starts the rest. A
//! sleeper is no capacity: the scaler sees it only once it wakes, as a replica starting. It costs
//! a price per replica-second asleep, a fraction of a full replica's (1: the GPU stays held while
//! it sleeps; less when its weights go to host memory and the GPU serves something else).
//!
//! The pool starts full (an operator who keeps one has filled it before the day begins) and is
//! filled again only by scale-downs: a replica joins it when its drain ends, and one woken and
//! removed before it is Ready goes back to sleep. This module holds the pool's rules and its
//! bill; [`super::cluster`] moves the replicas.

use serde::Serialize;

/// The pool's shape: how many may sleep, how long waking takes, what sleeping costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Standby {
    /// Most replicas asleep at once (0: no pool, every start is cold).
    pub size: u32,
    /// Seconds from waking a sleeper to its being Ready.
    pub wake_s: f64,
    /// What a replica-second asleep costs, in full replica-seconds (0 to 1).
    pub price: f64,
}

impl Default for Standby {
    fn default() -> Self {
        Standby {
            size: 0,
            wake_s: DEFAULT_WAKE_S,
            price: 1.0,
        }
    }
}

/// The wake time when none is given: a snapshot restore's order of magnitude (vLLM's sleep
/// mode wakes an 8B model in under a second; a restore from a snapshot takes seconds).
pub const DEFAULT_WAKE_S: f64 = 10.0;

/// The pool during a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pool {
    pub standby: Standby,
    /// Replicas asleep now.
    pub asleep: u32,
    /// Replica-seconds spent asleep so far (not priced).
    pub asleep_seconds: f64,
}

impl Pool {
    /// A pool of `standby`'s shape, full.
    pub fn full(standby: Standby) -> Pool {
        Pool {
            standby,
            asleep: standby.size,
            asleep_seconds: 0.0,
        }
    }

    /// Wakes up to `wanted` sleepers; returns how many woke (they leave the pool).
    pub fn wake(&mut self, wanted: u32) -> u32 {
        let woken = wanted.min(self.asleep);
        self.asleep -= woken;
        woken
    }

    /// A replica leaving the Deployment sleeps if the pool has room; returns whether it did.
    pub fn put_to_sleep(&mut self) -> bool {
        let room = self.asleep < self.standby.size;
        if room {
            self.asleep += 1;
        }
        room
    }

    /// Bills the sleepers for `dt` seconds.
    pub fn bill(&mut self, dt: f64) {
        self.asleep_seconds += f64::from(self.asleep) * dt;
    }

    /// What the time asleep costs, in full replica-seconds.
    pub fn cost_seconds(&self) -> f64 {
        self.asleep_seconds * self.standby.price
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::sim::bound::clairvoyant;
    use crate::sim::cluster::Cluster;
    use crate::sim::gpu::GpuModel;
    use crate::sim::replica::Hardware;
    use crate::sim::report::summarize;
    use crate::sim::run::{run, Settings, BOUND_CAP};
    use crate::sim::trace::{Request, Trace};

    const POOL: Standby = Standby {
        size: 2,
        wake_s: 10.0,
        price: 0.25,
    };

    /// Steps `cluster` with nothing arriving from `from` to `to` seconds.
    fn idle(cluster: &mut Cluster, from: f64, to: f64) {
        let mut t = from;
        while t < to - 1e-9 {
            cluster.step(t, 0.25, &[], &mut |_, _| {});
            t += 0.25;
        }
    }

    #[test]
    fn a_scale_up_wakes_the_pool_first_and_cold_starts_the_rest() {
        let mut c = Cluster::new(Hardware::new(GpuModel::default()), 1, 300.0);
        c.pool = Pool::full(POOL);
        c.became_ready.clear();
        c.resize(4, 0.0, 91.0);
        assert_eq!(c.pool.asleep, 0);
        assert_eq!((c.current(), c.ready()), (4, 1));
        assert_eq!(
            c.starting_since(),
            [0.0; 3],
            "a waking replica reads as starting"
        );
        idle(&mut c, 0.0, 9.75);
        assert_eq!(c.ready(), 1, "not Ready before the wake time");
        idle(&mut c, 9.75, 10.25);
        assert_eq!(c.ready(), 3, "the two woken are Ready after the 10 s wake");
        idle(&mut c, 10.25, 91.25);
        assert_eq!(c.ready(), 4, "the third after the 91 s cold start");
        assert_eq!(
            c.became_ready,
            [(0.0, 91.0)],
            "only the cold start is a cold start"
        );
    }

    #[test]
    fn a_replica_given_back_sleeps_and_a_woken_one_removed_sleeps_again() {
        let mut c = Cluster::new(Hardware::new(GpuModel::default()), 4, 300.0);
        c.pool = Pool::full(POOL);
        c.pool.asleep = 0;
        c.resize(1, 0.0, 91.0);
        assert_eq!(
            (c.current(), c.pool.asleep),
            (1, 2),
            "two sleep, the third is deleted"
        );
        c.resize(2, 1.0, 91.0);
        assert_eq!((c.pool.asleep, c.starting_since()), (1, vec![1.0]));
        c.resize(1, 2.0, 91.0);
        assert_eq!(
            (c.current(), c.pool.asleep),
            (1, 2),
            "back to sleep before it woke"
        );
    }

    #[test]
    fn the_bill_counts_the_standby_at_its_price() {
        // A fixed replica on a quiet day of 600 s beside a full pool of two.
        let trace = Trace {
            name: "quiet".to_owned(),
            duration: 600.0,
            requests: vec![Request {
                arrival: 1.0,
                prompt: 100,
                output: 10,
            }],
        };
        let hw = Hardware::new(GpuModel::default());
        let policy = Policy::parse_with_max("queue:24,min=1,max=1", 1).unwrap();
        let settings = Settings {
            standby: POOL,
            ..Settings::default()
        };
        let r = run(&trace, &hw, &policy, &settings);
        assert_eq!(r.standby_seconds, 2.0 * 600.0);
        assert_eq!(r.replica_seconds, 600.0 + 0.25 * 2.0 * 600.0);
        let s = summarize("fixed", &r, 2.0);
        assert_eq!((s.replica_minutes, s.standby_minutes), (15.0, 20.0));
        assert!(clairvoyant(&trace, &hw, &settings, BOUND_CAP).replica_minutes <= 15.0);
    }

    #[test]
    fn the_pool_wakes_what_it_holds_and_takes_back_what_fits() {
        let mut pool = Pool::full(Standby {
            size: 2,
            wake_s: 5.0,
            price: 0.25,
        });
        assert_eq!(
            pool.wake(3),
            2,
            "two asleep: two wake, the third starts cold"
        );
        assert_eq!(pool.wake(1), 0);
        assert!(pool.put_to_sleep());
        assert!(pool.put_to_sleep());
        assert!(!pool.put_to_sleep(), "full: the third is deleted");
        pool.bill(10.0);
        assert_eq!((pool.asleep_seconds, pool.cost_seconds()), (20.0, 5.0));
    }
}
