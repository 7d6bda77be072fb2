//! What each target's decision learned, kept across a restart of `serve` (`--state-dir`): the
//! learned reserve, holds and gaps of `reserve=auto` and `hold=auto` or `hold=idle` (what
//! [`ScalerState::carried`] keeps), one JSON file per trigger, at most once a minute.
//!
//! `serve` measures time from its own start, so a file records the collector's clock and the
//! wall clock when it was written; read back, its times move by both, as if the scaler had kept
//! running through the gap. A missing file starts the target fresh; a file that cannot be read
//! (another version's, cut short, another trigger's) is named in a warning and the target starts
//! fresh, and the next save replaces it. The file is read through [`crate::edge::files`], at
//! most [`MAX_CONFIG_FILE_BYTES`].

use crate::edge::files::{read_text, write_whole};
use infscale_core::control::decision::ScalerState;
use infscale_core::limits::MAX_CONFIG_FILE_BYTES;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Seconds between two saves of one target's memory.
pub const SAVE_EVERY_S: f64 = 60.0;

/// One trigger's memory file.
#[derive(Debug)]
pub struct MemoryFile {
    path: PathBuf,
    trigger: String,
    last_saved: Option<f64>,
}

/// What a file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    /// The trigger the memory is for (the file name is a hash of it).
    trigger: String,
    /// The collector's clock when written, seconds.
    clock_s: f64,
    /// The wall clock then, seconds since the Unix epoch.
    wall_s: f64,
    state: ScalerState,
}

impl MemoryFile {
    /// The file for the trigger `trigger` in `dir`.
    pub fn new(dir: &Path, trigger: &str) -> MemoryFile {
        MemoryFile {
            path: dir.join(format!("{:016x}.json", fnv1a(trigger.as_bytes()))),
            trigger: trigger.to_owned(),
            last_saved: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The memory saved for this trigger, its times on the collector's clock now (`clock_now`,
    /// with the wall clock at `wall_now`); `Ok(None)` without a file, and why it cannot be read
    /// otherwise.
    pub fn load(&self, clock_now: f64, wall_now: f64) -> Result<Option<ScalerState>, String> {
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", self.path.display())),
            Ok(_) => {}
        }
        let text = read_text(&self.path, MAX_CONFIG_FILE_BYTES)
            .map_err(|e| format!("{}: {e:#}", self.path.display()))?;
        let saved: Saved = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a memory file written by infscale serve: {e}",
                self.path.display()
            )
        })?;
        if saved.trigger != self.trigger {
            return Err(format!(
                "{}: written for another trigger",
                self.path.display()
            ));
        }
        if !(saved.clock_s.is_finite() && saved.wall_s.is_finite()) {
            return Err(format!(
                "{}: its clocks are not numbers",
                self.path.display()
            ));
        }
        // Time that passed while nothing ran (never negative: a clock set back moves nothing).
        let gap = (wall_now - saved.wall_s).max(0.0);
        Ok(Some(saved.state.carried(saved.clock_s - clock_now + gap)))
    }

    /// Saves `state` when the last save is [`SAVE_EVERY_S`] old (or there was none); `None`
    /// when it was not due, else whether the write worked.
    pub fn save_due(
        &mut self,
        clock_now: f64,
        wall_now: f64,
        state: &ScalerState,
    ) -> Option<Result<(), String>> {
        if self
            .last_saved
            .is_some_and(|at| clock_now - at < SAVE_EVERY_S)
        {
            return None;
        }
        self.last_saved = Some(clock_now);
        let saved = Saved {
            trigger: self.trigger.clone(),
            clock_s: clock_now,
            wall_s: wall_now,
            state: state.carried(0.0),
        };
        Some(self.write(&saved))
    }

    fn write(&self, saved: &Saved) -> Result<(), String> {
        let json = serde_json::to_vec(saved)
            .map_err(|e| format!("{}: cannot write: {e}", self.path.display()))?;
        write_whole(&self.path, &json).map_err(|e| format!("{e:#}"))
    }
}

/// FNV-1a, 64 bits: a file name that stays the same across versions and runs for one trigger.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use infscale_core::control::reserve::RECENT_S;
    use infscale_core::project::lookahead::Point;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("infscale-memory-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A memory holding 3 replicas, learned from a burst at `at` on the collector's clock.
    fn learned(at: f64) -> ScalerState {
        let mut s = ScalerState::default();
        s.reserve.evidence = Some(at);
        s.reserve.needs = vec![Point { at, value: 3.0 }];
        s
    }

    #[test]
    fn a_learned_level_outlives_a_restart_and_is_forgotten_on_time() {
        let d = dir("restart");
        let mut file = MemoryFile::new(&d, "llm/chat\nwork:1.0,reserve=auto");
        // Learned 100 s into the first run; saved at 500 s of it, at wall time 10,000.
        assert_eq!(
            file.save_due(500.0, 10_000.0, &learned(100.0)),
            Some(Ok(()))
        );
        // The new process starts its clock at 0 ten minutes later: the level was learned
        // 1,000 s before its start (400 s before the save, 600 s before that), and is held.
        let again = MemoryFile::new(&d, "llm/chat\nwork:1.0,reserve=auto");
        let state = again.load(0.0, 10_600.0).unwrap().unwrap();
        let level = state.reserve.level(0.0, 90.0);
        assert_eq!(level.replicas, 3);
        assert!((level.since + 1_000.0).abs() < 1e-6, "{level:?}");
        // Started after the burst's evidence has gone stale: forgotten.
        let late = again.load(0.0, 10_000.0 + RECENT_S).unwrap().unwrap();
        assert_eq!(late.reserve.level(0.0, 90.0).replicas, 0);
        // A collector restarted within the same process keeps the same clock.
        let same = again.load(600.0, 10_100.0).unwrap().unwrap();
        assert_eq!(same.reserve.level(600.0, 90.0).since, 100.0);
    }

    #[test]
    fn saves_come_at_most_once_a_minute() {
        let d = dir("pace");
        let mut file = MemoryFile::new(&d, "t");
        let s = learned(0.0);
        assert!(file.save_due(0.0, 0.0, &s).is_some());
        assert!(file.save_due(59.0, 59.0, &s).is_none());
        assert!(file.save_due(60.0, 60.0, &s).is_some());
    }

    #[test]
    fn what_cannot_be_read_is_named_and_nothing_is_loaded() {
        let d = dir("bad");
        let file = MemoryFile::new(&d, "t");
        assert_eq!(file.load(0.0, 0.0), Ok(None));
        std::fs::write(file.path(), "{\"trigger\": \"t\", \"clock_s\"").unwrap();
        let e = file.load(0.0, 0.0).unwrap_err();
        assert!(e.contains(&file.path().display().to_string()), "{e}");
        assert!(e.contains("not a memory file"), "{e}");
        // Another trigger's memory under this name is not taken.
        let mut other = MemoryFile::new(&d, "u");
        other.path = file.path().to_owned();
        assert_eq!(other.save_due(0.0, 0.0, &learned(0.0)), Some(Ok(())));
        assert!(file.load(0.0, 0.0).unwrap_err().contains("another trigger"));
    }

    #[test]
    fn names_are_stable_and_differ_by_trigger() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(
            MemoryFile::new(Path::new("/d"), "a").path,
            MemoryFile::new(Path::new("/d"), "b").path
        );
    }
}
