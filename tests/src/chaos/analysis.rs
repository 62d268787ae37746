//! What the runs say, against what the chaos run did: overlapping runs of
//! one job and whether a lease expiry explains them, and why jobs ran more
//! than once.
//!
//! Runs of one job are ordered by fencing token (it grows with every
//! claim). Run A and a later run B **overlap** when B started before A
//! ended. A run's end is its `end` line; a run without one ended when its
//! process died (a killed worker: when it was seen dead; any other: when
//! its exit was seen, at most a tick late), which only makes overlaps more
//! likely to be found. An overlap is **explained** only if A's lease had
//! expired before B was claimed:
//!
//! - A's worker was frozen (SIGSTOP) for at least the lease horizon minus
//!   one heartbeat interval before B started: its last extend was at most
//!   one interval (a third of the horizon) before the freeze, so its lease
//!   ran out by then; or
//! - the board recorded that A's lease expired (Redis history `stalled`,
//!   ZooKeeper claimers' `recovering an expired lease`).
//!
//! Anything else is unexplained: a bug.
//!
//! How each job **ended**, against the cancels: a job the board cancelled
//! (`jobworker cancel` exited 0) must be `cancelled` on the board and
//! never completed: no worker logged its consume as accepted (its handler
//! may have returned `ok` and its consume been refused, or been stopped).
//! Every other job must be `completed` (a cancel refused because the job
//! had finished is a race lost, nothing more), with a last run that
//! ended `ok`; one whose cancel got no answer (the CLI failed) may end
//! either way. A job neither completed nor cancelled as asked is lost.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use jobworker::JobState;
use jobworker_examples::scripted::run_log::RunOutcome;

use crate::chaos::events::{CancelAnswer, Events, KillKind};
use crate::chaos::evidence::Expired;
use crate::chaos::runs::Run;

/// Round trips of one heartbeat pass, allowed on top of its interval.
pub const HEARTBEAT_SLACK: Duration = Duration::from_millis(100);
/// A run that ended or started this close to a server outage (before the
/// kill, or after the restart) may have lost its consume to it.
pub const OUTAGE_MARGIN: Duration = Duration::from_secs(1);

/// Why an overlap is allowed, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Explanation {
    /// The earlier run's worker was frozen past its lease before the later
    /// run started.
    Frozen,
    /// The board recorded that the earlier run's lease expired.
    ExpiryOnRecord,
    /// Nothing explains it.
    Unexplained,
}

impl Explanation {
    /// Text for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Explanation::Frozen => "the earlier run's worker was frozen (SIGSTOP) past its lease",
            Explanation::ExpiryOnRecord => {
                "the board recorded the earlier run's lease as expired (no freeze long enough: a late heartbeat)"
            }
            Explanation::Unexplained => "UNEXPLAINED: no lease expiry allowed the later claim",
        }
    }
}

/// Two runs of one job that overlapped in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The earlier claim's run.
    pub earlier: Run,
    /// Its end (µs; `None`: unknown, counted as never).
    pub earlier_end_us: Option<u64>,
    /// The later claim's run.
    pub later: Run,
    /// Why it is allowed, or not.
    pub explanation: Explanation,
}

/// Why a run was not the job's last (its job ran again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    /// Its worker was frozen past its lease during the run.
    Frozen,
    /// Its worker was SIGKILLed during the run.
    KilledMidRun,
    /// Its supervisor tree was SIGKILLed during the run.
    TreeKilledMidRun,
    /// The handler returned `ok` but its worker (or tree) was SIGKILLed
    /// before the consume was recorded.
    KilledBeforeConsume,
    /// It ended close to the board server's restart (its consume or its
    /// heartbeat could not reach the server).
    ServerRestart,
    /// The worker stopped it (`aborted`): its lease was lost.
    LeaseLost,
    /// The board recorded its lease as expired (a late heartbeat).
    ExpiryOnRecord,
    /// The handler failed (retried).
    HandlerFailed,
    /// Nothing the run did or the board recorded explains it.
    Unexplained,
}

