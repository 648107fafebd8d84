//! `classifyd eval --plot FILE.svg`: the learning curve of a progressive
//! evaluation, drawn with plotters. Top: cumulative and sliding-window
//! accuracy over the stream. Bottom: 1-ROCA % (cumulative and window) for
//! binary tasks, else the window F1 of the most frequent classes.

use std::path::Path;

use plotters::prelude::*;

use crate::eval::Progressive;

/// Most classes drawn in the F1 panel.
const F1_CLASSES: usize = 5;

/// One sample of the curve.
#[derive(Clone, Debug)]
pub struct Point {
    pub examples: u64,
    pub accuracy: f64,
    pub window_accuracy: f64,
    /// 1-ROCA % cumulative and over the window (binary tasks).
    pub one_minus_roca: Option<(f64, Option<f64>)>,
    /// Window F1 per class index.
    pub f1: Vec<f64>,
}

/// Samples of progressive metrics along a stream.
#[derive(Clone, Debug, Default)]
pub struct Curve {
    pub points: Vec<Point>,
}

impl Curve {
    /// Records the metrics as they stand.
    pub fn sample(&mut self, m: &Progressive) {
        let total = m.total();
        if total.examples == 0 {
            return;
        }
        let auc = m
            .roc_auc()
            .map(|a| ((1.0 - a) * 100.0, m.window_roc_auc().map(|w| (1.0 - w) * 100.0)));
        self.points.push(Point {
            examples: total.examples,
            accuracy: total.accuracy(),
            window_accuracy: m.window().accuracy(),
            one_minus_roca: auc,
            f1: m.window().per_class.iter().map(|c| c.f1()).collect(),
        });
    }
}

/// Draws `curve` to an SVG file; `labels` and `support` name and rank the classes.
pub fn render(curve: &Curve, labels: &[String], support: &[u64], title: &str, path: &Path) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    if curve.points.is_empty() {
        return Err(format!("cannot draw {}: no labeled examples", path.display()));
    }
    let root = SVGBackend::new(path, (1000, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (top, bottom) = root.split_vertically(360);
    let n = curve.points.last().map_or(1, |p| p.examples).max(1);
    let lo = curve
        .points
        .iter()
        .filter(|p| p.examples * 10 >= n)
        .map(|p| p.window_accuracy.min(p.accuracy))
        .fold(1.0, f64::min)
        .clamp(0.0, 0.99);
    let mut chart = ChartBuilder::on(&top)
        .caption(format!("{title}: progressive accuracy"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0u64..n, (lo - 0.01).max(0.0)..1.0)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("labeled examples")
        .y_desc("accuracy")
        .draw()
        .map_err(|e| err(&e))?;
    let series = [(0usize, "cumulative", BLUE), (1, "last window", RED)];
    for (which, name, color) in series {
        let floor = (lo - 0.01).max(0.0);
        let pts = curve.points.iter().map(move |p| {
            (
                p.examples,
                (if which == 0 { p.accuracy } else { p.window_accuracy }).max(floor),
            )
        });
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;

    let binary = curve.points.iter().any(|p| p.one_minus_roca.is_some());
    if binary {
        let pts: Vec<(u64, f64, Option<f64>)> = curve
            .points
            .iter()
            .filter_map(|p| p.one_minus_roca.map(|(c, w)| (p.examples, c, w)))
            .collect();
        // Scaled to the stream after its first tenth (the first examples are
        // ranked by a model that knows almost nothing; their values are clipped).
        let hi = pts
            .iter()
            .filter(|p| p.0 * 10 >= n)
            .map(|p| p.1.max(p.2.unwrap_or(0.0)))
            .fold(0.1, f64::max)
            * 1.5;
        let mut chart = ChartBuilder::on(&bottom)
            .caption("1-ROCA % (lower is better)", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0u64..n, 0.0..hi * 1.05)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("labeled examples")
            .y_desc("1-ROCA %")
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1.min(hi))),
                BLUE.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label("cumulative")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(
                pts.iter().filter_map(|p| p.2.map(|w| (p.0, w.min(hi)))),
                RED.stroke_width(1),
            ))
            .map_err(|e| err(&e))?
            .label("last window")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(1)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    } else {
        let mut ranked: Vec<usize> = (0..labels.len()).collect();
        ranked.sort_by_key(|&c| std::cmp::Reverse(support.get(c).copied().unwrap_or(0)));
        ranked.truncate(F1_CLASSES);
        let mut chart = ChartBuilder::on(&bottom)
            .caption(
                format!("window F1 of the {} most frequent classes", ranked.len()),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0u64..n, 0.0..1.0)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("labeled examples")
            .y_desc("F1")
            .draw()
            .map_err(|e| err(&e))?;
        for (i, &c) in ranked.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts = curve
                .points
                .iter()
                .filter_map(|p| p.f1.get(c).map(|&f| (p.examples, f)));
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(labels[c].clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
