//! A standing reserve learned from the bursts this target's traffic has sprung on it
//! (`reserve=auto`): levels its need reached, held while bursts keep coming or where the same
//! minutes of earlier days needed them, and falling when the traffic falls.
//!
//! A replica ordered for a burst is Ready a start later; a burst shorter than that is over
//! before it arrives, and what serves it is capacity already there. Which traffic is like that
//! cannot be told from one reading (a burst after an idle gap looks like a quiet morning while
//! the gap lasts), but it can be told from the target's own recent past, in the replicas of work
//! arriving, at every scrape:
//! - an *onset*: the need [`ONSET_RISE`] replicas above its lowest over the last start. Two onsets
//!   to a level, a start to [`REPEAT_S`] apart, are bursts that repeat; a ramp a day sees once
//!   is not;
//! - a *surprise*: the need [`MIN_SURPRISE`] above what was Ready now: what the policy itself
//!   (without the reserve) would have had, having ordered it a start ago and kept it through its
//!   scale-down window, and no more than the replicas actually Ready (an order the HPA never
//!   acted on, between its reads, readied nothing): a burst that outran the policy.
//!
//! Either is evidence that bursts outrun the policy here. The reserve is a floor under the
//! policy's own value, as a fixed fleet chosen for the bursts would be, above which the policy
//! still reacts. It is the higher of two levels, each earned by recent evidence and each
//! falling when the traffic falls:
//! - *recent*: for [`RECENT_S`] after the last evidence, the highest need of the last
//!   [`RECENT_S`]. Bursts minutes apart keep their level; half an hour after the last one it
//!   is gone.
//! - *daily*: the need of the minutes a start ahead, as the same minutes of the day before and
//!   of the same day a week before (two days before, until a week is known) both saw it: the
//!   lower of the two. A burst one day saw holds nothing the next; a burst every afternoon is
//!   met every afternoon; at night it is the night's need, so the fleet falls with the traffic.
//!
//! Nothing the reserve holds outlives its evidence by more than [`RECENT_S`], except what the
//! same minutes of both earlier days needed.
//!
//! It also keeps the *peak*: the highest level the need reached within [`MEMORY_S`] (and the
//! most replicas Ready). Once the memory holds [`PEAK_DAYS`], the rate forecast's floor orders no
//! more than that peak ([`Reserve::peak`]): a forecast reads a ramp's slope, and the target's
//! own past says where its ramps stop. A cap only ever orders less. Where the fleet ran more
//! than [`NEED_GUIDE_RATIO`] times the peak need, something the need does not count (long
//! prompts queued behind each other's prefill, say) set the count, and the peak caps nothing.
//!
//! There the need is judged by the requests as well ([`Need::requests`]): the requests running
//! and waiting on the replicas over what a saturated replica was seen to run, with a queue up to
//! [`QUEUE_ALLOWANCE`] of it. Clumps of such requests are over before a start, so what meets
//! them is a level held from the last ones.
//!
//! The state is bounded (the orders of the last start plus scale-down window, the needs of the
//! last [`RECENT_S`], a need per minute of [`DAILY_DAYS`], and one time per replica count) and serialises with the rest of the
//! decision's memory, so it survives a restart of `decide` and travels in `serve`'s state.

use crate::project::lookahead::Point;
use serde::{Deserialize, Serialize};

/// A surprise is a need this many replicas above what was Ready: the need is work at full
/// utilisation, so a third of a replica short is a queue that grows by a third of a replica's
/// rate, while the noise of one reading is smaller.
pub const MIN_SURPRISE: f64 = 0.3;

/// How long the peak is remembered, seconds: two weeks, weekdays and weekends.
pub const MEMORY_S: f64 = 14.0 * DAY_S;

/// How recent the evidence of bursts and the needs the reserve holds are, seconds: bursts a few
/// minutes apart keep their level, a burst half an hour ago holds nothing, and a falling
/// traffic's reserve falls half an hour behind it.
pub const RECENT_S: f64 = 1800.0;

/// A day, seconds.
pub const DAY_S: f64 = 86_400.0;

/// A rise of the need by this many replicas within one start is an onset: demand no reactive
/// policy meets in time.
pub const ONSET_RISE: f64 = 1.5;

