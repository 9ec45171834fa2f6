//! `sgmcmc tune CONFIG [--method mamba|grid-search|heuristic] [--out DIR] [--plot FILE.svg]`:
//! the tuners of `sgmcmc::tuning` over a run file's `[tune]` table, with the per-round table
//! printed and written (`rounds.csv`, `tune.json`), the winner as a run file (`winner.toml`),
//! the winner's draws (`winner_draws.zarr`) and, for MAMBA, the metric of every arm round by
//! round as SVG (`--plot`).

use anyhow::{Context, Result};
use sgmcmc::io::{CheckpointDirectory, DrawSink, ExistingRun, RunDirectory, ZarrSink};
use sgmcmc::model::Model;
use sgmcmc::tuning::{ArmRound, GridPoint, TuneMetricSettings};
use sgmcmc_experiments::plot::{self, Figure, Panel, Series, SeriesStyle};
use sgmcmc_runfile::config::Config;
use sgmcmc_runfile::pipeline::{self, TuneMethod, TuneSession, Tuned};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// Which tuner (`--method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MethodArg {
    /// MAMBA: successive halving on the Stein discrepancy.
    Mamba,
    /// Grid search at a fixed batch size and iteration count.
    GridSearch,
    /// step = 1/N, batch 10 %, L = 10 (SGHMC).
    Heuristic,
}

impl From<MethodArg> for TuneMethod {
    fn from(m: MethodArg) -> Self {
        match m {
            MethodArg::Mamba => TuneMethod::Mamba,
            MethodArg::GridSearch => TuneMethod::GridSearch,
            MethodArg::Heuristic => TuneMethod::Heuristic,
        }
    }
}

