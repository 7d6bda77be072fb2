//! The `--state FILE` of `decide` and `kube`: the HPA's memory, the last activity and each
//! source's counters, kept as JSON between runs (read through [`super::files`], at most
//! [`infscale_core::limits::MAX_CONFIG_FILE_BYTES`]).

use crate::edge::files::{read_text, write_whole};
use anyhow::Context;
use infscale_core::control::decision::ScalerState;
use infscale_core::limits::MAX_CONFIG_FILE_BYTES;
use std::path::Path;

/// The state in `path`, or a fresh one without a file or when it does not exist yet.
pub fn load_state(path: Option<&Path>) -> anyhow::Result<ScalerState> {
    let Some(path) = path else {
        return Ok(ScalerState::default());
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ScalerState::default()),
        Err(e) => {
            return Err(e).with_context(|| format!("{}: cannot read the state", path.display()))
        }
        Ok(_) => {}
    }
    let text = read_text(path, MAX_CONFIG_FILE_BYTES)?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a state file written by infscale", path.display()))
}

/// Writes the state, if there is a file for it (to a temporary file first, then renamed over
/// the old one).
pub fn save_state(path: Option<&Path>, state: &ScalerState) -> anyhow::Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    write_whole(path, &serde_json::to_vec_pretty(state)?)
}

/// Seconds since the Unix epoch: the clock `decide` and `kube` keep their state on.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