impl Cause {
    /// Text for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Cause::Frozen => "lease expired while its worker was frozen (SIGSTOP); the job was claimed again",
            Cause::KilledMidRun => "worker SIGKILLed mid-run; its claim was given back after the crash",
            Cause::TreeKilledMidRun => "supervisor tree SIGKILLed mid-run; the lease expired",
            Cause::KilledBeforeConsume => {
                "handler returned ok, then its worker was SIGKILLed before the consume was recorded"
            }
            Cause::ServerRestart => {
                "ended around the server restart: its consume or heartbeat did not get through"
            }
            Cause::LeaseLost => "stopped by its worker after its lease was lost",
            Cause::ExpiryOnRecord => "its lease expired on the board (late heartbeat)",
            Cause::HandlerFailed => "the handler failed and the job was retried",
            Cause::Unexplained => "UNEXPLAINED",
        }
    }
}

/// The `jobworker cancel` calls, by answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CancelFigures {
    /// Calls made (one job each).
    pub asked: usize,
    /// Of those, jobs with a run in flight when asked.
    pub asked_running: usize,
    /// Exit 0: cancelled.
    pub cancelled: usize,
    /// Of those, jobs with a run in flight when asked.
    pub cancelled_running: usize,
    /// Exit 3: refused (the job had finished).
    pub refused: usize,
    /// Calls that failed otherwise: job id and what the CLI said.
    pub failed: Vec<(String, String)>,
}

/// What the analysis found.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Posted jobs neither completed on the board nor cancelled as asked.
    pub lost: usize,
    /// Posted jobs that ended cancelled on the board, as asked.
    pub cancelled: usize,
    /// The cancel calls.
    pub cancels: CancelFigures,
    /// Jobs a `jobworker cancel` cancelled (exit 0) that the board shows
    /// in another state: id and state.
    pub cancel_not_kept: Vec<(String, String)>,
    /// Jobs a `jobworker cancel` cancelled (exit 0) whose consume a
    /// worker logged as accepted: completed too.
    pub completed_after_cancel: Vec<String>,
    /// Runs in the log.
    pub runs: usize,
    /// Runs by how they ended (`killed` for no end line).
    pub outcomes: BTreeMap<&'static str, usize>,
    /// Jobs with at least one run.
    pub jobs_run: usize,
    /// Jobs with more than one run.
    pub jobs_run_again: usize,
    /// Runs that were not their job's last, by cause.
    pub extra_runs: BTreeMap<Cause, usize>,
    /// Jobs whose handler returned `ok` more than once.
    pub ok_more_than_once: usize,
    /// Their extra `ok` runs, by cause.
    pub extra_ok_runs: BTreeMap<Cause, usize>,
    /// Overlapping runs.
    pub overlaps: Vec<Overlap>,
    /// Two runs under the same claim (same job and token, another pid).
    pub same_claim_twice: Vec<(String, u64)>,
    /// Runs without an end line whose process exit was never seen.
    pub unknown_end: usize,
    /// Jobs not cancelled whose last run (by token) did not end `ok`:
    /// something else completed them, or they were claimed again after
    /// completing.
    pub last_run_not_ok: Vec<String>,
    /// Examples of unexplained extra runs.
    pub unexplained_runs: Vec<Run>,
}

impl Analysis {
    /// Overlaps with each explanation.
    pub fn overlaps_by(&self, explanation: Explanation) -> usize {
        self.overlaps
            .iter()
            .filter(|o| o.explanation == explanation)
            .count()
    }
}

/// The facts the analysis reads.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// Every run logged.
    pub runs: &'a [Run],
    /// What the chaos run did.
    pub events: &'a Events,
    /// How long a lease lives without an extend (the heartbeat extends
    /// every third of it).
    pub horizon: Duration,
    /// Expired leases on record.
    pub expired: &'a Expired,
    /// Every posted job's state on the board at the end (`None`: unknown
    /// to the board).
    pub states: &'a HashMap<String, Option<JobState>>,
    /// Jobs whose consume a worker logged as accepted (at least those
    /// asked to be cancelled).
    pub completed_logged: &'a HashSet<String>,
}

