//! Runs drawn as an SVG: for each policy, replicas and demand over time beside the TTFT that
//! requests saw, with the SLO as a line.
//!
//! Each row opens with a heading band that names the run in full (`demo: queue+work:...`), so
//! the charts' captions stay short and no label overlaps another or runs off the picture; the
//! tests measure every text's box to hold that.

use super::report::quantile;
use super::run::Run;
use super::trace::Trace;
use plotters::prelude::*;

/// One policy's curves.
pub struct Panel<'a> {
    /// What the row is called (`demo`, `simulated`, or the policy when it is short).
    pub title: &'a str,
    /// The full policy string, shown after the title.
    pub policy: &'a str,
    pub run: &'a Run,
}

/// The p95 TTFT of the requests arriving in each `window_s` window (a request with no first token
/// counts as `cap`), as (window start, seconds).
pub fn ttft_by_window(trace: &Trace, run: &Run, window_s: f64, cap: f64) -> Vec<(f64, f64)> {
    let windows = (trace.duration / window_s).ceil() as usize;
    let mut groups: Vec<Vec<f32>> = vec![Vec::new(); windows.max(1)];
    for (request, outcome) in trace.requests.iter().zip(&run.outcomes) {
        let i = ((request.arrival / window_s) as usize).min(groups.len() - 1);
        let ttft = outcome.first_token_s().map_or(cap, |s| s.min(cap));
        groups[i].push(ttft as f32);
    }
    groups
        .into_iter()
        .enumerate()
        .filter(|(_, g)| !g.is_empty())
        .map(|(i, mut g)| {
            // The same p95 as the report's table.
            g.sort_unstable_by(f32::total_cmp);
            (i as f64 * window_s, quantile(&g, 0.95))
        })
        .collect()
}

fn draw_error<E: std::fmt::Debug>(e: E) -> String {
    format!("cannot draw the plot: {e:?}")
}

/// The picture's width, and each row's height: a heading band over the two charts.
const WIDTH: u32 = 1200;
const ROW: u32 = 290;
const BAND: u32 = 28;
/// The heading's font size at most, in pixels.
const HEADING_PX: f64 = 15.0;
/// An upper bound of a character's width in the fonts used, over the font size.
pub const CHAR_EM: f64 = 0.6;

/// A row's heading: its title and, when they differ, the full policy.
fn heading(panel: &Panel<'_>) -> String {
    if panel.title == panel.policy {
        panel.title.to_owned()
    } else {
        format!("{}: {}", panel.title, panel.policy)
    }
}

/// The heading's font size: [`HEADING_PX`], smaller when the text would not fit the width.
fn heading_px(text: &str) -> f64 {
    let room = f64::from(WIDTH) - 16.0;
    let chars = text.chars().count().max(1) as f64;
    HEADING_PX.min(room / (CHAR_EM * chars)).max(6.0)
}

