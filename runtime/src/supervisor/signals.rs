//! The supervisor's signals, typed: [`Sig`] names each one it handles and
//! [`TABLE`] says, in one place, what the supervisor does on it and what
//! it relays to its workers, while running and while stopping (the
//! README's signal table is this one). Also the signals a worker handles
//! itself, blocked across `fork`.

use std::time::Instant;

use nix::sys::signal::{kill, SigSet, Signal};

use crate::supervisor::config::SHUTDOWN_MARGIN;
use crate::supervisor::run::Supervisor;
use crate::supervisor::slot::Slot;

/// A signal the supervisor handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sig {
    /// A worker exited (or stopped).
    Chld,
    /// Stop (drain).
    Term,
    /// Stop (drain), as from a terminal's Ctrl-C.
    Int,
    /// Stop now.
    Quit,
    /// Quiet: stop claiming.
    Tstp,
    /// Resume claiming.
    Cont,
    /// Restart the workers one by one.
    Hup,
    /// One worker more.
    Ttin,
    /// One worker less.
    Ttou,
}

/// What the supervisor itself does on a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing of its own (it may still relay).
    Nothing,
    /// Wait the workers that exited: recover, respawn, or retire their
    /// slots.
    WaitChildren,
    /// Begin the graceful stop (the reason is logged): no more respawns,
    /// and workers still running after `--grace` (plus a margin) are
    /// killed.
    BeginStop(&'static str),
    /// A second stop signal: the workers stop now (the relay tells them).
    StopNow,
    /// Restart the workers one by one: TERM to one, fork its successor as
    /// soon as it exits, then the next.
    RestartOneByOne,
    /// Add a slot and fork its worker.
    AddWorker,
    /// Retire the newest slot: TERM to its worker, and no respawn (one
    /// worker is the minimum).
    RetireWorker,
}

/// What a signal makes the supervisor do: its own action first, then the
/// signals relayed to every worker, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The supervisor's own action.
    pub(crate) action: Action,
    /// Sent to every live worker after the action.
    pub(crate) relay: &'static [Signal],
}

/// One signal's row of [`TABLE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    /// The signal.
    pub(crate) sig: Sig,
    /// Its number.
    pub(crate) raw: Signal,
    /// What it does while the supervisor runs.
    pub(crate) running: Plan,
    /// What it does once the supervisor is stopping.
    pub(crate) stopping: Plan,
}

const fn plan(action: Action, relay: &'static [Signal]) -> Plan {
    Plan { action, relay }
}

/// Ignored.
const IGNORED: Plan = plan(Action::Nothing, &[]);
/// A stop signal while stopping: the workers stop now.
const STOP_NOW: Plan = plan(Action::StopNow, &[Signal::SIGQUIT]);

/// Every signal the supervisor handles, what it does and what it relays.
pub(crate) const TABLE: [Row; 9] = [
    Row {
        sig: Sig::Chld,
        raw: Signal::SIGCHLD,
        running: plan(Action::WaitChildren, &[]),
        stopping: plan(Action::WaitChildren, &[]),
    },
    Row {
        sig: Sig::Term,
        raw: Signal::SIGTERM,
        running: plan(Action::BeginStop("stop signal"), &[Signal::SIGTERM]),
        stopping: STOP_NOW,
    },
    Row {
        sig: Sig::Int,
        raw: Signal::SIGINT,
        running: plan(Action::BeginStop("stop signal"), &[Signal::SIGTERM]),
        stopping: STOP_NOW,
    },
    Row {
        sig: Sig::Quit,
        raw: Signal::SIGQUIT,
        running: plan(
            Action::BeginStop("quit signal"),
            &[Signal::SIGTERM, Signal::SIGQUIT],
        ),
        stopping: plan(Action::Nothing, &[Signal::SIGQUIT]),
    },
    Row {
        sig: Sig::Tstp,
        raw: Signal::SIGTSTP,
        running: plan(Action::Nothing, &[Signal::SIGTSTP]),
        stopping: plan(Action::Nothing, &[Signal::SIGTSTP]),
    },
    Row {
        sig: Sig::Cont,
        raw: Signal::SIGCONT,
        running: plan(Action::Nothing, &[Signal::SIGCONT]),
        stopping: plan(Action::Nothing, &[Signal::SIGCONT]),
    },
    Row {
        sig: Sig::Hup,
        raw: Signal::SIGHUP,
        running: plan(Action::RestartOneByOne, &[]),
        stopping: IGNORED,
    },
    Row {
        sig: Sig::Ttin,
        raw: Signal::SIGTTIN,
        running: plan(Action::AddWorker, &[]),
        stopping: IGNORED,
    },
    Row {
        sig: Sig::Ttou,
        raw: Signal::SIGTTOU,
        running: plan(Action::RetireWorker, &[]),
        stopping: IGNORED,
    },
];