/// Two onsets to a level within this many seconds of each other (and a start apart) make the
/// level a reserve: bursts that repeat, not a ramp a day sees once, seconds.
pub const REPEAT_S: f64 = 600.0;

/// The peak need caps the forecast only where the most replicas Ready within [`MEMORY_S`] were
/// at most this many times it: beyond that, the need (work at full utilisation) is no guide to
/// the count the target runs at.
pub const NEED_GUIDE_RATIO: f64 = 4.0;

/// The peak caps nothing until the memory holds this many days: a week, so the peak is the
/// week's, weekend and weekdays; after fewer days a day above them met a cap set by lower ones,
/// and the surprises it sprang were held in the reserve for two weeks.
pub const PEAK_DAYS: u32 = 7;

/// Where the need is no guide, a replica counts as full of requests at this many times what a
/// saturated replica runs: a queue up to half as long as what runs waits less than a request's
/// own service. Chosen on the Mooncake trace (1: 3.2x the bound for nothing missed; 1.5: 2.3x,
/// 0.2% missed beyond the bound; 2: 0.5%; 3: 1.1%), where alone among the suite's families the
/// need is no guide (docs/decisions.md).
pub const QUEUE_ALLOWANCE: f64 = 1.5;

/// How much of each saturated reading the requests a saturated replica runs takes in: a mean
/// over about ten readings, under a minute of saturation.
const PER_REPLICA_WEIGHT: f64 = 0.1;

/// A slot of the daily memory, seconds: a minute, so that a burst at a minute of the day is
/// held for that minute, not for the five around it.
pub const SLOT_S: f64 = 60.0;

/// Slots in a day.
const SLOTS_PER_DAY: i64 = (DAY_S / SLOT_S) as i64;

/// Days the daily memory keeps: a week and a day, for the same day a week ago.
pub const DAILY_DAYS: i64 = 8;

/// How far past a start the daily memory looks, seconds: a replica ordered for the minute a
/// start ahead is Ready at its beginning, not its end.
pub const DAILY_AHEAD_S: f64 = 60.0;

/// Reserve levels remembered at most (a level is a replica count).
const MAX_LEVEL: usize = 1024;

/// Orders remembered at most (one per evaluation over a start plus a scale-down window), and
/// needs (one per scrape over [`RECENT_S`]).
const MAX_ORDERS: usize = 4096;

/// One evaluation's order: what the policy asked for without the reserve, in replicas.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub at: f64,
    pub replicas: f64,
    /// The replicas needed then.
    #[serde(default)]
    pub need: f64,
}

/// What the rule remembers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reserve {
    /// Recent orders, oldest first.
    #[serde(default)]
    pub orders: Vec<Order>,
    /// The needs of the last [`RECENT_S`] (judged as surprises are), oldest first.
    #[serde(default)]
    pub needs: Vec<Point>,
    /// When a surprise or a repeated onset was last seen.
    #[serde(default)]
    pub evidence: Option<f64>,
    /// The highest need in each minute of the last [`DAILY_DAYS`] days, by slot since the
    /// clock's origin (`floor(t / SLOT_S)`), oldest first.
    #[serde(default)]
    pub daily: Vec<(i64, f64)>,
    /// The first slot noted: how far back the daily memory reaches.
    #[serde(default)]
    pub daily_from: Option<i64>,
    /// For each level `k` (index `k - 1`), when an onset last reached it.
    #[serde(default)]
    pub onsets: Vec<f64>,
    /// For each level `k` (index `k - 1`), when the need last reached it.
    #[serde(default)]
    pub reached: Vec<f64>,
    /// For each count `k` (index `k - 1`), when at least that many replicas were last Ready.
    #[serde(default)]
    pub ready: Vec<f64>,
    /// When the first need was noted.
    #[serde(default)]
    pub first: Option<f64>,
    /// Whole days carried from before ([`Reserve::after_a_day`]).
    #[serde(default)]
    pub days: u32,
    /// The requests a saturated replica runs (running per replica while requests wait on the
    /// replicas), a mean over the recent saturated readings.
    #[serde(default)]
    pub per_replica: Option<f64>,
}

