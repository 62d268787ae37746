//! Forking, waiting for and respawning worker processes (signals: see
//! `children/signals.rs`).

use std::io::Write;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpid, getppid, setpgid, ForkResult, Pid};
use signal_hook::consts::{SIGCHLD, SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU};
use signal_hook::iterator::Signals;

use crate::board::{BlockingBoard, Recovered};
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::supervisor::config::*;
use crate::supervisor::progress::Progress;
use crate::supervisor::relay::Relay;
use crate::supervisor::respawn::{Ending, Streak, RESPAWN_MAX};
use crate::supervisor::started::{self, StartedReader, StartedWriter};
use crate::worker::{run_worker, EXIT_CANNOT_START};

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

/// Text for how a child ended.
fn describe(status: &WaitStatus) -> String {
    match status {
        WaitStatus::Exited(_, code) => format!("exited with status {code}"),
        WaitStatus::Signaled(_, sig, _) => format!("killed by signal {} ({sig:?})", *sig as i32),
        other => format!("{other:?}"),
    }
}

/// The owner string of slot `index`'s child: `host:supervisor:w<slot>:child`.
fn owner_of(supervisor: Pid, index: usize, child: Pid) -> String {
    format!("{}:{supervisor}:w{index}:{child}", crate::worker::hostname())
}

impl Supervisor {
    fn slot_pos(&self, index: usize) -> Option<usize> {
        self.slots.iter().position(|s| s.index == index)
    }

