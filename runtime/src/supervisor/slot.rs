//! A worker slot's lifecycle: forked, running, exited, then forked again,
//! restarted, retired or left empty. What follows an exit, and when a slot
//! is due again, are pure functions of the slot's state (the supervisor
//! applies them in `exit.rs` and its loop in `run.rs`).

use std::time::{Duration, Instant};

use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::supervisor::respawn::{Ending, Streak};
use crate::supervisor::started::StartedReader;
use crate::worker::EXIT_UNSETTLED;

/// One worker slot.
pub(super) struct Slot {
    pub(super) index: usize,
    pub(super) pid: Option<Pid>,
    pub(super) owner: String,
    /// When its worker was forked.
    pub(super) forked: Instant,
    /// Where its worker says it started (until it has).
    pub(super) started: Option<StartedReader>,
    /// Crashes and start failures in a row (the respawn backoff).
    pub(super) streak: Streak,
    /// When to fork it again (while it has no worker).
    pub(super) respawn_at: Option<Instant>,
    /// Restarting on HUP: respawn as soon as it exits.
    pub(super) restarting: bool,
    /// Removed by TTOU: do not respawn.
    pub(super) retiring: bool,
}

/// What the supervisor had asked of a slot's worker when it exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// Nothing: it ended on its own.
    Nothing,
    /// To stop, with all the others (the supervisor is stopping).
    Stop,
    /// To go for good (TTOU).
    Retire,
    /// To make way for a fresh worker (HUP).
    Restart,
}

/// What follows a worker's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterExit {
    /// The supervisor is stopping: the slot stays empty.
    StayEmpty,
    /// Retired: the slot goes.
    Remove,
    /// Restarted: fork its successor now, then restart the next slot.
    ForkNow,
    /// It ended on its own: fork again after `delay` (the crash-loop
    /// backoff of [`Streak`]).
    Respawn {
        /// How it ended.
        ending: Ending,
        /// How long to wait.
        delay: Duration,
    },
}

impl Slot {
    /// An empty slot, due to be forked.
    pub(super) fn new(index: usize) -> Slot {
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

    /// What had been asked of its worker, `stopping` being whether the
    /// supervisor is.
    pub(super) fn asked(&self, stopping: bool) -> Asked {
        if stopping {
            Asked::Stop
        } else if self.retiring {
            Asked::Retire
        } else if self.restarting {
            Asked::Restart
        } else {
            Asked::Nothing
        }
    }

    /// Decides what follows its worker's exit with `status` at `now`, and
    /// records the exit in its streak.
    pub(super) fn after_exit(&mut self, asked: Asked, status: &WaitStatus, now: Instant) -> AfterExit {
        match asked {
            Asked::Stop => AfterExit::StayEmpty,
            Asked::Retire => AfterExit::Remove,
            Asked::Restart => AfterExit::ForkNow,
            Asked::Nothing => {
                let ending = Ending::of(status);
                let delay = self.streak.ended(ending, self.forked, now);
                AfterExit::Respawn { ending, delay }
            }
        }
    }

    /// True when it waits to be forked again and `now` is past its time.
    pub(super) fn due(&self, now: Instant) -> bool {
        self.pid.is_none() && self.respawn_at.is_some_and(|t| t <= now)
    }
}

/// What a worker that exited left of its leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Leases {
    /// Nothing: it was asked to stop and settled or gave back its jobs
    /// itself.
    Settled,
    /// All it held: it crashed, was killed, or ended without being asked.
    /// They go back with the crash counted on their jobs.
    Crashed,
    /// Some: it stopped when asked, but the board did not take some of
    /// its give-backs or consumes ([`EXIT_UNSETTLED`]). They go back
    /// counting nothing.
    Unsettled,
}

/// What a worker that exited with `status`, having been asked `asked`,
/// left of its leases.
pub(super) fn leases_left(asked: Asked, status: &WaitStatus) -> Leases {
    match status {
        _ if asked == Asked::Nothing => Leases::Crashed,
        WaitStatus::Exited(_, 0) => Leases::Settled,
        WaitStatus::Exited(_, EXIT_UNSETTLED) => Leases::Unsettled,
        _ => Leases::Crashed,
    }
}

