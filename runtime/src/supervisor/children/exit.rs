//! A worker's exit: its leases given back at once unless it was asked to
//! stop, its slot respawned after the crash-loop backoff, and the workers
//! that said they started.

use std::time::Instant;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::supervisor::children::Supervisor;
use crate::supervisor::config::EXIT_WORKERS_CANNOT_START;
use crate::supervisor::respawn::Ending;
use crate::supervisor::started::StartedReader;

/// Text for how a child ended.
fn describe(status: &WaitStatus) -> String {
    match status {
        WaitStatus::Exited(_, code) => format!("exited with status {code}"),
        WaitStatus::Signaled(_, sig, _) => format!("killed by signal {} ({sig:?})", *sig as i32),
        other => format!("{other:?}"),
    }
}

impl Supervisor {
    /// Handles the exit of a child: a worker that ended without being asked
    /// to (a crash, a kill, an exit from inside a handler) has its leases
    /// given back at once, and its slot is forked again after the backoff
    /// of [`Streak`]. The supervisor gives up only when workers cannot start
    /// at all.
    pub(super) fn on_exit(&mut self, pid: Pid, status: WaitStatus) {
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
    pub(super) fn poll_started(&mut self) {
        for slot in &mut self.slots {
            if slot.started.as_mut().is_some_and(StartedReader::started) {
                slot.started = None;
                slot.streak.started();
                self.any_started = true;
            }
        }
    }
}