/// The SVG's text (the shells write it where the user asked).
pub fn render(trace: &Trace, panels: &[Panel<'_>], slo_s: f64) -> Result<String, String> {
    let mut out = String::new();
    draw(&mut out, trace, panels, slo_s)?;
    Ok(out)
}

fn draw(out: &mut String, trace: &Trace, panels: &[Panel<'_>], slo_s: f64) -> Result<(), String> {
    let rows = panels.len().max(1) as u32;
    let root = SVGBackend::with_string(out, (WIDTH, ROW * rows)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let row_areas = root.split_evenly((rows as usize, 1));
    let duration = trace.duration;
    let ttft_cap = (slo_s * 10.0).max(10.0);
    for (panel, row) in panels.iter().zip(&row_areas) {
        let (band, charts) = row.split_vertically(BAND);
        let title = heading(panel);
        let px = heading_px(&title);
        band.draw(&Text::new(
            title,
            (8, (f64::from(BAND) - px) as i32 / 2),
            ("sans-serif", px).into_font(),
        ))
        .map_err(draw_error)?;
        let areas = charts.split_evenly((1, 2));
        let series = &panel.run.series;
        let top_replicas = series.iter().map(|p| p.replicas).max().unwrap_or(1).max(1) + 1;
        let top_flight = series.iter().map(|p| p.in_flight).max().unwrap_or(1).max(1);
        let mut left = ChartBuilder::on(&areas[0])
            .caption("replicas and demand", ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(40)
            .right_y_label_area_size(48)
            .build_cartesian_2d(0.0..duration, 0u32..top_replicas)
            .map_err(draw_error)?
            .set_secondary_coord(0.0..duration, 0u32..top_flight + top_flight / 10 + 1);
        left.configure_mesh()
            .x_label_formatter(&|v| format!("{v:.0}"))
            .x_desc("seconds")
            .y_desc("replicas")
            .draw()
            .map_err(draw_error)?;
        left.configure_secondary_axes()
            .y_desc("requests in flight")
            .draw()
            .map_err(draw_error)?;
        left.draw_series(LineSeries::new(
            series.iter().map(|p| (p.t, p.replicas)),
            &BLUE,
        ))
        .map_err(draw_error)?
        .label("billed")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
        left.draw_series(LineSeries::new(
            series.iter().map(|p| (p.t, p.ready)),
            &GREEN,
        ))
        .map_err(draw_error)?
        .label("ready")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], GREEN));
        left.draw_secondary_series(LineSeries::new(
            series.iter().map(|p| (p.t, p.in_flight)),
            &RED.mix(0.6),
        ))
        .map_err(draw_error)?
        .label("in flight")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED.mix(0.6)));
        left.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;

        let ttft = ttft_by_window(trace, panel.run, 15.0, ttft_cap);
        let mut right = ChartBuilder::on(&areas[1])
            .caption("TTFT p95 per 15 s of arrivals", ("sans-serif", 14))
            .margin(8)
            .margin_right(24)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..duration, 0.0..ttft_cap)
            .map_err(draw_error)?;
        right
            .configure_mesh()
            .x_label_formatter(&|v| format!("{v:.0}"))
            .x_desc("seconds")
            .y_desc("seconds")
            .draw()
            .map_err(draw_error)?;
        // One line per stretch of consecutive windows with arrivals: no line across silence.
        let mut start = 0;
        for end in 1..=ttft.len() {
            if end == ttft.len() || ttft[end].0 - ttft[end - 1].0 > 15.0 + 1e-9 {
                right
                    .draw_series(LineSeries::new(ttft[start..end].iter().copied(), &MAGENTA))
                    .map_err(draw_error)?;
                start = end;
            }
        }
        right
            .draw_series(LineSeries::new(
                [(0.0, slo_s), (duration, slo_s)],
                BLACK.stroke_width(1),
            ))
            .map_err(draw_error)?;
    }
    root.present().map_err(draw_error)
}

#[cfg(test)]
mod tests {
    //! The layout, measured: every text's box from its position, font size, anchor, baseline
    //! shift and rotation, with [`CHAR_EM`] of the font size per character as an upper bound
    //! of its width; no two boxes may meet and every box lies within the viewBox.

    use super::*;
    use crate::policy::Policy;
    use crate::sim::gpu::GpuModel;
    use crate::sim::replica::Hardware;
    use crate::sim::run::{run, Settings};
    use crate::sim::trace::Scenario;

    /// A text's box: left, top, right, bottom.
    #[derive(Debug, Clone, Copy)]
    struct Box4(f64, f64, f64, f64);

