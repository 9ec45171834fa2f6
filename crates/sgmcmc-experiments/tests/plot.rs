//! `io::plot`: SVG figures with one panel per sampler and one series per tuning method (the
//! MAMBA paper's Figures 1–3): the file is written and holds every panel title and legend
//! label; the ±2 sd band is drawn where asked; bad input gives a named error, not a panic.
//!
//! Checked once by breaking the code (each restored afterwards):
//! - `src/io/plot.rs`, the legend drawn only when `any_legend` is false (inverted):
//!   `writes_one_panel_per_sampler_with_every_label` and `muted_series_have_no_legend_entry`
//!   failed (no legend text).
//! - `src/io/plot.rs`, `validate` without the drawable-point check:
//!   `nan_only_and_non_positive_log_series_are_named_errors` failed (plotters panicked on the
//!   non-finite axis range).
//! - `src/io/plot.rs`, bands skipped (`if s.sd.is_none()` for `is_some()`):
//!   `bands_are_drawn_only_for_series_with_sd` failed (no translucent polygon).

use sgmcmc_experiments::plot::{
    Figure, Panel, PlotError, Series, SeriesStyle, render_svg, write_svg,
};

/// The trimmed contents of every `<text>` element.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

fn count(svg: &str, text: &str) -> usize {
    texts(svg).iter().filter(|t| *t == text).count()
}

const METHODS: [&str; 3] = ["MAMBA-KSD", "grid search", "heuristic"];

fn figure(log_y: bool) -> Figure {
    let x: Vec<f64> = (1..=10).map(|k| k as f64).collect();
    let panels = ["SGLD", "SGLD-CV", "SGHMC", "SGNHT"]
        .iter()
        .enumerate()
        .map(|(p, &title)| Panel {
            title: title.to_string(),
            series: METHODS
                .iter()
                .enumerate()
                .map(|(m, &label)| {
                    let runs: Vec<Vec<f64>> = (0..4)
                        .map(|r| {
                            x.iter()
                                .map(|t| (1.0 + m as f64 + p as f64) / t + 0.01 * r as f64)
                                .collect()
                        })
                        .collect();
                    Series::mean_and_sd(label, x.clone(), &runs).unwrap()
                })
                .collect(),
        })
        .collect();
    Figure::new(
        "KSD against time",
        "wall-clock time (s)",
        "KSD",
        log_y,
        panels,
    )
}

