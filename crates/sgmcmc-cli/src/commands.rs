//! The `demo`, `run` and `reference` commands.

use crate::progress::{auto_progress, sharing_note};
use anyhow::{Context, Result};
use sgmcmc::data::synthetic;
use sgmcmc::io::format_table;
use sgmcmc::io::{
    CheckpointDirectory, DrawSink, ExistingRun, RunDirectory, ZarrSink, summarize_parameters,
};
use sgmcmc::model::Model;
use sgmcmc::reference::{self, NutsSettings};
use sgmcmc_runfile::config::Config;
use sgmcmc_runfile::config::coreset::CoresetFile;
use sgmcmc_runfile::pipeline::{self, Outcome};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first Ctrl-C: chains stop at their next iteration and everything is written.
static STOP: AtomicBool = AtomicBool::new(false);

/// First Ctrl-C: stop sampling gracefully (draws and summary are written). Second: exit now.
fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            eprintln!("second interrupt: exiting without writing the summary");
            std::process::exit(130);
        }
        eprintln!(
            "interrupt: stopping the chains and saving the draws (press Ctrl-C again to exit now)"
        );
    });
}

/// After the outputs are written: an interrupted run ends with an error exit.
/// After the outputs are written: a run whose every chain diverged produced nothing to
/// summarise and ends with an error exit too.
fn finish(outcome: &Outcome) -> Result<()> {
    if outcome.interrupted {
        anyhow::bail!(
            "interrupted: sampling stopped early; the draws so far and the summary were saved"
        );
    }
    if outcome.chains > 0 && outcome.summarised_chains.is_empty() {
        anyhow::bail!(
            "every chain diverged: there are no draws to summarise (the step is too large for \
             this posterior; try a smaller step, control variates, or the default path: leave out \
             [sampler])"
        );
    }
    Ok(())
}

/// The demo's run file, embedded so `demo` needs no files.
const DEMO_CONFIG: &str = include_str!("../../../examples/demo.toml");

fn print_outcome(outcome: &Outcome, extra: &[(&str, &[f64])]) {
    outln!();
    let mut columns = extra.to_vec();
    if let Some(sd) = &outcome.laplace_sd
        && !extra.iter().any(|(name, _)| *name == "laplace_sd")
    {
        columns.push(("laplace_sd", sd));
    }
    out!("{}", format_table(&outcome.parameters, &columns));
    outln!("{}", verdict(&outcome.parameters));
    if let Some(check) = &outcome.bias_check {
        outln!("{}", check.describe());
    }
    if let Some(line) = spread_beside_laplace(outcome) {
        outln!("{line}");
    }
    let per_chain = outcome.run.chains.first().map_or(0, |c| c.iterations);
    outln!(
        "{} chains x {} iterations in {:.2} s: {:.0} iterations/s per chain; {} draws kept",
        outcome.chains,
        per_chain,
        outcome.seconds,
        outcome.iterations_per_second,
        outcome.draws
    );
    if let Some(map) = &outcome.map {
        outln!(
            "MAP by L-BFGS: {} iterations, {} full-data evaluations, {:.2} s, |grad|_inf = {:.2e}{}",
            map.iterations,
            map.evaluations,
            outcome.map_seconds,
            map.gradient_norm,
            if map.converged {
                ""
            } else {
                " (NOT converged: the chains start from the last iterate)"
            }
        );
    }
    if let Some(ev) = &outcome.evaluation {
        for line in ev.describe() {
            outln!("{line}");
        }
    }
    for c in &outcome.run.chains {
        if let Some(sgmcmc::sampler::SamplerStatistics::Mh(stats)) = &c.sampler_statistics {
            outln!("chain {}: {}", c.chain, stats.describe());
        }
    }
    for c in &outcome.run.chains {
        if let Some(d) = &c.divergence {
            outln!(
                "WARNING: chain {} diverged at iteration {} (non-finite state); its {} earlier draws are \
                 stored but left out of the summary. Last finite state: {:?}",
                c.chain,
                d.iteration,
                c.draws,
                d.last_finite_state
            );
        }
    }
}

