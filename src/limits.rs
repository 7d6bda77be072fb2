//! The validation bounds on what comes from outside, in one place: how long a duration may be,
//! how large a value KEDA can take, how much trigger metadata a caller may send. Every check that
//! enforces one names the flag or key it read.
//!
//! These are fixed rules on input, not settings. The operational limits (timeouts, periods,
//! back-offs, caps on connections and bytes), which an operator may tune, are the `Limits`
//! structs of each binary: [`crate::serve::limits::Limits`] for `infscale serve` and
//! [`crate::activator::limits::Limits`] for `infscale activator`.

use std::time::Duration;

/// The longest duration any flag or field accepts: 30 days. Past it a duration is a mistake,
/// and near `u64::MAX` seconds it would overflow a clock.
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;

/// The longest an activator holds a request: one day.
pub const MAX_HOLD_SECONDS: f64 = 86_400.0;

/// The largest metric value KEDA can take: it converts a value to milli-units in an int64, so a
/// value must stay below 2^63 / 1000; 2^53 is the largest whole number below that which a double
/// holds exactly.
pub const MAX_METRIC_VALUE: f64 = 9_007_199_254_740_992.0;

/// A trigger's `threshold`: at least one milli-unit (KEDA's resolution), at most 1e9.
pub const THRESHOLD: (f64, f64) = (0.001, 1e9);

/// Trigger metadata a call may carry: keys, and bytes per key and per value.
pub const METADATA_KEYS: usize = 64;
pub const METADATA_KEY_BYTES: usize = 128;
pub const METADATA_VALUE_BYTES: usize = 2048;

/// The longest `metricsPath` and `activatorUrl`.
pub const PATH_BYTES: usize = 256;
pub const URL_BYTES: usize = 512;

/// The longest error text KEDA is shown (a gRPC status message travels in a header, and KEDA
/// logs it and puts it in events): longer ones are cut, saying so.
pub const ERROR_TEXT_BYTES: usize = 1024;

/// The longest piece of one failure kept in a summary of several.
pub const FAILURE_TEXT_BYTES: usize = 200;

/// `text` cut to at most `max` bytes on a character boundary, marked with `...` when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// A duration in seconds within `(0, max]` (or `[0, max]` with `zero_ok`), or why not.
pub fn seconds(v: f64, zero_ok: bool, max: f64) -> Result<Duration, String> {
    let low_ok = if zero_ok { v >= 0.0 } else { v > 0.0 };
    if !(v.is_finite() && low_ok && v <= max) {
        let low = if zero_ok { "from 0" } else { "above 0" };
        return Err(format!(
            "{v}: expected a number of seconds {low} up to {max}"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// A metric value as it may leave the scaler: finite, at least 0, at most [`MAX_METRIC_VALUE`].
pub fn metric_value(v: f64) -> f64 {
    if v.is_nan() {
        0.0
    } else {
        v.clamp(0.0, MAX_METRIC_VALUE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_range_only() {
        assert!(seconds(1e300, false, MAX_SECONDS).is_err());
        assert!(seconds(1e19, false, MAX_HOLD_SECONDS).is_err());
        assert!(seconds(0.0, false, MAX_SECONDS).is_err());
        assert_eq!(seconds(0.0, true, MAX_SECONDS), Ok(Duration::ZERO));
        assert!(seconds(f64::NAN, true, MAX_SECONDS).is_err());
        assert_eq!(seconds(1.5, false, 2.0), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn texts_are_cut_on_a_character_boundary() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("0123456789abc", 10), "0123456...");
        let cut_utf8 = cut("ééééé", 6);
        assert_eq!(cut_utf8, "é...");
        assert!(cut_utf8.len() <= 6);
    }

    #[test]
    fn values_fit_kedas_milli_units() {
        assert_eq!(metric_value(18_446_744_073_709_551_615.0), MAX_METRIC_VALUE);
        assert!((MAX_METRIC_VALUE * 1000.0) < i64::MAX as f64);
        assert_eq!(metric_value(f64::NAN), 0.0);
        assert_eq!(metric_value(-3.0), 0.0);
        assert_eq!(metric_value(f64::INFINITY), MAX_METRIC_VALUE);
    }
}
