//! Giving back a dead worker's leases at once (or handing that to the next
//! worker forked, where the supervisor cannot reach the board itself), and
//! those a stopped worker could not give back itself.

use crate::board::Recovered;
use crate::supervisor::run::{Supervisor, RECOVERY_RETRY};
use crate::supervisor::slot::Leases;

/// A worker gone with leases the supervisor gives back.
pub(super) struct Left {
    /// Its owner string.
    pub(super) owner: String,
    /// How it ended (the crash counted, for [`Leases::Crashed`]).
    pub(super) reason: String,
    /// What it left: [`Leases::Crashed`] or [`Leases::Unsettled`].
    pub(super) leases: Leases,
}

impl Supervisor {
    /// Gives back every lease of the workers gone at once, one worker
    /// after another until a recovery fails: that one and the rest stay
    /// pending, tried again after [`RECOVERY_RETRY`] (the supervisor is
    /// single-threaded, and a server that does not answer costs each call
    /// its response timeout); failing that, the leases end at their
    /// deadline (on ZooKeeper also with the dead worker's session).
    pub(super) fn recover_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        // While the board stays down, its failures are logged once.
        let loud = !self.board_down;
        let mut down = false;
        let failed = in_turn(pending, |left| match self.recover_owner(left, loud) {
            Ok(()) => true,
            Err(e) => {
                down = e.is_unavailable();
                false
            }
        });
        self.board_down = down;
        self.retry_recovery = (!failed.is_empty()).then(|| std::time::Instant::now() + RECOVERY_RETRY);
        self.pending = failed;
    }

    /// At the supervisor's exit, says which workers' leases it could not
    /// give back: their jobs run again once their leases run out.
    pub(super) fn leave_pending(&self) {
        for Left { owner, reason, .. } in &self.pending {
            tracing::warn!(owner, reason, "leases not given back; they are left to run out");
        }
        for (owner, reason) in &self.handoff {
            tracing::warn!(owner, reason, "leases not given back; they are left to run out");
        }
    }

    /// Gives back the leases of one worker that is gone in each queue, as
    /// `left` says, then removes its entry; the error of the call that
    /// failed (the rest of its queues are left for the next try), logged
    /// as an error when `loud`, else at debug level.
    fn recover_owner(&mut self, left: &Left, loud: bool) -> crate::Result<()> {
        let owner = left.owner.as_str();
        for queue in &self.cfg.worker.queues.clone() {
            let done = match left.leases {
                Leases::Unsettled => self.release_unsettled(queue, owner).map(|()| true),
                _ => self.recover_crashed(queue, owner, &left.reason),
            };
            match done {
                Ok(true) => {}
                Ok(false) => {
                    self.handoff.push((left.owner.clone(), left.reason.clone()));
                    return Ok(());
                }
                Err(e) if loud => {
                    tracing::error!(queue = %queue, owner, error = %e, "cannot recover leases yet; retrying");
                    return Err(e);
                }
                Err(e) => {
                    tracing::debug!(queue = %queue, owner, error = %e, "cannot recover leases yet; retrying");
                    return Err(e);
                }
            }
        }
        self.remove_entry(owner);
        Ok(())
    }

    /// Gives back, counting nothing, the leases in `queue` of a worker
    /// asked to stop that could not give them back itself.
    fn release_unsettled(&mut self, queue: &str, owner: &str) -> crate::Result<()> {
        let back = self.board().release_owner(queue, owner)?;
        if back > 0 {
            tracing::warn!(queue = %queue, owner, back, "gave back the leases a stopped worker could not");
        }
        Ok(())
    }

    /// Gives back a dead worker's leases in `queue`, the crash counted;
    /// false when the supervisor cannot and the next worker forked must
    /// (a ZooKeeper board without an agent).
    fn recover_crashed(&mut self, queue: &str, owner: &str, reason: &str) -> crate::Result<bool> {
        match self.board().recover_owner(queue, owner, reason)? {
            None => Ok(false),
            Some(Recovered { back: 0, trashed: 0 }) => Ok(true),
            Some(Recovered { back, trashed }) => {
                self.metrics.recovered(back, trashed);
                tracing::warn!(queue = %queue, owner, back, trashed, "recovered the leases of a dead worker");
                Ok(true)
            }
        }
    }

    /// Removes a worker's entry from the registry (one left behind goes
    /// stale at its beat's end, and is pruned when read).
    pub(super) fn remove_entry(&mut self, owner: &str) {
        if let Err(e) = self.board.remove_worker(owner) {
            tracing::debug!(error = %e, "cannot remove the worker entry");
        }
    }
}

/// Runs `recover` on `pending` in order until it fails; returns what is
/// left: the ones not tried, then the one that failed (last, so that one
/// that keeps failing does not hold up the others).
fn in_turn<T>(pending: Vec<T>, mut recover: impl FnMut(&T) -> bool) -> Vec<T> {
    let mut left = pending.into_iter();
    let failed = left.by_ref().find(|p| !recover(p));
    left.chain(failed).collect()
}

#[cfg(test)]
mod tests {
    use super::in_turn;

    #[test]
    fn recoveries_stop_at_the_first_failure_and_leave_it_last() {
        let mut tried = Vec::new();
        let left = in_turn(vec![1, 2, 3, 4], |&p| {
            tried.push(p);
            p != 2
        });
        assert_eq!(tried, [1, 2]);
        assert_eq!(left, [3, 4, 2]);
        assert!(in_turn(left, |_| true).is_empty());
    }

    #[test]
    fn one_that_keeps_failing_does_not_hold_up_the_others() {
        let mut pending = vec!["stuck", "a", "b"];
        for _ in 0..3 {
            pending = in_turn(pending, |&p| p != "stuck");
        }
        assert_eq!(pending, ["stuck"]);
    }
}
