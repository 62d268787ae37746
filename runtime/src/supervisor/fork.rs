//! Forking a worker into a slot: the single-threaded fork, the child's
//! set-up (signals, parent-death signal, process group) and its owner
//! string.

use std::io::Write;
use std::time::Instant;

use nix::sys::signal::{SigmaskHow, Signal};
use nix::unistd::{getpid, getppid, setpgid, ForkResult, Pid};

use crate::supervisor::respawn::RESPAWN_MAX;
use crate::supervisor::run::Supervisor;
use crate::supervisor::signals::worker_signals;
use crate::supervisor::started::{self, StartedWriter};
use crate::worker::{run_worker, EXIT_CANNOT_START};

/// The owner string of slot `index`'s child: `host:supervisor:w<slot>:child`.
fn owner_of(supervisor: Pid, index: usize, child: Pid) -> String {
    format!("{}:{supervisor}:w{index}:{child}", crate::worker::hostname())
}

impl Supervisor {
    /// Forks the worker of slot `index`.
    pub(super) fn spawn(&mut self, index: usize) {
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
        // its self-pipe and the blocking board start none).
        let forked = crate::fork::fork_single_threaded();
        if let (Ok(ForkResult::Parent { .. }) | Err(_), Some(old)) = (&forked, &blocked) {
            let _ = old.thread_set_mask();
        }
        match forked {
            Ok(ForkResult::Parent { child }) => {
                let _ = setpgid(child, child);
                drop(notice);
                let slot = &mut self.slots[pos];
                if !slot.owner.is_empty() {
                    self.metrics.respawned();
                }
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
    pub(super) fn child_main(&mut self, index: usize, parent: Pid, notice: Option<StartedWriter>) -> i32 {
        // The supervisor's signal registrations and its self-pipe are
        // inherited; drop them so that the worker's own (tokio) handlers
        // receive the signals, and its exits never wake the supervisor.
        drop(self.wakeups.take());
        // The ZooKeeper agent is the supervisor's to ask and to stop.
        self.board.disown_agent();
        // The metrics listener and its clients are the supervisor's: a
        // worker that kept them would hold the port after the supervisor
        // exits.
        drop(self.http.take());
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
        cfg.in_flight = self.in_flight.as_ref().map(|f| f.report(index));
        let started = move || notice.map_or((), StartedWriter::send);
        match run_worker(self.cfg.board.clone(), cfg, self.registry.clone(), started) {
            Ok(exit) => exit.code(),
            Err(e) => {
                tracing::error!(slot = index, error = %e, "worker cannot start");
                EXIT_CANNOT_START
            }
        }
    }
}
