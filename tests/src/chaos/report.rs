//! The report of a chaos run: the figures, the cancels and how their jobs
//! ended, the duplicates with their causes, the overlaps with their
//! explanations, and the verdict.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::chaos::analysis::{Analysis, Explanation};
use crate::chaos::events::{Events, KillKind, SupervisorEnd};
use crate::chaos::verify::BoardCheck;

/// Overlaps and runs quoted in full.
const QUOTED: usize = 10;

/// Everything a chaos run found.
#[derive(Debug, Clone)]
pub struct Report {
    /// `Redis` or `ZooKeeper`.
    pub backend: &'static str,
    /// The server and its persistence.
    pub server: String,
    /// The seed of the run's random choices.
    pub seed: u64,
    /// Supervisor flags, as passed.
    pub supervisor_args: String,
    /// The lease horizon used to judge freezes.
    pub horizon: Duration,
    /// Time from the first supervisor start to the end of the faults.
    pub chaos_time: Duration,
    /// Time from then until the board had settled every job.
    pub settle_time: Duration,
    /// Whether the board settled within the timeout.
    pub settled: bool,
    /// What the run did.
    pub events: Events,
    /// What the runs say.
    pub analysis: Analysis,
    /// Bad lines in the run log.
    pub bad_log_lines: Vec<String>,
    /// What the board says.
    pub board: BoardCheck,
    /// Jobs the board completed with no run in the log.
    pub completed_without_run: usize,
    /// The run's directory (logs, server data), when kept.
    pub dir: Option<PathBuf>,
}

impl Report {
    /// Every job completed exactly once or cancelled as asked, and
    /// nothing left in the queue.
    pub fn exactly_once(&self) -> bool {
        let a = &self.analysis;
        a.lost == 0
            && a.cancel_not_kept.is_empty()
            && a.completed_after_cancel.is_empty()
            && self.board.queue_empty()
    }