impl Facts<'_> {
    /// When `run` ended: its end line, else its process' death.
    fn end_of(&self, run: &Run) -> Option<u64> {
        run.end
            .map(|(at, _)| at)
            .or_else(|| self.events.worker_exits.get(&run.pid).copied())
    }

    /// How long `run`'s worker had been frozen when `at` came (0 if it was
    /// not frozen then).
    fn frozen_before(&self, pid: u32, at: u64) -> u64 {
        self.events
            .freezes
            .iter()
            .filter(|f| f.pid == pid && f.from_us < at)
            .map(|f| {
                let until = f
                    .to_us
                    .or_else(|| self.events.worker_exits.get(&pid).copied())
                    .unwrap_or(u64::MAX);
                until.min(at) - f.from_us
            })
            .max()
            .unwrap_or(0)
    }

    /// Was `run`'s worker frozen at some point while it ran?
    fn frozen_during(&self, run: &Run) -> bool {
        let end = self.end_of(run).unwrap_or(u64::MAX);
        self.events
            .freezes
            .iter()
            .any(|f| f.pid == run.pid && f.from_us < end && f.to_us.unwrap_or(u64::MAX) > run.start_us)
    }

    /// Had `earlier`'s worker been frozen past its lease when `later`
    /// started? Its last extend was at most one heartbeat interval (a
    /// third of the horizon, plus round trips) before the freeze.
    fn frozen_past_lease(&self, earlier: &Run, later: &Run) -> bool {
        let needed = self.horizon.saturating_sub(self.horizon / 3 + HEARTBEAT_SLACK);
        let needed_us = u64::try_from(needed.as_micros()).unwrap_or(u64::MAX);
        self.frozen_before(earlier.pid, later.start_us) >= needed_us
    }

    fn explain(&self, earlier: &Run, later: &Run) -> Explanation {
        if self.frozen_past_lease(earlier, later) {
            Explanation::Frozen
        } else if self.expired.contains(&(earlier.id.clone(), earlier.pid)) {
            Explanation::ExpiryOnRecord
        } else {
            Explanation::Unexplained
        }
    }

    fn near_outage(&self, at: u64) -> bool {
        let margin = u64::try_from(OUTAGE_MARGIN.as_micros()).unwrap_or(u64::MAX);
        let after = margin + u64::try_from(self.horizon.as_micros()).unwrap_or(u64::MAX);
        self.events
            .outages
            .iter()
            .any(|o| at + margin >= o.down_us && at <= o.up_us + after)
    }

    /// Why `run` was followed by `next`, the job's next run.
    fn cause(&self, run: &Run, next: &Run) -> Cause {
        // Frozen while it ran, or (claimed just before the freeze, started
        // after it) frozen past its lease when the next run started.
        if self.frozen_during(run) || self.frozen_past_lease(run, next) {
            return Cause::Frozen;
        }
        let kill = self.events.kill_of(run.pid).filter(|k| k.sent_us >= run.start_us);
        match (run.end, kill) {
            (None, Some(k)) if k.kind == KillKind::Worker => return Cause::KilledMidRun,
            (None, Some(_)) => return Cause::TreeKilledMidRun,
            (Some((_, RunOutcome::Ok)), Some(_)) => return Cause::KilledBeforeConsume,
            _ => {}
        }
        if self.near_outage(self.end_of(run).unwrap_or(run.start_us)) {
            return Cause::ServerRestart;
        }
        match run.end {
            Some((_, RunOutcome::Aborted)) => Cause::LeaseLost,
            _ if self.expired.contains(&(run.id.clone(), run.pid)) => Cause::ExpiryOnRecord,
            Some((_, RunOutcome::Error | RunOutcome::Panicked)) => Cause::HandlerFailed,
            _ => Cause::Unexplained,
        }
    }
}

/// Examples of unexplained runs kept for the report.
const EXAMPLES: usize = 10;

/// Counts the cancel calls by answer.
fn cancel_figures(events: &Events) -> CancelFigures {
    let mut out = CancelFigures::default();
    for c in &events.cancels {
        out.asked += 1;
        out.asked_running += usize::from(c.running);
        match &c.answer {
            CancelAnswer::Cancelled => {
                out.cancelled += 1;
                out.cancelled_running += usize::from(c.running);
            }
            CancelAnswer::Refused(_) => out.refused += 1,
            CancelAnswer::Failed(said) => out.failed.push((c.id.clone(), said.clone())),
        }
    }
    out
}

