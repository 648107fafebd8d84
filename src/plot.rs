//! `classifyd eval --plot FILE.svg`: the learning curve of a progressive
//! evaluation, drawn with plotters. Top: cumulative and sliding-window
//! accuracy over the stream. Bottom: 1-ROCA % (cumulative and window) for
//! binary tasks, else the window F1 of the most frequent classes.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::eval::Progressive;

/// Most classes drawn in the F1 panel.
const F1_CLASSES: usize = 5;

/// One sample of the curve.
#[derive(Clone, Debug)]
pub(crate) struct Point {
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
pub(crate) struct Curve {
    pub points: Vec<Point>,
}

impl Curve {
    /// Records the metrics as they stand.
    pub(crate) fn sample(&mut self, m: &Progressive) {
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

/// One line of a panel: its legend, color, width and points.
type Line = (String, RGBColor, u32, Vec<(u64, f64)>);

/// Draws one panel: axes over `0..n` and `y`, the lines, a legend.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    size: u32,
    n: u64,
    y: std::ops::Range<f64>,
    y_desc: &str,
    lines: Vec<Line>,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", size))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0u64..n, y)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("labeled examples")
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(&e))?;
    for (name, color, width, pts) in lines {
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(width)))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}

/// Why a learning curve could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {}: {detail}", path.display())]
pub struct PlotError {
    pub path: std::path::PathBuf,
    pub detail: String,
}

/// A drawing area of the SVG file.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws `curve` to an SVG file; `labels` and `support` name and rank the classes.
pub(crate) fn render(
    curve: &Curve,
    labels: &[String],
    support: &[u64],
    title: &str,
    path: &Path,
) -> Result<(), PlotError> {
    let err = |detail: String| PlotError {
        path: path.to_path_buf(),
        detail,
    };
    if curve.points.is_empty() {
        return Err(err("no labeled examples".into()));
    }
    let root = SVGBackend::new(path, (1000, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (top, bottom) = root.split_vertically(360);
    let n = curve.points.last().map_or(1, |p| p.examples).max(1);
    // Axes scaled to the stream after its first tenth (the first examples meet
    // a model that knows almost nothing; their values are clipped).
    let lo = later(curve, n)
        .map(|p| p.window_accuracy.min(p.accuracy))
        .fold(1.0, f64::min)
        .clamp(0.0, 0.99);
    let floor = (lo - 0.01).max(0.0);
    let acc = |f: fn(&Point) -> f64| curve.points.iter().map(|p| (p.examples, f(p).max(floor))).collect();
    let lines = vec![
        ("cumulative".to_string(), BLUE, 2, acc(|p| p.accuracy)),
        ("last window".to_string(), RED, 2, acc(|p| p.window_accuracy)),
    ];
    let caption = format!("{title}: progressive accuracy");
    panel(&top, &caption, 22, n, floor..1.0, "accuracy", lines).map_err(err)?;
    if curve.points.iter().any(|p| p.one_minus_roca.is_some()) {
        roca_panel(&bottom, curve, n).map_err(err)?;
    } else {
        f1_panel(&bottom, curve, labels, support, n).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The points after the stream's first tenth (of `n` examples).
fn later(curve: &Curve, n: u64) -> impl Iterator<Item = &Point> {
    curve.points.iter().filter(move |p| p.examples * 10 >= n)
}

/// 1-ROCA %, cumulative and over the window (binary tasks).
fn roca_panel(area: &Area<'_>, curve: &Curve, n: u64) -> Result<(), String> {
    let hi = later(curve, n)
        .filter_map(|p| p.one_minus_roca)
        .map(|(c, w)| c.max(w.unwrap_or(0.0)))
        .fold(0.1, f64::max)
        * 1.5;
    let pts = |window: bool| {
        curve
            .points
            .iter()
            .filter_map(|p| {
                let (c, w) = p.one_minus_roca?;
                Some((p.examples, (if window { w? } else { c }).min(hi)))
            })
            .collect()
    };
    let lines = vec![
        ("cumulative".to_string(), BLUE, 2, pts(false)),
        ("last window".to_string(), RED, 1, pts(true)),
    ];
    panel(
        area,
        "1-ROCA % (lower is better)",
        20,
        n,
        0.0..hi * 1.05,
        "1-ROCA %",
        lines,
    )
}

/// The window F1 of the most frequent classes (by `support`).
fn f1_panel(area: &Area<'_>, curve: &Curve, labels: &[String], support: &[u64], n: u64) -> Result<(), String> {
    let mut ranked: Vec<usize> = (0..labels.len()).collect();
    ranked.sort_by_key(|&c| std::cmp::Reverse(support.get(c).copied().unwrap_or(0)));
    ranked.truncate(F1_CLASSES);
    let lines = ranked
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let (r, g, b) = Palette99::pick(i).rgb();
            let color = RGBColor(r, g, b);
            let pts = curve
                .points
                .iter()
                .filter_map(|p| p.f1.get(c).map(|&f| (p.examples, f)))
                .collect();
            (labels[c].clone(), color, 2, pts)
        })
        .collect();
    let caption = format!("window F1 of the {} most frequent classes", ranked.len());
    panel(area, &caption, 20, n, 0.0..1.0, "F1", lines)
}