    /// Why the run failed; empty when it passed.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        let lost = self.analysis.lost;
        if lost > 0 {
            out.push(format!(
                "{lost} jobs lost (neither completed on the board nor cancelled as asked)"
            ));
        }
        out.extend(self.cancel_failures());
        if self.board.live_left > 0 || self.board.trashed_left > 0 {
            out.push(format!(
                "jobs left in the queue: {} live, {} trashed",
                self.board.live_left, self.board.trashed_left
            ));
        }
        let unexplained = self.analysis.overlaps_by(Explanation::Unexplained);
        if unexplained > 0 {
            out.push(format!(
                "{unexplained} overlapping runs unexplained by a lease expiry"
            ));
        }
        if !self.analysis.same_claim_twice.is_empty() {
            out.push(format!(
                "{} claims ran twice (same job and fencing token)",
                self.analysis.same_claim_twice.len()
            ));
        }
        if !self.analysis.last_run_not_ok.is_empty() {
            out.push(format!(
                "{} jobs whose last run did not succeed (claimed again after completing, or completed without success)",
                self.analysis.last_run_not_ok.len()
            ));
        }
        if self.completed_without_run > 0 {
            out.push(format!(
                "{} jobs completed with no run logged",
                self.completed_without_run
            ));
        }
        for (life, status, _) in self.events.own_exits() {
            out.push(format!("supervisor {} exited on its own: {status}", life.pid));
        }
        for life in &self.events.supervisors {
            if let Some((_, SupervisorEnd::Stopped(status))) = &life.end {
                if status != "exit status: 0" {
                    out.push(format!(
                        "supervisor {} did not stop cleanly on SIGTERM: {status}",
                        life.pid
                    ));
                }
            }
        }
        if !self.settled {
            out.push("the board did not settle every job within the timeout".into());
        }
        for missed in &self.events.missed {
            out.push(format!("planned fault did not happen: {missed}"));
        }
        if !self.bad_log_lines.is_empty() {
            out.push(format!("{} bad lines in the run log", self.bad_log_lines.len()));
        }
        out
    }

    /// What went wrong with the cancels and their jobs.
    fn cancel_failures(&self) -> Vec<String> {
        let a = &self.analysis;
        let mut out = Vec::new();
        if !a.cancel_not_kept.is_empty() {
            out.push(format!(
                "{} jobs cancelled by `jobworker cancel` (exit 0) are not cancelled on the board: {:?}",
                a.cancel_not_kept.len(),
                a.cancel_not_kept
            ));
        }
        if !a.completed_after_cancel.is_empty() {
            out.push(format!(
                "{} jobs cancelled by `jobworker cancel` (exit 0) were completed too (a worker's consume was accepted): {:?}",
                a.completed_after_cancel.len(),
                a.completed_after_cancel
            ));
        }
        if !a.cancels.failed.is_empty() {
            out.push(format!(
                "{} `jobworker cancel` calls neither cancelled nor refused: {:?}",
                a.cancels.failed.len(),
                a.cancels.failed
            ));
        }
        out
    }

    /// True when nothing failed.
    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// The cancels' lines.
    fn fmt_cancels(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.analysis.cancels;
        writeln!(f, "-- cancels (jobworker cancel, one job per call)")?;
        writeln!(
            f,
            "asked:           {} ({} with a run in flight)",
            c.asked, c.asked_running
        )?;
        writeln!(
            f,
            "cancelled:       {} ({} of them while running)",
            c.cancelled, c.cancelled_running
        )?;
        writeln!(
            f,
            "refused:         {} (the job had finished: a race lost)",
            c.refused
        )?;
        writeln!(f, "failed:          {}", c.failed.len())?;
        for (id, said) in &c.failed {
            writeln!(f, "  {id}: {said}")?;
        }
        Ok(())
    }

    fn kills(&self, kind: KillKind) -> usize {
        self.events.kills.iter().filter(|k| k.kind == kind).count()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.analysis;
        let b = &self.board;
        let e = &self.events;
        writeln!(f, "== chaos run on {} (seed {})", self.backend, self.seed)?;
        writeln!(f, "server:      {}", self.server)?;
        writeln!(f, "supervisor:  jobworker {}", self.supervisor_args)?;
        writeln!(
            f,
            "time:        {} of faults, then {} to settle",
            ms(self.chaos_time),
            ms(self.settle_time)
        )?;
        writeln!(f, "-- faults")?;
        let killed_open: usize = e
            .kills
            .iter()
            .filter(|k| k.kind == KillKind::Worker)
            .map(|k| k.open_runs)
            .sum();
        let worker_kills = self.kills(KillKind::Worker);
        writeln!(
            f,
            "worker SIGKILLs:           {worker_kills} ({killed_open} runs in flight hit; {} kill times skipped: \
             no worker ran 2 jobs or more then)",
            e.kills_skipped
        )?;
        let t0 = e.supervisors.first().map_or(0, |s| s.started_us);
        let at = |us: u64| format!("{:.1} s", us.saturating_sub(t0) as f64 / 1e6);
        writeln!(
            f,
            "supervisor tree SIGKILLs:  {} at {:?} (workers killed with it: {}), restarted each time",
            e.tree_kills.len(),
            e.tree_kills.iter().map(|&t| at(t)).collect::<Vec<_>>(),
            self.kills(KillKind::Tree)
        )?;
        for (from, to) in &e.pauses {
            writeln!(
                f,
                "queue paused (operator):   at {} for {} ms",
                at(*from),
                to.saturating_sub(*from) / 1_000
            )?;
        }
        for o in &e.outages {
            writeln!(
                f,
                "server SIGKILL + restart:  at {}, down {} ms",
                at(o.down_us),
                (o.up_us.saturating_sub(o.down_us)) / 1_000
            )?;
        }
        for z in &e.freezes {
            let held = z
                .to_us
                .map(|t| format!("{} ms", (t - z.from_us) / 1_000))
                .unwrap_or_else(|| "until it died".into());
            writeln!(
                f,
                "worker SIGSTOP:            pid {} at {} for {held} (lease horizon {})",
                z.pid,
                at(z.from_us),
                ms(self.horizon)
            )?;
        }
        writeln!(f, "supervisors started:       {}", e.supervisors.len())?;
        let own: Vec<_> = e.own_exits().collect();
        writeln!(f, "supervisor exits on its own: {}", own.len())?;
        for (life, status, tail) in own {
            writeln!(f, "  pid {}: {status}; end of its log:", life.pid)?;
            for line in tail.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev() {
                writeln!(f, "    {line}")?;
            }
        }
        self.fmt_cancels(f)?;
        writeln!(f, "-- board")?;
        writeln!(f, "jobs posted:     {}", b.posted)?;
        writeln!(f, "completed:       {}", b.completed())?;
        writeln!(f, "cancelled:       {} ({} as asked)", b.cancelled(), a.cancelled)?;
        writeln!(f, "lost:            {}", a.lost)?;
        writeln!(f, "by state:        {:?}", b.by_state)?;
        writeln!(
            f,
            "left in queue:   {} live, {} trashed",
            b.live_left, b.trashed_left
        )?;
        writeln!(
            f,
            "exactly once:    {} (every job completed or cancelled as asked, nothing left; a consumed job leaves the board, so none completes twice)",
            if self.exactly_once() { "yes" } else { "NO" }
        )?;
        for (id, state, reason) in &b.unfinished {
            writeln!(f, "  neither completed nor cancelled: {id} {state} {reason}")?;
        }
        writeln!(f, "-- runs")?;
        writeln!(f, "runs:            {} ({:?})", a.runs, a.outcomes)?;
        writeln!(f, "jobs run:        {}", a.jobs_run)?;
        writeln!(
            f,
            "duplicates:      {} jobs ran more than once, {} extra runs",
            a.jobs_run_again,
            a.extra_runs.values().sum::<usize>()
        )?;
        for (cause, n) in &a.extra_runs {
            writeln!(f, "  {n:>6}  {}", cause.describe())?;
        }
        writeln!(
            f,
            "handler returned ok more than once: {} jobs (extra ok runs by cause below)",
            a.ok_more_than_once
        )?;
        for (cause, n) in &a.extra_ok_runs {
            writeln!(f, "  {n:>6}  {}", cause.describe())?;
        }
        for run in &a.unexplained_runs {
            writeln!(f, "  unexplained extra run: {run:?}")?;
        }
        writeln!(
            f,
            "overlaps:        {} ({} explained by a freeze, {} by an expiry on record, {} unexplained)",
            a.overlaps.len(),
            a.overlaps_by(Explanation::Frozen),
            a.overlaps_by(Explanation::ExpiryOnRecord),
            a.overlaps_by(Explanation::Unexplained)
        )?;
        for o in a.overlaps.iter().rev().take(QUOTED) {
            writeln!(
                f,
                "  job {}: token {} (pid {}, {}..{:?} µs) and token {} (pid {}, from {} µs): {}",
                o.earlier.id,
                o.earlier.token,
                o.earlier.pid,
                o.earlier.start_us,
                o.earlier_end_us,
                o.later.token,
                o.later.pid,
                o.later.start_us,
                o.explanation.describe()
            )?;
        }
        if a.unknown_end > 0 {
            writeln!(f, "runs with no known end: {}", a.unknown_end)?;
        }
        if let Some(dir) = &self.dir {
            writeln!(f, "files:           {}", dir.display())?;
        }
        let failures = self.failures();
        if failures.is_empty() {
            writeln!(
                f,
                "== PASS: every job completed exactly once on the board or cancelled as asked, none lost, no unexplained overlap"
            )
        } else {
            writeln!(f, "== FAIL")?;
            for failure in failures {
                writeln!(f, "  - {failure}")?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::analysis::CancelFigures;

    fn report(analysis: Analysis) -> Report {
        Report {
            backend: "Redis",
            server: String::new(),
            seed: 1,
            supervisor_args: String::new(),
            horizon: Duration::from_secs(3),
            chaos_time: Duration::ZERO,
            settle_time: Duration::ZERO,
            settled: true,
            events: Events::default(),
            analysis,
            bad_log_lines: Vec::new(),
            board: BoardCheck::default(),
            completed_without_run: 0,
            dir: None,
        }
    }

    #[test]
    fn cancelled_jobs_pass_and_cancels_not_kept_fail() {
        let cancels = CancelFigures {
            asked: 3,
            asked_running: 1,
            cancelled: 2,
            cancelled_running: 1,
            refused: 1,
            failed: Vec::new(),
        };
        let passing = report(Analysis {
            cancelled: 2,
            cancels: cancels.clone(),
            ..Analysis::default()
        });
        assert!(passing.passed(), "{:?}", passing.failures());
        assert!(passing.exactly_once());
        let text = passing.to_string();
        assert!(
            text.contains("cancelled:       2 (1 of them while running)"),
            "{text}"
        );
        let kept_badly = report(Analysis {
            cancels: cancels.clone(),
            cancel_not_kept: vec![("a".into(), "completed".into())],
            ..Analysis::default()
        });
        assert!(!kept_badly.exactly_once());
        assert_eq!(kept_badly.failures().len(), 1, "{:?}", kept_badly.failures());
        let completed_too = report(Analysis {
            cancels: cancels.clone(),
            completed_after_cancel: vec!["a".into()],
            ..Analysis::default()
        });
        assert!(!completed_too.passed());
        let unanswered = report(Analysis {
            cancels: CancelFigures {
                failed: vec![("a".into(), "exit status: 4".into())],
                ..cancels
            },
            ..Analysis::default()
        });
        assert!(!unanswered.passed());
    }
}
