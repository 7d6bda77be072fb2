//! The published shapes the week families play: what production LLM traffic does over a day
//! and a week, read from public datasets' own figures and statistics (each source says where).
//!
//! - `azure-code` and `azure-conv`: the Azure LLM inference trace 2024 (May 2024, one week
//!   each, Coding and Conversation). The week-long traces are not in the dataset's repository;
//!   the notebook that publishes them plots invocations per minute, and
//!   `scripts/weeks/digitize-azure-2024.py` reads those plots into 15-minute levels (the CSV
//!   files beside this one). Coding: weekday peaks about ten times the night, a weekend at a
//!   fifth; Conversation: a trough at a third of the peak, several peaks a day. Lengths: the
//!   2023 traces' means (code: prompts about 2,050 tokens, outputs 28; conversation: 1,150 and
//!   210).
//! - `burstgpt`: BurstGPT (github.com/HPMLL/BurstGPT, KDD 2025), ChatGPT conversation logs: the
//!   median and quartiles of the requests in each hour of the day (its Figure 2, "daily
//!   periodicity") and the weekday against the weekend (Figure 1: weekend days at about half);
//!   a night at a fortieth of the afternoon. Lengths from its Figure 4: responses about 250
//!   tokens, requests up to 2,000.

use super::Source;
use crate::sim::rng::Lengths;

/// The sources by name, in the order the tables show them.
pub const NAMES: [&str; 3] = ["azure-code", "azure-conv", "burstgpt"];

/// The source called `name`.
pub fn source(name: &str) -> Option<Source> {
    match name {
        "azure-code" => Some(azure(
            "azure-code",
            "Azure LLM inference 2024, Coding: the published week's invocations per minute \
             (from a Friday)",
            include_str!("azure-code-2024.csv"),
            0.12,
            lognormal(2050.0, 0.9, 16, 8192),
            lognormal(28.0, 1.0, 1, 1024),
        )),
        "azure-conv" => Some(azure(
            "azure-conv",
            "Azure LLM inference 2024, Conversation: the published week's invocations per \
             minute (from a Sunday)",
            include_str!("azure-conv-2024.csv"),
            0.07,
            lognormal(1150.0, 0.9, 16, 8192),
            lognormal(210.0, 1.0, 1, 4096),
        )),
        "burstgpt" => Some(burstgpt()),
        _ => None,
    }
}

fn lognormal(mean: f64, sigma: f64, min: u32, max: u32) -> Lengths {
    Lengths::Lognormal {
        mean,
        sigma,
        min,
        max,
    }
}

/// A digitised Azure week: `day,minute,per_minute` rows after `#` comments and a header.
fn azure(
    name: &'static str,
    about: &'static str,
    csv: &str,
    minute_sigma: f64,
    prompt: Lengths,
    output: Lengths,
) -> Source {
    let levels: Vec<f64> = csv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("day"))
        .filter_map(|l| l.rsplit(',').next()?.trim().parse::<f64>().ok())
        .collect();
    Source {
        name,
        about,
        slot_s: 900.0,
        levels: normalised(levels),
        // The published week is one draw of each weekday; another week of the same service
        // varies its hours by about this much (the weekdays' spread at one hour in the plots).
        hourly_sigma: 0.1,
        minute_sigma,
        prompt,
        output,
    }
}

/// BurstGPT's hourly medians and quartiles of ChatGPT conversation requests (Figure 2), read
/// off the box plot, hour 0 first.
const BURSTGPT_HOURS: [(f64, f64, f64); 24] = [
    (46.0, 38.0, 54.0),
    (28.0, 16.0, 38.0),
    (16.0, 8.0, 26.0),
    (10.0, 8.0, 13.0),
    (5.0, 3.0, 6.0),
    (5.0, 4.0, 6.0),
    (5.0, 4.0, 6.0),
    (5.0, 3.0, 6.0),
    (20.0, 16.0, 25.0),
    (106.0, 84.0, 135.0),
    (157.0, 142.0, 194.0),
    (158.0, 138.0, 180.0),
    (68.0, 52.0, 74.0),
    (92.0, 81.0, 117.0),
    (155.0, 128.0, 171.0),
    (184.0, 169.0, 212.0),
    (188.0, 160.0, 211.0),
    (132.0, 115.0, 154.0),
    (77.0, 62.0, 103.0),
    (101.0, 76.0, 122.0),
    (118.0, 90.0, 132.0),
    (107.0, 93.0, 129.0),
    (94.0, 80.0, 104.0),
    (75.0, 55.0, 95.0),
];

/// BurstGPT's weekdays against its weekend (Figure 1, ChatGPT conversation), Monday first.
const BURSTGPT_WEEKDAYS: [f64; 7] = [1.0, 1.0, 1.0, 1.0, 0.95, 0.5, 0.55];

fn burstgpt() -> Source {
    let mut levels = Vec::with_capacity(7 * 24);
    for day in BURSTGPT_WEEKDAYS {
        levels.extend(BURSTGPT_HOURS.iter().map(|(median, _, _)| median * day));
    }
    // The quartiles' spread as a log-normal sigma (the interquartile range is 1.35 sigma),
    // over the busy hours (the night's few requests an hour spread by chance alone).
    let busy: Vec<f64> = BURSTGPT_HOURS
        .iter()
        .filter(|(m, _, _)| *m >= 50.0)
        .map(|(_, q1, q3)| (q3 / q1).ln() / 1.35)
        .collect();
    let hourly_sigma = busy.iter().sum::<f64>() / busy.len() as f64;
    Source {
        name: "burstgpt",
        about: "BurstGPT, ChatGPT conversation: the published hourly medians and their spread, \
                weekend days at half (from a Monday)",
        slot_s: 3600.0,
        levels: normalised(levels),
        hourly_sigma,
        minute_sigma: 0.1,
        prompt: lognormal(600.0, 1.0, 8, 2048),
        output: lognormal(250.0, 0.9, 1, 2048),
    }
}

/// `levels` over their highest.
fn normalised(levels: Vec<f64>) -> Vec<f64> {
    let top = levels.iter().copied().fold(0.0, f64::max);
    if top <= 0.0 {
        return levels;
    }
    levels.into_iter().map(|l| l / top).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_is_a_week_with_a_night() {
        for name in NAMES {
            let s = source(name).unwrap();
            let week = s.slot_s * s.levels.len() as f64;
            assert_eq!(week, 7.0 * 86_400.0, "{name}");
            let top = s.levels.iter().copied().fold(0.0, f64::max);
            let low = s.levels.iter().copied().fold(1.0, f64::min);
            assert_eq!(top, 1.0, "{name}");
            // Conversation's trough is the shallowest: about a quarter of its peak.
            assert!(low > 0.0 && low < 0.3, "{name}: {low}");
            assert!(s.hourly_sigma > 0.0 && s.hourly_sigma < 0.3, "{name}");
        }
        assert!(source("sunny").is_none());
    }

    #[test]
    fn azure_coding_has_weekdays_and_a_weekend() {
        let s = source("azure-code").unwrap();
        // Mean level per day: Friday, the weekend, then Monday to Thursday.
        let days: Vec<f64> = s
            .levels
            .chunks(96)
            .map(|d| d.iter().sum::<f64>() / 96.0)
            .collect();
        assert!(
            days[1] < 0.6 * days[3] && days[2] < 0.6 * days[4],
            "{days:?}"
        );
    }
}
