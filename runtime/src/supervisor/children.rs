//! The supervisor's slots and its loop: signals, children and timers (the
//! fork in `children/fork.rs`, exits and respawns in `children/exit.rs`,
//! crash recovery in `children/recovery.rs`, signals in
//! `children/signals.rs`).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use signal_hook::consts::{SIGCHLD, SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU};
use signal_hook::iterator::Signals;

use crate::board::BlockingBoard;
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::supervisor::config::*;
use crate::supervisor::progress::Progress;
use crate::supervisor::relay::Relay;
use crate::supervisor::respawn::Streak;
use crate::supervisor::started::StartedReader;

mod exit;
mod fork;
mod recovery;
mod signals;

pub(crate) use signals::worker_signals;

/// How often the supervisor looks at signals, children and timers.
const TICK: Duration = Duration::from_millis(20);
/// How often progress and `--until-drained` read the queues.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// One worker slot.
struct Slot {
    index: usize,
    pid: Option<Pid>,
    owner: String,
    /// When its worker was forked.
    forked: Instant,
    /// Where its worker says it started (until it has).
    started: Option<StartedReader>,
    /// Crashes and start failures in a row (the respawn backoff).
    streak: Streak,
    respawn_at: Option<Instant>,
    /// Restarting on HUP: respawn as soon as it exits.
    restarting: bool,
    /// Removed by TTOU: do not respawn.
    retiring: bool,
}

struct Supervisor {
    cfg: SupervisorConfig,
    registry: Registry,
    /// The board, reached without a runtime (the supervisor forks).
    board: BlockingBoard,
    signals: Option<Signals>,
    slots: Vec<Slot>,
    /// Deadline after which remaining children are killed.
    shutdown: Option<Instant>,
    exit_code: i32,
    /// Slots still to restart after a HUP, one at a time.
    rolling: Vec<usize>,
    progress: Option<Progress>,
    last_progress: Instant,
    /// Recoveries that failed (Redis unreachable), retried every tick.
    pending: Vec<(String, String)>,
    /// Recoveries the supervisor cannot make itself, handed to the next
    /// worker it forks (see `BlockingBoard::recover_owner`).
    handoff: Vec<(String, String)>,
    /// A worker has started since the supervisor did: from then on it
    /// never gives up.
    any_started: bool,
    /// The workers' stderr, relayed above the progress bar (when shown).
    relay: Option<Relay>,
}

/// Runs the supervisor until it is told to stop (or the queues drain with
/// `until_drained`); returns the process exit code.
pub fn supervise(cfg: SupervisorConfig, registry: Registry) -> Result<i32> {
    cfg.validate()?;
    let mut board = BlockingBoard::connect(&cfg.board)?;
    let signals = Signals::new([
        SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGTSTP, SIGCONT, SIGHUP, SIGTTIN, SIGTTOU,
    ])
    .map_err(|e| Error::io("cannot register signal handlers", e))?;
    let progress = if cfg.progress || cfg.until_drained {
        Some(Progress::new(board.counts(&cfg.worker.queues)?, cfg.progress))
    } else {
        None
    };
    tracing::info!(
        workers = cfg.workers,
        queues = ?cfg.worker.queues,
        concurrency = cfg.worker.concurrency,
        handlers = registry.len(),
        "supervisor started (pid {})",
        std::process::id()
    );
    let mut sup = Supervisor {
        slots: Vec::new(),
        cfg,
        registry,
        board,
        signals: Some(signals),
        shutdown: None,
        exit_code: 0,
        rolling: Vec::new(),
        progress,
        last_progress: Instant::now(),
        pending: Vec::new(),
        handoff: Vec::new(),
        any_started: false,
        relay: None,
    };
    if sup.cfg.progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        sup.relay = Some(Relay::new()?);
    }
    for index in 0..sup.cfg.workers {
        sup.slots.push(Slot::new(index));
        sup.spawn(index);
    }
    sup.run()
}

impl Slot {
    fn new(index: usize) -> Slot {
        Slot {
            index,
            pid: None,
            owner: String::new(),
            forked: Instant::now(),
            started: None,
            streak: Streak::default(),
            respawn_at: None,
            restarting: false,
            retiring: false,
        }
    }
}

impl Supervisor {
    fn slot_pos(&self, index: usize) -> Option<usize> {
        self.slots.iter().position(|s| s.index == index)
    }

    fn reap_children(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) => {
                    if let Some(pid) = status.pid() {
                        if matches!(status, WaitStatus::Exited(..) | WaitStatus::Signaled(..)) {
                            self.on_exit(pid, status);
                        }
                    }
                }
            }
        }
    }

    fn run(mut self) -> Result<i32> {
        loop {
            let pending: Vec<i32> = self
                .signals
                .as_mut()
                .map(|s| s.pending().collect())
                .unwrap_or_default();
            for sig in pending {
                self.on_signal(sig);
            }
            self.poll_started();
            self.reap_children();
            if let Some(relay) = self.relay.as_mut() {
                relay.drain();
            }
            let now = Instant::now();
            if !self.pending.is_empty() && now.duration_since(self.last_progress) >= PROGRESS_EVERY {
                self.recover_pending();
            }
            if let Some(deadline) = self.shutdown {
                if self.slots.iter().all(|s| s.pid.is_none()) {
                    break;
                }
                if now >= deadline {
                    tracing::warn!("workers did not stop within the grace; killing them");
                    self.signal_children(Signal::SIGKILL);
                    self.shutdown = Some(now + SHUTDOWN_MARGIN);
                }
            } else {
                let due: Vec<usize> = self
                    .slots
                    .iter()
                    .filter(|s| s.pid.is_none() && s.respawn_at.is_some_and(|t| t <= now))
                    .map(|s| s.index)
                    .collect();
                for index in due {
                    self.spawn(index);
                }
            }
            if self.progress.is_some() && now.duration_since(self.last_progress) >= PROGRESS_EVERY {
                self.last_progress = now;
                self.tick_progress();
            }
            std::thread::sleep(TICK);
        }
        if let Some(relay) = self.relay.as_mut() {
            relay.drain();
        }
        if let Some(p) = &self.progress {
            match self.board.counts(&self.cfg.worker.queues) {
                Ok(c) => p.summary(&c),
                Err(e) => tracing::warn!(error = %e, "cannot read the final counts"),
            }
        }
        tracing::info!(code = self.exit_code, "supervisor stopped");
        Ok(self.exit_code)
    }

    fn tick_progress(&mut self) {
        let counts = match self.board.counts(&self.cfg.worker.queues) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read progress");
                return;
            }
        };
        let drained = counts.listed == 0;
        if let Some(p) = self.progress.as_mut() {
            if self.cfg.progress {
                p.draw(&counts);
            }
        }
        if self.cfg.until_drained && drained && self.shutdown.is_none() {
            self.begin_shutdown("queues drained");
        }
    }
}
