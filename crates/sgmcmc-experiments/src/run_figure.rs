//! The one-page diagnostic figure of a run (issue 22), written beside its draws: the verdict
//! lines (diagnostics, bias check) on top, then for up to six parameters the chains' traces
//! and the pooled marginal density beside the Laplace approximation's N(θ̂ⱼ, σ̂ⱼ²).
//!
//! The parameters shown are the ones most worth a look: the three with the largest R-hat and
//! the three whose sd is furthest from the Laplace sd (the first ones when there are six or
//! fewer).

use crate::plot::{PALETTE, PlotError, draw_err, write_document};
use plotters::prelude::*;
use std::path::Path;

/// Panels per figure (rows of trace + density).
pub const MAX_PARAMETERS: usize = 6;
/// Points of a trace per chain (every k-th draw beyond).
const TRACE_POINTS: usize = 400;
/// Histogram bins of a marginal.
const BINS: usize = 40;

/// What the figure shows.
pub struct RunFigure<'a> {
    /// Title line.
    pub title: String,
    /// Lines under the title (the verdicts), each drawn as given.
    pub lines: Vec<String>,
    /// Parameter names (D).
    pub names: &'a [String],
    /// Each chain's kept draws, flat `draws × D`.
    pub chains: &'a [&'a [f64]],
    /// R-hat per parameter (NaN when unknown).
    pub rhat: &'a [f64],
    /// The Laplace approximation's mean and sd per parameter, when the run formed it.
    pub laplace: Option<(&'a [f64], &'a [f64])>,
}

/// Up to [`MAX_PARAMETERS`] parameter indices: the worst R-hats, then the sds furthest from
/// the Laplace sds, in model order.
pub fn pick_parameters(
    names: &[String],
    rhat: &[f64],
    sd: &[f64],
    laplace_sd: Option<&[f64]>,
) -> Vec<usize> {
    let d = names.len();
    if d <= MAX_PARAMETERS {
        return (0..d).collect();
    }
    let mut by_rhat: Vec<usize> = (0..d).collect();
    by_rhat.sort_by(|&a, &b| rhat[b].total_cmp(&rhat[a]));
    let mut picked: Vec<usize> = by_rhat.into_iter().take(MAX_PARAMETERS / 2).collect();
    if let Some(l) = laplace_sd {
        let mut by_sd: Vec<usize> = (0..d).collect();
        let off = |j: usize| (sd[j] / l[j]).ln().abs();
        by_sd.sort_by(|&a, &b| off(b).total_cmp(&off(a)));
        for j in by_sd {
            if picked.len() == MAX_PARAMETERS {
                break;
            }
            if !picked.contains(&j) {
                picked.push(j);
            }
        }
    }
    for j in 0..d {
        if picked.len() == MAX_PARAMETERS {
            break;
        }
        if !picked.contains(&j) {
            picked.push(j);
        }
    }
    picked.sort_unstable();
    picked
}

/// Render the figure as an SVG document.
pub fn render_run_figure(fig: &RunFigure) -> Result<String, PlotError> {
    let d = fig.names.len();
    let draws = fig.chains.first().map_or(0, |c| c.len() / d.max(1));
    if d == 0 || draws < 2 {
        return Err(PlotError::NoPanels(fig.title.clone()));
    }
    let sd: Vec<f64> = (0..d).map(|j| pooled_sd(fig.chains, d, j)).collect();
    let shown = pick_parameters(fig.names, fig.rhat, &sd, fig.laplace.map(|l| l.1));
    let (width, row_height) = (1200u32, 230u32);
    let header = 40 + 20 * fig.lines.len() as u32;
    let size = (width, header + row_height * shown.len() as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let (top, body) = root.split_vertically(header);
        top.draw(&Text::new(fig.title.clone(), (12, 8), ("sans-serif", 20)))
            .map_err(draw_err)?;
        for (k, line) in fig.lines.iter().enumerate() {
            top.draw(&Text::new(
                line.clone(),
                (12, 36 + 20 * k as i32),
                ("sans-serif", 13),
            ))
            .map_err(draw_err)?;
        }
        let areas = body.split_evenly((shown.len(), 2));
        for (row, &j) in shown.iter().enumerate() {
            draw_trace(&areas[2 * row], fig, j, draws)?;
            draw_marginal(&areas[2 * row + 1], fig, j)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

/// Render the figure and write it to `path`.
pub fn write_run_figure(path: &Path, fig: &RunFigure) -> Result<(), PlotError> {
    write_document(path, &render_run_figure(fig)?)
}

fn column(chain: &[f64], d: usize, j: usize) -> impl Iterator<Item = f64> + '_ {
    chain.chunks_exact(d).map(move |r| r[j])
}

fn pooled_sd(chains: &[&[f64]], d: usize, j: usize) -> f64 {
    let values: Vec<f64> = chains.iter().flat_map(|c| column(c, d, j)).collect();
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// min and max of the finite values, widened when equal.
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if hi > lo {
        let pad = 0.03 * (hi - lo);
        (lo - pad, hi + pad)
    } else {
        (lo - 0.5, lo + 0.5)
    }
}

fn draw_trace<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    fig: &RunFigure,
    j: usize,
    draws: usize,
) -> Result<(), PlotError> {
    let d = fig.names.len();
    let (lo, hi) = span(fig.chains.iter().flat_map(|c| column(c, d, j)));
    let caption = format!("{}: traces (R-hat {:.3})", fig.names[j], fig.rhat[j]);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..draws as f64, lo..hi)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("draw")
        .light_line_style(WHITE)
        .draw()
        .map_err(draw_err)?;
    let every = draws.div_ceil(TRACE_POINTS).max(1);
    for (c, chain) in fig.chains.iter().enumerate() {
        let colour = PALETTE[c % PALETTE.len()];
        let points = column(chain, d, j)
            .enumerate()
            .step_by(every)
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| (i as f64, v));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(1)))
            .map_err(draw_err)?;
    }
    Ok(())
}

