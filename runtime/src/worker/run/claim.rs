//! The claim step of the worker loop: consume what finished and claim up
//! to the free concurrency and the prefetch, in one round trip where the
//! board can, then launch what fits.

use crate::board::{Board, ClaimRequest};
use crate::error::Result;
use crate::job::{Claimed, Lease};
use crate::worker::job::Finished;
use crate::worker::run::Worker;

impl Worker {
    /// Claims and launches; returns (more work may be waiting, the claim
    /// failed).
    pub(super) async fn claim_step(&mut self, queues: &[String]) -> (bool, bool) {
        let room = self.claim_room();
        let sent = std::time::Instant::now();
        match self.settle_and_claim(queues, room).await {
            Ok(claimed) => {
                self.fruitless_claims = match claimed.is_empty() && self.woke_at_once && self.holding() > 0 {
                    true => self.fruitless_claims.saturating_add(1),
                    false => 0,
                };
                let short = claimed.len() < room;
                self.keep_ahead(claimed, sent);
                let all_started = self.launch_ahead().await;
                ((short || !all_started) && self.isolated.is_none(), false)
            }
            Err(e) => {
                tracing::warn!(error = %e, "claim failed; retrying");
                (false, true)
            }
        }
    }

    /// Consumes the finished jobs and claims up to `room` more.
    async fn settle_and_claim(&mut self, queues: &[String], room: usize) -> Result<Vec<Claimed>> {
        let q: Vec<&str> = queues.iter().map(String::as_str).collect();
        let request = ClaimRequest {
            queues: &q,
            who: &self.cfg.owner,
            expiry: self.cfg.expiry,
            count: room,
            holding: self.holding(),
            // Until the wait after this claim ends and the next claim
            // registers again (a wait lasts an interval at most).
            hand_off: Some(self.cfg.interval * 2),
        };
        if self.done.is_empty() {
            return self.board.claim_with(&request).await;
        }
        // Settle what finished and take what is next in one round trip; a
        // consume that did not reach the board is tried once more.
        let (done, finished): (Vec<Lease>, Vec<Finished>) =
            std::mem::take(&mut self.done).into_iter().unzip();
        let (consumed, claimed) = self.board.consume_then_claim(done, &request).await;
        if self.log_consumed(finished, consumed, true) {
            self.flush_consumes().await;
        }
        claimed
    }
}