/// Judges how every posted job ended against the cancels (see the module
/// docs); returns the jobs that ended cancelled as asked.
fn endings<'a>(facts: &Facts<'a>, out: &mut Analysis) -> HashSet<&'a str> {
    let (cancelled, unknown) = facts.events.cancelled_jobs();
    let mut ended_cancelled = HashSet::new();
    for (id, state) in facts.states {
        let is_cancelled = *state == Some(JobState::Cancelled);
        if cancelled.contains(id) && !is_cancelled {
            let name = state.map_or("missing", JobState::as_str);
            out.cancel_not_kept.push((id.clone(), name.to_owned()));
        } else if is_cancelled && (cancelled.contains(id) || unknown.contains(id)) {
            ended_cancelled.insert(id.as_str());
        } else if *state != Some(JobState::Completed) {
            out.lost += 1;
        }
    }
    out.cancelled = ended_cancelled.len();
    out.completed_after_cancel = cancelled
        .into_iter()
        .filter(|id| facts.completed_logged.contains(id))
        .collect();
    out.cancel_not_kept.sort();
    out.completed_after_cancel.sort();
    ended_cancelled
}

/// Analyses `facts`.
pub fn analyse(facts: &Facts<'_>) -> Analysis {
    let mut out = Analysis {
        runs: facts.runs.len(),
        cancels: cancel_figures(facts.events),
        ..Analysis::default()
    };
    let ended_cancelled = endings(facts, &mut out);
    let mut by_job: HashMap<&str, Vec<&Run>> = HashMap::new();
    for run in facts.runs {
        by_job.entry(run.id.as_str()).or_default().push(run);
        let outcome = match run.end {
            Some((_, o)) => o.as_str(),
            None => "no end (process died)",
        };
        *out.outcomes.entry(outcome).or_default() += 1;
        if run.end.is_none() && !facts.events.worker_exits.contains_key(&run.pid) {
            out.unknown_end += 1;
        }
    }
    out.jobs_run = by_job.len();
    let mut same_claim = HashSet::new();
    for (id, mut runs) in by_job {
        runs.sort_by_key(|r| (r.token, r.start_us));
        for pair in runs.windows(2) {
            if pair[0].token == pair[1].token && same_claim.insert((id.to_owned(), pair[0].token)) {
                out.same_claim_twice.push((id.to_owned(), pair[0].token));
            }
        }
        for (i, earlier) in runs.iter().enumerate() {
            let end = facts.end_of(earlier);
            for later in &runs[i + 1..] {
                if later.start_us < end.unwrap_or(u64::MAX) {
                    out.overlaps.push(Overlap {
                        earlier: (*earlier).clone(),
                        earlier_end_us: end,
                        later: (*later).clone(),
                        explanation: facts.explain(earlier, later),
                    });
                }
            }
        }
        let Some((last, superseded)) = runs.split_last() else {
            continue;
        };
        if !matches!(last.end, Some((_, RunOutcome::Ok))) && !ended_cancelled.contains(id) {
            out.last_run_not_ok.push(id.to_owned());
        }
        if superseded.is_empty() {
            continue;
        }
        out.jobs_run_again += 1;
        let oks = runs
            .iter()
            .filter(|r| matches!(r.end, Some((_, RunOutcome::Ok))))
            .count();
        if oks > 1 {
            out.ok_more_than_once += 1;
        }
        for (run, next) in superseded.iter().zip(&runs[1..]) {
            let cause = facts.cause(run, next);
            *out.extra_runs.entry(cause).or_default() += 1;
            if matches!(run.end, Some((_, RunOutcome::Ok))) {
                *out.extra_ok_runs.entry(cause).or_default() += 1;
            }
            if cause == Cause::Unexplained && out.unexplained_runs.len() < EXAMPLES {
                out.unexplained_runs.push((*run).clone());
            }
        }
    }
    out.overlaps.sort_by_key(|o| (o.explanation, o.later.start_us));
    out.last_run_not_ok.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::events::{Cancel, Freeze, Kill, Outage};

    const MS: u64 = 1_000;

    fn run(id: &str, pid: u32, token: u64, start: u64, end: Option<(u64, RunOutcome)>) -> Run {
        Run {
            id: id.into(),
            pid,
            token,
            start_us: start * MS,
            end: end.map(|(at, o)| (at * MS, o)),
        }
    }

    /// The board's side of the facts: the jobs' states, and the jobs
    /// whose consume a worker logged.
    #[derive(Default)]
    struct Board {
        states: HashMap<String, Option<JobState>>,
        completed_logged: HashSet<String>,
    }

    fn facts<'a>(runs: &'a [Run], events: &'a Events, expired: &'a Expired, board: &'a Board) -> Facts<'a> {
        Facts {
            runs,
            events,
            horizon: Duration::from_secs(3),
            expired,
            states: &board.states,
            completed_logged: &board.completed_logged,
        }
    }

    #[test]
    fn a_kill_mid_run_is_a_duplicate_without_overlap() {
        let mut events = Events::default();
        events.kills.push(Kill {
            pid: 10,
            kind: KillKind::Worker,
            sent_us: 50 * MS,
            dead_us: Some(52 * MS),
            open_runs: 2,
        });
        events.worker_exits.insert(10, 52 * MS);
        let runs = [
            run("a", 10, 1, 40, None),
            run("a", 11, 2, 60, Some((80, RunOutcome::Ok))),
        ];
        let expired = Expired::new();
        let a = analyse(&facts(&runs, &events, &expired, &Board::default()));
        assert!(a.overlaps.is_empty());
        assert_eq!(a.extra_runs, BTreeMap::from([(Cause::KilledMidRun, 1)]));
        assert_eq!(a.jobs_run_again, 1);
        assert!(a.last_run_not_ok.is_empty());
    }

    #[test]
    fn a_run_claimed_again_while_its_killed_worker_still_ran_is_unexplained() {
        let mut events = Events::default();
        events.kills.push(Kill {
            pid: 10,
            kind: KillKind::Tree,
            sent_us: 100 * MS,
            dead_us: Some(101 * MS),
            open_runs: 2,
        });
        events.worker_exits.insert(10, 101 * MS);
        let runs = [
            run("a", 10, 1, 40, None),
            run("a", 11, 2, 90, Some((120, RunOutcome::Ok))),
        ];
        let expired = Expired::new();
        let a = analyse(&facts(&runs, &events, &expired, &Board::default()));
        assert_eq!(a.overlaps.len(), 1);
        assert_eq!(a.overlaps[0].explanation, Explanation::Unexplained);
        assert_eq!(a.overlaps[0].earlier_end_us, Some(101 * MS));
        // With the expiry on record it is explained.
        let expired = Expired::from([("a".to_owned(), 10)]);
        let a = analyse(&facts(&runs, &events, &expired, &Board::default()));
        assert_eq!(a.overlaps_by(Explanation::ExpiryOnRecord), 1);
    }

    fn worker_10_frozen_from_1s_to_5_5s() -> Events {
        let mut events = Events::default();
        events.freezes.push(Freeze {
            pid: 10,
            from_us: 1_000 * MS,
            to_us: Some(5_500 * MS),
        });
        events
    }

    #[test]
    fn a_freeze_past_the_lease_explains_an_overlap_and_a_short_one_does_not() {
        let events = worker_10_frozen_from_1s_to_5_5s();
        // Claimed again 2.5 s into the freeze (horizon 3 s: at least 1.9 s needed).
        let runs = [
            run("a", 10, 1, 990, Some((5_510, RunOutcome::Aborted))),
            run("a", 11, 2, 3_500, Some((3_520, RunOutcome::Ok))),
        ];
        let expired = Expired::new();
        let a = analyse(&facts(&runs, &events, &expired, &Board::default()));
        assert_eq!(a.overlaps_by(Explanation::Frozen), 1);
        assert_eq!(a.extra_runs, BTreeMap::from([(Cause::Frozen, 1)]));
        // Claimed again 0.5 s into the freeze: the lease could not have expired.
        let runs = [
            run("a", 10, 1, 990, Some((5_510, RunOutcome::Aborted))),
            run("a", 11, 2, 1_500, Some((1_520, RunOutcome::Ok))),
        ];
        let a = analyse(&facts(&runs, &events, &expired, &Board::default()));
        assert_eq!(a.overlaps_by(Explanation::Unexplained), 1);
    }

    #[test]
    fn a_claim_frozen_before_its_run_started_is_a_frozen_duplicate() {
        let events = worker_10_frozen_from_1s_to_5_5s();
        // Claimed just before the freeze, its handler started only after
        // the SIGCONT, when the job had been claimed again and run.
        let runs = [
            run("a", 10, 1, 5_501, Some((5_510, RunOutcome::Ok))),
            run("a", 11, 2, 3_500, Some((3_520, RunOutcome::Ok))),
        ];
        let expired = Expired::new();
        let a = analyse(&facts(&runs, &events, &expired, &Board::default()));
        assert_eq!(a.overlaps_by(Explanation::Frozen), 1);
        assert_eq!(a.extra_runs, BTreeMap::from([(Cause::Frozen, 1)]));
        assert_eq!(a.extra_ok_runs, BTreeMap::from([(Cause::Frozen, 1)]));
    }

    #[test]
    fn duplicates_get_their_causes_and_odd_jobs_are_listed() {
        let mut events = Events::default();
        events.kills.push(Kill {
            pid: 10,
            kind: KillKind::Worker,
            sent_us: 50 * MS,
            dead_us: Some(51 * MS),
            open_runs: 3,
        });
        events.worker_exits.insert(10, 51 * MS);
        events.outages.push(Outage {
            down_us: 10_000 * MS,
            up_us: 10_500 * MS,
        });
        let runs = [
            // ok, then killed before its consume.
            run("a", 10, 1, 40, Some((45, RunOutcome::Ok))),
            run("a", 12, 2, 60, Some((70, RunOutcome::Ok))),
            // ok during the outage.
            run("b", 12, 1, 10_100, Some((10_120, RunOutcome::Ok))),
            run("b", 12, 2, 15_000, Some((15_020, RunOutcome::Ok))),
            // ok, then again for no reason; the last run failed.
            run("c", 12, 1, 100, Some((120, RunOutcome::Ok))),
            run("c", 13, 2, 200, Some((220, RunOutcome::Error))),
            // the same claim run twice.
            run("d", 12, 7, 300, Some((320, RunOutcome::Ok))),
            run("d", 13, 7, 400, Some((420, RunOutcome::Ok))),
        ];
        let expired = Expired::new();
        let a = analyse(&facts(&runs, &events, &expired, &Board::default()));
        assert_eq!(a.extra_runs[&Cause::KilledBeforeConsume], 1);
        assert_eq!(a.extra_runs[&Cause::ServerRestart], 1);
        assert_eq!(a.extra_runs[&Cause::Unexplained], 2);
        assert_eq!(a.ok_more_than_once, 3);
        assert_eq!(a.last_run_not_ok, ["c"]);
        assert_eq!(a.same_claim_twice, [("d".to_owned(), 7)]);
        assert!(a.overlaps.is_empty());
        assert_eq!(a.outcomes["ok"], 7);
    }

    fn cancel(id: &str, running: bool, answer: CancelAnswer) -> Cancel {
        Cancel {
            id: id.into(),
            running,
            asked_us: 100 * MS,
            answered_us: 130 * MS,
            answer,
        }
    }

    /// Job `a` cancelled while it ran (its handler stopped), `b` asked
    /// before it ran, `c` completed without a cancel.
    fn cancelled_a_and_b() -> (Vec<Run>, Events) {
        let mut events = Events::default();
        events.cancels.push(cancel("a", true, CancelAnswer::Cancelled));
        events.cancels.push(cancel("b", false, CancelAnswer::Cancelled));
        let runs = vec![
            run("a", 10, 1, 90, Some((110, RunOutcome::Aborted))),
            run("c", 10, 1, 95, Some((120, RunOutcome::Ok))),
        ];
        (runs, events)
    }

    fn states(of: &[(&str, Option<JobState>)]) -> HashMap<String, Option<JobState>> {
        of.iter().map(|(id, s)| ((*id).to_owned(), *s)).collect()
    }

    #[test]
    fn jobs_cancelled_on_the_board_as_asked_are_neither_lost_nor_odd() {
        let (runs, events) = cancelled_a_and_b();
        let board = Board {
            states: states(&[
                ("a", Some(JobState::Cancelled)),
                ("b", Some(JobState::Cancelled)),
                ("c", Some(JobState::Completed)),
            ]),
            ..Board::default()
        };
        let a = analyse(&facts(&runs, &events, &Expired::new(), &board));
        assert_eq!(a.lost, 0);
        assert_eq!(a.cancelled, 2);
        assert!(a.cancel_not_kept.is_empty() && a.completed_after_cancel.is_empty());
        assert!(a.last_run_not_ok.is_empty(), "a's aborted run was its cancel");
        assert_eq!(
            a.cancels,
            CancelFigures {
                asked: 2,
                asked_running: 1,
                cancelled: 2,
                cancelled_running: 1,
                refused: 0,
                failed: vec![],
            }
        );
    }

    #[test]
    fn a_job_cancelled_by_the_cli_but_completed_on_the_board_is_caught() {
        let (runs, events) = cancelled_a_and_b();
        let board = Board {
            states: states(&[
                ("a", Some(JobState::Completed)),
                ("b", Some(JobState::Ready)),
                ("c", Some(JobState::Completed)),
            ]),
            ..Board::default()
        };
        let a = analyse(&facts(&runs, &events, &Expired::new(), &board));
        assert_eq!(
            a.cancel_not_kept,
            [
                ("a".to_owned(), "completed".to_owned()),
                ("b".to_owned(), "ready".to_owned())
            ]
        );
        assert_eq!(a.cancelled, 0);
        // Cancelled on the board, but a worker's consume went through too.
        let board = Board {
            states: states(&[
                ("a", Some(JobState::Cancelled)),
                ("b", Some(JobState::Cancelled)),
                ("c", Some(JobState::Completed)),
            ]),
            completed_logged: HashSet::from(["a".to_owned()]),
        };
        let a = analyse(&facts(&runs, &events, &Expired::new(), &board));
        assert_eq!(a.completed_after_cancel, ["a"]);
    }

    #[test]
    fn a_refused_cancel_is_a_lost_race_and_its_job_must_complete() {
        let mut events = Events::default();
        events.cancels.push(cancel(
            "a",
            true,
            CancelAnswer::Refused("already completed".into()),
        ));
        let runs = [run("a", 10, 1, 90, Some((110, RunOutcome::Ok)))];
        let completed = Board {
            states: states(&[("a", Some(JobState::Completed))]),
            ..Board::default()
        };
        let a = analyse(&facts(&runs, &events, &Expired::new(), &completed));
        assert_eq!((a.lost, a.cancelled), (0, 0));
        assert!(a.cancel_not_kept.is_empty() && a.last_run_not_ok.is_empty());
        assert_eq!((a.cancels.refused, a.cancels.cancelled), (1, 0));
        // Refused, yet cancelled on the board: lost.
        let cancelled = Board {
            states: states(&[("a", Some(JobState::Cancelled))]),
            ..Board::default()
        };
        let a = analyse(&facts(&runs, &events, &Expired::new(), &cancelled));
        assert_eq!((a.lost, a.cancelled), (1, 0));
    }

    #[test]
    fn a_job_cancelled_without_a_cancel_is_lost_and_an_unanswered_cancel_may_go_either_way() {
        let mut events = Events::default();
        events
            .cancels
            .push(cancel("b", false, CancelAnswer::Failed("exit status: 4".into())));
        let runs = [
            run("a", 10, 1, 90, Some((110, RunOutcome::Aborted))),
            run("c", 10, 1, 90, Some((110, RunOutcome::Ok))),
        ];
        let board = Board {
            states: states(&[
                ("a", Some(JobState::Cancelled)),
                ("b", Some(JobState::Cancelled)),
                ("c", Some(JobState::Completed)),
                ("d", None),
            ]),
            ..Board::default()
        };
        let a = analyse(&facts(&runs, &events, &Expired::new(), &board));
        assert_eq!((a.lost, a.cancelled), (2, 1), "a and d lost, b cancelled");
        assert_eq!(a.last_run_not_ok, ["a"]);
        assert_eq!(a.cancels.failed, [("b".to_owned(), "exit status: 4".to_owned())]);
    }
}
