//! Checks of numeric flags that several commands take, each error naming the flag and its value.

use anyhow::bail;
use infscale_core::limits::{show, MAX_HELD, MAX_NOW, MAX_REPLICAS};
use std::time::Duration;

/// A flag that is a positive number of seconds, at most `limits::MAX_SECONDS`.
pub fn positive_seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    infscale_core::limits::seconds(v, false, infscale_core::limits::MAX_SECONDS)
        .map_err(|e| anyhow::anyhow!("{flag} {e}"))
}

/// A flag that is a number of seconds from 0, at most `limits::MAX_SECONDS`.
pub fn seconds_from_zero(flag: &str, v: f64) -> anyhow::Result<Duration> {
    infscale_core::limits::seconds(v, true, infscale_core::limits::MAX_SECONDS)
        .map_err(|e| anyhow::anyhow!("{flag} {e}"))
}

/// The `--held` flag of `decide` and `kube`.
pub fn held_flag(held: f64) -> anyhow::Result<f64> {
    if !(held.is_finite() && (0.0..=MAX_HELD).contains(&held)) {
        bail!(
            "--held {}: expected a number of requests from 0 to {MAX_HELD}",
            show(held)
        );
    }
    Ok(held)
}

/// The `--now` flag of `decide` and `kube`, or the clock.
pub fn now_flag(now: Option<f64>) -> anyhow::Result<f64> {
    let now = now.unwrap_or_else(super::state_file::unix_now);
    if !(now.is_finite() && (0.0..=MAX_NOW).contains(&now)) {
        bail!(
            "--now {}: expected Unix seconds from 0 to {MAX_NOW}",
            show(now)
        );
    }
    Ok(now)
}

/// A replica count flag (`--current`, `--status`), at most [`MAX_REPLICAS`].
pub fn replicas_flag(flag: &str, n: Option<u32>) -> anyhow::Result<Option<u32>> {
    match n {
        Some(n) if n > MAX_REPLICAS => {
            bail!("{flag} {n}: expected a number of replicas from 0 to {MAX_REPLICAS}")
        }
        n => Ok(n),
    }
}

/// `FIRST-LAST`, a range of ports.
pub fn port_range(flag: &str, v: &str) -> anyhow::Result<std::ops::RangeInclusive<u16>> {
    let bad = || anyhow::anyhow!("{flag} {v:?}: expected FIRST-LAST, ports from 1 to 65535");
    let (a, b) = v.split_once('-').ok_or_else(bad)?;
    let (a, b): (u16, u16) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a == 0 || a > b {
        return Err(bad());
    }
    Ok(a..=b)
}
