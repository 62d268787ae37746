//! The supervisor's signals: TERM/INT drain (a second one stops now), QUIT
//! stops now, TSTP/CONT quiet and resume the workers, HUP restarts them one
//! by one, TTIN/TTOU add or retire one; and the signals a worker handles
//! itself, blocked across `fork`.

use std::time::Instant;

use nix::sys::signal::{kill, SigSet, Signal};
use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU};

use super::{Slot, Supervisor, SHUTDOWN_MARGIN};

/// The signals a worker handles itself (blocked across `fork`).
pub(crate) fn worker_signals() -> SigSet {
    let mut set = SigSet::empty();
    for sig in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGTSTP,
        Signal::SIGCONT,
    ] {
        set.add(sig);
    }
    set
}

impl Supervisor {
    pub(super) fn signal_children(&self, sig: Signal) {
        for pid in self.slots.iter().filter_map(|s| s.pid) {
            let _ = kill(pid, sig);
        }
    }

    pub(super) fn begin_shutdown(&mut self, why: &str) {
        if self.shutdown.is_none() {
            tracing::info!(why, grace = ?self.cfg.worker.grace, "stopping workers");
            self.shutdown = Some(Instant::now() + self.cfg.worker.grace + SHUTDOWN_MARGIN);
            self.rolling.clear();
            self.signal_children(Signal::SIGTERM);
        }
    }

    pub(super) fn on_signal(&mut self, sig: i32) {
        match sig {
            SIGTERM | SIGINT if self.shutdown.is_some() => {
                tracing::info!("second stop signal: stopping workers now");
                self.signal_children(Signal::SIGQUIT);
            }
            SIGTERM | SIGINT => self.begin_shutdown("stop signal"),
            SIGQUIT => {
                self.begin_shutdown("quit signal");
                self.signal_children(Signal::SIGQUIT);
            }
            SIGTSTP => self.signal_children(Signal::SIGTSTP),
            SIGCONT => self.signal_children(Signal::SIGCONT),
            SIGHUP if self.shutdown.is_none() => {
                tracing::info!("restarting workers one by one");
                self.rolling = self
                    .slots
                    .iter()
                    .filter(|s| !s.retiring)
                    .map(|s| s.index)
                    .rev()
                    .collect();
                self.next_restart();
            }
            SIGTTIN if self.shutdown.is_none() => {
                let index = self.slots.iter().map(|s| s.index + 1).max().unwrap_or(0);
                tracing::info!(slot = index, "one worker more");
                self.slots.push(Slot::new(index));
                self.spawn(index);
            }
            SIGTTOU if self.shutdown.is_none() => {
                let active = self.slots.iter().filter(|s| !s.retiring).count();
                if active <= 1 {
                    tracing::warn!("TTOU ignored: one worker is the minimum");
                } else if let Some(slot) = self.slots.iter_mut().rev().find(|s| !s.retiring) {
                    tracing::info!(slot = slot.index, "one worker less");
                    slot.retiring = true;
                    match slot.pid {
                        Some(pid) => {
                            let _ = kill(pid, Signal::SIGTERM);
                        }
                        None => slot.respawn_at = None,
                    }
                }
            }
            _ => {}
        }
    }

    /// Sends TERM to the next slot of a rolling restart (if none is
    /// restarting now).
    pub(super) fn next_restart(&mut self) {
        if self.slots.iter().any(|s| s.restarting) {
            return;
        }
        while let Some(index) = self.rolling.pop() {
            let Some(pos) = self.slot_pos(index) else { continue };
            let slot = &mut self.slots[pos];
            if let Some(pid) = slot.pid {
                slot.restarting = true;
                let _ = kill(pid, Signal::SIGTERM);
                return;
            }
        }
    }
}
