//! How far the demo's compressed clock lags the wall clock, and whether the run kept time.
//!
//! Everything in the demo runs on the wall clock at `speed` times the scenario's, on one machine:
//! a scheduler delay of 20 ms is 0.6 s of scenario time at 30x, close to a third of the 2 s TTFT
//! SLO. On a machine busy with other work the demo would then report misses the policy did not
//! cause, so it measures its own lateness, in scenario seconds:
//! - a probe that asks to wake every [`PROBE_EVERY`] and notes how late it woke: the runtime's
//!   delay, which every task of the demo (replicas, Service, activator, scaler, clients) feels;
//! - each request's send delay: how long after its arrival time the client sent it;
//! - the control loop's tick and the HPA's sync: the time meant against the time got.
//!
//! The run is invalid, its misses then not a result, when the probe was late by more than a
//! quarter of the SLO for more than a small share of the run, when more than a small share of
//! the requests were sent that late (the load then comes bunched, and the scaler answers late),
//! or when more than a small share of the requests missed by no more than the probe's lateness
//! while they waited (misses the lag alone explains).

use super::clock::SimClock;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the probe asks to wake, wall time.
pub const PROBE_EVERY: Duration = Duration::from_millis(10);
/// A probe this late (a share of the SLO, scenario time) is late.
pub const LATE_SHARE_OF_SLO: f64 = 0.25;
/// The share of the run the probe may be late before the run is invalid.
pub const MAX_LATE_TIME: f64 = 0.01;
/// Misses the lag could explain, as a share of the requests, before the run is invalid.
pub const MAX_SUSPECT_MISSES: f64 = 0.005;
/// The share of the requests that may be sent late before the run is invalid.
pub const MAX_LATE_SENDS: f64 = 0.01;
/// The stretches of the run (scenario seconds) the probe's lateness is also reported over.
pub const WINDOW_S: f64 = 150.0;
/// The fewest wakes a stretch is reported on.
const WINDOW_SAMPLES: usize = 100;

/// Lateness samples, scenario seconds.
#[derive(Debug, Default)]
struct Samples {
    /// (scenario time of the wake, lateness).
    probe: Vec<(f64, f64)>,
    send: Vec<f64>,
    tick: Vec<f64>,
    hpa: Vec<f64>,
}

/// Where the demo notes its lateness; shared by its tasks.
#[derive(Debug)]
pub struct Meter {
    clock: SimClock,
    samples: Mutex<Samples>,
}

/// One source of lateness, scenario seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub samples: usize,
    pub p50_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| {
            v.get(((v.len() as f64 - 1.0) * q).round().max(0.0) as usize)
                .copied()
                .unwrap_or(0.0)
        };
        Spread {
            samples: v.len(),
            p50_s: at(0.5),
            p99_s: at(0.99),
            max_s: v.last().copied().unwrap_or(0.0),
        }
    }
}

/// How far the clock lagged, and the verdict on the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClockLag {
    /// Whether the run kept time: its misses are the policy's.
    pub valid: bool,
    pub speed: f64,
    /// The probe's lateness at each wake.
    pub probe: Spread,
    /// How late each request was sent after its arrival time.
    pub send: Spread,
    /// The control loop's tick, late against its schedule.
    pub tick: Spread,
    /// The HPA's sync, late against its period.
    pub hpa: Spread,
    /// The lateness past which the probe counts as late (a share of the SLO), scenario seconds.
    pub late_s: f64,
    /// The share of the run's time the probe was late.
    pub late_time: f64,
    /// The probe's 99th percentile lateness in each [`WINDOW_S`] of the run.
    pub window_p99_s: Vec<f64>,
    /// The share of the requests sent more than `late_s` after their arrival time.
    pub late_sends: f64,
    /// Misses the lateness alone could explain: the probe was late, while the request waited,
    /// by at least its excess over the SLO.
    pub suspect_misses: usize,
    /// Why the run is invalid, if it is.
    pub why: Option<String>,
}

/// A request as the verdict needs it: when it was sent and its TTFT (scenario seconds).
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    pub sent_at: f64,
    pub ttft: f64,
}

impl Meter {
    pub fn new(clock: SimClock) -> Arc<Meter> {
        Arc::new(Meter {
            clock,
            samples: Mutex::new(Samples::default()),
        })
    }

    fn note(&self, f: impl FnOnce(&mut Samples)) {
        if let Ok(mut s) = self.samples.lock() {
            f(&mut s);
        }
    }