    fn attr(tag: &str, name: &str) -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        let end = tag[at..].find('"')? + at;
        Some(tag[at..end].to_owned())
    }

    /// An SVG length in pixels against font size `px`: em, ex (half an em) or plain.
    fn length(v: &str, px: f64) -> f64 {
        let num = |s: &str| s.parse::<f64>().unwrap();
        match (v.strip_suffix("em"), v.strip_suffix("ex")) {
            (Some(n), _) => num(n) * px,
            (_, Some(n)) => num(n) * px / 2.0,
            _ => num(v),
        }
    }

    /// Every text of the SVG with its box.
    fn boxes(svg: &str) -> Vec<(String, Box4)> {
        let mut out = Vec::new();
        for piece in svg.split("<text").skip(1) {
            let (tag, rest) = piece.split_once('>').unwrap();
            let text = rest.split("</text>").next().unwrap().trim().to_owned();
            let num = |n: &str| attr(tag, n).map(|v| v.parse::<f64>().unwrap());
            let (x, y, px) = (
                num("x").unwrap(),
                num("y").unwrap(),
                num("font-size").unwrap(),
            );
            let w = CHAR_EM * px * text.chars().count() as f64;
            let left = match attr(tag, "text-anchor").as_deref() {
                Some("middle") => x - w / 2.0,
                Some("end") => x - w,
                _ => x,
            };
            let baseline = y + attr(tag, "dy").map_or(0.0, |d| length(&d, px));
            let mut b = Box4(left, baseline - 0.8 * px, left + w, baseline + 0.2 * px);
            if let Some(t) = attr(tag, "transform") {
                let args: Vec<f64> = t
                    .trim_start_matches("rotate(")
                    .trim_end_matches(')')
                    .split(',')
                    .map(|a| a.trim().parse().unwrap())
                    .collect();
                let (a, cx, cy) = (args[0].to_radians(), args[1], args[2]);
                let turn = |(px, py): (f64, f64)| {
                    let (dx, dy) = (px - cx, py - cy);
                    (
                        cx + dx * a.cos() - dy * a.sin(),
                        cy + dx * a.sin() + dy * a.cos(),
                    )
                };
                let corners = [(b.0, b.1), (b.2, b.1), (b.0, b.3), (b.2, b.3)].map(turn);
                let xs = corners.map(|c| c.0);
                let ys = corners.map(|c| c.1);
                let min = |v: [f64; 4]| v.into_iter().fold(f64::INFINITY, f64::min);
                let max = |v: [f64; 4]| v.into_iter().fold(f64::NEG_INFINITY, f64::max);
                b = Box4(min(xs), min(ys), max(xs), max(ys));
            }
            out.push((text, b));
        }
        out
    }

    fn view_box(svg: &str) -> Box4 {
        let v: Vec<f64> = attr(svg, "viewBox")
            .unwrap()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        Box4(v[0], v[1], v[0] + v[2], v[1] + v[3])
    }

    fn overlap(a: Box4, b: Box4) -> bool {
        a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
    }

    /// The problems of a picture's layout: boxes that meet, and boxes outside the viewBox.
    fn problems(svg: &str) -> Vec<String> {
        let all = boxes(svg);
        let view = view_box(svg);
        let mut bad = Vec::new();
        for (i, (t, b)) in all.iter().enumerate() {
            if b.0 < view.0 || b.1 < view.1 || b.2 > view.2 || b.3 > view.3 {
                bad.push(format!("{t:?} {b:?} outside {view:?}"));
            }
            for (u, c) in &all[i + 1..] {
                if overlap(*b, *c) {
                    bad.push(format!("{t:?} {b:?} meets {u:?} {c:?}"));
                }
            }
        }
        bad
    }

    /// The demo's picture: its row and the simulator's, under the long policy string.
    fn demo_svg() -> String {
        let trace = Scenario::default_day().generate().unwrap();
        let policy = "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto,min=0,cooldown=300,hold=idle";
        let settings = Settings {
            series_every_s: 15.0,
            ..Settings::default()
        };
        let hw = Hardware::new(GpuModel::default());
        let r = run(&trace, &hw, &Policy::parse(policy).unwrap(), &settings);
        let panels = [
            Panel {
                title: "demo",
                policy,
                run: &r,
            },
            Panel {
                title: "simulated",
                policy,
                run: &r,
            },
        ];
        render(&trace, &panels, 2.0).unwrap()
    }

    #[test]
    fn no_label_overlaps_another_or_leaves_the_picture() {
        let svg = demo_svg();
        assert!(boxes(&svg).len() > 40, "{svg}");
        assert!(svg.contains("demo: queue+work:192") && svg.contains("simulated: queue+work"));
        let bad = problems(&svg);
        assert!(bad.is_empty(), "\n{}", bad.join("\n"));
    }

    #[test]
    fn the_demos_picture_in_the_docs_has_no_label_over_another() {
        // Written by `infscale demo --svg fixtures/demo/infscale-demo.svg` (docs/demo.md).
        let svg = include_str!("../../../../fixtures/demo/infscale-demo.svg");
        assert!(svg.contains("demo: queue+work:192") && svg.contains("simulated: queue+work"));
        let bad = problems(svg);
        assert!(bad.is_empty(), "\n{}", bad.join("\n"));
    }

    #[test]
    fn the_measure_sees_an_overlap_and_a_clipped_label() {
        let svg = r#"<svg viewBox="0 0 100 50"><text x="10" y="20" font-size="10">abcdef</text>
            <text x="40" y="22" font-size="10" text-anchor="end">xy</text>
            <text x="95" y="40" font-size="10">far</text>
            <text x="15" y="48" font-size="10" transform="rotate(270, 15, 48)">up</text></svg>"#;
        let bad = problems(svg);
        assert!(bad
            .iter()
            .any(|b| b.contains("\"abcdef\"") && b.contains("meets \"xy\"")));
        assert!(bad
            .iter()
            .any(|b| b.starts_with("\"far\"") && b.contains("outside")));
        assert_eq!(bad.len(), 2, "{bad:?}");
        // The rotated label stands upright: 12 px tall above its point, 10 px wide.
        let up = boxes(svg)[3].1;
        assert!(
            (up.3 - 48.0).abs() < 1e-9 && (up.1 - 36.0).abs() < 1e-9,
            "{up:?}"
        );
        assert!(
            (up.0 - 7.0).abs() < 1e-9 && (up.2 - 17.0).abs() < 1e-9,
            "{up:?}"
        );
    }
}
