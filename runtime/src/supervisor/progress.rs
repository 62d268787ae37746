//! Progress of a run over a set of queues (for the demo's progress bar and
//! `--until-drained`).

use std::io::Write;
use std::time::Instant;

use crate::redis::QueueCounts;

/// Tracks finished jobs since the start.
pub(crate) struct Progress {
    start: Instant,
    baseline: QueueCounts,
    total: usize,
    shown: bool,
}

impl Progress {
    /// Starts counting from the queues' current state.
    pub fn new(baseline: QueueCounts) -> Progress {
        Progress {
            start: Instant::now(),
            baseline,
            total: baseline.listed,
            shown: false,
        }
    }

    /// Jobs finished (completed or trashed) since the start.
    pub fn finished(&self, now: &QueueCounts) -> usize {
        (now.completed + now.trashed).saturating_sub(self.baseline.completed + self.baseline.trashed)
    }

    /// Draws one progress line on stderr.
    pub fn draw(&mut self, now: &QueueCounts) {
        let done = self.finished(now);
        self.total = self.total.max(done + now.listed);
        let width = 30;
        let filled = (done * width).checked_div(self.total).unwrap_or(width).min(width);
        let rate = done as f64 / self.start.elapsed().as_secs_f64().max(0.001);
        eprint!(
            "\r[{}{}] {done}/{} jobs, {} running, {rate:.0} jobs/s   ",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.total,
            now.claimed
        );
        let _ = std::io::stderr().flush();
        self.shown = true;
    }

    /// Ends the progress line and prints the summary.
    pub fn summary(&self, now: &QueueCounts) {
        if self.shown {
            eprintln!();
        }
        let elapsed = self.start.elapsed().as_secs_f64();
        let done = self.finished(now);
        eprintln!(
            "jobworker: {done} jobs finished in {elapsed:.2}s ({:.0} jobs/s): {} completed, {} trashed, {} left",
            done as f64 / elapsed.max(0.001),
            now.completed.saturating_sub(self.baseline.completed),
            now.trashed.saturating_sub(self.baseline.trashed),
            now.listed
        );
    }
}
