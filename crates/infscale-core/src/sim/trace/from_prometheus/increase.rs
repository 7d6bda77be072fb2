//! How much a counter grew in each step of a range query, summed over the series (pods) that
//! export it: what Prometheus' `increase()` would say, without its extrapolation, so that the
//! steps add up to the counter's growth over the window.
//!
//! A counter that falls restarted (a pod restarted): its growth since the restart is its new
//! value. A step with no sample (a scrape missed) gets an even share of the growth across the
//! gap. A series' first sample is its baseline: what it counted before the window is not in it.

use super::response::Series;

/// The query's window: samples at `start + k * step`, `steps` intervals between them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start: f64,
    pub step: f64,
    pub steps: usize,
}

/// The most steps one trace is built from (Prometheus itself answers at most 11,000 points).
pub const MAX_STEPS: usize = 11_000;

impl Window {
    /// The window from `start` to `end` (unix seconds) in steps of `step` seconds, the last
    /// reaching `end` or just past it.
    pub fn new(start: f64, end: f64, step: f64) -> Result<Window, String> {
        if !(step.is_finite() && step > 0.0) {
            return Err(format!("step {step}: expected seconds above 0"));
        }
        if !(start.is_finite() && end.is_finite() && end > start) {
            return Err(format!("end {end} is not after start {start}"));
        }
        // A window that is not a whole number of steps ends with a whole step past `end`, so
        // that the last requests before `end` are counted.
        let steps = ((end - start) / step - 1e-9).ceil().max(1.0);
        if steps > MAX_STEPS as f64 {
            return Err(format!(
                "{steps} steps of {step} s: at most {MAX_STEPS}; take a longer step"
            ));
        }
        Ok(Window {
            start,
            step,
            steps: steps as usize,
        })
    }

    /// The sample index of time `t`, if it is one of the window's sample times.
    fn index(&self, t: f64) -> Option<usize> {
        let k = ((t - self.start) / self.step).round();
        let near = (t - (self.start + k * self.step)).abs() <= self.step * 1e-3;
        (near && k >= 0.0 && k <= self.steps as f64).then_some(k as usize)
    }
}

/// What the counting found beyond the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Seen {
    /// Times a series fell (a restart).
    pub resets: usize,
    /// Steps a series had no sample for, filled from its neighbours.
    pub gaps: usize,
}

/// Each step's growth, summed over `series`.
pub fn increases(series: &[Series], w: &Window, seen: &mut Seen) -> Vec<f64> {
    let mut out = vec![0.0; w.steps];
    for s in series {
        let mut last: Option<(usize, f64)> = None;
        for &(t, v) in &s.points {
            let Some(k) = w.index(t) else { continue };
            if let Some((j, before)) = last {
                if k <= j {
                    continue;
                }
                let grew = if v >= before {
                    v - before
                } else {
                    seen.resets += 1;
                    v
                };
                seen.gaps += k - j - 1;
                let share = grew / (k - j) as f64;
                for slot in &mut out[j..k] {
                    *slot += share;
                }
            }
            last = Some((k, v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(f64, f64)]) -> Series {
        Series {
            points: points.to_vec(),
            ..Series::default()
        }
    }

    #[test]
    fn windows_refuse_what_cannot_be_stepped() {
        assert!(Window::new(0.0, 10.0, 0.0).unwrap_err().contains("above 0"));
        assert!(Window::new(0.0, 10.0, -1.0).is_err());
        assert!(Window::new(10.0, 10.0, 1.0)
            .unwrap_err()
            .contains("not after"));
        assert!(Window::new(0.0, 1e9, 1.0).unwrap_err().contains("at most"));
        assert_eq!(Window::new(0.0, 0.5, 1.0).unwrap().steps, 1);
        assert_eq!(Window::new(100.0, 110.0, 2.0).unwrap().steps, 5);
        assert_eq!(Window::new(100.0, 110.5, 2.0).unwrap().steps, 6);
    }

    #[test]
    fn steps_sum_the_pods_and_survive_a_restart_and_a_gap() {
        let w = Window::new(0.0, 4.0, 1.0).unwrap();
        let a = series(&[
            (0.0, 10.0),
            (1.0, 12.0),
            (2.0, 15.0),
            (3.0, 1.0),
            (4.0, 4.0),
        ]);
        // b misses its sample at 2 s: the 4 it grew from 1 s to 3 s is shared over both steps.
        let b = series(&[(0.0, 0.0), (1.0, 1.0), (3.0, 5.0), (4.0, 5.0)]);
        let mut seen = Seen::default();
        let got = increases(&[a, b], &w, &mut seen);
        assert_eq!(got, vec![3.0, 5.0, 3.0, 3.0]);
        assert_eq!(seen, Seen { resets: 1, gaps: 1 });
    }

    #[test]
    fn samples_off_the_grid_are_ignored() {
        let w = Window::new(0.0, 2.0, 1.0).unwrap();
        let a = series(&[
            (0.0, 0.0),
            (0.5, 100.0),
            (1.0, 1.0),
            (2.0, 3.0),
            (9.0, 50.0),
        ]);
        let got = increases(&[a], &w, &mut Seen::default());
        assert_eq!(got, vec![1.0, 2.0]);
    }
}
