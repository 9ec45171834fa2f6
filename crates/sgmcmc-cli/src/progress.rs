//! Progress of the chains on standard error: a bar per chain on a terminal, plain log lines
//! otherwise, through the core runner's [`Progress`] callbacks.
//!
//! With more chains than threads, chains wait for a thread, so a chain's own ETA says nothing
//! about the run's. Both displays therefore also show the whole run: iterations over all
//! chains against chains × iterations per chain, whose rate is the aggregate one (threads ×
//! a chain's), so its ETA counts the chains still waiting.

use indicatif::{MultiProgress, ProgressBar, ProgressState, ProgressStyle};
use sgmcmc::runner::{ChainReport, Progress};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

/// A progress bar per chain (for terminals), under one for the whole run.
pub struct BarProgress {
    multi: MultiProgress,
    bars: Mutex<Vec<Option<ProgressBar>>>,
    run: Option<ProgressBar>,
    done: Mutex<Vec<usize>>,
}

impl BarProgress {
    /// Bars for `chains` chains of `per_chain` iterations each (if known), drawn on standard
    /// error.
    pub fn new(chains: usize, per_chain: Option<usize>) -> Self {
        let multi = MultiProgress::new();
        let run = per_chain.filter(|_| chains > 1).map(|n| {
            let b = ProgressBar::new((n * chains) as u64);
            if let Ok(style) = ProgressStyle::with_template(
                "all chains [{bar:40}] {pos}/{len} it  {rate}  eta {eta} (chains still waiting included)",
            ) {
                b.set_style(style.with_key("rate", rate).progress_chars("=> "));
            }
            multi.add(b)
        });
        Self {
            multi,
            bars: Mutex::new(vec![None; chains]),
            run,
            done: Mutex::new(vec![0; chains]),
        }
    }

    fn record(&self, chain: usize, iterations: usize) {
        if let Some(run) = &self.run {
            let mut done = self.done.lock().expect("progress lock");
            done[chain] = iterations;
            run.set_position(done.iter().sum::<usize>() as u64);
        }
    }
}

impl Progress for BarProgress {
    fn chain_started(&self, chain: usize, total: Option<usize>) {
        let bar = match total {
            Some(n) => {
                let b = ProgressBar::new(n as u64);
                if let Ok(style) = ProgressStyle::with_template(
                    "chain {prefix} [{bar:40}] {pos}/{len} it  {rate}  eta {eta}",
                ) {
                    b.set_style(style.with_key("rate", rate).progress_chars("=> "));
                }
                b
            }
            None => {
                let b = ProgressBar::new_spinner();
                if let Ok(style) =
                    ProgressStyle::with_template("chain {prefix} {spinner} {pos} it  {rate}")
                {
                    b.set_style(style.with_key("rate", rate));
                }
                b
            }
        };
        let bar = self.multi.add(bar.with_prefix(chain.to_string()));
        self.bars.lock().expect("progress lock")[chain] = Some(bar);
    }

    fn advanced(&self, chain: usize, iterations: usize) {
        if let Some(b) = &self.bars.lock().expect("progress lock")[chain] {
            b.set_position(iterations as u64);
        }
        self.record(chain, iterations);
    }

    fn chain_finished(&self, chain: usize, report: &ChainReport) {
        self.record(chain, report.iterations);
        if let Some(b) = &self.bars.lock().expect("progress lock")[chain] {
            b.set_position(report.iterations as u64);
            let msg = match &report.divergence {
                Some(d) => format!("DIVERGED at iteration {}", d.iteration),
                None => "done".to_string(),
            };
            b.finish_with_message(msg);
        }
    }
}

/// Iterations per second, without decimals.
fn rate(state: &ProgressState, w: &mut dyn std::fmt::Write) {
    let _ = write!(w, "{:.0} it/s", state.per_sec());
}

/// Plain lines on standard error, at most one per chain every `interval_seconds`, and as
/// often one for the whole run.
pub struct LogProgress {
    start: Instant,
    interval_seconds: f64,
    last: Mutex<Vec<f64>>,
    totals: Mutex<Vec<Option<usize>>>,
    per_chain: Option<usize>,
    run: Mutex<RunLog>,
}

/// The whole run's counts for [`LogProgress`].
struct RunLog {
    done: Vec<usize>,
    finished: usize,
    last: f64,
}