    /// A request sent `late_s` scenario seconds after its arrival time.
    pub fn send(&self, late_s: f64) {
        self.note(|s| s.send.push(late_s.max(0.0)));
    }

    /// The control loop woke `late_s` past its tick.
    pub fn tick(&self, late_s: f64) {
        self.note(|s| s.tick.push(late_s.max(0.0)));
    }

    /// The HPA synced `late_s` past its period.
    pub fn hpa(&self, late_s: f64) {
        self.note(|s| s.hpa.push(late_s.max(0.0)));
    }

    /// Wakes every [`PROBE_EVERY`] until `stop` turns true (or its sender goes), noting how late
    /// each wake was. A wake later than a period starts the schedule again from now, so one
    /// stall is one late sample, not a burst of catching up.
    pub async fn probe(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let speed = self.clock.speed();
        let mut due = tokio::time::Instant::now() + PROBE_EVERY;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                changed = stop.wait_for(|s| *s) => {
                    let _ = changed;
                    return;
                }
            }
            let now = tokio::time::Instant::now();
            let late = now.saturating_duration_since(due).as_secs_f64() * speed;
            let at = self.clock.now();
            self.note(|s| s.probe.push((at, late)));
            due += PROBE_EVERY;
            if due <= now {
                due = now + PROBE_EVERY;
            }
        }
    }

    /// The verdict on a run with `requests` sent (of which `seen` answered) and the SLO `slo_s`.
    pub fn verdict(&self, seen: &[Seen], requests: usize, slo_s: f64) -> ClockLag {
        let s = self.samples.lock().map(|mut s| std::mem::take(&mut *s));
        let s = s.unwrap_or_default();
        let basis = Basis {
            speed: self.clock.speed(),
            requests,
            slo_s,
        };
        judge(&s, &basis, seen)
    }
}

/// What the verdict weighs lateness against.
struct Basis {
    speed: f64,
    requests: usize,
    slo_s: f64,
}

fn judge(s: &Samples, basis: &Basis, seen: &[Seen]) -> ClockLag {
    let Basis {
        speed,
        requests,
        slo_s,
    } = *basis;
    let late_s = LATE_SHARE_OF_SLO * slo_s;
    let lateness: Vec<f64> = s.probe.iter().map(|p| p.1).collect();
    // Each wake stands for the time since the one before (a period, plus its lateness).
    let period = PROBE_EVERY.as_secs_f64() * speed;
    let total: f64 = lateness.iter().map(|l| period + l).sum();
    let late: f64 = lateness
        .iter()
        .filter(|l| **l > late_s)
        .map(|l| period + l)
        .sum::<f64>()
        + 0.0; // an empty sum is -0.0
    let late_time = if total > 0.0 { late / total } else { 0.0 };
    let suspect_misses = seen
        .iter()
        .filter(|r| r.ttft > slo_s)
        .filter(|r| worst_between(&s.probe, r.sent_at, r.sent_at + r.ttft) >= r.ttft - slo_s)
        .count();
    let suspect_share = suspect_misses as f64 / requests.max(1) as f64;
    let late_sends =
        s.send.iter().filter(|l| **l > late_s).count() as f64 / s.send.len().max(1) as f64;
    let why = if late_time > MAX_LATE_TIME {
        Some(format!(
            "the clock ran more than {late_s:.2} s late (scenario time) for {:.1}% of the run, more than {:.1}%",
            late_time * 100.0,
            MAX_LATE_TIME * 100.0
        ))
    } else if suspect_share > MAX_SUSPECT_MISSES {
        Some(format!(
            "{suspect_misses} misses ({:.2}% of the requests) are no more than the clock's lateness while they waited, more than {:.1}%",
            suspect_share * 100.0,
            MAX_SUSPECT_MISSES * 100.0
        ))
    } else if late_sends > MAX_LATE_SENDS {
        Some(format!(
            "{:.1}% of the requests were sent more than {late_s:.2} s (scenario time) after their arrival, more than {:.1}%",
            late_sends * 100.0,
            MAX_LATE_SENDS * 100.0
        ))
    } else {
        None
    };
    ClockLag {
        valid: why.is_none(),
        speed,
        probe: Spread::of(&lateness),
        send: Spread::of(&s.send),
        tick: Spread::of(&s.tick),
        hpa: Spread::of(&s.hpa),
        late_s,
        late_time,
        late_sends,
        window_p99_s: windows(&s.probe),
        suspect_misses,
        why,
    }
}

