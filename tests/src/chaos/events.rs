//! What the chaos run did and saw, with wall-clock times in microseconds
//! since the epoch (the clock the run log uses): kills, freezes, server
//! outages, cancels, supervisor lives, and when each worker process was
//! seen to exit.

use std::collections::{HashMap, HashSet};

pub use jobworker_examples::scripted::run_log::now_us;

/// How a worker was killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillKind {
    /// One worker, SIGKILL, its supervisor alive (it respawns the slot).
    Worker,
    /// The whole supervisor tree (supervisor and workers), SIGKILL.
    Tree,
}

/// One worker process killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// The worker.
    pub pid: u32,
    /// Which fault killed it.
    pub kind: KillKind,
    /// Just before the signal was sent.
    pub sent_us: u64,
    /// When it was seen dead (`None`: not within the wait).
    pub dead_us: Option<u64>,
    /// Runs it had in flight by the run log.
    pub open_runs: usize,
}

/// A worker stopped with SIGSTOP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freeze {
    /// The worker.
    pub pid: u32,
    /// Just before SIGSTOP was sent.
    pub from_us: u64,
    /// Just after SIGCONT was sent (`None`: it died stopped).
    pub to_us: Option<u64>,
}

/// The board server down: killed with SIGKILL, then started again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    /// Just before the kill.
    pub down_us: u64,
    /// When the restarted server answered.
    pub up_us: u64,
}

/// What one `jobworker cancel` call answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelAnswer {
    /// Exit 0: the board cancelled the job.
    Cancelled,
    /// Exit 3: the board refused (the job had finished: a race lost to its
    /// consume); what the CLI said.
    Refused(String),
    /// Anything else (the server unavailable, a failure, a signal): the
    /// status and what the CLI said. Whether the job was cancelled is
    /// unknown.
    Failed(String),
}

/// One `jobworker cancel` of one job (one id per call: a call with
/// several ids is all or nothing, so a refusal would hide which job was
/// finished).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancel {
    /// The job.
    pub id: String,
    /// The job had a run in flight on a live worker when it was asked
    /// (by the run log); otherwise it had not run yet, or its run had
    /// ended.
    pub running: bool,
    /// Just before the CLI was started.
    pub asked_us: u64,
    /// When its exit was seen.
    pub answered_us: u64,
    /// What it answered.
    pub answer: CancelAnswer,
}

/// How a supervisor's life ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SupervisorEnd {
    /// Killed with its tree by the chaos run.
    Killed,
    /// Exited without being told to: the status and the end of its log.
    OnItsOwn {
        /// `exit status: 5`, `signal: 9 (SIGKILL)`, …
        status: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// Stopped with SIGTERM at the end of the run: the status.
    Stopped(String),
}

/// One supervisor process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorLife {
    /// Its pid.
    pub pid: u32,
    /// When it was started.
    pub started_us: u64,
    /// How it ended (`None` while it runs).
    pub end: Option<(u64, SupervisorEnd)>,
}

/// Everything the run did and saw.
#[derive(Debug, Clone, Default)]
pub struct Events {
    /// Worker kills, single and with the tree.
    pub kills: Vec<Kill>,
    /// Kill times when no worker ran two jobs or more: skipped.
    pub kills_skipped: usize,
    /// Workers stopped with SIGSTOP.
    pub freezes: Vec<Freeze>,
    /// Board server restarts.
    pub outages: Vec<Outage>,
    /// The queue paused: from just before `pause` to just after `resume`.
    pub pauses: Vec<(u64, u64)>,
    /// Whole supervisor trees killed: when.
    pub tree_kills: Vec<u64>,
    /// Every supervisor started.
    pub supervisors: Vec<SupervisorLife>,
    /// When each worker process was first seen.
    pub worker_seen: HashMap<u32, u64>,
    /// When each worker process was seen to have exited (at most one tick
    /// late; for a killed worker, its `dead_us`).
    pub worker_exits: HashMap<u32, u64>,
    /// `jobworker cancel` calls, in the order they ended.
    pub cancels: Vec<Cancel>,
    /// Planned faults that could not happen, with the reason.
    pub missed: Vec<String>,
}

impl Events {
    /// The kill of `pid`, if the run killed it.
    pub fn kill_of(&self, pid: u32) -> Option<&Kill> {
        self.kills.iter().find(|k| k.pid == pid)
    }

    /// Jobs the board cancelled (exit 0), and jobs whose cancel answer
    /// is unknown (the CLI failed): these may have ended either way.
    pub fn cancelled_jobs(&self) -> (HashSet<String>, HashSet<String>) {
        let (mut cancelled, mut unknown) = (HashSet::new(), HashSet::new());
        for c in &self.cancels {
            match c.answer {
                CancelAnswer::Cancelled => cancelled.insert(c.id.clone()),
                CancelAnswer::Failed(_) => unknown.insert(c.id.clone()),
                CancelAnswer::Refused(_) => false,
            };
        }
        (cancelled, unknown)
    }

    /// Supervisors that exited on their own.
    pub fn own_exits(&self) -> impl Iterator<Item = (&SupervisorLife, &str, &str)> {
        self.supervisors.iter().filter_map(|s| match &s.end {
            Some((_, SupervisorEnd::OnItsOwn { status, log_tail })) => {
                Some((s, status.as_str(), log_tail.as_str()))
            }
            _ => None,
        })
    }
}
