//! `softpart-bench plot`: the summary's figures (summary.rs) drawn against
//! load, one panel per figure, one line per policy through the medians,
//! the runs' range as error bars; the scenario, kernel and topology as the
//! caption. SVG, from plotters' SVG backend (no font files needed).

use crate::scenario::Scenario;
use crate::summary::{self, Figure};
use crate::table::Cell;
use anyhow::{Result, anyhow};
use plotters::prelude::*;

const PANEL_W: u32 = 420;
const PANEL_H: u32 = 300;
const CAPTION_H: u32 = 56;
/// One colour per policy, in the results' policy order (distinct on white
/// and for the common colour blindnesses; matplotlib's "tab10").
pub const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One policy's points on one figure: (load index, median, min, max).
fn points(
    fig: &Figure,
    sc: &Scenario,
    cells: &[Cell],
    policy: &str,
) -> Vec<(usize, f64, f64, f64)> {
    sc.loads
        .iter()
        .enumerate()
        .filter_map(|(i, &load)| {
            let cell = cells
                .iter()
                .find(|c| c.load == load && c.policy == policy)?;
            let s = fig.summary(cell, summary::eevdf_cell(cells, load))?;
            Some((i, s.median, s.min, s.max))
        })
        .collect()
}

/// The SVG text of a scenario's figures.
pub fn svg(sc: &Scenario, policies: &[String], cells: &[Cell], header: &str) -> Result<String> {
    let figs = summary::figures(sc, policies, cells);
    let cols = 2u32.min(figs.len().max(1) as u32);
    let rows = (figs.len() as u32).div_ceil(cols).max(1);
    let size = (PANEL_W * cols, CAPTION_H + PANEL_H * rows);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing: {e:?}");
        root.fill(&WHITE).map_err(err)?;
        let (top, body) = root.split_vertically(CAPTION_H);
        for (i, line) in header.lines().take(2).enumerate() {
            let size = if i == 0 { 16 } else { 12 };
            top.draw(&Text::new(
                line.to_string(),
                (10, 8 + 22 * i as i32),
                ("sans-serif", size).into_font(),
            ))
            .map_err(err)?;
        }
        let panels = body.split_evenly((rows as usize, cols as usize));
        let n = sc.loads.len();
        let loads = sc.loads.clone();
        for (fi, (panel, fig)) in panels.iter().zip(&figs).enumerate() {
            let series: Vec<Vec<(usize, f64, f64, f64)>> =
                policies.iter().map(|p| points(fig, sc, cells, p)).collect();
            let top_y = series.iter().flatten().map(|p| p.3).fold(0.0f64, f64::max);
            let y_max = if top_y > 0.0 { top_y * 1.15 } else { 1.0 };
            let mut chart = ChartBuilder::on(panel)
                .caption(&fig.title, ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(32)
                .y_label_area_size(48)
                .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..y_max)
                .map_err(err)?;
            let fmt = fig.fmt;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(n.max(2))
                .x_label_formatter(&|x| {
                    let i = x.round();
                    if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < loads.len() {
                        loads[i as usize].to_string()
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| fmt(*y))
                .x_desc(sc.load_label.as_str())
                .draw()
                .map_err(err)?;
            let np = policies.len() as f64;
            for (pi, (policy, pts)) in policies.iter().zip(&series).enumerate() {
                let color = COLOURS[pi % COLOURS.len()];
                // Policies side by side at each load, so that their bars
                // do not hide each other.
                let dx = (pi as f64 - (np - 1.0) / 2.0) * 0.08;
                let at = |i: usize| i as f64 + dx;
                let line = chart
                    .draw_series(LineSeries::new(
                        pts.iter().map(|p| (at(p.0), p.1)),
                        color.stroke_width(2),
                    ))
                    .map_err(err)?;
                if fi == 0 {
                    line.label(policy.as_str()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                }
                // The bar's dot is the median; its ends, the runs' range.
                chart
                    .draw_series(pts.iter().map(|p| {
                        ErrorBar::new_vertical(at(p.0), p.2, p.1, p.3, color.stroke_width(1), 6)
                    }))
                    .map_err(err)?;
            }
            if fi == 0 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerRight)
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixtures::run;

    /// The elements of `tag` that carry `attr`.
    fn elements<'a>(svg: &'a str, tag: &str, attr: &str) -> Vec<&'a str> {
        svg.split('<')
            .filter(|e| e.starts_with(tag) && e.contains(attr))
            .collect()
    }

    #[test]
    fn a_plot_has_a_series_per_policy_a_point_per_load_and_error_bars() {
        // A small results file, as `run` writes one: two policies, three
        // loads, three runs each.
        let mut sc: Scenario = crate::table::fixtures::scenario();
        sc.loads = vec![1, 2, 4];
        let policies = vec!["eevdf".to_string(), "softpart".to_string()];
        let mut runs = vec![];
        for &load in &sc.loads {
            for (pi, policy) in policies.iter().enumerate() {
                for rep in 0..3u64 {
                    let home = 1_000_000_000 - 100_000_000 * (rep + 3 * pi as u64);
                    let mut r = run(policy, [home, 0, 0, 0, 1_000_000_000 - home, 0, 0, 0], rep);
                    r.load = load;
                    r.rep = rep as u32;
                    runs.push(r);
                }
            }
        }
        let dir = std::env::temp_dir().join(format!("softpart-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.json");
        let saved = serde_json::json!({
            "scenario": sc, "guest": null, "policies": policies, "runs": runs,
            "header": "t — a test\nkernel k, guest topology 2n2c2t\nnow",
        });
        std::fs::write(&file, saved.to_string()).unwrap();
        let svg_path = crate::plot_file(&file).unwrap();
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();

        let refs: Vec<_> = runs.iter().collect();
        let cells = crate::table::cells(&refs, &sc, &sc.topo().unwrap(), &policies).unwrap();
        let panels = summary::figures(&sc, &policies, &cells).len();
        assert!(panels >= 4, "{panels} panels");
        assert!(svg.contains("t — a test") && svg.contains("guest topology 2n2c2t"));
        for (pi, policy) in policies.iter().enumerate() {
            let c = COLOURS[pi];
            let stroke = format!("stroke=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
            // A line per panel through one point per load, and the legend's.
            let lines = elements(&svg, "polyline", &format!("{stroke} stroke-width=\"2\""));
            assert_eq!(lines.len(), panels + 1, "{policy}");
            let through_loads = lines
                .iter()
                .filter(|l| {
                    l.split("points=\"")
                        .nth(1)
                        .unwrap()
                        .split_whitespace()
                        .count()
                        == 4
                })
                .count();
            assert_eq!(through_loads, panels, "{policy}");
            // An error bar per point: its median dot and three strokes
            // (the range and its two caps).
            let dots = elements(&svg, "circle", &stroke);
            assert_eq!(dots.len(), panels * sc.loads.len(), "{policy}");
            let bars = elements(&svg, "line", &format!("{stroke} stroke-width=\"1\""));
            assert_eq!(bars.len(), 3 * panels * sc.loads.len(), "{policy}");
            assert!(
                svg.contains(&format!(">\n{policy}\n</text>")),
                "{policy} in the legend"
            );
        }
    }
}
