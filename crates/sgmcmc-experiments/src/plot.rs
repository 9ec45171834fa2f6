//! SVG line plots of a metric against time, one panel per sampler and one series per tuning
//! method: the MAMBA paper's Figures 1–3 (paper 000 §4: "the mean curve along with a confidence
//! interval (two standard deviations)" over ten independent runs), and `sgmcmc tune --plot`'s
//! round-by-round metric per arm.
//!
//! Drawn by plotters' SVG backend with its built-in text layout (no font libraries): text is
//! written as SVG `<text>` and the viewer's font renders it. Non-finite points (and, on a log
//! axis, non-positive ones) are gaps: a line is broken there, e.g. where a run diverged.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeriesStyle {
    /// A coloured line (the next colour of the panel's palette) with a legend entry.
    #[default]
    Highlighted,
    /// A thin grey line without a legend entry (e.g. an arm MAMBA pruned).
    Muted,
}

/// One line: `mean[i]` at `x[i]`, with an optional band `mean[i] ± 2·sd[i]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Abscissae (e.g. wall-clock seconds).
    pub x: Vec<f64>,
    /// The line's values (the mean over runs).
    pub mean: Vec<f64>,
    /// Standard deviations over runs (same length as `mean`); the band is mean ± 2 sd.
    pub sd: Option<Vec<f64>>,
    /// Line style.
    pub style: SeriesStyle,
}

impl Series {
    /// A plain line without a band.
    pub fn line(label: impl Into<String>, x: Vec<f64>, y: Vec<f64>) -> Self {
        Self {
            label: label.into(),
            x,
            mean: y,
            sd: None,
            style: SeriesStyle::Highlighted,
        }
    }

    /// Mean and sample sd (n − 1; 0 for one run) over `runs` at each `x[i]`, using the runs'
    /// finite values at that point only (a point with none is a gap). Every run must have
    /// `x.len()` values.
    pub fn mean_and_sd(
        label: impl Into<String>,
        x: Vec<f64>,
        runs: &[Vec<f64>],
    ) -> Result<Self, PlotError> {
        let label = label.into();
        if let Some(r) = runs.iter().find(|r| r.len() != x.len()) {
            return Err(PlotError::LengthMismatch {
                series: label,
                what: "a run",
                got: r.len(),
                expected: x.len(),
            });
        }
        let mut mean = Vec::with_capacity(x.len());
        let mut sd = Vec::with_capacity(x.len());
        for i in 0..x.len() {
            let values: Vec<f64> = runs
                .iter()
                .map(|r| r[i])
                .filter(|v| v.is_finite())
                .collect();
            let n = values.len();
            if n == 0 {
                mean.push(f64::NAN);
                sd.push(f64::NAN);
                continue;
            }
            let m = values.iter().sum::<f64>() / n as f64;
            let s = if n < 2 {
                0.0
            } else {
                (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1) as f64).sqrt()
            };
            mean.push(m);
            sd.push(s);
        }
        Ok(Self {
            label,
            x,
            mean,
            sd: Some(sd),
            style: SeriesStyle::Highlighted,
        })
    }
}

/// One panel (e.g. one sampler).
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Panel title.
    pub title: String,
    /// Its lines.
    pub series: Vec<Series>,
}

/// A figure: panels on a grid of at most `columns` columns under one title.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Title above the panels.
    pub title: String,
    /// x-axis label of every panel.
    pub x_label: String,
    /// y-axis label of every panel.
    pub y_label: String,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// Panels, row by row.
    pub panels: Vec<Panel>,
    /// Columns of the panel grid (0: up to 3).
    pub columns: usize,
    /// Pixel size of one panel.
    pub panel_size: (u32, u32),
}

impl Figure {
    /// A figure with default layout (up to 3 columns, 440 × 330 px panels).
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        log_y: bool,
        panels: Vec<Panel>,
    ) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_y,
            panels,
            columns: 0,
            panel_size: (440, 330),
        }
    }
}

