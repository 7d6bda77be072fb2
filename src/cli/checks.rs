//! Checks of numeric flags that several commands take, each error naming the flag and its value.

use anyhow::bail;
use std::time::Duration;

/// A flag that is a positive number of seconds, at most `limits::MAX_SECONDS`.
pub fn positive_seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    crate::limits::seconds(v, false, crate::limits::MAX_SECONDS)
        .map_err(|e| anyhow::anyhow!("{flag} {e}"))
}

/// A flag that is a number of seconds from 0, at most `limits::MAX_SECONDS`.
pub fn seconds_from_zero(flag: &str, v: f64) -> anyhow::Result<Duration> {
    crate::limits::seconds(v, true, crate::limits::MAX_SECONDS)
        .map_err(|e| anyhow::anyhow!("{flag} {e}"))
}

/// The `--held` flag of `decide` and `kube`.
pub fn held_flag(held: f64) -> anyhow::Result<f64> {
    if !(held.is_finite() && held >= 0.0) {
        bail!("--held {held}: expected a number of requests >= 0");
    }
    Ok(held)
}