impl LogProgress {
    /// Log lines for `chains` chains of `per_chain` iterations each (if known), at most every
    /// `interval_seconds` per chain.
    pub fn new(chains: usize, per_chain: Option<usize>, interval_seconds: f64) -> Self {
        Self {
            start: Instant::now(),
            interval_seconds,
            last: Mutex::new(vec![0.0; chains]),
            totals: Mutex::new(vec![None; chains]),
            per_chain,
            run: Mutex::new(RunLog {
                done: vec![0; chains],
                finished: 0,
                last: 0.0,
            }),
        }
    }

    /// Record a chain's count; every `interval_seconds`, a line for the whole run.
    fn record(&self, chain: usize, iterations: usize, finished: bool) {
        let Some(per_chain) = self.per_chain else {
            return;
        };
        let mut run = self.run.lock().expect("progress lock");
        run.done[chain] = iterations;
        run.finished += usize::from(finished);
        let chains = run.done.len();
        let now = self.start.elapsed().as_secs_f64();
        if chains < 2 || now - run.last < self.interval_seconds || run.finished == chains {
            return;
        }
        run.last = now;
        let done: usize = run.done.iter().sum();
        let total = per_chain * chains;
        let eta = (total.saturating_sub(done)) as f64 * now / done.max(1) as f64;
        eprintln!(
            "all chains: {done}/{total} iterations, {} of {chains} chains finished, eta {eta:.0} s \
             (chains still waiting for a thread included)",
            run.finished
        );
    }
}

impl Progress for LogProgress {
    fn chain_started(&self, chain: usize, total: Option<usize>) {
        self.totals.lock().expect("progress lock")[chain] = total;
    }

    fn advanced(&self, chain: usize, iterations: usize) {
        let now = self.start.elapsed().as_secs_f64();
        let mut last = self.last.lock().expect("progress lock");
        if now - last[chain] >= self.interval_seconds {
            last[chain] = now;
            match self.totals.lock().expect("progress lock")[chain] {
                Some(t) => eprintln!("chain {chain}: {iterations}/{t} iterations ({:.0} s)", now),
                None => eprintln!("chain {chain}: {iterations} iterations ({:.0} s)", now),
            }
        }
        drop(last);
        self.record(chain, iterations, false);
    }

    fn chain_finished(&self, chain: usize, report: &ChainReport) {
        self.record(chain, report.iterations, true);
        match &report.divergence {
            Some(d) => eprintln!(
                "chain {chain}: DIVERGED at iteration {} (non-finite state); {} draws kept",
                d.iteration, report.draws
            ),
            None => eprintln!(
                "chain {chain}: done, {} iterations in {:.2} s ({:.0} it/s), {} draws",
                report.iterations,
                report.seconds,
                report.iterations_per_second(),
                report.draws
            ),
        }
    }
}

/// Bars when standard error is a terminal, log lines otherwise; `per_chain` is each chain's
/// iteration count (burn-in included) when the budget fixes it.
pub fn auto_progress(chains: usize, per_chain: Option<usize>) -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() {
        Box::new(BarProgress::new(chains, per_chain))
    } else {
        Box::new(LogProgress::new(chains, per_chain, 5.0))
    }
}

/// One line on how `chains` chains share `threads` threads (`None` when every chain has a
/// thread): they run in waves, and a per-chain budget of `budget_seconds` then takes that many
/// times longer in all.
pub fn sharing_note(chains: usize, threads: usize, budget_seconds: Option<f64>) -> Option<String> {
    let threads = threads.max(1);
    if chains <= threads {
        return None;
    }
    let waves = chains.div_ceil(threads);
    let mut line = format!(
        "{chains} chains on {threads} threads: they run {threads} at a time, in {waves} waves"
    );
    if let Some(b) = budget_seconds {
        line += &format!(
            "; budget_seconds = {b} is per chain, so the sampling takes about {:.0} s in all",
            b * waves as f64
        );
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharing_note_counts_waves_and_the_whole_budget() {
        assert_eq!(sharing_note(4, 4, Some(10.0)), None);
        let note = sharing_note(8, 2, Some(10.0)).unwrap();
        assert!(note.contains("in 4 waves"), "{note}");
        assert!(note.contains("about 40 s in all"), "{note}");
        let note = sharing_note(3, 2, None).unwrap();
        assert!(
            note.contains("in 2 waves") && !note.contains("budget"),
            "{note}"
        );
    }
}