/// The earliest respawn among `slots` (none while every slot has its
/// worker, or only retired ones wait).
pub(super) fn next_respawn(slots: &[Slot]) -> Option<Instant> {
    slots
        .iter()
        .filter(|s| s.pid.is_none())
        .filter_map(|s| s.respawn_at)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::respawn::{RESPAWN_BASE, RESPAWN_MAX, STREAK_RESET};
    use crate::worker::{EXIT_CANNOT_START, EXIT_STUCK};
    use nix::sys::signal::Signal;

    const PID: Pid = Pid::from_raw(42);

    fn crash() -> WaitStatus {
        WaitStatus::Signaled(PID, Signal::SIGSEGV, true)
    }

    fn running(index: usize) -> Slot {
        Slot {
            pid: Some(PID),
            ..Slot::new(index)
        }
    }

    #[test]
    fn what_was_asked_follows_stop_then_retire_then_restart() {
        let mut s = running(0);
        assert_eq!(s.asked(false), Asked::Nothing);
        s.restarting = true;
        assert_eq!(s.asked(false), Asked::Restart);
        s.retiring = true;
        assert_eq!(s.asked(false), Asked::Retire);
        assert_eq!(s.asked(true), Asked::Stop);
    }

    #[test]
    fn asked_workers_stay_removed_or_restart_at_once() {
        let mut s = running(0);
        let now = Instant::now();
        assert_eq!(s.after_exit(Asked::Stop, &crash(), now), AfterExit::StayEmpty);
        assert_eq!(s.after_exit(Asked::Retire, &crash(), now), AfterExit::Remove);
        assert_eq!(s.after_exit(Asked::Restart, &crash(), now), AfterExit::ForkNow);
    }

    #[test]
    fn quick_crashes_back_off_and_a_long_run_starts_over() {
        let mut s = running(0);
        let t = Instant::now();
        let mut delays = Vec::new();
        for k in 0..8u64 {
            s.forked = t + Duration::from_secs(k);
            let now = s.forked + Duration::from_millis(50);
            match s.after_exit(Asked::Nothing, &crash(), now) {
                AfterExit::Respawn { ending, delay } => {
                    assert_eq!(ending, Ending::Crashed);
                    delays.push(delay);
                }
                other => panic!("a crash respawns: {other:?}"),
            }
        }
        assert_eq!(delays[0], RESPAWN_BASE);
        assert_eq!(
            delays[3],
            RESPAWN_BASE * 8,
            "after 3 quick crashes the 4th waits 8x"
        );
        assert_eq!(delays[7], RESPAWN_MAX, "the backoff is capped");
        // A worker that ran long enough resets the streak.
        s.forked = t;
        let late = t + STREAK_RESET + Duration::from_secs(1);
        assert_eq!(
            s.after_exit(Asked::Nothing, &crash(), late),
            AfterExit::Respawn {
                ending: Ending::Crashed,
                delay: RESPAWN_BASE
            }
        );
    }

    #[test]
    fn kills_and_stuck_workers_respawn_at_once_and_start_failures_back_off() {
        let mut s = running(0);
        let now = s.forked;
        let killed = WaitStatus::Signaled(PID, Signal::SIGKILL, false);
        let stuck = WaitStatus::Exited(PID, EXIT_STUCK);
        for (status, ending) in [(killed, Ending::Killed), (stuck, Ending::Stuck)] {
            assert_eq!(
                s.after_exit(Asked::Nothing, &status, now),
                AfterExit::Respawn {
                    ending,
                    delay: Duration::ZERO
                }
            );
        }
        let no_start = WaitStatus::Exited(PID, EXIT_CANNOT_START);
        s.after_exit(Asked::Nothing, &no_start, now);
        assert!(matches!(
            s.after_exit(Asked::Nothing, &no_start, now),
            AfterExit::Respawn { ending: Ending::CannotStart, delay } if delay == RESPAWN_BASE * 2
        ));
    }

    #[test]
    fn leases_are_given_back_unless_an_asked_worker_exited_cleanly() {
        let clean = WaitStatus::Exited(PID, 0);
        let unsettled = WaitStatus::Exited(PID, EXIT_UNSETTLED);
        assert_eq!(
            leases_left(Asked::Nothing, &clean),
            Leases::Crashed,
            "an exit 0 mid-job is a crash"
        );
        assert_eq!(leases_left(Asked::Nothing, &unsettled), Leases::Crashed);
        assert_eq!(leases_left(Asked::Nothing, &crash()), Leases::Crashed);
        for asked in [Asked::Stop, Asked::Retire, Asked::Restart] {
            assert_eq!(leases_left(asked, &clean), Leases::Settled, "{asked:?}");
            assert_eq!(leases_left(asked, &unsettled), Leases::Unsettled, "{asked:?}");
            assert_eq!(leases_left(asked, &crash()), Leases::Crashed, "{asked:?}");
            assert_eq!(
                leases_left(asked, &WaitStatus::Exited(PID, 1)),
                Leases::Crashed,
                "{asked:?}"
            );
        }
    }

    #[test]
    fn only_empty_slots_past_their_time_are_due_and_the_earliest_wakes_the_loop() {
        let t = Instant::now();
        let mut slots = vec![running(0), Slot::new(1), Slot::new(2)];
        assert_eq!(next_respawn(&slots), None, "nothing to wait for");
        slots[1].respawn_at = Some(t + Duration::from_secs(3));
        slots[2].respawn_at = Some(t + Duration::from_secs(1));
        slots[0].respawn_at = Some(t);
        assert_eq!(next_respawn(&slots), Some(t + Duration::from_secs(1)));
        assert!(!slots[0].due(t + Duration::from_secs(9)), "it has a worker");
        assert!(!slots[1].due(t + Duration::from_secs(2)));
        assert!(slots[1].due(t + Duration::from_secs(3)));
    }
}