fn draw_marginal<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    fig: &RunFigure,
    j: usize,
) -> Result<(), PlotError> {
    let d = fig.names.len();
    let values: Vec<f64> = fig
        .chains
        .iter()
        .flat_map(|c| column(c, d, j))
        .filter(|v| v.is_finite())
        .collect();
    let laplace = fig.laplace.map(|(m, s)| (m[j], s[j]));
    let (mut lo, mut hi) = span(values.iter().copied());
    if let Some((m, s)) = laplace
        && s.is_finite()
        && s > 0.0
    {
        lo = lo.min(m - 4.0 * s);
        hi = hi.max(m + 4.0 * s);
    }
    let width = (hi - lo) / BINS as f64;
    let mut counts = [0usize; BINS];
    for v in &values {
        let k = (((v - lo) / width) as usize).min(BINS - 1);
        counts[k] += 1;
    }
    let density: Vec<f64> = counts
        .iter()
        .map(|&c| c as f64 / (values.len() as f64 * width))
        .collect();
    let normal = |x: f64, m: f64, s: f64| {
        (-0.5 * ((x - m) / s).powi(2)).exp() / (s * (2.0 * std::f64::consts::PI).sqrt())
    };
    let mut top = density.iter().copied().fold(0.0, f64::max);
    if let Some((m, s)) = laplace {
        top = top.max(normal(m, m, s));
    }
    let caption = match laplace {
        Some(_) => format!("{}: marginal (bars) vs Laplace (line)", fig.names[j]),
        None => format!("{}: marginal", fig.names[j]),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(70)
        .build_cartesian_2d(lo..hi, 0.0..1.05 * top)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .draw()
        .map_err(draw_err)?;
    chart
        .draw_series(density.iter().enumerate().map(|(k, &h)| {
            let x0 = lo + k as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width, h)], PALETTE[0].mix(0.5).filled())
        }))
        .map_err(draw_err)?;
    if let Some((m, s)) = laplace {
        let points = (0..=200).map(|k| {
            let x = lo + (hi - lo) * k as f64 / 200.0;
            (x, normal(x, m, s))
        });
        chart
            .draw_series(LineSeries::new(points, BLACK.stroke_width(2)))
            .map_err(draw_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_worst_rhat_and_sd_then_model_order() {
        let names: Vec<String> = (0..10).map(|j| format!("p{j}")).collect();
        let mut rhat = vec![1.0; 10];
        rhat[7] = 1.2;
        rhat[2] = 1.1;
        rhat[9] = 1.05;
        let sd = vec![1.0; 10];
        let mut laplace = vec![1.0; 10];
        laplace[4] = 3.0;
        let picked = pick_parameters(&names, &rhat, &sd, Some(&laplace));
        assert_eq!(picked.len(), 6);
        for j in [2, 4, 7, 9] {
            assert!(picked.contains(&j), "{picked:?}");
        }
    }

    #[test]
    fn renders_an_svg_with_every_shown_parameter() {
        let names: Vec<String> = (0..2).map(|j| format!("theta[{j}]")).collect();
        let chain: Vec<f64> = (0..400)
            .map(|i| ((i * 37 % 101) as f64) / 50.0 - 1.0)
            .collect();
        let chains = [chain.as_slice(), chain.as_slice()];
        let fig = RunFigure {
            title: "test".into(),
            lines: vec!["diagnostics: fine".into()],
            names: &names,
            chains: &chains,
            rhat: &[1.0, 1.0],
            laplace: Some((&[0.0, 0.0], &[0.6, 0.6])),
        };
        let svg = render_run_figure(&fig).unwrap();
        assert!(svg.contains("theta[0]: traces") && svg.contains("theta[1]: marginal"));
        assert!(svg.contains("diagnostics: fine"));
    }
}
