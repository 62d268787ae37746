//! Pacing the replacement of an ended session. While no quorum serves (a
//! slow election, a majority down) the members refuse sessions at once:
//! unpaced, every request would connect again, many times a second. So one
//! request connects at a time; the next attempt waits a pause after the
//! last one, doubled on each failure up to [`PAUSE_MAX`]; and the requests
//! that waited while an attempt failed take its failure as their answer
//! (see `Session::client`), so none waits longer than one pause and one
//! connect.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::Error;

/// The pause after the first failed attempt.
const PAUSE_FIRST: Duration = Duration::from_millis(250);
/// The longest pause between two attempts.
const PAUSE_MAX: Duration = Duration::from_secs(2);

/// The state of replacing an ended session (held under the session's
/// reconnect lock).
#[derive(Default)]
pub(crate) struct Reconnect {
    /// The ended session last announced (logged once, however many tries).
    announced: i64,
    /// The pause after the attempt under way or last made (zero until one
    /// started).
    pause: Duration,
    /// No attempt before this.
    not_before: Option<Instant>,
    /// The last attempt's failure.
    failure: Option<Error>,
}

impl Reconnect {
    /// True the first time `session` is reported ended.
    pub(crate) fn announce(&mut self, session: i64) -> bool {
        std::mem::replace(&mut self.announced, session) != session
    }

    /// The last attempt's failure, for a request that waited while it ran.
    pub(crate) fn failure(&self) -> Option<Error> {
        self.failure.clone()
    }

    /// Waits for this attempt's turn, then counts the attempt as failed
    /// until [`succeeded`](Self::succeeded) says otherwise: a request
    /// dropped while it connects still slows the next attempt down.
    pub(crate) async fn take_turn(&mut self) {
        if let Some(at) = self.not_before {
            tokio::time::sleep_until(at).await;
        }
        self.pause = (self.pause * 2).clamp(PAUSE_FIRST, PAUSE_MAX);
        self.not_before = Some(Instant::now() + self.pause);
    }

    /// The attempt failed with `e`: the next waits the pause from now.
    pub(crate) fn failed(&mut self, e: &Error) {
        self.not_before = Some(Instant::now() + self.pause);
        self.failure = Some(e.clone());
    }

    /// The attempt connected: the next ended session starts afresh.
    pub(crate) fn succeeded(&mut self) {
        (self.pause, self.not_before, self.failure) = (Duration::ZERO, None, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pauses after failures in a row: 0.25, 0.5, 1, 2, 2 s, each
    /// counted from the failure; after a success, 0.25 s again.
    #[tokio::test]
    async fn the_pause_doubles_up_to_its_cap_and_resets_on_success() {
        let mut r = Reconnect::default();
        let e = Error::unavailable("down");
        let mut pauses = Vec::new();
        for _ in 0..5 {
            // Not waiting out the pause: only its length is checked here.
            r.not_before = None;
            r.take_turn().await;
            let failed_at = Instant::now();
            r.failed(&e);
            assert!(r.not_before.is_some_and(|at| at >= failed_at + r.pause));
            pauses.push(r.pause);
        }
        let ms = |n| Duration::from_millis(n);
        assert_eq!(pauses, [ms(250), ms(500), ms(1000), ms(2000), ms(2000)]);
        assert_eq!(r.failure(), Some(e));
        r.succeeded();
        assert_eq!((r.failure(), r.not_before), (None, None));
        r.take_turn().await;
        assert_eq!(r.pause, ms(250));
    }

    #[test]
    fn an_ended_session_is_announced_once() {
        let mut r = Reconnect::default();
        assert!(r.announce(7));
        assert!(!r.announce(7));
        assert!(r.announce(8));
    }
}