/// The draws' sds beside the Laplace approximation's: the range of their ratio, and the
/// parameters off by more than half (a posterior far from Gaussian there, or a biased sampler).
fn spread_beside_laplace(outcome: &Outcome) -> Option<String> {
    let laplace = outcome.laplace_sd.as_ref()?;
    let ratios: Vec<(f64, &str)> = outcome
        .parameters
        .iter()
        .zip(laplace)
        .map(|(p, l)| (p.stats.sd / l, p.name.as_str()))
        .collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), (r, _)| {
            (lo.min(*r), hi.max(*r))
        });
    let off: Vec<&str> = ratios
        .iter()
        .filter(|(r, _)| !(2.0 / 3.0..=1.5).contains(r))
        .map(|(_, name)| *name)
        .collect();
    let mut line = format!("spread: sd / Laplace sd from {lo:.3} to {hi:.3}");
    if off.is_empty() {
        line += " (every parameter within a factor 1.5)";
    } else {
        line += &format!(
            "; {} parameters off by more than a factor 1.5 ({}{}): the posterior is far from \
             Gaussian there, or the draws are biased",
            off.len(),
            off.iter().take(5).copied().collect::<Vec<_>>().join(", "),
            if off.len() > 5 { ", ..." } else { "" }
        );
    }
    Some(line)
}

/// One line judging the diagnostics against the usual thresholds (Vehtari et al. 2021:
/// R-hat ≤ 1.01, bulk and tail ESS ≥ 400).
fn verdict(rows: &[sgmcmc::io::ParameterRow]) -> String {
    let max_rhat = rows.iter().map(|r| r.stats.rhat).fold(f64::NAN, f64::max);
    let min_bulk = rows
        .iter()
        .map(|r| r.stats.ess_bulk)
        .fold(f64::NAN, f64::min);
    let min_tail = rows
        .iter()
        .map(|r| r.stats.ess_tail)
        .fold(f64::NAN, f64::min);
    let stats =
        format!("max R-hat {max_rhat:.3}, min bulk ESS {min_bulk:.0}, min tail ESS {min_tail:.0}");
    // Judge the values as printed (R-hat to 3 decimals, ESS to whole draws).
    let rhat_shown = (max_rhat * 1e3).round() / 1e3;
    if rhat_shown <= 1.01 && min_bulk.round() >= 400.0 && min_tail.round() >= 400.0 {
        format!("diagnostics: {stats}: within the usual thresholds (R-hat <= 1.01, ESS >= 400)")
    } else {
        format!(
            "diagnostics: {stats}: NOT within the usual thresholds (R-hat <= 1.01, ESS >= 400); \
             treat means as rough and tails as unreliable, or run longer"
        )
    }
}

/// Writes summary.json and the diagnostic figure, before anything about the run is printed
/// (a closed or full stdout must not cost the files); returns the lines that name them.
fn write_outputs(
    dir: &RunDirectory,
    title: &str,
    outcome: &Outcome,
    chains: &[Vec<f64>],
    cfg: &Config,
    model: &dyn Model,
) -> Result<Vec<String>> {
    let summary = pipeline::summary_json(outcome, cfg, model);
    let path = pipeline::write_summary(dir.path(), &summary)?;
    let mut lines = vec![format!(
        "draws: {}   summary: {}",
        dir.join("draws.zarr").display(),
        path.display()
    )];
    lines.extend(write_figure(dir.path(), title, outcome, chains, model));
    Ok(lines)
}

/// The threads the chains run on (rayon's global pool: one per core unless RAYON_NUM_THREADS
/// says otherwise).
fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// A run file resolved for execution: the file itself, or, without a `[sampler]` table, the
/// default path's choices (printed) with the MAP and Laplace approximation it found.
fn resolve(
    cfg: Config,
    model: &dyn Model,
) -> Result<(Config, Option<pipeline::default_path::Resolved>)> {
    if pipeline::default_path::takes_default_path(&cfg) {
        outln!(
            "default path (no [sampler] table): MAP, Laplace preconditioner, gradient, then MAMBA's step"
        );
    }
    let (cfg, resolved) = pipeline::default_path::resolve_if_needed(cfg, model)?;
    for line in resolved.iter().flat_map(|r| &r.report.choices) {
        outln!("  {line}");
    }
    Ok((cfg, resolved))
}

/// Run a resolved file on `prepared` (its `[evaluation]` included) into `zarr`, with progress
/// bars and Ctrl-C.
fn execute_resolved(
    cfg: &Config,
    prepared: &pipeline::Prepared,
    resolved: Option<pipeline::default_path::Resolved>,
    output: Option<&pipeline::RunOutput>,
) -> Result<(Outcome, Vec<Vec<f64>>)> {
    pipeline::check_run(cfg, prepared.model())?;
    let settings = pipeline::run_settings(cfg)?;
    let threads = rayon_threads();
    // The chains this process runs (some of them with `--chains`).
    let here = output
        .and_then(|o| o.only.as_ref())
        .map_or(cfg.run.chains, Vec::len);
    if let Some(note) = sharing_note(here, threads, cfg.run.budget_seconds) {
        outln!("{note}");
    }
    let per_chain = match settings.budget {
        sgmcmc::runner::Budget::Iterations(n) => Some(n + settings.burn_in),
        _ => None,
    };
    let progress = auto_progress(cfg.run.chains, per_chain);
    install_interrupt_handler();
    Ok(pipeline::execute_resolved(
        cfg,
        prepared,
        resolved,
        output,
        progress.as_ref(),
        &STOP,
    )?)
}

