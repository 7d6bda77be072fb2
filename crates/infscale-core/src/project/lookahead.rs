//! Cold-start lookahead: demand projected over the time a new replica needs to become Ready.
//!
//! A replica ordered now serves only after the image pull, the weight load and the warm-up, and
//! the queue keeps growing meanwhile. The projection fits a least-squares line through the
//! recent values and extends it `lookahead` seconds; a falling trend never projects below the
//! value now, so the lookahead only ever buys capacity earlier.

use serde::{Deserialize, Serialize};

/// At most this many recent values are kept for the trend.
pub const MAX_POINTS: usize = 512;

/// A past value of the metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub at: f64,
    pub value: f64,
}

/// The projected value and the trend it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projection {
    pub value: f64,
    /// Units per second; `None` with fewer than two points in the window.
    pub slope: Option<f64>,
}

/// Records `value` at `now` (in place of one already recorded at `now`) and projects it
/// `lookahead_s` ahead along the trend of the points no older than `window_s`.
pub fn project(
    history: &mut Vec<Point>,
    now: f64,
    value: f64,
    lookahead_s: f64,
    window_s: f64,
) -> Projection {
    history.retain(|p| p.at <= now && now - p.at <= window_s);
    // A value at a time already recorded replaces it.
    if history.last().is_some_and(|p| p.at == now) {
        history.pop();
    }
    history.push(Point { at: now, value });
    if history.len() > MAX_POINTS {
        let excess = history.len() - MAX_POINTS;
        history.drain(..excess);
    }
    let slope = slope(history);
    let rise = slope.unwrap_or(0.0).max(0.0) * lookahead_s;
    Projection {
        value: value + rise,
        slope,
    }
}

/// The value at `at` of the least-squares line through the points (`None` unless they span
/// some time): the recent level without the noise of the last point, and without the lag of a
/// mean on a ramp.
pub fn fitted(points: &[Point], at: f64) -> Option<f64> {
    let slope = slope(points)?;
    let n = points.len() as f64;
    let mean_t = points.iter().map(|p| p.at).sum::<f64>() / n;
    let mean_v = points.iter().map(|p| p.value).sum::<f64>() / n;
    Some(mean_v + slope * (at - mean_t))
}

/// The least-squares slope of the points, if they span any time.
pub fn slope(points: &[Point]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_t = points.iter().map(|p| p.at).sum::<f64>() / n;
    let mean_v = points.iter().map(|p| p.value).sum::<f64>() / n;
    let (mut cov, mut var) = (0.0, 0.0);
    for p in points {
        cov += (p.at - mean_t) * (p.value - mean_v);
        var += (p.at - mean_t) * (p.at - mean_t);
    }
    (var > 0.0).then(|| cov / var).filter(|s| s.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(values: &[(f64, f64)], lookahead: f64) -> Projection {
        let mut history = Vec::new();
        let mut last = None;
        for &(t, v) in values {
            last = Some(project(&mut history, t, v, lookahead, 60.0));
        }
        last.unwrap()
    }

    #[test]
    fn a_rising_trend_is_extended() {
        // +1 request per second: 90 s ahead of 40 is 130.
        let p = run(&[(0.0, 10.0), (15.0, 25.0), (30.0, 40.0)], 90.0);
        assert_eq!(p.slope, Some(1.0));
        assert_eq!(p.value, 130.0);
    }

    #[test]
    fn a_falling_trend_never_projects_below_now() {
        let p = run(&[(0.0, 40.0), (15.0, 25.0), (30.0, 10.0)], 90.0);
        assert_eq!(p.slope, Some(-1.0));
        assert_eq!(p.value, 10.0);
    }

    #[test]
    fn one_point_has_no_trend() {
        let p = run(&[(0.0, 12.0)], 90.0);
        assert_eq!((p.value, p.slope), (12.0, None));
    }

    #[test]
    fn points_older_than_the_window_are_dropped() {
        // The jump from 0 at t=0 is outside the 60 s window at t=100: flat 50 -> 50.
        let p = run(&[(0.0, 0.0), (70.0, 50.0), (100.0, 50.0)], 90.0);
        assert_eq!(p.value, 50.0);
    }

    #[test]
    fn history_is_bounded() {
        let mut history = Vec::new();
        for i in 0..(MAX_POINTS * 2) {
            project(&mut history, i as f64 * 0.01, 1.0, 10.0, 1e9);
        }
        assert_eq!(history.len(), MAX_POINTS);
    }
}
