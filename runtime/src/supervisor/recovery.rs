//! Giving back a dead worker's leases at once (or handing that to the next
//! worker forked, where the supervisor cannot reach the board itself).

use crate::board::Recovered;
use crate::supervisor::run::{Supervisor, RECOVERY_RETRY};

impl Supervisor {
    /// Gives back every lease of the dead workers at once, one worker
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
        let failed = in_turn(pending, |(owner, reason)| {
            match self.recover_owner(owner, reason, loud) {
                Ok(()) => true,
                Err(e) => {
                    down = e.is_unavailable();
                    false
                }
            }
        });
        self.board_down = down;
        self.retry_recovery = (!failed.is_empty()).then(|| std::time::Instant::now() + RECOVERY_RETRY);
        self.pending = failed;
    }

    /// At the supervisor's exit, says which dead workers' leases it could
    /// not give back: their jobs run again once their leases run out.
    pub(super) fn leave_pending(&self) {
        for (owner, reason) in self.pending.iter().chain(&self.handoff) {
            tracing::warn!(owner, reason, "leases not given back; they are left to run out");
        }
    }

    /// Gives back the leases of one dead worker in each queue, then
    /// removes its entry; the error of the call that failed (the rest of
    /// its queues are left for the next try), logged as an error when
    /// `loud`, else at debug level.
    fn recover_owner(&mut self, owner: &str, reason: &str, loud: bool) -> crate::Result<()> {
        for queue in &self.cfg.worker.queues.clone() {
            match self.board().recover_owner(queue, owner, reason) {
                Ok(None) => {
                    self.handoff.push((owner.to_owned(), reason.to_owned()));
                    return Ok(());
                }
                Ok(Some(Recovered { back: 0, trashed: 0 })) => {}
                Ok(Some(Recovered { back, trashed })) => {
                    self.metrics.recovered(back, trashed);
                    tracing::warn!(queue = %queue, owner, back, trashed, "recovered the leases of a dead worker")
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