/// `sgmcmc tune`.
pub fn tune(
    config: &Path,
    out: &Path,
    method: MethodArg,
    plot: Option<&Path>,
    existing: ExistingRun,
) -> Result<()> {
    if plot.is_some() && method != MethodArg::Mamba {
        anyhow::bail!(
            "--plot draws MAMBA's rounds; --method {} has none",
            method_name(method)
        );
    }
    if let Some(path) = plot {
        sgmcmc::io::check_replaceable(path)
            .with_context(|| format!("--plot {}", path.display()))?;
    }
    let started = Instant::now();
    let cfg = Config::from_file(config)?;
    let prepared = pipeline::prepare(&cfg)?;
    let session = TuneSession::new(&cfg, &prepared)?;
    let dir = RunDirectory::open(out, existing)?;
    let model = prepared.model();
    let resume = existing == ExistingRun::Resume;
    if resume {
        pipeline::recorded_tuning(&dir, &cfg, model)?;
        outln!("continuing the tuning run in {}", out.display());
    } else {
        pipeline::record_tuning(&dir, &cfg, model)?;
    }
    let checkpoints = CheckpointDirectory::of(&dir);
    outln!(
        "MAP and its full-data score: {:.2} s; metric scores: {}",
        session.map_seconds,
        if session.ctx.scores.is_exact() {
            format!("full batch ({} per draw)", model.num_data())
        } else {
            format!(
                "control-variate surrogate on a fixed subsample of {} of {} points",
                session.ctx.scores.cost_per_draw(),
                model.num_data()
            )
        }
    );
    let unit = match method {
        MethodArg::Mamba => session.mamba_settings()?.budget.unit(),
        _ => "",
    };
    let mut csv = String::from(CSV_HEADER);
    let mut per_arm_budgets = Vec::new();
    let mut on_round = |records: &[ArmRound], budget: f64| {
        print_round(records, budget, unit);
        per_arm_budgets.push(budget);
        for (i, r) in records.iter().enumerate() {
            csv_row(&mut csv, i + 1, r);
        }
    };
    let tuned = session.tune(
        TuneMethod::from(method),
        Some((&checkpoints, resume)),
        None,
        &mut on_round,
    )?;
    let wall = started.elapsed().as_secs_f64();
    match &tuned {
        Tuned::Mamba {
            arms,
            settings,
            outcome,
        } => {
            dir.write("rounds.csv", csv.as_bytes())?;
            if let Some(path) = plot {
                let metric = match settings.metric {
                    TuneMetricSettings::Ksd(_) => "KSD",
                    TuneMetricSettings::Fssd(..) => "FSSD-opt",
                };
                let figure = rounds_figure(
                    &format!("sgmcmc tune {}", config.display()),
                    metric,
                    settings.budget.unit(),
                    &outcome.rounds,
                    &per_arm_budgets,
                )?;
                plot::write_svg(path, &figure)?;
                outln!("rounds plot: {}", path.display());
            }
            let nominal = outcome.total_budget;
            outln!(
                "\nMAMBA: {} arms, η = {}, K = {}, T = {:.4} {}; winner arm {} ({}) with metric {:.6e}",
                outcome.arms,
                outcome.eta,
                outcome.rounds_planned,
                nominal,
                outcome.budget_unit,
                outcome.winner,
                arms[outcome.winner].label(),
                outcome.winner_metric
            );
            outln!(
                "threads {}: sampling {:.2} CPU s, build + scores + metric {:.2} s, MAMBA wall {:.2} s, tune wall {:.2} s (MAP included)",
                outcome.threads,
                outcome.sampling_seconds,
                outcome.overhead_seconds,
                outcome.wall_seconds,
                wall
            );
            if outcome.resumed_rounds > 0 {
                outln!(
                    "continued after {} of {} rounds (their progress was saved; they did not run again)",
                    outcome.resumed_rounds,
                    outcome.rounds.len()
                );
            }
            if outcome.budget_unit == "s" {
                outln!("wall clock / nominal budget T = {:.3}", wall / nominal);
            }
        }
        Tuned::GridSearch {
            arms,
            selection,
            outcome,
        } => {
            print_grid(&outcome.points, &format!("{selection:?}"));
            let mut csv = String::from(GRID_CSV_HEADER);
            for (i, p) in outcome.points.iter().enumerate() {
                grid_csv_row(&mut csv, i + 1, p);
            }
            dir.write("rounds.csv", csv.as_bytes())?;
            let g = &session.tune.grid_search;
            outln!(
                "\ngrid search: {} points x {}; winner arm {} ({}); {:.2} s wall",
                arms.len(),
                match g.estimates {
                    Some(e) => format!("{e} gradient estimates"),
                    None => format!("{} iterations", g.iterations),
                },
                outcome.winner,
                arms[outcome.winner].label(),
                outcome.wall_seconds
            );
        }
        Tuned::Heuristic { arm } => outln!("1/N heuristic: {}", arm.label()),
    }
    let report = tuned.report(session.map_seconds, wall);
    let winner = tuned.winner().clone();
    let winner_draws = tuned.winner_draws();
    let winner_path = out.join("winner.toml");
    let winner_cfg = session.winner_config(&winner);
    let text = format!(
        "# Written by `sgmcmc tune {} --method {}`: the winner's settings ({}).\n# Run it with `sgmcmc run {}`.\n\n{}",
        config.display(),
        method_name(method),
        winner.label(),
        winner_path.display(),
        winner_cfg.to_toml()?
    );
    dir.write("winner.toml", text.as_bytes())
        .with_context(|| format!("cannot write {}", winner_path.display()))?;
    dir.write(
        "tune.json",
        (serde_json::to_string_pretty(&report)? + "\n").as_bytes(),
    )
    .with_context(|| format!("cannot write {}", out.join("tune.json").display()))?;
    outln!("winner config: {}", winner_path.display());
    if let Some(draws) = winner_draws {
        let path = out.join("winner_draws.zarr");
        write_draws(&path, model, draws)?;
        outln!(
            "winner draws: {} ({} draws)",
            path.display(),
            draws.len() / model.dim()
        );
    }
    if method != MethodArg::Heuristic {
        outln!("rounds: {}", out.join("rounds.csv").display());
    }
    Ok(())
}

/// MAMBA's metric per arm against the cumulative budget per arm (x after round i: r₀ + … + rᵢ):
/// one line per arm, ending at the round that pruned it (grey), the last round's arms in colour
/// with a legend. Non-finite metrics (diverged arms) are gaps.
fn rounds_figure(
    title: &str,
    metric: &str,
    unit: &str,
    rounds: &[Vec<ArmRound>],
    per_arm_budgets: &[f64],
) -> Result<Figure> {
    let cumulative: Vec<f64> = per_arm_budgets
        .iter()
        .scan(0.0, |sum, b| {
            *sum += b;
            Some(*sum)
        })
        .collect();
    let mut arms: Vec<usize> = rounds.iter().flatten().map(|r| r.arm).collect();
    arms.sort_unstable();
    arms.dedup();
    let last = rounds.len().saturating_sub(1);
    let series: Vec<Series> = arms
        .iter()
        .map(|&arm| {
            let mut x = Vec::new();
            let mut y = Vec::new();
            let mut label = String::new();
            let mut reached_last = false;
            for (i, round) in rounds.iter().enumerate() {
                if let Some(r) = round.iter().find(|r| r.arm == arm) {
                    x.push(cumulative.get(i).copied().unwrap_or(i as f64 + 1.0));
                    y.push(r.metric);
                    label = format!("arm {arm}: {}", r.label);
                    reached_last = i == last;
                }
            }
            let mut s = Series::line(label, x, y);
            if !reached_last {
                s.style = SeriesStyle::Muted;
            }
            s
        })
        .collect();
    // Arms whose every round diverged have nothing to draw.
    let drawable: Vec<Series> = series
        .into_iter()
        .filter(|s| s.mean.iter().any(|v| v.is_finite() && *v > 0.0))
        .collect();
    let mut figure = Figure::new(
        format!("{title}: {metric} by round"),
        format!("cumulative budget per arm ({unit})"),
        metric,
        true,
        vec![Panel {
            title: format!(
                "MAMBA: {} arms, {} rounds (grey: pruned)",
                arms.len(),
                rounds.len()
            ),
            series: drawable,
        }],
    );
    figure.panel_size = (820, 520);
    Ok(figure)
}