/// Why a figure cannot be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// The figure has no panels.
    #[error("figure \"{0}\" has no panels")]
    NoPanels(String),
    /// A panel has no series.
    #[error("panel \"{0}\" has no series")]
    EmptyPanel(String),
    /// A series has no points.
    #[error("series \"{series}\" of panel \"{panel}\" has no points")]
    EmptySeries {
        /// Panel title.
        panel: String,
        /// Series label.
        series: String,
    },
    /// `x`, `mean`, `sd` (or a run) of a series differ in length.
    #[error("series \"{series}\": {what} has {got} values, expected {expected} (one per x)")]
    LengthMismatch {
        /// Series label.
        series: String,
        /// Which vector.
        what: &'static str,
        /// Its length.
        got: usize,
        /// `x.len()`.
        expected: usize,
    },
    /// A series has no point that can be drawn (finite x and y, and y > 0 on a log axis).
    #[error(
        "series \"{series}\" of panel \"{panel}\" has no drawable point (all values are NaN, infinite{})",
        if *log_y { " or ≤ 0 on the log axis" } else { "" }
    )]
    NoFiniteValues {
        /// Panel title.
        panel: String,
        /// Series label.
        series: String,
        /// The axis is logarithmic.
        log_y: bool,
    },
    /// plotters failed to draw.
    #[error("drawing failed: {0}")]
    Draw(String),
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The SVG's path.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
}

/// Colours of highlighted series, in order (Tableau 10).
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const MUTED: RGBColor = RGBColor(190, 190, 190);