/// `text` broken at spaces into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let last = lines.last_mut().expect("one line");
        if !last.is_empty() && last.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_string());
        } else {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    lines
}

/// The one-page diagnostic figure (`DIR/diagnostics.svg`): the verdicts, and traces and
/// marginals beside the Laplace approximation for the parameters most worth a look.
fn write_figure(
    out: &Path,
    title: &str,
    outcome: &Outcome,
    chains: &[Vec<f64>],
    model: &dyn Model,
) -> Option<String> {
    if outcome.parameters.is_empty() || outcome.summarised_chains.is_empty() {
        return None;
    }
    let kept: Vec<&[f64]> = outcome
        .summarised_chains
        .iter()
        .map(|&c| chains[c].as_slice())
        .collect();
    let shortest = kept.iter().map(|c| c.len()).min().unwrap_or(0);
    // On the scale the names refer to (σ, not log σ), as the summary.
    let constrained: Option<Vec<Vec<f64>>> = model.is_constrained().then(|| {
        kept.iter()
            .map(|c| sgmcmc::model::constraint::constrain_draws(model, &c[..shortest]))
            .collect()
    });
    let kept: Vec<&[f64]> = match &constrained {
        Some(c) => c.iter().map(Vec::as_slice).collect(),
        None => kept.iter().map(|c| &c[..shortest]).collect(),
    };
    let names = model.parameter_names();
    let rhat: Vec<f64> = outcome.parameters.iter().map(|p| p.stats.rhat).collect();
    let mut lines = wrap(&verdict(&outcome.parameters), 170);
    if let Some(check) = &outcome.bias_check {
        lines.extend(wrap(&check.describe(), 170));
    }
    if let Some(dp) = &outcome.default_path {
        for choice in &dp.choices {
            lines.extend(wrap(&format!("default path: {choice}"), 170));
        }
    }
    let map = outcome.map.as_ref().map(|m| {
        let mut x = vec![0.0; m.theta.len()];
        model.constrain(&m.theta, &mut x);
        x
    });
    let laplace = match (&map, &outcome.laplace_sd) {
        (Some(map), Some(sd)) => Some((map.as_slice(), sd.as_slice())),
        _ => None,
    };
    let figure = sgmcmc_experiments::run_figure::RunFigure {
        title: title.to_string(),
        lines,
        names: &names,
        chains: &kept,
        rhat: &rhat,
        laplace,
    };
    let path = out.join("diagnostics.svg");
    // The figure is a view of outputs already written: if it cannot be drawn (no draws kept),
    // the run still stands.
    Some(
        match sgmcmc_experiments::run_figure::write_run_figure(&path, &figure) {
            Ok(()) => format!("diagnostic figure: {}", path.display()),
            Err(e) => format!("diagnostic figure: not drawn ({e})"),
        },
    )
}

/// `sgmcmc demo`: the default path (no sampler settings) on the embedded demo run file.
pub fn demo(
    out: Option<PathBuf>,
    iterations: Option<usize>,
    print_config: bool,
    existing: ExistingRun,
) -> Result<()> {
    if print_config {
        out!("{DEMO_CONFIG}");
        return Ok(());
    }
    let dir = out
        .as_deref()
        .map(|o| RunDirectory::open(o, existing))
        .transpose()?;
    let mut cfg = Config::from_toml(DEMO_CONFIG, "examples/demo.toml")?;
    if let Some(n) = iterations {
        cfg.run.iterations = Some(n);
    }
    let syn = cfg
        .data
        .synthetic
        .clone()
        .context("the demo config uses synthetic data")?;
    let t0 = std::time::Instant::now();
    let prepared = pipeline::prepare(&cfg)?;
    let model = prepared.model();
    // The θ* that generated the data (the same generator and seed as the [data] table's).
    let (_, theta_star) = synthetic::logistic_regression(syn.rows, syn.dim, syn.seed);
    outln!(
        "sgmcmc demo: Bayesian logistic regression, N = {} rows, d = {}, prior N(0, 10 I); data built in {:.2} s; \
         {} chains x {} iterations (burn-in {}, thin {})",
        model.num_data(),
        model.dim(),
        t0.elapsed().as_secs_f64(),
        cfg.run.chains,
        cfg.run.iterations.unwrap_or(0),
        cfg.run.burn_in,
        cfg.run.thin
    );
    let (cfg, resolved) = resolve(cfg, model)?;
    let output = dir
        .as_ref()
        .map(|d| pipeline::RunOutput::draws_only(d.join("draws.zarr")));
    let (outcome, chains) = execute_resolved(&cfg, &prepared, resolved, output.as_ref())?;
    let written = match &dir {
        Some(dir) => write_outputs(dir, "sgmcmc demo", &outcome, &chains, &cfg, model)?,
        None => Vec::new(),
    };
    print_outcome(&outcome, &[("true", &theta_star)]);
    outln!(
        "(true = the theta* that generated the data; laplace_sd = sd of the Laplace approximation at the MAP)"
    );
    for line in written {
        outln!("{line}");
    }
    finish(&outcome)
}