    /// Forks the worker of slot `index`.
    fn spawn(&mut self, index: usize) {
        let Some(pos) = self.slot_pos(index) else { return };
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let parent = getpid();
        let (started, notice) = match started::pipe() {
            Ok((r, w)) => (Some(r), Some(w)),
            Err(e) => {
                tracing::warn!(slot = index, error = %e, "worker starts unannounced");
                (None, None)
            }
        };
        // Stop signals stay blocked from before the fork until the child has
        // registered its own handlers (crate::worker unblocks them), so none
        // is lost in between.
        let blocked = worker_signals().thread_swap_mask(SigmaskHow::SIG_BLOCK).ok();
        // The supervisor is single-threaded (no runtime, no threads:
        // signal-hook's iterator and the blocking board start none).
        let forked = crate::fork::fork_single_threaded();
        if let (Ok(ForkResult::Parent { .. }) | Err(_), Some(old)) = (&forked, &blocked) {
            let _ = old.thread_set_mask();
        }
        match forked {
            Ok(ForkResult::Parent { child }) => {
                let _ = setpgid(child, child);
                drop(notice);
                let slot = &mut self.slots[pos];
                slot.pid = Some(child);
                slot.owner = owner_of(parent, index, child);
                slot.forked = Instant::now();
                slot.started = started;
                slot.respawn_at = None;
                tracing::info!(slot = index, pid = child.as_raw(), owner = %slot.owner, "worker started");
                // The child gives these back (`WorkerConfig::recover`).
                self.handoff.clear();
            }
            Ok(ForkResult::Child) => {
                // Never unwind into the supervisor's frames (they own the
                // private redis-server): exit from here whatever happens.
                drop(started);
                let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.child_main(index, parent, notice)
                }))
                .unwrap_or(101);
                let _ = std::io::stdout().flush();
                std::process::exit(code);
            }
            Err(e) => {
                tracing::error!(slot = index, error = %e, "fork failed; retrying");
                self.slots[pos].respawn_at = Some(Instant::now() + RESPAWN_MAX);
            }
        }
    }

    /// The forked child: becomes worker `index`, and says so on `notice`
    /// once it started. Never returns to the supervisor loop.
    fn child_main(&mut self, index: usize, parent: Pid, notice: Option<StartedWriter>) -> i32 {
        // The signal-hook registrations are inherited; close them so that
        // the worker's own (tokio) handlers receive the signals.
        drop(self.signals.take());
        // The progress bar is the supervisor's; this worker logs into the
        // relay, which writes above it.
        crate::console::forget();
        if let Some(relay) = &self.relay {
            relay.become_stderr();
        }
        if nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).is_err() || getppid() != parent {
            return 1;
        }
        // Own process group: a terminal's Ctrl-C reaches the supervisor,
        // which forwards it in order.
        let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
        let mut cfg = self.cfg.worker.clone();
        cfg.recover = std::mem::take(&mut self.handoff);
        cfg.slot = index;
        cfg.owner = owner_of(parent, index, getpid());
        let started = move || notice.map_or((), StartedWriter::send);
        match run_worker(self.cfg.board.clone(), cfg, self.registry.clone(), started) {
            Ok(exit) => exit.code(),
            Err(e) => {
                tracing::error!(slot = index, error = %e, "worker cannot start");
                EXIT_CANNOT_START
            }
        }
    }

    /// Handles the exit of a child: a worker that ended without being asked
    /// to (a crash, a kill, an exit from inside a handler) has its leases
    /// given back at once, and its slot is forked again after the backoff
    /// of [`Streak`]. The supervisor gives up only when workers cannot start
    /// at all.
    fn on_exit(&mut self, pid: Pid, status: WaitStatus) {
        let Some(pos) = self.slots.iter().position(|s| s.pid == Some(pid)) else {
            tracing::debug!(pid = pid.as_raw(), "reaped a process that is not a worker");
            return;
        };
        self.poll_started();
        let how = describe(&status);
        let clean = matches!(status, WaitStatus::Exited(_, 0));
        let slot = &mut self.slots[pos];
        let (index, owner) = (slot.index, slot.owner.clone());
        slot.pid = None;
        slot.started = None;
        let asked = self.shutdown.is_some() || slot.retiring || slot.restarting;
        // Whatever the handler started in the worker's process group goes too.
        let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        if !(asked && clean) {
            self.pending
                .push((owner.clone(), format!("worker {owner} {how}")));
            self.recover_pending();
        }
        if let Err(e) = self.board.remove_worker(&owner) {
            tracing::debug!(error = %e, "cannot remove the worker entry");
        }
        let slot = &mut self.slots[pos];
        if self.shutdown.is_some() {
            tracing::info!(slot = index, "worker {how}");
        } else if slot.retiring {
            tracing::info!(slot = index, "worker retired");
            self.slots.remove(pos);
        } else if slot.restarting {
            slot.restarting = false;
            self.spawn(index);
            self.next_restart();
        } else {
            let ending = Ending::of(&status);
            let now = Instant::now();
            let delay = slot.streak.ended(ending, slot.forked, now);
            slot.respawn_at = Some(now + delay);
            match ending {
                Ending::Stuck => {
                    tracing::warn!(slot = index, "worker replaced after a handler would not stop")
                }
                Ending::CannotStart => {
                    tracing::error!(slot = index, ?delay, "worker could not start; trying again")
                }
                Ending::Killed | Ending::Crashed => {
                    tracing::error!(slot = index, owner = %owner, ?delay, "worker {how}; starting a new one")
                }
            }
            if !self.any_started && self.slots.iter().all(|s| s.streak.cannot_start()) {
                tracing::error!(
                    "workers cannot start: every slot failed {} times in a row (the reason is above); giving up",
                    crate::supervisor::START_FAILURE_LIMIT
                );
                self.exit_code = EXIT_WORKERS_CANNOT_START;
                self.begin_shutdown("workers cannot start");
            }
        }
    }

    /// Notes the workers that said they started since the last look.
    fn poll_started(&mut self) {
        for slot in &mut self.slots {
            if slot.started.as_mut().is_some_and(StartedReader::started) {
                slot.started = None;
                slot.streak.started();
                self.any_started = true;
            }
        }
    }

    /// Gives back every lease of the dead workers at once; what cannot be
    /// done now (the board unreachable) stays pending for the next tick;
    /// failing that, the leases end at their deadline (on ZooKeeper also
    /// with the dead worker's session).
    fn recover_pending(&mut self) {
        let board = &mut self.board;
        let mut failed = Vec::new();
        for (owner, reason) in std::mem::take(&mut self.pending) {
            let mut ok = true;
            for queue in &self.cfg.worker.queues {
                match board.recover_owner(queue, &owner, &reason) {
                    Ok(None) => {
                        self.handoff.push((owner.clone(), reason.clone()));
                        break;
                    }
                    Ok(Some(Recovered { back: 0, trashed: 0 })) => {}
                    Ok(Some(Recovered { back, trashed })) => {
                        tracing::warn!(queue = %queue, owner, back, trashed, "recovered the leases of a dead worker")
                    }
                    Err(e) => {
                        tracing::error!(queue = %queue, owner, error = %e, "cannot recover leases yet; retrying");
                        ok = false;
                    }
                }
            }
            if !ok {
                failed.push((owner, reason));
            }
        }
        self.pending = failed;
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