/// What one evaluation needs, in replicas.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Need {
    /// The work arriving, in replicas at full utilisation.
    pub work: f64,
    /// The requests in flight over what a replica holds ([`Reserve::requests_need`]), where
    /// the work is no guide.
    pub requests: Option<f64>,
}

impl Need {
    /// The need surprises and onsets are judged on: the larger.
    fn judged(self) -> f64 {
        self.requests.map_or(self.work, |r| self.work.max(r))
    }
}

impl From<f64> for Need {
    fn from(work: f64) -> Need {
        Need {
            work,
            requests: None,
        }
    }
}

/// A surprise seen at one evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Surprise {
    /// Replicas needed now.
    pub need: f64,
    /// Replicas the policy alone would have had Ready now.
    pub ready: f64,
}

/// The reserve at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// Replicas held standing (0: none learned).
    pub replicas: u32,
    /// When the last surprise or repeated onset was seen.
    pub since: f64,
}

impl Reserve {
    /// Notes one evaluation: `need` replicas needed now (the peak keeps its work), the policy's
    /// own order `ordered`
    /// (replicas, before the reserve), the replicas `ready_now` actually Ready (when known),
    /// over a start of `start_s` and a scale-down window of `down_window_s`. Returns the
    /// surprise, when the need passed what was Ready: what the policy alone would have had,
    /// and no more than `ready_now`.
    pub fn note(
        &mut self,
        now: f64,
        need: impl Into<Need>,
        ordered: f64,
        ready_now: Option<f64>,
        start_s: f64,
        down_window_s: f64,
    ) -> Option<Surprise> {
        let need = need.into();
        let (work, need) = (need.work, need.judged());
        if !(now.is_finite() && work.is_finite() && need.is_finite() && ordered.is_finite()) {
            return None;
        }
        let keep_s = start_s.max(0.0) + down_window_s.max(0.0);
        let surprise = self
            .ready_at(now, start_s, down_window_s)
            .map(|alone| ready_now.map_or(alone, |r| alone.min(r)))
            .and_then(|ready| (need - ready >= MIN_SURPRISE).then_some(Surprise { need, ready }));
        if surprise.is_some() {
            self.evidence = Some(now);
        }
        self.note_onset(now, need, start_s);
        self.reach(now, work, ready_now);
        self.note_daily(now, need);
        self.needs.retain(|p| p.at <= now && now - p.at <= RECENT_S);
        self.needs.push(Point {
            at: now,
            value: need.max(0.0),
        });
        if self.needs.len() > MAX_ORDERS {
            let excess = self.needs.len() - MAX_ORDERS;
            self.needs.drain(..excess);
        }
        self.orders.retain(|o| o.at <= now && now - o.at <= keep_s);
        self.orders.push(Order {
            at: now,
            replicas: ordered.max(0.0),
            need: need.max(0.0),
        });
        if self.orders.len() > MAX_ORDERS {
            let excess = self.orders.len() - MAX_ORDERS;
            self.orders.drain(..excess);
        }
        surprise
    }

    /// Notes the level the need reached and the replicas Ready, for the peak.
    fn reach(&mut self, now: f64, need: f64, ready_now: Option<f64>) {
        self.first.get_or_insert(now);
        stamp(&mut self.reached, level_of(need), now);
        if let Some(r) = ready_now.filter(|r| r.is_finite() && *r >= 1.0) {
            stamp(&mut self.ready, level_of(r), now);
        }
    }

    /// Keeps the need in its minute of the daily memory.
    fn note_daily(&mut self, now: f64, need: f64) {
        let slot = slot_of(now);
        self.daily_from.get_or_insert(slot);
        if need.is_nan() || need <= 0.0 {
            return;
        }
        // Slots are noted in order; a clock that went back starts the memory again.
        if self.daily.last().is_some_and(|&(s, _)| s > slot) {
            self.daily.clear();
        }
        let oldest = slot.saturating_sub(DAILY_DAYS * SLOTS_PER_DAY);
        let stale = self.daily.partition_point(|&(s, _)| s <= oldest);
        self.daily.drain(..stale);
        match self.daily.last_mut() {
            Some((s, v)) if *s == slot => *v = v.max(need),
            _ => self.daily.push((slot, need)),
        }
    }

