//! Progress of a run over a set of queues (the demo's progress bar and
//! `--until-drained`): a bar on stderr (shown on a terminal only; log lines
//! go above it, see [`crate::console`]) with the rate over the last
//! [`RATE_WINDOW`], and a summary line at the end.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::board::QueueCounts;

/// The window the shown rate is measured over.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(10);

/// Tracks finished jobs since the start.
pub(crate) struct Progress {
    start: Instant,
    baseline: QueueCounts,
    total: usize,
    /// (when, jobs finished by then) over the last [`RATE_WINDOW`].
    samples: VecDeque<(Instant, usize)>,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    /// Starts counting from the queues' current state; `show` draws a bar.
    pub(super) fn new(baseline: QueueCounts, show: bool) -> Progress {
        let bar = show.then(|| {
            let bar = indicatif::ProgressBar::new(baseline.listed as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} jobs, {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("#>."),
            );
            crate::console::show(bar.clone());
            bar
        });
        Progress {
            start: Instant::now(),
            baseline,
            total: baseline.listed,
            samples: VecDeque::from([(Instant::now(), 0)]),
            bar,
        }
    }

    /// Jobs finished (completed or trashed) since the start.
    pub(super) fn finished(&self, now: &QueueCounts) -> usize {
        (now.completed + now.trashed).saturating_sub(self.baseline.completed + self.baseline.trashed)
    }

    /// Jobs per second over the last [`RATE_WINDOW`] (a job that runs for
    /// minutes shows a small rate, not zero, once it finishes).
    fn rate(&mut self, done: usize) -> f64 {
        let now = Instant::now();
        self.samples.push_back((now, done));
        while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= RATE_WINDOW {
            self.samples.pop_front();
        }
        let (since, then) = self.samples[0];
        (done - then.min(done)) as f64 / now.duration_since(since).as_secs_f64().max(0.001)
    }

    /// Updates the bar.
    pub(super) fn draw(&mut self, now: &QueueCounts) {
        let done = self.finished(now);
        self.total = self.total.max(done + now.listed);
        let rate = self.rate(done);
        if let Some(bar) = &self.bar {
            bar.set_length(self.total as u64);
            bar.set_position(done as u64);
            bar.set_message(format!("{} running, {rate:.1} jobs/s", now.claimed));
        }
    }

    /// Clears the bar and prints the summary.
    pub(super) fn summary(&self, now: &QueueCounts) {
        if self.bar.is_some() {
            crate::console::hide();
        }
        let elapsed = self.start.elapsed().as_secs_f64();
        let done = self.finished(now);
        eprintln!(
            "jobworker: {done} jobs finished in {elapsed:.2}s ({:.1} jobs/s): {} completed, {} trashed, {} left",
            done as f64 / elapsed.max(0.001),
            now.completed.saturating_sub(self.baseline.completed),
            now.trashed.saturating_sub(self.baseline.trashed),
            now.listed
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(completed: usize, listed: usize) -> QueueCounts {
        QueueCounts {
            completed,
            listed,
            ..QueueCounts::default()
        }
    }

    #[test]
    fn the_rate_is_over_the_recent_window_and_never_zero_after_a_finish() {
        let mut p = Progress::new(counts(0, 3), false);
        p.samples = VecDeque::from([(Instant::now() - Duration::from_secs(4), 0)]);
        let rate = p.rate(p.finished(&counts(1, 2)));
        assert!(rate > 0.2 && rate < 0.3, "1 job in 4 s: {rate}");
        // Old samples leave the window: 100 jobs a minute ago do not count.
        p.samples = VecDeque::from([
            (Instant::now() - Duration::from_secs(60), 0),
            (Instant::now() - Duration::from_secs(12), 100),
            (Instant::now() - Duration::from_secs(8), 100),
        ]);
        let rate = p.rate(110);
        assert!(rate > 0.7 && rate < 1.0, "10 jobs in the last 12 s: {rate}");
    }
}
