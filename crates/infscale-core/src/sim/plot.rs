//! Runs drawn as an SVG: for each policy, replicas and demand over time beside the TTFT that
//! requests saw, with the SLO as a line.

use super::report::quantile;
use super::run::Run;
use super::trace::Trace;
use plotters::prelude::*;

/// One policy's curves.
pub struct Panel<'a> {
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

/// Writes the SVG to `path`.
pub fn svg(
    path: &std::path::Path,
    trace: &Trace,
    panels: &[Panel<'_>],
    slo_s: f64,
) -> Result<(), String> {
    let rows = panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (1200, 260 * rows)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let areas = root.split_evenly((rows as usize, 2));
    let duration = trace.duration;
    let ttft_cap = (slo_s * 10.0).max(10.0);
    for (i, panel) in panels.iter().enumerate() {
        let series = &panel.run.series;
        let top_replicas = series.iter().map(|p| p.replicas).max().unwrap_or(1).max(1) + 1;
        let top_flight = series.iter().map(|p| p.in_flight).max().unwrap_or(1).max(1);
        let mut left = ChartBuilder::on(&areas[2 * i])
            .caption(
                format!("{}: replicas and demand", panel.policy),
                ("sans-serif", 16),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(40)
            .right_y_label_area_size(48)
            .build_cartesian_2d(0.0..duration, 0u32..top_replicas)
            .map_err(draw_error)?
            .set_secondary_coord(0.0..duration, 0u32..top_flight + top_flight / 10 + 1);
        left.configure_mesh()
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
        let mut right = ChartBuilder::on(&areas[2 * i + 1])
            .caption(
                format!("{}: TTFT p95 per 15 s of arrivals", panel.policy),
                ("sans-serif", 16),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(40)
            .build_cartesian_2d(0.0..duration, 0.0..ttft_cap)
            .map_err(draw_error)?;
        right
            .configure_mesh()
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