/// How `sgmcmc run` splits a run over processes (a batch scheduler's tasks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Split {
    /// Every chain in this process.
    Whole,
    /// Record the run and create its store; no sampling (`--prepare`).
    Prepare,
    /// Only these chains of a prepared run (`--chains`).
    Chains(Vec<usize>),
    /// Summarise a prepared run whose chains are all in (`--finish`).
    Finish,
}

/// The chains `N` or `N-M` (inclusive) of `--chains`.
pub fn parse_chains(spec: &str) -> Result<Vec<usize>> {
    let number = |s: &str| -> Result<usize> {
        s.trim()
            .parse()
            .with_context(|| format!("--chains {spec}: `{s}` is not a chain number"))
    };
    let (first, last) = match spec.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => (number(spec)?, number(spec)?),
    };
    if first > last {
        anyhow::bail!("--chains {spec}: the range is empty (write N-M with N <= M)");
    }
    Ok((first..=last).collect())
}

/// `sgmcmc run CONFIG --out DIR --chains N[-M]`: chains of a prepared run, each from its
/// checkpoint if it has one; no summary (`--finish` writes it once every chain is in).
fn run_chains(config: &Path, out: &Path, chains: &[usize]) -> Result<()> {
    let given = Config::from_file(config)?;
    let prepared = pipeline::prepare(&given)?;
    let model = prepared.model();
    let dir = RunDirectory::open_chains(out, chains)?;
    let (cfg, output) =
        pipeline::chains_task_output(&dir, &given, model, chains).context("--chains")?;
    let (outcome, _) = execute_resolved(&cfg, &prepared, None, Some(&output))?;
    for chain in &outcome.run.chains {
        let before = outcome
            .resumed_draws
            .as_ref()
            .map_or(0, |kept| kept[chain.chain]);
        outln!(
            "chain {}: {} draws ({} from its checkpoint), {} iterations in {:.2} s{}",
            chain.chain,
            chain.draws,
            before,
            chain.iterations,
            chain.seconds,
            if chain.divergence.is_some() {
                "; DIVERGED"
            } else {
                ""
            }
        );
    }
    if outcome.interrupted {
        anyhow::bail!("interrupted: run the same command again to continue these chains");
    }
    Ok(())
}

/// `sgmcmc run CONFIG --out DIR`. A run file without a `[sampler]` table takes the default
/// path (`pipeline::default_path`): MAP, Laplace preconditioner, control variates where they
/// pay, MAMBA's step; what it chose is printed and written to summary.json. `split` runs it as
/// separate processes instead: `--prepare`, then `--chains` (any number at once), then
/// `--finish`.
pub fn run(config: &Path, out: &Path, existing: ExistingRun, split: Split) -> Result<()> {
    if let Split::Chains(chains) = &split {
        return run_chains(config, out, chains);
    }
    let given = Config::from_file(config)?;
    // Data (without the held-out test rows), model, test split and reference.
    let prepared = pipeline::prepare(&given)?;
    let model = prepared.model();
    let resume = existing == ExistingRun::Resume;
    let (cfg, resolved, recorded_choices, dir) = if resume {
        // The run as it was resolved when it started (MAMBA's timed choice is not made again;
        // the MAP and preconditioner are found again, deterministically).
        let dir = RunDirectory::open(out, existing)?;
        let (cfg, report) = pipeline::recorded_run(&dir, &given, model)?;
        outln!(
            "continuing the run in {} from its checkpoints",
            out.display()
        );
        (cfg, None, report, dir)
    } else {
        let (cfg, resolved) = resolve(given.clone(), model)?;
        // Validate every setting before creating output.
        pipeline::check_run(&cfg, model)?;
        let dir = RunDirectory::open(out, existing)?;
        pipeline::record_run(
            &dir,
            &given,
            model,
            &cfg,
            resolved.as_ref().map(|r| &r.report),
        )?;
        (cfg, resolved, None, dir)
    };
    let output = pipeline::RunOutput::in_directory(&dir, resume);
    if split == Split::Prepare {
        let draws = pipeline::prepare_store(&cfg, model, &output)?;
        outln!(
            "prepared {}: {} chains of {draws} draws each; run them with `sgmcmc run {} --out {} \
             --chains N[-M]` (any number at once), then `--finish`",
            out.display(),
            cfg.run.chains,
            config.display(),
            out.display()
        );
        return Ok(());
    }
    if split == Split::Finish {
        let unfinished = pipeline::unfinished_chains(&cfg, &output)?;
        if !unfinished.is_empty() {
            let list: Vec<String> = unfinished.iter().map(usize::to_string).collect();
            anyhow::bail!(
                "the run in {} is not finished: chains {} do not have all their draws yet (run \
                 them with --chains)",
                out.display(),
                list.join(", ")
            );
        }
    }
    let (mut outcome, chains) = execute_resolved(&cfg, &prepared, resolved, Some(&output))?;
    if recorded_choices.is_some() {
        outcome.default_path = recorded_choices;
    }
    let written = write_outputs(
        &dir,
        &format!("sgmcmc run {}", config.display()),
        &outcome,
        &chains,
        &cfg,
        model,
    )?;
    print_outcome(&outcome, &[]);
    for line in written {
        outln!("{line}");
    }
    finish(&outcome)
}