fn method_name(m: MethodArg) -> &'static str {
    match m {
        MethodArg::Mamba => "mamba",
        MethodArg::GridSearch => "grid-search",
        MethodArg::Heuristic => "heuristic",
    }
}

/// One chain of draws into a Zarr store.
fn write_draws(path: &Path, model: &dyn Model, draws: &[f64]) -> Result<()> {
    let dim = model.dim();
    let sink = ZarrSink::create(
        path,
        1,
        dim,
        "theta",
        &model.parameter_names(),
        Some(draws.len() / dim),
    )?;
    let mut writer = sink.chain_writer(0)?;
    for d in draws.chunks_exact(dim) {
        writer.push(d)?;
    }
    writer.finish()?;
    sink.finalize()?;
    Ok(())
}

const CSV_HEADER: &str = "round,rank,arm,settings,metric,full_batch_ksd,draws,iterations,gradient_evaluations,sampling_seconds,overhead_seconds,diverged,kept\n";

fn csv_row(csv: &mut String, rank: usize, r: &ArmRound) {
    let _ = writeln!(
        csv,
        "{},{},{},\"{}\",{:e},{},{},{},{},{:.6},{:.6},{},{}",
        r.round,
        rank,
        r.arm,
        r.label,
        r.metric,
        r.full_batch_ksd.map_or(String::new(), |k| format!("{k:e}")),
        r.draws,
        r.iterations,
        r.gradient_evaluations,
        r.sampling_seconds,
        r.overhead_seconds,
        r.diverged,
        r.kept
    );
}

const GRID_CSV_HEADER: &str =
    "rank,arm,settings,metric,draws,iterations,sampling_seconds,metric_seconds,diverged\n";

fn grid_csv_row(csv: &mut String, rank: usize, p: &GridPoint) {
    let _ = writeln!(
        csv,
        "{rank},{},\"{}\",{:e},{},{},{:.6},{:.6},{}",
        p.arm,
        p.label,
        p.metric,
        p.draws,
        p.iterations,
        p.sampling_seconds,
        p.metric_seconds,
        p.diverged
    );
}

fn print_round(records: &[ArmRound], budget: f64, unit: &str) {
    let round = records.first().map_or(0, |r| r.round);
    outln!(
        "\nround {round}: {} arms x {budget:.5} {unit} each (ranked; * = kept)",
        records.len()
    );
    let width = records
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(8)
        .max(8);
    outln!(
        "  {:>4} {:>4}  {:<width$} {:>12} {:>7} {:>9} {:>8} {:>8}",
        "rank",
        "arm",
        "settings",
        "metric",
        "draws",
        "iters",
        "cpu s",
        "other s"
    );
    for (i, r) in records.iter().enumerate() {
        outln!(
            "{} {:>4} {:>4}  {:<width$} {:>12} {:>7} {:>9} {:>8.4} {:>8.4}{}",
            if r.kept { "*" } else { " " },
            i + 1,
            r.arm,
            r.label,
            format_metric(r.metric),
            r.draws,
            r.iterations,
            r.sampling_seconds,
            r.overhead_seconds,
            if r.diverged { "  diverged" } else { "" }
        );
    }
}

fn print_grid(points: &[GridPoint], selection: &str) {
    outln!("\ngrid search, ranked by {selection}:");
    let width = points
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(8)
        .max(8);
    outln!(
        "  {:>4} {:>4}  {:<width$} {:>12} {:>7} {:>9} {:>8}",
        "rank",
        "arm",
        "settings",
        "metric",
        "draws",
        "iters",
        "cpu s"
    );
    for (i, p) in points.iter().enumerate() {
        outln!(
            "  {:>4} {:>4}  {:<width$} {:>12} {:>7} {:>9} {:>8.3}{}",
            i + 1,
            p.arm,
            p.label,
            format_metric(p.metric),
            p.draws,
            p.iterations,
            p.sampling_seconds,
            if p.diverged { "  diverged" } else { "" }
        );
    }
}

fn format_metric(m: f64) -> String {
    if m.is_finite() {
        format!("{m:.5e}")
    } else {
        "inf".into()
    }
}