/// The probe's 99th percentile lateness in each [`WINDOW_S`] of the run (the wakes of a window
/// with fewer than [`WINDOW_SAMPLES`] join the one before).
fn windows(probe: &[(f64, f64)]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut from = 0;
    while from < probe.len() {
        let end_s = probe[from].0 + WINDOW_S;
        let mut to = from + probe[from..].partition_point(|p| p.0 < end_s);
        if probe.len() - to < WINDOW_SAMPLES {
            to = probe.len();
        }
        let late: Vec<f64> = probe[from..to].iter().map(|p| p.1).collect();
        out.push(Spread::of(&late).p99_s);
        from = to.max(from + 1);
    }
    out
}

/// The probe's worst lateness among the wakes in `[from, to]` (sorted by time), and the wake
/// just after `to` (a stall that ends after the first token was due is felt by it).
fn worst_between(probe: &[(f64, f64)], from: f64, to: f64) -> f64 {
    let lo = probe.partition_point(|p| p.0 < from);
    let hi = (probe.partition_point(|p| p.0 <= to) + 1).min(probe.len());
    probe
        .get(lo..hi)
        .unwrap_or_default()
        .iter()
        .map(|p| p.1)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(requests: usize) -> Basis {
        Basis {
            speed: 30.0,
            requests,
            slo_s: 2.0,
        }
    }

    #[test]
    fn requests_sent_late_make_the_run_invalid() {
        let mut s = samples(&[0.01; 1000]);
        s.send = vec![0.05; 1000];
        assert!(judge(&s, &run(1000), &[]).valid);
        s.send[..20].iter_mut().for_each(|l| *l = 0.8);
        let lag = judge(&s, &run(1000), &[]);
        assert!((lag.late_sends - 0.02).abs() < 1e-9, "{lag:?}");
        assert!(!lag.valid, "{lag:?}");
        assert!(lag
            .why
            .as_deref()
            .unwrap_or("")
            .contains("sent more than 0.50 s"));
    }

    #[test]
    fn the_probe_is_reported_by_stretch() {
        let mut l = vec![0.01; 10_000];
        l[1000..1060].iter_mut().for_each(|x| *x = 0.2);
        let lag = judge(&samples(&l), &run(100), &[]);
        assert!(lag.probe.p99_s < 0.02, "{lag:?}");
        assert_eq!(lag.window_p99_s.len(), 20);
        assert_eq!(lag.window_p99_s[2], 0.2);
    }

    fn samples(lateness: &[f64]) -> Samples {
        Samples {
            probe: lateness
                .iter()
                .enumerate()
                .map(|(i, l)| (i as f64 * 0.3, *l))
                .collect(),
            ..Samples::default()
        }
    }

    #[test]
    fn a_run_on_time_is_valid_and_a_policys_misses_stay_its_own() {
        let s = samples(&[0.01; 1000]);
        let seen = [Seen {
            sent_at: 10.0,
            ttft: 5.0,
        }];
        let lag = judge(&s, &run(100), &seen);
        assert!(lag.valid, "{lag:?}");
        assert!(lag.late_time.is_sign_positive(), "{lag:?}");
        assert_eq!(lag.suspect_misses, 0);
        assert!(lag.probe.p99_s < 0.02);
    }

    #[test]
    fn a_clock_late_for_long_is_invalid() {
        let mut l = vec![0.01; 900];
        l.extend(vec![1.0; 100]);
        let lag = judge(&samples(&l), &run(100), &[]);
        assert!(!lag.valid);
        assert!(lag.why.as_deref().unwrap_or("").contains("late"), "{lag:?}");
    }

    #[test]
    fn misses_within_the_lateness_are_the_clocks() {
        // One stall of 1.5 s at 30 s; a request sent at 29.5 s with a TTFT of 3 s would have
        // made the 2 s SLO without it.
        let mut l = vec![0.0; 200];
        l[100] = 1.5;
        let s = samples(&l);
        let seen: Vec<Seen> = (0..10)
            .map(|_| Seen {
                sent_at: 29.5,
                ttft: 3.0,
            })
            .collect();
        let lag = judge(&s, &run(1000), &seen);
        assert_eq!(lag.suspect_misses, 10);
        assert!(!lag.valid, "{lag:?}");
        // A miss far past the stall is the policy's.
        let far = [Seen {
            sent_at: 29.5,
            ttft: 9.0,
        }];
        assert_eq!(judge(&s, &run(1000), &far).suspect_misses, 0);
    }
}