    /// What the daily memory holds over the next `ahead_s` from `now`: in each slot, the lower
    /// of the day before's and the same day a week before's (two days before until a week is
    /// known), the highest of those.
    pub fn daily_level(&self, now: f64, ahead_s: f64) -> f64 {
        let (Some(from), true) = (self.daily_from, now.is_finite()) else {
            return 0.0;
        };
        let slot = slot_of(now);
        let known_days = slot.saturating_sub(from) / SLOTS_PER_DAY;
        let back = match known_days {
            d if d >= 7 => 7,
            d if d >= 2 => 2,
            _ => return 0.0,
        };
        let at = |s: i64| {
            self.daily
                .binary_search_by_key(&s, |&(k, _)| k)
                .map_or(0.0, |i| self.daily[i].1)
        };
        let last = slot_of(now + ahead_s.max(0.0)).max(slot);
        (slot..=last.min(slot + SLOTS_PER_DAY))
            .map(|s| at(s - SLOTS_PER_DAY).min(at(s - back * SLOTS_PER_DAY)))
            .fold(0.0, f64::max)
    }

    /// An onset: the need `ONSET_RISE` above its lowest over the last start. A second onset to
    /// a level, more than a start and at most [`REPEAT_S`] after the first, is evidence.
    fn note_onset(&mut self, now: f64, need: f64, start_s: f64) {
        let Some(low) = self
            .orders
            .iter()
            .filter(|o| now - o.at <= start_s)
            .map(|o| o.need)
            .reduce(f64::min)
        else {
            return;
        };
        if need - low < ONSET_RISE {
            return;
        }
        let level = level_of(need);
        if self.onsets.len() < level {
            self.onsets.resize(level, f64::NEG_INFINITY);
        }
        let mut repeated = 0;
        for (i, t) in self.onsets.iter_mut().enumerate().take(level) {
            let since = now - *t;
            if since <= start_s {
                continue;
            }
            if since <= REPEAT_S {
                repeated = i + 1;
            }
            *t = now;
        }
        if repeated > 0 {
            self.evidence = Some(now);
        }
    }

    /// The replicas the policy alone would have had Ready at `now`: those it still wants (its
    /// count, the most it ordered over the scale-down window) that it had wanted a start ago.
    /// `None` until the orders reach back a start.
    fn ready_at(&self, now: f64, start_s: f64, down_window_s: f64) -> Option<f64> {
        let oldest = self.orders.first()?;
        if now - oldest.at < start_s {
            return None;
        }
        let count_at = |t: f64| {
            self.orders
                .iter()
                .filter(|o| o.at <= t && t - o.at <= down_window_s)
                .map(|o| o.replicas)
                .reduce(f64::max)
        };
        let then = count_at(now - start_s)?;
        let current = count_at(now).unwrap_or(then);
        Some(then.min(current))
    }

    /// What outlasts a day, its times `seconds` earlier (the day before a run), its daily
    /// memory `cycle_s` earlier (the same, or a whole day where the simulator's days are
    /// shorter): the evidence, the needs, the daily memory and the peak, not the orders.
    pub fn earlier_by(&self, seconds: f64, cycle_s: f64) -> Reserve {
        let shift = if cycle_s.is_finite() {
            (cycle_s / SLOT_S).round() as i64
        } else {
            0
        };
        let earlier = |v: &[f64]| v.iter().map(|t| t - seconds).collect();
        Reserve {
            orders: Vec::new(),
            needs: self
                .needs
                .iter()
                .map(|p| Point {
                    at: p.at - seconds,
                    value: p.value,
                })
                .collect(),
            evidence: self.evidence.map(|t| t - seconds),
            daily: self
                .daily
                .iter()
                .map(|&(k, v)| (k.saturating_sub(shift), v))
                .collect(),
            daily_from: self.daily_from.map(|k| k.saturating_sub(shift)),
            onsets: earlier(&self.onsets),
            reached: earlier(&self.reached),
            ready: earlier(&self.ready),
            first: self.first.map(|t| t - seconds),
            days: self.days,
            per_replica: self.per_replica,
        }
    }

