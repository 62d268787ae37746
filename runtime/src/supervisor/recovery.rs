//! Giving back a dead worker's leases at once (or handing that to the next
//! worker forked, where the supervisor cannot reach the board itself).

use crate::board::Recovered;
use crate::supervisor::run::{Supervisor, RECOVERY_RETRY};

impl Supervisor {
    /// Gives back every lease of the dead workers at once; what cannot be
    /// done now (the board unreachable) stays pending, tried again after
    /// [`RECOVERY_RETRY`];
    /// failing that, the leases end at their deadline (on ZooKeeper also
    /// with the dead worker's session).
    pub(super) fn recover_pending(&mut self) {
        let mut failed = Vec::new();
        for (owner, reason) in std::mem::take(&mut self.pending) {
            let mut ok = true;
            for queue in &self.cfg.worker.queues.clone() {
                match self.board().recover_owner(queue, &owner, &reason) {
                    Ok(None) => {
                        self.handoff.push((owner.clone(), reason.clone()));
                        break;
                    }
                    Ok(Some(Recovered { back: 0, trashed: 0 })) => {}
                    Ok(Some(Recovered { back, trashed })) => {
                        self.metrics.recovered(back, trashed);
                        tracing::warn!(queue = %queue, owner, back, trashed, "recovered the leases of a dead worker")
                    }
                    Err(e) => {
                        tracing::error!(queue = %queue, owner, error = %e, "cannot recover leases yet; retrying");
                        ok = false;
                    }
                }
            }
            if !ok {
                failed.push((owner, reason));
            }
        }
        self.retry_recovery = (!failed.is_empty()).then(|| std::time::Instant::now() + RECOVERY_RETRY);
        self.pending = failed;
    }
}
