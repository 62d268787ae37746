//! A worker's exit: waited, its leases given back at once unless it was
//! asked to stop and did so cleanly, and its slot forked again, restarted,
//! retired or left empty as `slot.rs` decides.

use std::time::Instant;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::supervisor::config::{EXIT_WORKERS_CANNOT_START, SHUTDOWN_MARGIN};
use crate::supervisor::recovery::Left;
use crate::supervisor::respawn::Ending;
use crate::supervisor::run::Supervisor;
use crate::supervisor::slot::{leases_left, AfterExit, Leases};
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
    /// Waits every child that exited (one SIGCHLD may stand for several).
    pub(super) fn wait_children(&mut self) {
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

    /// Handles the exit of a child: a worker that ended without being asked
    /// to (a crash, a kill, an exit from inside a handler) has its leases
    /// given back at once, and its slot is forked again after the backoff
    /// of its streak. The supervisor gives up only when workers cannot
    /// start at all.
    fn on_exit(&mut self, pid: Pid, status: WaitStatus) {
        let Some(pos) = self.slots.iter().position(|s| s.pid == Some(pid)) else {
            if self.board.agent_exited(pid) {
                tracing::warn!(pid = pid.as_raw(), "the zookeeper agent {}", describe(&status));
            } else {
                tracing::debug!(pid = pid.as_raw(), "waited a process that is not a worker");
            }
            return;
        };
        self.poll_started();
        let how = describe(&status);
        let asked = self.slots[pos].asked(self.shutdown.is_some());
        let (index, owner) = (self.slots[pos].index, self.slots[pos].owner.clone());
        self.note_exit(index, asked, &status);
        let slot = &mut self.slots[pos];
        slot.pid = None;
        slot.started = None;
        // Whatever the handler started in the worker's process group goes too.
        let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        let leases = match leases_left(asked, &status) {
            // On ZooKeeper they end with the worker's session.
            Leases::Unsettled if !self.board.releases_owners() => Leases::Settled,
            leases => leases,
        };
        if leases == Leases::Settled {
            if !self.board_down {
                self.remove_entry(&owner);
            }
        } else {
            self.pending.push(Left {
                owner: owner.clone(),
                reason: format!("worker {owner} {how}"),
                leases,
            });
            // While the board is down, a call now would wait out its
            // timeouts too (4–6 s against a frozen server, on the
            // supervisor's one thread): the retry scheduled tries it.
            if !self.board_down {
                self.recover_pending();
            }
        }
        let now = Instant::now();
        let slot = &mut self.slots[pos];
        match slot.after_exit(asked, &status, now) {
            AfterExit::StayEmpty => tracing::info!(slot = index, "worker {how}"),
            AfterExit::Remove => {
                tracing::info!(slot = index, "worker retired");
                self.slots.remove(pos);
            }
            AfterExit::ForkNow => {
                slot.restarting = false;
                self.spawn(index);
                self.next_restart();
            }
            AfterExit::Respawn { ending, delay } => {
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
                self.give_up_if_workers_cannot_start();
            }
        }
        // With every worker gone, a stop gives the board at most a margin
        // more to take back what they left.
        if let Some(deadline) = self.shutdown {
            if self.slots.iter().all(|s| s.pid.is_none()) {
                self.shutdown = Some(deadline.min(Instant::now() + SHUTDOWN_MARGIN));
            }
        }
    }

    /// Stops the supervisor when no worker ever started and every slot
    /// failed to start too often in a row.
    fn give_up_if_workers_cannot_start(&mut self) {
        if !self.any_started && self.slots.iter().all(|s| s.streak.cannot_start()) {
            tracing::error!(
                "workers cannot start: every slot failed {} times in a row (the reason is above); giving up",
                crate::supervisor::START_FAILURE_LIMIT
            );
            self.exit_code = EXIT_WORKERS_CANNOT_START;
            self.begin_shutdown("workers cannot start");
        }
    }

    /// Notes the workers that said they started (read when a worker
    /// exits: the notice stays in its pipe until then).
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
