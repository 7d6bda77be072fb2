//! The validation bounds on what comes from outside, in one place: how long a duration may be,
//! how large a value KEDA can take, how much trigger metadata a caller may send. Every check that
//! enforces one names the flag or key it read.
//!
//! These are fixed rules on input, not settings. The operational limits (timeouts, periods,
//! back-offs, caps on connections and bytes), which an operator may tune, are the `Limits`
//! structs of each binary in the `infscale` crate: `serve::limits::Limits` for `infscale serve` and
//! `activator::limits::Limits` for `infscale activator`.

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

// The tools' bounds (`simulate`, `tune`, `gpu`, `decide`, `kube`, `parse`, `load`, `emulate`,
// `demo`, `infscale-sim`): numbers and files no real use comes near. Past them a run would take
// hours, abort on an allocation, or overflow a clock; each check names the flag, or the file,
// line and field, and the command exits with status 2.

/// The longest simulated run: a scenario's `duration`, the span of a read trace's arrivals (after
/// `--rate-scale`), `simulate --duration`: 31 days.
pub const MAX_SIM_SECONDS: f64 = 31.0 * 86_400.0;

/// The highest request rate, per second: a scenario's `rates`, `load --rate`.
pub const MAX_RATE: f64 = 1e5;

/// `--rate-scale` (and `--suite-trace FILE@X`): from a thousandth to a thousand times.
pub const RATE_SCALE: (f64, f64) = (1e-3, 1e3);

/// The most requests one trace holds, read or generated (the speed benchmark's day at 30 req/s
/// is 2.6 million).
pub const MAX_TRACE_REQUESTS: usize = 50_000_000;

/// The most candidate arrivals generating one scenario may draw: its peak rate times its largest
/// burst factor times its duration (thinning draws at the peak and keeps a share).
pub const MAX_TRACE_DRAWS: f64 = 1e9;

/// A scenario's burst `block`, `on` and `off`: at least a second.
pub const MIN_BURST_SECONDS: f64 = 1.0;

/// The engine step, `simulate --dt` and `emulate --step`, seconds.
pub const STEP_SECONDS: (f64, f64) = (0.001, 60.0);

/// The most engine steps of one simulated run (its duration over `--dt`).
pub const MAX_SIM_STEPS: f64 = 1e8;

/// Tokens of one prompt or one output: a scenario's length bounds, a trace row, `load
/// --prompt-tokens` and `--output-tokens`, a request's `max_tokens` to `emulate`.
pub const MAX_TOKENS: u32 = 1 << 20;

/// `emulate --max-model-len`, tokens.
pub const MAX_MODEL_LEN: u32 = 1 << 24;

/// Replicas: `--max`, `--current`, `--status` (the policy key `max` has the same bound).
pub const MAX_REPLICAS: u32 = 10_000;

/// Replicas `demo` may run on one machine (its policy's `max`).
pub const DEMO_MAX_REPLICAS: u32 = 64;

/// Days or seeds: `simulate --seeds`, `tune --replicates` and `--held-out`.
pub const MAX_DAYS: u64 = 10_000;

/// Files named by `--suite-trace`.
pub const MAX_SUITE_TRACES: usize = 64;

/// Points of a `tune` grid (the product of its axes), before `--points` samples it.
pub const MAX_GRID_POINTS: usize = 1_000_000;

/// `load --concurrency` and each `--sweep` level.
pub const MAX_CONCURRENCY: u32 = 100_000;

/// `load --max-in-flight` and `emulate --max-in-flight`.
pub const MAX_IN_FLIGHT: usize = 1_000_000;

/// `--held`, requests.
pub const MAX_HELD: f64 = 1e9;

/// `decide --cpu-request`, cores.
pub const MAX_CORES: f64 = 10_000.0;

/// `decide`/`kube --now`: Unix seconds from 0 to this (the year 5138).
pub const MAX_NOW: f64 = 1e11;

/// Simulated seconds per wall second: `emulate --speed`.
pub const SPEED: (f64, f64) = (0.01, 100.0);

/// Any number of the GPU replica model (`--gpu-file` fields and their flags), at most; a whole
/// number (`layers`, `kv_heads`, `head_dim`, `max_batch`) at most [`MAX_GPU_WHOLE`].
pub const MAX_GPU_NUMBER: f64 = 1e6;
pub const MAX_GPU_WHOLE: u32 = 1 << 16;
/// The GPU model's derived speeds: a decode step at most an hour, prefill at least a token a
/// second (the defaults: 7 ms and 24,750 tokens a second).
pub const GPU_MAX_STEP_SECONDS: f64 = 3600.0;
pub const GPU_MIN_PREFILL_TOKENS_PER_S: f64 = 1.0;

/// A trace file (`--trace`, `--suite-trace`: CSV, JSONL), bytes.
pub const MAX_TRACE_FILE_BYTES: u64 = 512 << 20;

/// A scenario or GPU YAML file, or a `--state` file, bytes.
pub const MAX_CONFIG_FILE_BYTES: u64 = 16 << 20;

/// `parse`/`decide --max-bytes`: the largest page a flag may allow, bytes.
pub const MAX_PAGE_BYTES: usize = 256 << 20;

/// A number within `[low, high]`, or why not (for a message that names its flag or field).
pub fn within(v: f64, (low, high): (f64, f64)) -> Result<f64, String> {
    if v.is_finite() && (low..=high).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{}: expected a number from {low} to {high}",
            show(v)
        ))
    }
}

/// A number as a message shows it: as written for everyday sizes, in exponent form past them
/// (`1e300`, not three hundred digits).
pub fn show(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && a.is_finite() && !(1e-6..1e15).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A duration in seconds within `(0, max]` (or `[0, max]` with `zero_ok`), or why not.
pub fn seconds(v: f64, zero_ok: bool, max: f64) -> Result<Duration, String> {
    let low_ok = if zero_ok { v >= 0.0 } else { v > 0.0 };
    if !(v.is_finite() && low_ok && v <= max) {
        let low = if zero_ok { "from 0" } else { "above 0" };
        return Err(format!(
            "{}: expected a number of seconds {low} up to {max}",
            show(v)
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