impl Sig {
    /// The handled signal numbered `raw`, if it is one.
    pub(crate) fn from_raw(raw: i32) -> Option<Sig> {
        TABLE.iter().find(|r| r.raw as i32 == raw).map(|r| r.sig)
    }

    /// Its row of [`TABLE`].
    fn row(self) -> &'static Row {
        TABLE
            .iter()
            .find(|r| r.sig == self)
            .expect("every signal has a row")
    }

    /// What it makes the supervisor do, `stopping` or not.
    pub(crate) fn plan(self, stopping: bool) -> Plan {
        let row = self.row();
        if stopping {
            row.stopping
        } else {
            row.running
        }
    }
}

/// The numbers of every signal in [`TABLE`] (what the supervisor listens
/// to).
pub(crate) fn handled() -> impl Iterator<Item = i32> {
    TABLE.iter().map(|r| r.raw as i32)
}

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

    /// Begins the graceful stop and tells the workers to drain (TERM).
    pub(super) fn begin_shutdown(&mut self, why: &str) {
        if self.shutdown.is_none() {
            self.begin_stop(why);
            self.signal_children(Signal::SIGTERM);
        }
    }

    /// Begins the graceful stop: the deadline after which stragglers are
    /// killed; no more restarts (the caller tells the workers).
    fn begin_stop(&mut self, why: &str) {
        tracing::info!(why, grace = ?self.cfg.worker.grace, "stopping workers");
        self.shutdown = Some(Instant::now() + self.cfg.worker.grace + SHUTDOWN_MARGIN);
        self.rolling.clear();
    }

    /// Does what [`TABLE`] says for `sig`.
    pub(super) fn on_signal(&mut self, sig: Sig) {
        let plan = sig.plan(self.shutdown.is_some());
        match plan.action {
            Action::Nothing => {}
            Action::WaitChildren => self.wait_children(),
            Action::BeginStop(why) => self.begin_stop(why),
            Action::StopNow => tracing::info!("second stop signal: stopping workers now"),
            Action::RestartOneByOne => {
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
            Action::AddWorker => {
                let index = self.slots.iter().map(|s| s.index + 1).max().unwrap_or(0);
                tracing::info!(slot = index, "one worker more");
                self.slots.push(Slot::new(index));
                self.spawn(index);
            }
            Action::RetireWorker => self.retire_one(),
        }
        for &relayed in plan.relay {
            self.signal_children(relayed);
        }
    }

    /// Retires the newest active slot (TTOU).
    fn retire_one(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signal_has_exactly_one_row_and_its_number_maps_back() {
        for row in TABLE {
            assert_eq!(
                TABLE.iter().filter(|r| r.sig == row.sig).count(),
                1,
                "{:?}",
                row.sig
            );
            assert_eq!(Sig::from_raw(row.raw as i32), Some(row.sig));
        }
        assert_eq!(Sig::from_raw(Signal::SIGUSR1 as i32), None);
        assert_eq!(handled().count(), TABLE.len());
    }

    #[test]
    fn a_stop_signal_drains_and_a_second_one_stops_now() {
        for sig in [Sig::Term, Sig::Int] {
            let first = sig.plan(false);
            assert!(matches!(first.action, Action::BeginStop(_)), "{sig:?}");
            assert_eq!(first.relay, [Signal::SIGTERM]);
            let second = sig.plan(true);
            assert_eq!(second.action, Action::StopNow);
            assert_eq!(second.relay, [Signal::SIGQUIT]);
        }
    }

    #[test]
    fn quit_stops_and_tells_the_workers_to_stop_now() {
        let plan = Sig::Quit.plan(false);
        assert!(matches!(plan.action, Action::BeginStop(_)));
        assert_eq!(plan.relay, [Signal::SIGTERM, Signal::SIGQUIT]);
        assert_eq!(Sig::Quit.plan(true).relay, [Signal::SIGQUIT]);
    }

    #[test]
    fn quiet_and_resume_are_relayed_whatever_the_state() {
        for stopping in [false, true] {
            assert_eq!(
                Sig::Tstp.plan(stopping),
                plan(Action::Nothing, &[Signal::SIGTSTP])
            );
            assert_eq!(
                Sig::Cont.plan(stopping),
                plan(Action::Nothing, &[Signal::SIGCONT])
            );
        }
    }

    #[test]
    fn restarts_and_resizes_are_ignored_while_stopping_and_relay_nothing() {
        for (sig, action) in [
            (Sig::Hup, Action::RestartOneByOne),
            (Sig::Ttin, Action::AddWorker),
            (Sig::Ttou, Action::RetireWorker),
        ] {
            assert_eq!(sig.plan(false), plan(action, &[]));
            assert_eq!(sig.plan(true), IGNORED, "{sig:?}");
        }
    }

    #[test]
    fn exits_are_waited_whatever_the_state() {
        for stopping in [false, true] {
            assert_eq!(Sig::Chld.plan(stopping), plan(Action::WaitChildren, &[]));
        }
    }
}
