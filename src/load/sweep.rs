//! A closed-loop run per concurrency, lightest first, and the [knee](super::knee) among them.

use super::config::{Config, Mode};
use super::knee::{self, Knee, Point};
use super::report::{ms, Report};
use super::Error;
use serde::Serialize;

/// The rows of a sweep, in rising concurrency, and their knee.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    #[serde(rename = "sweep")]
    pub rows: Vec<Report>,
    /// The knee's concurrency; none when the lightest was already saturated or none was.
    #[serde(serialize_with = "knee_concurrency")]
    pub knee: Option<Knee>,
    /// The knee with the TTFT on either side of it, and why the next one is saturated.
    #[serde(rename = "knee_detail")]
    pub detail: Option<Knee>,
    pub knee_rule: &'static str,
}

fn knee_concurrency<S: serde::Serializer>(knee: &Option<Knee>, s: S) -> Result<S::Ok, S::Error> {
    match knee {
        Some(k) => s.serialize_u32(k.concurrency),
        None => s.serialize_none(),
    }
}

impl Sweep {
    /// The sweep of these closed-loop reports, in rising concurrency, with their knee.
    pub fn judge(rows: Vec<Report>) -> Sweep {
        let points: Vec<Point> = rows.iter().map(Point::of).collect();
        let knee = knee::find(&points);
        Sweep {
            rows,
            knee,
            detail: knee,
            knee_rule: knee::RULE,
        }
    }

    /// The verdict in one line.
    pub fn verdict(&self) -> String {
        match (&self.knee, self.rows.first(), self.rows.last()) {
            (Some(k), _, _) => format!(
                "knee: concurrency {} (TTFT p50 {} -> {} past it); use it as the per-replica queue target",
                k.concurrency,
                ms(k.ttft_p50_s),
                k.past_ttft_p50_s.map_or("no answer".to_owned(), ms),
            ),
            (None, Some(first), _) if knee::lightest_saturated(&Point::of(first)) => format!(
                "no knee: concurrency {} is already saturated (errors: {})",
                first.concurrency.unwrap_or(0),
                first.errors_line()
            ),
            (None, _, Some(last)) => format!(
                "no knee: not saturated up to concurrency {}; sweep higher",
                last.concurrency.unwrap_or(0)
            ),
            _ => "no knee: nothing was run".to_owned(),
        }
    }
}

/// A closed-loop run of `config` per concurrency (sorted, duplicates dropped), each for the
/// configured duration, and the knee.
pub async fn sweep(config: &Config, concurrencies: &[u32]) -> Result<Sweep, Error> {
    let mut levels: Vec<u32> = concurrencies.to_vec();
    levels.sort_unstable();
    levels.dedup();
    let mut rows = Vec::with_capacity(levels.len());
    for concurrency in levels {
        let run = Config {
            mode: Mode::Closed { concurrency },
            ..config.clone()
        };
        rows.push(super::run(run).await?);
    }
    Ok(Sweep::judge(rows))
}
