//! The history forecast (`forecast=history`): demand over the horizon from the recent pattern
//! and from the same time on earlier days, not only the last 30 s.
//!
//! Two views, and the larger rise wins (like the trend, it only ever buys capacity earlier):
//! - the recent pattern: the least-squares trend over a window as long as the horizon itself
//!   (at least the policy's trend window), so a ramp that has lasted a cold start is followed
//!   without chasing the noise of the last few scrapes;
//! - the time of day: the value is kept per five-minute slot of a 24-hour cycle, averaged over
//!   the days seen (an exponential average, each day weighing [`DAY_WEIGHT`]); once a slot and
//!   the slot one horizon later have both been seen on an earlier day, their difference is the
//!   rise the day usually brings. The cycle runs on the caller's clock, so its origin does not
//!   matter, only that a day is 86,400 s.

use crate::project::lookahead::{self, Point};
use serde::{Deserialize, Serialize};

pub const DAY_S: f64 = 86_400.0;
pub const SLOT_S: f64 = 300.0;
const SLOTS: usize = (DAY_S / SLOT_S) as usize;
/// The weight of the newest day in a slot's average.
pub const DAY_WEIGHT: f64 = 0.5;

/// One slot of the daily cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// The average over earlier days, once a day has closed on this slot.
    pub earlier: Option<f64>,
    /// The day now being filled (whole days on the caller's clock), its sum and count.
    pub day: i64,
    pub sum: f64,
    pub count: u32,
}

impl Slot {
    /// The average over the days before `today`, the slot's last day folded in if it is one.
    fn settled(&self, today: i64) -> Option<f64> {
        if self.count == 0 || self.day >= today {
            return self.earlier;
        }
        let mean = self.sum / f64::from(self.count);
        Some(match self.earlier {
            Some(e) => e + DAY_WEIGHT * (mean - e),
            None => mean,
        })
    }
}

/// The daily cycle: one slot per five minutes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Daily {
    pub slots: Vec<Slot>,
}

fn slot_of(t: f64) -> (usize, i64) {
    let day = (t / DAY_S).floor();
    let index = ((t - day * DAY_S) / SLOT_S) as usize;
    (index.min(SLOTS - 1), day as i64)
}

impl Daily {
    /// Records `value` at `now`; a slot's earlier days absorb its last day when a new one begins.
    pub fn record(&mut self, now: f64, value: f64) {
        if !(now.is_finite() && value.is_finite()) {
            return;
        }
        if self.slots.len() != SLOTS {
            self.slots = vec![Slot::default(); SLOTS];
        }
        let (index, day) = slot_of(now);
        let slot = &mut self.slots[index];
        if slot.count > 0 && slot.day != day {
            slot.earlier = slot.settled(day);
            slot.sum = 0.0;
            slot.count = 0;
        }
        slot.day = day;
        slot.sum += value;
        slot.count += 1;
    }

    /// The cycle on a clock `seconds` behind this one (a restart's, or the next day's at
    /// [`DAY_S`]): each slot moves to the one its time falls in there, to the nearest slot, so
    /// the time of day it describes is kept.
    pub fn earlier_by(&self, seconds: f64) -> Daily {
        if self.slots.len() != SLOTS || !seconds.is_finite() {
            return Daily::default();
        }
        let shift = (seconds / SLOT_S).round() as i64;
        let mut slots = vec![Slot::default(); SLOTS];
        for (i, slot) in self.slots.iter().enumerate() {
            let at = slot
                .day
                .saturating_mul(SLOTS as i64)
                .saturating_add(i as i64)
                .saturating_sub(shift);
            slots[at.rem_euclid(SLOTS as i64) as usize] = Slot {
                day: at.div_euclid(SLOTS as i64),
                ..*slot
            };
        }
        Daily { slots }
    }

    /// What earlier days say the value does between `now` and `now + horizon`.
    pub fn rise(&self, now: f64, horizon_s: f64) -> Option<f64> {
        let today = slot_of(now).1;
        let earlier = |t: f64| self.slots.get(slot_of(t).0)?.settled(today);
        Some(earlier(now + horizon_s)? - earlier(now)?)
    }
}