#[test]
fn writes_one_panel_per_sampler_with_every_label() {
    let dir = tempfile::tempdir().unwrap();
    for log_y in [true, false] {
        let path = dir.path().join(format!("ksd_{log_y}.svg"));
        write_svg(&path, &figure(log_y)).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(
            svg.starts_with("<svg") || svg.contains("<svg "),
            "{svg:.200}"
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(count(&svg, "KSD against time"), 1);
        // One axis label per panel.
        assert_eq!(count(&svg, "wall-clock time (s)"), 4);
        for title in ["SGLD", "SGLD-CV", "SGHMC", "SGNHT"] {
            // Exactly one caption per panel.
            assert_eq!(count(&svg, title), 1, "{title}");
        }
        for label in METHODS {
            // One legend entry per panel.
            assert_eq!(count(&svg, label), 4, "{label}");
        }
        if log_y {
            // 1-2-5 ticks on the log axis (the values span 0.1 … 3.5).
            for tick in ["0.2", "0.5", "1", "2"] {
                assert!(count(&svg, tick) >= 1, "tick {tick}: {:?}", texts(&svg));
            }
        }
        // One polyline per series (no gaps here) plus the legend swatches.
        assert!(svg.matches("<polyline").count() >= 12);
    }
}

#[test]
fn bands_are_drawn_only_for_series_with_sd() {
    let x = vec![1.0, 2.0, 3.0];
    let with =
        Series::mean_and_sd("a", x.clone(), &[vec![1.0, 2.0, 3.0], vec![2.0, 3.0, 5.0]]).unwrap();
    let without = Series::line("b", x.clone(), vec![1.0, 2.0, 3.0]);
    let svg = |s: Series| {
        render_svg(&Figure::new(
            "t",
            "x",
            "y",
            true,
            vec![Panel {
                title: "p".into(),
                series: vec![s],
            }],
        ))
        .unwrap()
    };
    // The band is a translucent filled polygon (opacity 0.18).
    assert!(svg(with).contains("opacity=\"0.18"));
    assert!(!svg(without).contains("opacity=\"0.18"));
}

#[test]
fn muted_series_have_no_legend_entry() {
    let x = vec![0.0, 1.0];
    let mut pruned = Series::line("pruned arm", x.clone(), vec![2.0, 1.0]);
    pruned.style = SeriesStyle::Muted;
    let kept = Series::line("kept arm", x, vec![1.5, 0.5]);
    let svg = render_svg(&Figure::new(
        "rounds",
        "round",
        "KSD",
        true,
        vec![Panel {
            title: "MAMBA".into(),
            series: vec![pruned, kept],
        }],
    ))
    .unwrap();
    assert_eq!(count(&svg, "kept arm"), 1);
    assert!(!svg.contains("pruned arm"));
}

fn one_series(s: Series, log_y: bool) -> Figure {
    Figure::new(
        "t",
        "x",
        "y",
        log_y,
        vec![Panel {
            title: "SGLD".into(),
            series: vec![s],
        }],
    )
}

#[test]
fn empty_input_is_a_named_error() {
    let err = render_svg(&Figure::new("empty", "x", "y", false, vec![])).unwrap_err();
    assert!(matches!(err, PlotError::NoPanels(_)), "{err}");
    assert!(err.to_string().contains("no panels"));

    let err = render_svg(&Figure::new(
        "f",
        "x",
        "y",
        false,
        vec![Panel {
            title: "SGLD".into(),
            series: vec![],
        }],
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("panel \"SGLD\" has no series"),
        "{err}"
    );

    let err = render_svg(&one_series(Series::line("m", vec![], vec![]), false)).unwrap_err();
    assert!(
        err.to_string()
            .contains("\"m\" of panel \"SGLD\" has no points"),
        "{err}"
    );

    let err = render_svg(&one_series(
        Series::line("m", vec![1.0, 2.0], vec![1.0]),
        false,
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("mean has 1 values, expected 2"),
        "{err}"
    );
    let err = Series::mean_and_sd("m", vec![1.0, 2.0], &[vec![1.0]]).unwrap_err();
    assert!(matches!(err, PlotError::LengthMismatch { .. }), "{err}");
}

#[test]
fn nan_only_and_non_positive_log_series_are_named_errors() {
    let nan = Series::line("nan", vec![1.0, 2.0], vec![f64::NAN, f64::INFINITY]);
    let err = render_svg(&one_series(nan, false)).unwrap_err();
    assert!(
        matches!(&err, PlotError::NoFiniteValues { series, .. } if series == "nan"),
        "{err}"
    );
    let err = Series::mean_and_sd("runs", vec![1.0], &[vec![f64::NAN], vec![f64::NAN]])
        .map(|s| render_svg(&one_series(s, true)))
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("no drawable point"), "{err}");
    // Zero and negative values are drawable on a linear axis only.
    let zeros = Series::line("zeros", vec![1.0, 2.0], vec![0.0, -1.0]);
    assert!(render_svg(&one_series(zeros.clone(), false)).is_ok());
    let err = render_svg(&one_series(zeros, true)).unwrap_err();
    assert!(err.to_string().contains("≤ 0 on the log axis"), "{err}");
    // One finite point among gaps is enough (drawn as a marker).
    let one = Series::line("one", vec![1.0, 2.0, 3.0], vec![f64::NAN, 2.0, f64::NAN]);
    assert!(
        render_svg(&one_series(one, true))
            .unwrap()
            .contains("<circle")
    );
}

#[test]
fn unwritable_path_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing_dir/plot.svg");
    let err = write_svg(&path, &figure(true)).unwrap_err();
    assert!(matches!(err, PlotError::Io { .. }), "{err}");
    assert!(err.to_string().contains("plot.svg"), "{err}");
}