/// Render `figure` as an SVG document.
pub fn render_svg(figure: &Figure) -> Result<String, PlotError> {
    validate(figure)?;
    let n = figure.panels.len();
    let columns = match figure.columns {
        0 => n.min(3),
        c => c.min(n),
    };
    let rows = n.div_ceil(columns);
    let (pw, ph) = figure.panel_size;
    let title_height = 40;
    // Wide enough for the title (about 11 px per character at 22 px).
    let width = (pw * columns as u32).max(11 * figure.title.chars().count() as u32 + 40);
    let size = (width, ph * rows as u32 + title_height);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let body = root
            .titled(&figure.title, ("sans-serif", 22))
            .map_err(draw_err)?;
        let areas = body.split_evenly((rows, columns));
        for (panel, area) in figure.panels.iter().zip(&areas) {
            let (x, y) = ranges(panel, figure.log_y);
            if figure.log_y {
                let ticks = log_ticks(y.start, y.end);
                let y = y.log_scale().with_key_points(ticks);
                draw_panel(area, panel, figure, x, y)?;
            } else {
                let y: RangedCoordf64 = y.into();
                draw_panel(area, panel, figure, x, y)?;
            }
        }
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

/// Render `figure` and write it to `path`.
pub fn write_svg(path: &Path, figure: &Figure) -> Result<(), PlotError> {
    write_document(path, &render_svg(figure)?)
}

/// Write a rendered SVG document to `path`.
pub(crate) fn write_document(path: &Path, svg: &str) -> Result<(), PlotError> {
    sgmcmc::io::write_atomic(path, svg.as_bytes()).map_err(|source| PlotError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn draw_err<E: std::error::Error>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

fn drawable(x: f64, y: f64, log_y: bool) -> bool {
    x.is_finite() && y.is_finite() && (!log_y || y > 0.0)
}

fn validate(figure: &Figure) -> Result<(), PlotError> {
    if figure.panels.is_empty() {
        return Err(PlotError::NoPanels(figure.title.clone()));
    }
    for panel in &figure.panels {
        if panel.series.is_empty() {
            return Err(PlotError::EmptyPanel(panel.title.clone()));
        }
        for s in &panel.series {
            if s.x.is_empty() {
                return Err(PlotError::EmptySeries {
                    panel: panel.title.clone(),
                    series: s.label.clone(),
                });
            }
            let mismatch = |what, got: usize| PlotError::LengthMismatch {
                series: s.label.clone(),
                what,
                got,
                expected: s.x.len(),
            };
            if s.mean.len() != s.x.len() {
                return Err(mismatch("mean", s.mean.len()));
            }
            if let Some(sd) = &s.sd
                && sd.len() != s.x.len()
            {
                return Err(mismatch("sd", sd.len()));
            }
            if !s
                .x
                .iter()
                .zip(&s.mean)
                .any(|(&x, &y)| drawable(x, y, figure.log_y))
            {
                return Err(PlotError::NoFiniteValues {
                    panel: panel.title.clone(),
                    series: s.label.clone(),
                    log_y: figure.log_y,
                });
            }
        }
    }
    Ok(())
}

/// The band of point i: (mean − 2 sd, mean + 2 sd) when both are drawable.
fn band(s: &Series, i: usize, log_y: bool) -> Option<(f64, f64)> {
    let sd = s.sd.as_ref()?[i];
    let (m, x) = (s.mean[i], s.x[i]);
    if !drawable(x, m, log_y) || !sd.is_finite() {
        return None;
    }
    Some((m - 2.0 * sd, m + 2.0 * sd))
}

/// The panel's x range and y range (over the lines and the bands' drawable ends), padded.
fn ranges(panel: &Panel, log_y: bool) -> (Range<f64>, Range<f64>) {
    let (mut x0, mut x1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    let mut take_y = |y: f64| {
        if y.is_finite() && (!log_y || y > 0.0) {
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    };
    for s in &panel.series {
        for i in 0..s.x.len() {
            if !drawable(s.x[i], s.mean[i], log_y) {
                continue;
            }
            x0 = x0.min(s.x[i]);
            x1 = x1.max(s.x[i]);
            take_y(s.mean[i]);
            if let Some((lo, hi)) = band(s, i, log_y) {
                take_y(lo);
                take_y(hi);
            }
        }
    }
    if x1 <= x0 {
        (x0, x1) = (x0 - 0.5, x0 + 0.5);
    }
    let pad_x = 0.02 * (x1 - x0);
    let y = if log_y {
        let (l0, l1) = (y0.log10(), y1.log10());
        let pad = if l1 > l0 { 0.05 * (l1 - l0) } else { 0.5 };
        10f64.powf(l0 - pad)..10f64.powf(l1 + pad)
    } else {
        let pad = if y1 > y0 {
            0.05 * (y1 - y0)
        } else {
            0.5 * y0.abs().max(1.0)
        };
        (y0 - pad)..(y1 + pad)
    };
    ((x0 - pad_x)..(x1 + pad_x), y)
}

/// Ticks of a log axis on `lo..hi`: 1-2-5 multiples of powers of ten when at most eight fall
/// in the range, else every k-th power of ten (plotters' own log ticks start at the first power
/// of ten, so a range inside one decade would get at most one label).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (e0, e1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let in_range = |v: &f64| *v >= lo && *v <= hi;
    let fine: Vec<f64> = (e0..=e1)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| round_sig(m * 10f64.powi(e))))
        .filter(in_range)
        .collect();
    if fine.len() >= 2 && fine.len() <= 8 {
        return fine;
    }
    if fine.len() < 2 {
        // Less than half a decade: every integer multiple.
        return (e0..=e1)
            .flat_map(|e| (1..=9).map(move |m| round_sig(f64::from(m) * 10f64.powi(e))))
            .filter(in_range)
            .collect();
    }
    let step = ((e1 - e0) as usize).div_ceil(6).max(1);
    (e0..=e1)
        .step_by(step)
        .map(|e| round_sig(10f64.powi(e)))
        .filter(in_range)
        .collect()
}

/// `v` rounded to 6 significant digits (so 5·10⁻³ prints as 0.005).
fn round_sig(v: f64) -> f64 {
    format!("{v:.5e}").parse().unwrap_or(v)
}

/// A tick label: plain decimals from 10⁻³ to 10⁵, else scientific.
fn tick_label(v: f64) -> String {
    let v = round_sig(v);
    if v == 0.0 || (1e-3..1e5).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// The drawable runs of consecutive points of a series, split at gaps.
fn segments(s: &Series, log_y: bool) -> Vec<Vec<(f64, f64)>> {
    let mut out = vec![Vec::new()];
    for (&x, &y) in s.x.iter().zip(&s.mean) {
        if drawable(x, y, log_y) {
            out.last_mut().expect("non-empty").push((x, y));
        } else if !out.last().expect("non-empty").is_empty() {
            out.push(Vec::new());
        }
    }
    out.retain(|seg| !seg.is_empty());
    out
}

fn draw_panel<Y>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    panel: &Panel,
    figure: &Figure,
    x: Range<f64>,
    y: Y,
) -> Result<(), PlotError>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let y_floor = y.range().start;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(62)
        .build_cartesian_2d(x, y)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc(figure.x_label.as_str())
        .y_desc(figure.y_label.as_str())
        .x_labels(6)
        .y_labels(6)
        .light_line_style(WHITE.mix(0.0))
        .label_style(("sans-serif", 12))
        .x_label_formatter(&|v| tick_label(*v))
        .y_label_formatter(&|v| tick_label(*v))
        .draw()
        .map_err(draw_err)?;

    // Muted lines first, so highlighted ones are drawn over them.
    let mut order: Vec<&Series> = panel
        .series
        .iter()
        .filter(|s| s.style == SeriesStyle::Muted)
        .collect();
    order.extend(
        panel
            .series
            .iter()
            .filter(|s| s.style == SeriesStyle::Highlighted),
    );
    let mut colour_index = 0;
    let mut any_legend = false;
    for s in order {
        let colour = match s.style {
            SeriesStyle::Muted => MUTED,
            SeriesStyle::Highlighted => {
                colour_index += 1;
                PALETTE[(colour_index - 1) % PALETTE.len()]
            }
        };
        if s.sd.is_some() {
            // The ±2 sd band of each drawable segment, clipped to the axis on a log scale.
            let mut segment: Vec<(f64, f64, f64)> = Vec::new();
            let mut polygons = Vec::new();
            for i in 0..s.x.len() {
                match band(s, i, figure.log_y) {
                    Some((lo, hi)) => {
                        let lo = if figure.log_y { lo.max(y_floor) } else { lo };
                        segment.push((s.x[i], lo, hi));
                    }
                    None => polygons.push(std::mem::take(&mut segment)),
                }
            }
            polygons.push(segment);
            for seg in polygons.into_iter().filter(|seg| !seg.is_empty()) {
                let mut outline: Vec<(f64, f64)> = seg.iter().map(|&(x, _, hi)| (x, hi)).collect();
                outline.extend(seg.iter().rev().map(|&(x, lo, _)| (x, lo)));
                chart
                    .draw_series(std::iter::once(Polygon::new(
                        outline,
                        colour.mix(0.18).filled(),
                    )))
                    .map_err(draw_err)?;
            }
        }
        let width = if s.style == SeriesStyle::Muted { 1 } else { 2 };
        let style = colour.stroke_width(width);
        for (k, seg) in segments(s, figure.log_y).into_iter().enumerate() {
            let single = seg.len() == 1;
            let drawn = chart
                .draw_series(LineSeries::new(seg.iter().copied(), style))
                .map_err(draw_err)?;
            if k == 0 && s.style == SeriesStyle::Highlighted {
                any_legend = true;
                drawn.label(s.label.as_str()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            }
            if single {
                // A lone point has no line: mark it.
                chart
                    .draw_series(seg.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                    .map_err(draw_err)?;
            }
        }
    }
    if any_legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(draw_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_one_two_five_or_powers_of_ten() {
        assert_eq!(log_ticks(0.3, 3.0), vec![0.5, 1.0, 2.0]);
        assert_eq!(log_ticks(0.004, 0.03), vec![0.005, 0.01, 0.02]);
        assert_eq!(log_ticks(2.6, 9.5), vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        assert_eq!(
            log_ticks(1e-7, 1e3),
            vec![1e-7, 1e-5, 1e-3, 0.1, 10.0, 1000.0]
        );
        assert_eq!(tick_label(0.005), "0.005");
        assert_eq!(tick_label(2e-5), "2e-5");
        assert_eq!(tick_label(1e6), "1e6");
    }

    #[test]
    fn segments_split_at_gaps_and_non_positive_values_on_a_log_axis() {
        let s = Series::line(
            "a",
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            vec![1.0, 2.0, f64::NAN, 3.0, -1.0, 4.0],
        );
        assert_eq!(
            segments(&s, true),
            vec![
                vec![(0.0, 1.0), (1.0, 2.0)],
                vec![(3.0, 3.0)],
                vec![(5.0, 4.0)]
            ]
        );
        assert_eq!(segments(&s, false).len(), 2);
    }

    #[test]
    fn mean_and_sd_skip_non_finite_runs_pointwise() {
        let s = Series::mean_and_sd(
            "m",
            vec![1.0, 2.0],
            &[vec![1.0, f64::INFINITY], vec![3.0, 5.0]],
        )
        .unwrap();
        assert_eq!(s.mean, vec![2.0, 5.0]);
        let sd = s.sd.unwrap();
        assert!((sd[0] - 2f64.sqrt()).abs() < 1e-15);
        assert_eq!(sd[1], 0.0);
    }
}