/// The projection and the view that made it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryForecast {
    pub value: f64,
    /// The rise along the recent pattern (`None` with fewer than two points).
    pub pattern: Option<f64>,
    /// The rise the time of day brings (`None` before a day of history).
    pub daily: Option<f64>,
}

/// Records `value` and projects it `horizon_s` ahead from the recent pattern and the time of day.
pub fn project(
    history: &mut Vec<Point>,
    daily: &mut Daily,
    now: f64,
    value: f64,
    horizon_s: f64,
    trend_window_s: f64,
) -> HistoryForecast {
    let window = trend_window_s.max(horizon_s);
    let recent = lookahead::project(history, now, value, horizon_s, window);
    let pattern = recent.slope.map(|s| s * horizon_s);
    let rise_daily = daily.rise(now, horizon_s);
    daily.record(now, value);
    let rise = pattern
        .unwrap_or(0.0)
        .max(rise_daily.unwrap_or(0.0))
        .max(0.0);
    HistoryForecast {
        value: value + rise,
        pattern,
        daily: rise_daily,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Day 0 recorded every 15 s: flat 10 until 08:00, then 40.
    fn a_day_with_a_morning_step() -> Daily {
        let mut daily = Daily::default();
        let mut t = 0.0;
        while t < DAY_S {
            daily.record(t, if t < 8.0 * 3600.0 { 10.0 } else { 40.0 });
            t += 15.0;
        }
        daily
    }

    #[test]
    fn a_day_teaches_the_morning_ramp() {
        let mut daily = a_day_with_a_morning_step();
        assert_eq!(daily.rise(7.0 * 3600.0, 1800.0), None, "no earlier day yet");
        // Day 1 begins: at 07:50 the slot of 08:05 says +30.
        let mut t = DAY_S;
        while t < DAY_S + 8.0 * 3600.0 {
            daily.record(t, 10.0);
            t += 15.0;
        }
        let rise = daily.rise(DAY_S + 7.0 * 3600.0 + 50.0 * 60.0, 900.0);
        assert_eq!(rise, Some(30.0));
    }

    #[test]
    fn the_cycle_keeps_its_time_of_day_on_a_clock_behind() {
        let mut daily = a_day_with_a_morning_step();
        let morning = 7.0 * 3600.0 + 50.0 * 60.0;
        // The next day on a clock that starts again at 0 (the simulator's days).
        let next = daily.earlier_by(DAY_S);
        assert_eq!(next.rise(morning, 900.0), Some(30.0));
        // A restart whose clock is 3 h 7 s behind: 07:50 is now 04:50 (to the slot).
        let behind = 3.0 * 3600.0 + 7.0;
        let restarted = daily.earlier_by(DAY_S + behind);
        assert_eq!(restarted.rise(morning - behind, 900.0), Some(30.0));
        assert_eq!(restarted.rise(morning, 900.0), Some(0.0));
        // A clock that cannot be read keeps nothing; days at the ends of the range (a hostile
        // memory file) move without overflowing.
        assert_eq!(daily.earlier_by(f64::NAN), Daily::default());
        daily.slots[0].day = i64::MIN;
        daily.slots[1].day = i64::MAX;
        assert_eq!(daily.earlier_by(1e300).slots.len(), SLOTS);
    }

    #[test]
    fn the_pattern_follows_a_ramp_and_never_projects_down() {
        let (mut history, mut daily) = (Vec::new(), Daily::default());
        let mut last = None;
        for i in 0..20 {
            let t = f64::from(i) * 15.0;
            last = Some(project(&mut history, &mut daily, t, t / 10.0, 90.0, 30.0));
        }
        let f = last.unwrap();
        assert!((f.value - (28.5 + 9.0)).abs() < 1e-6, "{f:?}");
        let f = project(&mut history, &mut daily, 300.0, 0.0, 90.0, 30.0);
        assert_eq!(f.value, 0.0);
    }
}