/// `sgmcmc coreset CONFIG --out DIR`: Coreset MCMC on a coreset run file; writes coreset.json
/// (points, weights, hot start, metric along the run), draws.zarr (the draws after training) and
/// summary.json (their per-parameter summary). The run's whole state is checkpointed in
/// DIR/checkpoints; `--resume` continues a killed or interrupted run from there.
pub fn coreset(config: &Path, out: &Path, existing: ExistingRun) -> Result<()> {
    let cfg = CoresetFile::from_file(config)?;
    let dir = RunDirectory::open(out, existing)?;
    let checkpoints = CheckpointDirectory::of(&dir);
    let resume = existing == ExistingRun::Resume;
    install_interrupt_handler();
    let outcome = pipeline::run_coreset_file(
        &cfg,
        &STOP,
        Some(pipeline::CoresetCheckpointing {
            directory: &checkpoints,
            resume,
        }),
    )?;

    let run = &outcome.run;
    let names = &outcome.parameter_names;
    let chains: Vec<&[f64]> = run.draws.iter().map(Vec::as_slice).collect();
    let per_chain = chains.first().map_or(0, |c| c.len() / names.len().max(1));
    let weights = &run.coreset.weights;
    // Every file first: a closed or full stdout must not cost them.
    let zarr = dir.join("draws.zarr");
    let sink = ZarrSink::create(
        &zarr,
        chains.len(),
        names.len(),
        "theta",
        names,
        Some(per_chain),
    )?;
    for (c, draws) in chains.iter().enumerate() {
        let mut writer = sink.chain_writer(c)?;
        for draw in draws.chunks_exact(names.len()) {
            writer.push(draw)?;
        }
        writer.finish()?;
    }
    sink.finalize()?;
    let parameters = if per_chain >= 4 {
        summarize_parameters(names, &chains)
    } else {
        Vec::new()
    };
    let report = serde_json::json!({
        "points": run.coreset.points,
        "weights": weights,
        "num_data": outcome.num_data,
        "optimiser": outcome.optimiser,
        "kernel": outcome.kernel,
        "hot_start_iteration": run.hot_start_iteration,
        "hot_start_passed": run.hot_start_passed,
        "optimiser_steps": run.optimiser_steps,
        "iterations": run.iterations,
        "seconds": outcome.seconds,
        "stopped": run.stopped,
        "metric": run.metric,
        "config": cfg,
    });
    let path = dir
        .write(
            "coreset.json",
            serde_json::to_string_pretty(&report)?.as_bytes(),
        )
        .with_context(|| format!("cannot write {}", dir.join("coreset.json").display()))?;
    let summary = serde_json::json!({ "parameters": parameters, "draws_per_chain": per_chain });
    let summary_path = pipeline::write_summary(dir.path(), &summary)?;

    let total: f64 = weights.iter().sum();
    let nonzero = weights.iter().filter(|w| **w > 0.0).count();
    if resume {
        outln!(
            "continued the coreset run in {} from its checkpoint",
            out.display()
        );
    }
    outln!(
        "coreset of M = {} from N = {}: {} with the {} kernel, {} iterations in {:.2} s",
        run.coreset.len(),
        outcome.num_data,
        outcome.optimiser,
        outcome.kernel,
        run.iterations,
        outcome.seconds
    );
    match run.hot_start_iteration {
        Some(i) if run.hot_start_passed => outln!("hot-start test passed at iteration {i}"),
        Some(0) if !run.hot_start_passed => outln!("hot start off: training from iteration 1"),
        Some(i) => {
            outln!("hot-start test did not pass; warm-up ended at the cap (iteration {i})")
        }
        None => outln!("warm-up never ended: the weights were not trained"),
    }
    outln!(
        "{} optimiser steps; weights sum to {total:.1} (N = {}), {nonzero} of {} positive",
        run.optimiser_steps,
        outcome.num_data,
        run.coreset.len()
    );
    if let Some(&(i, m)) = run.metric.last() {
        outln!("average squared z-score against the reference at iteration {i}: {m:.4e}");
    }
    if let Some(why) = &run.stopped {
        outln!("WARNING: the run stopped early: {why}; everything up to there is saved");
    }
    if !parameters.is_empty() {
        outln!();
        out!("{}", format_table(&parameters, &[]));
        outln!("{}", verdict(&parameters));
    }
    outln!(
        "coreset: {}   draws: {}   summary: {}",
        path.display(),
        zarr.display(),
        summary_path.display()
    );
    if run.stopped.is_some() {
        anyhow::bail!(
            "the coreset run stopped early; what it had is saved, and `sgmcmc coreset {} --out {} \
             --resume` continues it",
            config.display(),
            out.display()
        );
    }
    Ok(())
}

