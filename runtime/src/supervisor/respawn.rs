//! What the supervisor does when a worker process ends on its own: whether
//! its leases are recovered, when its slot is forked again, and when the
//! supervisor gives up (only when workers cannot start at all).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;

use crate::worker::{EXIT_CANNOT_START, EXIT_STUCK};

/// First respawn delay after a crash; doubles with each crash in a row.
pub(crate) const RESPAWN_BASE: Duration = Duration::from_millis(100);
/// Longest respawn delay (the cap of the backoff).
pub(crate) const RESPAWN_MAX: Duration = Duration::from_secs(5);
/// A worker that ran this long before it crashed ends its slot's streak:
/// the next crash starts the backoff again from [`RESPAWN_BASE`].
pub(crate) const STREAK_RESET: Duration = Duration::from_secs(10);
/// Start failures in a row, in every slot and before any worker ever
/// started, after which the supervisor gives up (exit code
/// [`EXIT_CANNOT_START`](crate::worker::EXIT_CANNOT_START)).
pub(crate) const START_FAILURE_LIMIT: u32 = 5;

/// How a worker process ended, as the respawn policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It could not start (bad config, board unreachable, sandbox taken):
    /// exit code [`EXIT_CANNOT_START`].
    CannotStart,
    /// Killed by SIGKILL from outside (the OOM killer, an operator): not
    /// of its own making, so its slot is forked again at once.
    Killed,
    /// It replaced itself because a handler would not stop
    /// ([`EXIT_STUCK`]): not a crash.
    Stuck,
    /// Anything else while nobody asked it to stop: a crash (abort, a
    /// fault, a panic's exit, or an exit 0 from inside a handler).
    Crashed,
}

impl Ending {
    /// Classifies a wait status.
    pub(crate) fn of(status: &WaitStatus) -> Ending {
        match status {
            WaitStatus::Exited(_, EXIT_CANNOT_START) => Ending::CannotStart,
            WaitStatus::Exited(_, EXIT_STUCK) => Ending::Stuck,
            WaitStatus::Signaled(_, Signal::SIGKILL, _) => Ending::Killed,
            _ => Ending::Crashed,
        }
    }
}

/// One slot's respawn state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Streak {
    /// Crashes in a row (reset by a worker that lived [`STREAK_RESET`]).
    crashes: u32,
    /// Start failures in a row (reset by a worker that started).
    start_failures: u32,
}

impl Streak {
    /// Records how a worker forked at `forked` ended at `now`; returns how
    /// long to wait before forking the slot again.
    pub(crate) fn ended(&mut self, ending: Ending, forked: Instant, now: Instant) -> Duration {
        match ending {
            Ending::CannotStart => {
                self.start_failures += 1;
                backoff(self.start_failures)
            }
            Ending::Killed | Ending::Stuck => Duration::ZERO,
            Ending::Crashed => {
                if now.duration_since(forked) >= STREAK_RESET {
                    self.crashes = 0;
                }
                self.crashes += 1;
                backoff(self.crashes)
            }
        }
    }

    /// The slot's worker reported that it started.
    pub(crate) fn started(&mut self) {
        self.start_failures = 0;
    }

    /// True when the slot's workers failed to start
    /// [`START_FAILURE_LIMIT`] times in a row.
    pub(crate) fn cannot_start(&self) -> bool {
        self.start_failures >= START_FAILURE_LIMIT
    }
}

/// The delay before the `n`th respawn in a row: [`RESPAWN_BASE`] doubled
/// each time, capped at [`RESPAWN_MAX`].
fn backoff(n: u32) -> Duration {
    RESPAWN_BASE
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(RESPAWN_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::unistd::Pid;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn outside_kills_and_stuck_workers_respawn_at_once_however_often() {
        let (mut s, t) = (Streak::default(), Instant::now());
        for i in 0..1000 {
            assert_eq!(s.ended(Ending::Killed, at(t, i), at(t, i + 1)), Duration::ZERO);
            assert_eq!(s.ended(Ending::Stuck, at(t, i), at(t, i + 1)), Duration::ZERO);
        }
        assert!(!s.cannot_start());
    }

    #[test]
    fn crashes_back_off_up_to_the_cap_and_a_long_run_resets_the_streak() {
        let (mut s, t) = (Streak::default(), Instant::now());
        let delays: Vec<u128> = (0..10)
            .map(|i| s.ended(Ending::Crashed, at(t, i), at(t, i + 1)).as_millis())
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]);
        let long = STREAK_RESET.as_millis() as u64;
        assert_eq!(s.ended(Ending::Crashed, t, at(t, long)), RESPAWN_BASE);
        assert!(!s.cannot_start(), "crashes never make the supervisor give up");
    }

    #[test]
    fn only_start_failures_in_a_row_count_towards_giving_up() {
        let (mut s, t) = (Streak::default(), Instant::now());
        for _ in 1..START_FAILURE_LIMIT {
            s.ended(Ending::CannotStart, t, t);
        }
        assert!(!s.cannot_start());
        s.started();
        for _ in 1..START_FAILURE_LIMIT {
            s.ended(Ending::CannotStart, t, t);
        }
        assert!(!s.cannot_start(), "a worker that started resets the count");
        s.ended(Ending::CannotStart, t, t);
        assert!(s.cannot_start());
    }

    #[test]
    fn wait_statuses_are_classified() {
        let pid = Pid::from_raw(1);
        assert_eq!(
            Ending::of(&WaitStatus::Exited(pid, EXIT_CANNOT_START)),
            Ending::CannotStart
        );
        assert_eq!(Ending::of(&WaitStatus::Exited(pid, EXIT_STUCK)), Ending::Stuck);
        assert_eq!(
            Ending::of(&WaitStatus::Signaled(pid, Signal::SIGKILL, false)),
            Ending::Killed
        );
        assert_eq!(
            Ending::of(&WaitStatus::Signaled(pid, Signal::SIGABRT, true)),
            Ending::Crashed
        );
        assert_eq!(Ending::of(&WaitStatus::Exited(pid, 0)), Ending::Crashed);
        assert_eq!(Ending::of(&WaitStatus::Exited(pid, 101)), Ending::Crashed);
    }
}
