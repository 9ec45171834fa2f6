//! Progress of the chains on standard error: a bar per chain on a terminal, plain log lines
//! otherwise, through the core runner's [`Progress`] callbacks.

use indicatif::{MultiProgress, ProgressBar, ProgressState, ProgressStyle};
use sgmcmc::runner::{ChainReport, Progress};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

/// A progress bar per chain (for terminals).
pub struct BarProgress {
    multi: MultiProgress,
    bars: Mutex<Vec<Option<ProgressBar>>>,
}

impl BarProgress {
    /// Bars for `chains` chains, drawn on standard error.
    pub fn new(chains: usize) -> Self {
        Self {
            multi: MultiProgress::new(),
            bars: Mutex::new(vec![None; chains]),
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
    }

    fn chain_finished(&self, chain: usize, report: &ChainReport) {
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

/// Plain lines on standard error, at most one per chain every `interval_seconds`.
pub struct LogProgress {
    start: Instant,
    interval_seconds: f64,
    last: Mutex<Vec<f64>>,
    totals: Mutex<Vec<Option<usize>>>,
}

impl LogProgress {
    /// Log lines for `chains` chains, at most every `interval_seconds` per chain.
    pub fn new(chains: usize, interval_seconds: f64) -> Self {
        Self {
            start: Instant::now(),
            interval_seconds,
            last: Mutex::new(vec![0.0; chains]),
            totals: Mutex::new(vec![None; chains]),
        }
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
    }

    fn chain_finished(&self, chain: usize, report: &ChainReport) {
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

/// Bars when standard error is a terminal, log lines otherwise.
pub fn auto_progress(chains: usize) -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() {
        Box::new(BarProgress::new(chains))
    } else {
        Box::new(LogProgress::new(chains, 5.0))
    }
}