/// The options of `sgmcmc reference` besides its run file.
pub struct ReferenceOptions {
    /// Number of chains.
    pub chains: usize,
    /// Warm-up iterations per chain.
    pub warmup: usize,
    /// Draws kept per chain.
    pub draws: usize,
    /// Seed (default: the run file's).
    pub seed: Option<u64>,
    /// A dense metric at the Laplace covariance.
    pub dense_metric: bool,
}

/// Where `sgmcmc reference --out FILE` keeps its finished chains until the file is written:
/// the run directory `FILE.partial` (locked while the run lasts; deleted once FILE is
/// complete; kept after an interruption, for `--resume`).
fn partial_reference(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// `sgmcmc reference CONFIG --out FILE`: NUTS on the full-data posterior of the run file's model
/// (built exactly as `run` builds it), a table, and the reference file. Each chain is saved in
/// FILE.partial once finished, so that `--resume` after a kill or Ctrl-C runs only the chains
/// that had not finished, and gives the reference an uninterrupted run would have.
pub fn reference(
    config: &Path,
    out: &Path,
    options: &ReferenceOptions,
    existing: ExistingRun,
) -> Result<()> {
    sgmcmc::io::check_replaceable(out)
        .with_context(|| format!("reference file {}", out.display()))?;
    let cfg = Config::from_file(config)?;
    let settings = NutsSettings {
        chains: options.chains,
        warmup: options.warmup,
        draws: options.draws,
        seed: options.seed.unwrap_or(cfg.run.seed),
        dense_laplace_metric: options.dense_metric,
        ..NutsSettings::default()
    };
    settings.validate()?;
    // Fail before sampling, not after, when the file cannot be written there.
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        anyhow::bail!(
            "cannot write the reference file {}: directory {} does not exist",
            out.display(),
            dir.display()
        );
    }
    let partial = partial_reference(out);
    let resume = existing == ExistingRun::Resume;
    if resume && !partial.is_dir() {
        anyhow::bail!(
            "there is no interrupted reference run to continue for {} ({} does not exist); run \
             without --resume",
            out.display(),
            partial.display()
        );
    }
    let data = pipeline::load_data(&cfg.data)?;
    let model = pipeline::build_model(&cfg.model, data)?;
    outln!(
        "sgmcmc reference: NUTS (nuts-rs {}) on the full-data posterior of {} (N = {}, D = {}); \
         {} chains x {} draws after {} warm-up, seed {}",
        reference::NUTS_RS_VERSION,
        model.name(),
        model.num_data(),
        model.dim(),
        settings.chains,
        settings.draws,
        settings.warmup,
        settings.seed
    );
    let recorded_options = serde_json::json!({
        "chains": settings.chains,
        "warmup": settings.warmup,
        "draws": settings.draws,
        "seed": settings.seed,
        "dense_metric": settings.dense_laplace_metric,
    });
    let dir = RunDirectory::open(&partial, existing)?;
    let checkpoints = CheckpointDirectory::of(&dir);
    let earlier = if resume {
        pipeline::recorded_reference(&dir, &cfg, model.as_ref(), &recorded_options)?;
        let earlier = checkpoints
            .load(settings.chains)
            .with_context(|| format!("cannot read {}", checkpoints.path().display()))?;
        let done = earlier.iter().filter(|c| c.is_some()).count();
        outln!(
            "continuing the reference run in {}: {done} of {} chains finished earlier",
            partial.display(),
            settings.chains
        );
        earlier
    } else {
        pipeline::record_reference(&dir, &cfg, model.as_ref(), recorded_options)?;
        Vec::new()
    };
    let finished = reference::FinishedChains {
        store: &checkpoints,
        earlier,
    };
    let progress = auto_progress(settings.chains, Some(settings.warmup + settings.draws));
    install_interrupt_handler();
    let result = reference::run_nuts_resumable(
        model.as_ref(),
        &settings,
        progress.as_ref(),
        &STOP,
        Some(&finished),
    )?;
    drop(progress);
    let laplace_sd = result.laplace_sd.clone();
    let extra: Vec<(&str, &[f64])> = laplace_sd
        .as_deref()
        .map(|sd| vec![("laplace_sd", sd)])
        .unwrap_or_default();
    outln!();
    out!("{}", format_table(&result.parameters, &extra));
    outln!("{}", verdict(&result.parameters));
    let steps: Vec<String> = result
        .chains
        .iter()
        .map(|c| format!("{:.3e}", c.step_size))
        .collect();
    outln!(
        "{:.2} s sampling, {} full-data gradient evaluations; step sizes {}; MAP in {} L-BFGS iterations",
        result.seconds,
        result.gradient_evaluations(),
        steps.join(", "),
        result.map.iterations
    );
    let divergences = result.divergences();
    if divergences > 0 {
        let non_finite: usize = result.chains.iter().map(|c| c.non_finite).sum();
        outln!(
            "WARNING: {divergences} divergent transitions after warm-up ({non_finite} non-finite log \
             densities in all); the reference may be biased: check the model, or raise --warmup"
        );
    }
    if let Some(rel) = result.sd_relative_to_laplace() {
        let max = rel.iter().map(|r| r.abs()).fold(0.0, f64::max);
        let mean = rel.iter().map(|r| r.abs()).sum::<f64>() / rel.len() as f64;
        outln!(
            "NUTS sd vs Laplace sd (laplace_sd: the Laplace approximation at the MAP): \
             max |relative difference| {:.2} %, mean {:.2} %",
            100.0 * max,
            100.0 * mean
        );
    }
    result.moments.save(out)?;
    outln!("reference: {}", out.display());
    if result.interrupted {
        anyhow::bail!(
            "interrupted: the reference was written from the {} draws per chain made so far (of \
             {}); the finished chains are kept in {}: the same command with --resume runs the rest",
            result.moments.draws_per_chain,
            settings.draws,
            partial.display()
        );
    }
    // The reference is complete: its chains need not be kept.
    drop(dir);
    std::fs::remove_dir_all(&partial)
        .with_context(|| format!("cannot delete {}", partial.display()))?;
    Ok(())
}