    /// What outlasts a whole day, for the day after it (its times `day_s` earlier): as
    /// [`Reserve::earlier_by`], and the memory counts one more day (the simulator's days are
    /// shorter than a real one).
    pub fn after_a_day(&self, day_s: f64, cycle_s: f64) -> Reserve {
        Reserve {
            days: self.days.saturating_add(1),
            ..self.earlier_by(day_s, cycle_s)
        }
    }

    /// The peak: the highest level the need reached within [`MEMORY_S`], once the memory holds
    /// [`PEAK_DAYS`] (days carried from before, or that many days of readings), and only while
    /// the need is a guide ([`Reserve::need_is_no_guide`]).
    pub fn peak(&self, now: f64) -> Option<u32> {
        let known = self.days >= PEAK_DAYS
            || self
                .first
                .is_some_and(|f| now - f >= f64::from(PEAK_DAYS) * DAY_S);
        if !known || self.need_is_no_guide(now) {
            return None;
        }
        top(&self.reached, now)
    }

    /// Whether the need (work at full utilisation) is no guide to the count: the most replicas
    /// Ready within [`MEMORY_S`] were more than [`NEED_GUIDE_RATIO`] times the highest need.
    pub fn need_is_no_guide(&self, now: f64) -> bool {
        let need = top(&self.reached, now).unwrap_or(0);
        let ready = top(&self.ready, now).unwrap_or(0);
        need > 0 && f64::from(ready) > NEED_GUIDE_RATIO * f64::from(need)
    }

    /// The replicas the requests in flight need, where the need is no guide
    /// ([`Reserve::need_is_no_guide`]): `running` and `waiting` on the `replicas` read over
    /// [`QUEUE_ALLOWANCE`] times what a saturated replica runs. A reading with requests waiting
    /// is a saturated one and updates that; `None` before one is seen, or where the need is a
    /// guide.
    pub fn requests_need(
        &mut self,
        now: f64,
        (running, waiting): (f64, f64),
        replicas: usize,
    ) -> Option<f64> {
        if !(running.is_finite() && waiting.is_finite()) || replicas == 0 {
            return None;
        }
        if waiting > 0.0 && running > 0.0 {
            let seen = running / replicas as f64;
            self.per_replica = Some(
                self.per_replica
                    .map_or(seen, |p| p + PER_REPLICA_WEIGHT * (seen - p)),
            );
        }
        let per_replica = self.per_replica.filter(|p| *p > 0.0)?;
        self.need_is_no_guide(now)
            .then(|| (running + waiting) / (QUEUE_ALLOWANCE * per_replica))
    }

    /// The reserve at `now`, for replicas ordered now and Ready a start of `start_s` later: the
    /// higher of the daily memory's level over that start ([`Reserve::daily_level`]) and,
    /// within [`RECENT_S`] of the last evidence of bursts, the highest need of the last
    /// [`RECENT_S`].
    pub fn level(&self, now: f64, start_s: f64) -> Level {
        let daily = self.daily_level(now, start_s + DAILY_AHEAD_S);
        let recent = self.evidence.filter(|&t| now - t <= RECENT_S && t <= now);
        let top = recent.map_or(0.0, |_| {
            self.needs
                .iter()
                .filter(|p| now - p.at <= RECENT_S && p.at <= now)
                .map(|p| p.value)
                .fold(0.0, f64::max)
        });
        let top = top.max(daily);
        if top <= 0.0 {
            return Level {
                replicas: 0,
                since: f64::NAN,
            };
        }
        Level {
            replicas: level_of(top) as u32,
            since: recent.unwrap_or(now - DAY_S),
        }
    }
}

/// Sets the time of every level up to `level` to `now`.
fn stamp(times: &mut Vec<f64>, level: usize, now: f64) {
    if times.len() < level {
        times.resize(level, f64::NEG_INFINITY);
    }
    for t in times.iter_mut().take(level) {
        *t = now;
    }
}

