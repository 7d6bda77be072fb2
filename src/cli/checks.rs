//! Checks of numeric flags that several commands take, each error naming the flag and its value.

use anyhow::bail;
use std::time::Duration;

/// A flag that is a positive, finite number of seconds.
pub fn positive_seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0) {
        bail!("{flag} {v}: expected a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(v))
}

/// The `--held` flag of `decide` and `kube`.
pub fn held_flag(held: f64) -> anyhow::Result<f64> {
    if !(held.is_finite() && held >= 0.0) {
        bail!("--held {held}: expected a number of requests >= 0");
    }
    Ok(held)
}
