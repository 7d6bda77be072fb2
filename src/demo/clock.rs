//! The demo's two clocks: the wall clock everything really runs on, and the simulated clock of
//! the scenario (wall seconds times the speed), in which the policy, the cold start and every
//! reported figure are stated.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct SimClock {
    start: Instant,
    speed: f64,
}

impl SimClock {
    pub fn new(speed: f64) -> SimClock {
        SimClock {
            start: Instant::now(),
            speed,
        }
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Simulated seconds since the start.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * self.speed
    }

    /// Simulated seconds as wall time.
    pub fn wall(&self, sim_s: f64) -> Duration {
        Duration::from_secs_f64((sim_s / self.speed).max(0.0))
    }

    /// The instant of simulated time `sim_s`.
    pub fn at(&self, sim_s: f64) -> Instant {
        self.start + self.wall(sim_s)
    }

    /// Wall seconds as simulated seconds.
    pub fn sim(&self, wall: Duration) -> f64 {
        wall.as_secs_f64() * self.speed
    }
}