/// The highest level whose time is within [`MEMORY_S`] of `now`.
fn top(times: &[f64], now: f64) -> Option<u32> {
    times
        .iter()
        .rposition(|&at| now - at <= MEMORY_S)
        .map(|i| i as u32 + 1)
}

/// The slot `t` falls in, counted from the clock's origin.
fn slot_of(t: f64) -> i64 {
    (t / SLOT_S).floor() as i64
}

/// The count a need of `need` replicas takes.
fn level_of(need: f64) -> usize {
    (need.ceil().max(1.0) as usize).min(MAX_LEVEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `need` every 5 s from `from` to `to`, the policy ordering `order(need)`.
    fn feed(r: &mut Reserve, from: f64, to: f64, need: impl Fn(f64) -> f64, order: f64) {
        let mut t = from;
        while t < to {
            r.note(t, need(t), order.max(need(t)), None, 90.0, 60.0);
            t += 5.0;
        }
    }

    #[test]
    fn smooth_traffic_the_policy_follows_keeps_no_reserve() {
        let mut r = Reserve::default();
        // A ramp from 1 to 4 replicas over 20 minutes, ordered a start ahead.
        let mut t = 0.0;
        while t < 1200.0 {
            let need = 1.0 + 3.0 * t / 1200.0;
            let ahead = 1.0 + 3.0 * f64::min(t + 90.0, 1200.0) / 1200.0;
            r.note(t, need, ahead, None, 90.0, 60.0);
            t += 5.0;
        }
        assert_eq!(r.level(t, 90.0).replicas, 0);
    }

    #[test]
    fn a_burst_after_a_gap_keeps_its_level_for_half_an_hour() {
        let mut r = Reserve::default();
        feed(&mut r, 0.0, 600.0, |_| 0.2, 1.0);
        // A burst needing 3 replicas for 60 s: the policy could not have had them Ready.
        let burst = |t: f64| {
            if (600.0..660.0).contains(&t) {
                3.0
            } else {
                0.2
            }
        };
        feed(&mut r, 600.0, 900.0, burst, 1.0);
        let level = r.level(900.0, 90.0);
        assert_eq!(level.replicas, 3);
        assert!((600.0..660.0).contains(&level.since), "{level:?}");
        // Quiet since: half an hour after the last evidence it holds nothing.
        feed(&mut r, 900.0, level.since + RECENT_S, |_| 0.2, 1.0);
        assert_eq!(r.level(level.since + RECENT_S - 5.0, 90.0).replicas, 3);
        feed(
            &mut r,
            level.since + RECENT_S,
            level.since + RECENT_S + 10.0,
            |_| 0.2,
            1.0,
        );
        assert_eq!(r.level(level.since + RECENT_S + 10.0, 90.0).replicas, 0);
    }

    #[test]
    fn bursts_that_repeat_hold_their_level_and_a_single_ramp_does_not() {
        // A ramp from 0.2 to 3 replicas within a minute, once: the policy follows it.
        let mut ramp = Reserve::default();
        feed(
            &mut ramp,
            0.0,
            600.0,
            |t| (0.2 + (t - 300.0) / 20.0).clamp(0.2, 3.0),
            5.0,
        );
        assert_eq!(ramp.level(600.0, 90.0).replicas, 0);
        // Bursts to 3 replicas for 40 s every 3 minutes, which a policy with a long window
        // bridges (it orders 5 all along): no surprise, but the onsets repeat.
        let mut bursts = Reserve::default();
        let burst = |t: f64| if t % 180.0 < 40.0 { 3.0 } else { 0.2 };
        feed(&mut bursts, 0.0, 170.0, burst, 5.0);
        assert_eq!(
            bursts.level(170.0, 90.0).replicas,
            0,
            "one onset is not a pattern"
        );
        feed(&mut bursts, 170.0, 600.0, burst, 5.0);
        assert_eq!(bursts.level(600.0, 90.0).replicas, 3);
    }

    #[test]
    fn an_order_that_readied_nothing_does_not_hide_a_surprise() {
        // One replica Ready all along. One reading ordered two (between the HPA's reads, so
        // nothing was started); the policy orders two again from 250 s, Ready a start later;
        // at 300 s the need is 1.4 replicas.
        let run = |ready_now: Option<f64>| {
            let mut r = Reserve::default();
            let mut t = 0.0;
            let mut seen = None;
            while t <= 300.0 {
                let ordered = if t == 150.0 || t >= 250.0 { 2.0 } else { 1.0 };
                let need = if t >= 300.0 { 1.4 } else { 0.3 };
                seen = seen.or(r.note(t, need, ordered, ready_now, 90.0, 60.0));
                t += 5.0;
            }
            (seen, r.level(t, 90.0).replicas)
        };
        // By the orders alone, two were Ready and 1.4 fit: no surprise.
        assert_eq!(run(None), (None, 0));
        // One was: the burst outran it, and its level is held.
        let (seen, level) = run(Some(1.0));
        assert_eq!(seen.map(|s| s.ready), Some(1.0));
        assert_eq!(level, 2);
    }

    #[test]
    fn the_peak_is_the_weeks_highest_need_once_a_week_is_known() {
        let mut r = Reserve::default();
        // A day whose need climbs to 2.4 replicas, with 3 Ready at the top.
        let mut t = 0.0;
        while t < 1200.0 {
            let need = 0.5 + 1.9 * t / 1200.0;
            r.note(t, need, need.ceil(), Some(need.ceil()), 90.0, 60.0);
            t += 5.0;
        }
        assert_eq!(r.peak(t), None, "one day is not a week");
        for _ in 0..PEAK_DAYS - 1 {
            r = r.after_a_day(1200.0, DAY_S);
        }
        assert_eq!(r.peak(0.0), None, "six days are not a week");
        r = r.after_a_day(1200.0, DAY_S);
        assert_eq!(r.peak(0.0), Some(3));
        // It travels as the rest of the memory does, and is forgotten after two weeks.
        let back: Reserve = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.peak(0.0), Some(3));
        assert_eq!(r.peak(MEMORY_S), None);
        // Without days carried, a week of readings makes it known as well.
        let mut live = Reserve::default();
        live.note(0.0, 2.0, 2.0, Some(2.0), 90.0, 60.0);
        assert_eq!(live.peak(6.0 * DAY_S), None);
        assert_eq!(live.peak(f64::from(PEAK_DAYS) * DAY_S), Some(2));
    }

    #[test]
    fn a_fleet_far_above_its_need_is_capped_by_no_peak() {
        // 20 replicas Ready for a need of 2: something the need does not count sets the count
        // (long prefills queued behind each other), so the need's peak is no cap.
        let mut r = Reserve::default();
        r.note(0.0, 2.0, 20.0, Some(20.0), 90.0, 60.0);
        r.days = PEAK_DAYS;
        assert_eq!(r.peak(10.0), None);
        let mut near = Reserve::default();
        near.note(0.0, 2.0, 8.0, Some(8.0), 90.0, 60.0);
        near.days = PEAK_DAYS;
        assert_eq!(near.peak(10.0), Some(2));
    }

    #[test]
    fn where_the_need_is_no_guide_clumps_of_requests_set_the_level() {
        // 20 replicas Ready for a work need of 2 (long prompts queued behind each other's
        // prefill): the need is no guide.
        let mut r = Reserve::default();
        r.note(0.0, 2.0, 20.0, Some(20.0), 90.0, 60.0);
        assert!(r.need_is_no_guide(0.0));
        // Nothing saturated seen yet: no requests need.
        assert_eq!(r.requests_need(5.0, (10.0, 0.0), 10), None);
        // Saturated: 2 running per replica with requests waiting.
        assert_eq!(r.requests_need(10.0, (20.0, 10.0), 10), Some(10.0));
        assert_eq!(r.per_replica, Some(2.0));
        // A clump of 48 requests in flight on 10 replicas, judged a start later: a surprise at
        // the level they need (48 / (1.5 x 2) = 16), though the work reads 2.
        let mut t = 15.0;
        while t < 120.0 {
            r.note(t, 2.0, 10.0, Some(10.0), 90.0, 60.0);
            t += 5.0;
        }
        let clump = r.requests_need(t, (20.0, 28.0), 10);
        assert!(r
            .note(
                t,
                Need {
                    work: 2.0,
                    requests: clump
                },
                10.0,
                Some(10.0),
                90.0,
                60.0
            )
            .is_some());
        assert_eq!(r.level(t, 90.0).replicas, 16);
        // The peak keeps the work: the need is still no guide.
        assert!(r.need_is_no_guide(t));
        // Where the need is a guide, the requests are not counted.
        let mut guide = Reserve::default();
        guide.note(0.0, 4.0, 5.0, Some(5.0), 90.0, 60.0);
        assert_eq!(guide.requests_need(5.0, (20.0, 28.0), 5), None);
        assert_eq!(guide.per_replica, Some(4.0));
        assert_eq!(guide.requests_need(5.0, (f64::NAN, 1.0), 5), None);
    }

    /// Notes a day's `need` (by seconds since its midnight) every 30 s of day `day`, from
    /// `from` to `until` seconds into it, the policy ordering the need itself.
    fn live_day(
        r: &mut Reserve,
        day: f64,
        (from, until): (f64, f64),
        need: impl Fn(f64, f64) -> f64,
    ) {
        let mut t = from;
        while t < until {
            let n = need(day, t);
            r.note(day * DAY_S + t, n, n, Some(n.ceil()), 90.0, 60.0);
            t += 30.0;
        }
    }

    #[test]
    fn the_daily_memory_holds_what_both_earlier_days_needed_and_falls_at_night() {
        // Half a replica all day; three from 10:00 to 10:10 every day; six from 15:00 to 15:05
        // on the second day only.
        let need = |day: f64, t: f64| {
            if (36_000.0..36_600.0).contains(&t) {
                3.0
            } else if day == 1.0 && (54_000.0..54_300.0).contains(&t) {
                6.0
            } else {
                0.5
            }
        };
        let mut r = Reserve::default();
        live_day(&mut r, 0.0, (0.0, DAY_S), need);
        // One day is no pattern: after the first day's burst has gone stale, nothing is held.
        live_day(&mut r, 1.0, (0.0, 35_880.0), need);
        assert_eq!(r.level(DAY_S + 35_880.0, 90.0).replicas, 0);
        live_day(&mut r, 1.0, (35_880.0, DAY_S), need);
        // The third morning, two minutes before ten: the burst both earlier days saw a start
        // ahead is held, though nothing has happened for hours.
        live_day(&mut r, 2.0, (0.0, 35_880.0), need);
        let morning = r.level(2.0 * DAY_S + 35_880.0, 90.0);
        assert_eq!(morning.replicas, 3);
        // Before three: the second day's burst alone holds no more than the half replica both
        // days needed.
        live_day(&mut r, 2.0, (35_880.0, 53_880.0), need);
        assert_eq!(r.level(2.0 * DAY_S + 53_880.0, 90.0).replicas, 1);
        // At night it is the night's need.
        live_day(&mut r, 2.0, (53_880.0, DAY_S), need);
        assert_eq!(r.level(3.0 * DAY_S - 30.0, 90.0).replicas, 1);
        // The memory is bounded to a week and a day of minutes, and carried a day back with the
        // rest (its minutes a whole cycle back).
        assert!(r.daily.len() as i64 <= DAILY_DAYS * SLOTS_PER_DAY);
        let carried = r.after_a_day(1200.0, DAY_S);
        assert_eq!(
            carried.daily.last().map(|d| d.0),
            r.daily.last().map(|d| d.0 - SLOTS_PER_DAY)
        );
        let back: Reserve = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.level(2.0 * DAY_S + 35_880.0, 90.0), morning);
    }

    #[test]
    fn nothing_is_judged_before_the_orders_reach_back_a_start() {
        let mut r = Reserve::default();
        assert_eq!(r.note(0.0, 5.0, 1.0, None, 90.0, 60.0), None);
        assert_eq!(r.note(45.0, 5.0, 1.0, None, 90.0, 60.0), None);
        assert!(r.note(95.0, 5.0, 1.0, None, 90.0, 60.0).is_some());
        assert!(r.orders.len() <= MAX_ORDERS);
        assert_eq!(r.note(f64::NAN, 5.0, 1.0, None, 90.0, 60.0), None);
    }
}