/// `sgmcmc ksd DRAWS --config CONFIG [--variable NAME[,NAME...]] [--thin K] [--fssd]
/// [--json FILE]`: read the stored draws (of `variables`, side by side; by default `theta` or
/// the posterior's only variable), compute full-batch scores at every K-th draw of each chain
/// (reference §4.6), and report the KSD (and FSSD-opt) of the pooled thinned draws.
pub fn ksd(
    draws_path: &Path,
    config: &Path,
    variables: &[String],
    thin: usize,
    fssd: bool,
    json: Option<&Path>,
) -> Result<()> {
    use sgmcmc::stein::{self, FssdSettings, SteinSettings};
    anyhow::ensure!(thin >= 1, "--thin must be at least 1");
    if let Some(path) = json {
        sgmcmc::io::check_replaceable(path)
            .with_context(|| format!("--json {}", path.display()))?;
    }
    let cfg = Config::from_file(config)?;
    let variables = if variables.is_empty() {
        let found = sgmcmc::io::posterior_variables(draws_path)?;
        match sgmcmc::io::default_variable(&found) {
            Some(name) => vec![name.to_string()],
            None if found.is_empty() => anyhow::bail!(
                "{}: the posterior group has no variable of shape (chain, draw, ...)",
                draws_path.display()
            ),
            None => anyhow::bail!(
                "{}: the posterior group has no variable theta but {} others ({}); \
                 choose with --variable NAME[,NAME...]",
                draws_path.display(),
                found.len(),
                found.join(", ")
            ),
        }
    } else {
        variables.to_vec()
    };
    let stored = sgmcmc::io::read_posterior(draws_path, &variables)?;
    anyhow::ensure!(
        !stored.is_empty(),
        "{} holds no draws",
        draws_path.display()
    );
    // The posterior the draws target: the training part if the run held a test split out.
    let prepared = pipeline::prepare(&cfg)?;
    let model = prepared.model();
    anyhow::ensure!(
        model.dim() == stored.dim,
        "the draws have {} parameters but the model of {} has {}",
        stored.dim,
        config.display(),
        model.dim()
    );
    let (mut kept, mut scores, mut score_seconds) = (Vec::new(), Vec::new(), 0.0);
    for chain in stored.chains.iter().filter(|c| !c.is_empty()) {
        // Stored on the constrained scale (σ); scored on θ (log σ), where the Stein identity
        // holds.
        let chain = sgmcmc::model::constraint::unconstrain_draws(model, chain)
            .with_context(|| format!("{}", draws_path.display()))?;
        let t = stein::full_batch_scores(model, &chain, stored.dim, thin)?;
        kept.extend_from_slice(&t.draws);
        scores.extend_from_slice(&t.scores);
        score_seconds += t.seconds;
    }
    let settings = SteinSettings {
        fssd: fssd.then(FssdSettings::default),
        ..SteinSettings::default()
    };
    let report = stein::evaluate(&kept, &scores, stored.dim, &settings)?;
    outln!(
        "{} draws in {} chains, every {thin}-th kept: {} draws x {} parameters",
        stored.len(),
        stored.chains.len(),
        report.draws,
        report.dim
    );
    outln!(
        "full-batch scores: {score_seconds:.2} s ({:.1} ms per draw, N = {})",
        1e3 * score_seconds / report.draws.max(1) as f64,
        model.num_data()
    );
    let u = report
        .ksd
        .squared_u
        .map_or_else(|| "n/a".to_string(), |u| format!("{u:.6e}"));
    outln!(
        "KSD (IMQ, V-statistic, square root) = {:.6e}   KSD²_U = {u}   ({:.3} s)",
        report.ksd.ksd,
        report.ksd_seconds
    );
    if let Some(warning) = &report.warning {
        outln!("WARNING: {warning}");
    }
    if let Some(f) = &report.fssd {
        outln!(
            "FSSD-opt = {:.6e} (FSSD²_U = {:.6e}; J = {}, {} train / {} test draws; {:.2} s)",
            f.fssd,
            f.squared_u,
            f.num_locations,
            f.train_points,
            f.test_points,
            f.seconds
        );
    }
    if let Some(path) = json {
        let value = serde_json::json!({
            "draws_path": draws_path.display().to_string(),
            "variables": variables,
            "config": config.display().to_string(),
            "thin": thin,
            "score_seconds": score_seconds,
            "report": report,
        });
        sgmcmc::io::write_atomic(
            path,
            (serde_json::to_string_pretty(&value)? + "\n").as_bytes(),
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
        outln!("wrote {}", path.display());
    }
    Ok(())
}

/// `sgmcmc shuffle FEATURES --out COPY [--targets Y --out-targets Y_COPY] [--seed S]
/// [--memory-mib M]`: the rows in a uniformly random order, written out of core
/// (`data::shuffle_npy`).
pub fn shuffle(
    features: &Path,
    targets: Option<(&Path, &Path)>,
    out: &Path,
    seed: u64,
    memory_mib: usize,
) -> Result<()> {
    anyhow::ensure!(memory_mib >= 1, "--memory-mib must be at least 1");
    let inputs = std::iter::once(features).chain(targets.map(|(t, _)| t));
    let outputs = std::iter::once(out).chain(targets.map(|(_, o)| o));
    for (i, o) in inputs.zip(outputs) {
        anyhow::ensure!(
            i != o,
            "{}: the copy must not overwrite its input (it is read while the copy is written)",
            o.display()
        );
    }
    let r = sgmcmc::data::shuffle_npy(features, targets, out, seed, memory_mib << 20)?;
    let gb = r.bytes as f64 / 1e9;
    outln!(
        "shuffled {} rows x {} columns ({}, {gb:.2} GB with targets) through {} buckets: \
         {:.1} s to the buckets ({:.2} GB/s), {:.1} s to {} ({:.2} GB/s)",
        r.rows,
        r.cols,
        r.dtype,
        r.buckets,
        r.seconds[0],
        gb / r.seconds[0].max(1e-9),
        r.seconds[1],
        out.display(),
        gb / r.seconds[1].max(1e-9)
    );
    Ok(())
}
