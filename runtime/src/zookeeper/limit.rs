//! The concurrency limit on ZooKeeper: at most `limit` jobs of a queue
//! held at once, across every board.
//!
//! The count is the queue's listing itself: every lock under the jobs path
//! is a held job (jobworker's leases, taskflow's claims, a dead session's
//! lock until it goes). What keeps the count exact under racing claimers is
//! the claim gate, `R/Q/.jw/claims`, an empty znode. A claim under a limit
//! reads the gate's version *before* it lists the queue (in one round trip,
//! answered in order), and its claim transaction sets the gate at that
//! version along with creating the lock. Two limited claims therefore never
//! both commit on the same count: the second fails on the gate, lists
//! again and counts the first. A lock that goes (consume, release, expiry,
//! a dead session) needs no bookkeeping: the next listing does not count
//! it, and its deletion fires the jobs path's child watch that idle workers
//! wait on.
//!
//! Under a limit a claim takes its jobs one transaction after another (each
//! sets the gate, so they cannot be pipelined); a limited queue is one
//! where that cost is the point. A claim of a named job (taskflow's) is
//! neither held back nor gated, but its lock counts.

use std::sync::Arc;

use zookeeper_client as zk;

use crate::error::Result;
use crate::job::Claimed;
use crate::zookeeper::cache::{Known, Snapshot};
use crate::zookeeper::claim::{Claimer, Noted};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::settings::Stored;
use crate::zookeeper::ZooKeeperBoard;

/// What a claim reads first, in one round trip and in this order.
pub(crate) struct ClaimView {
    /// The queue's settings.
    pub settings: Stored,
    /// The claim gate's version (`None`: no gate yet).
    pub gate: Option<i32>,
    /// The listing, made after the gate was read.
    pub snap: Snapshot,
}

/// The claim gate at the version a claim read: its transaction sets it at
/// that version.
pub(crate) struct Gate<'a> {
    /// `R/Q/.jw/claims`.
    pub path: &'a str,
    /// The version read (one more after each claim this claimer made).
    pub version: i32,
}

/// What a claim under a limit got.
pub(crate) enum Gated {
    /// These jobs (perhaps none: no room, or nothing claimable).
    Claimed(Vec<Claimed>),
    /// Another claim under the limit came first: list and count again.
    Contended,
}

impl ZooKeeperBoard {
    /// The settings, the gate's version and the listing (see the module
    /// docs).
    pub(crate) async fn claim_view(&self, paths: &QueuePaths) -> Result<ClaimView> {
        let what = format!("cannot list queue {}", paths.queue);
        let (settings, gate, (children, delayed, suspects)) = self
            .read(&what, |client| {
                let p = paths.clone();
                async move {
                    // Sent now, in this order; the server answers in order.
                    let settings = client.get_data(&p.settings);
                    let gate = client.check_stat(&p.claims);
                    let jobs = client.get_children(&p.jobs);
                    let delayed = client.list_children(&p.delayed);
                    let suspects = client.list_children(&p.suspects);
                    let (settings, gate, jobs, delayed, suspects) =
                        futures_util::join!(settings, gate, jobs, delayed, suspects);
                    let listed = (found(jobs)?, found(delayed)?, found(suspects)?);
                    Ok((found(settings)?, gate?, listed))
                }
            })
            .await?
            .map_err(|e| self.session().error(&what, &e))?;
        let (children, jobs_made) = children.map_or((Vec::new(), None), |(c, stat)| (c, Some(stat.czxid)));
        Ok(ClaimView {
            settings: settings.map_or_else(Stored::default, |(data, _)| Stored::parse(&data, &paths.queue)),
            gate: gate.map(|stat| stat.version),
            snap: Snapshot {
                suspects: suspects.unwrap_or_default().into_iter().collect(),
                jobs_made,
                ..Snapshot::from_listing(children, delayed.unwrap_or_default())
            },
        })
    }

    /// Makes the queue's claim gate when it is missing.
    pub(crate) async fn ensure_claim_gate(&self, paths: &QueuePaths) -> Result<()> {
        self.ensure_queue(paths).await?;
        let what = format!("cannot make the claim gate of queue {}", paths.queue);
        let persistent = &self.session().access().persistent();
        self.read(&what, |client| async move {
            client.mkdir(&paths.claims, persistent).await
        })
        .await?
        .map_err(|e| self.session().error(&what, &e))
    }

    /// Claims up to `count` of `candidates` (in order), one transaction
    /// after another, each setting the gate at the version `view` read.
    pub(crate) async fn claim_gated(
        &self,
        paths: &QueuePaths,
        candidates: &[Arc<Known>],
        claimer: &Claimer<'_>,
        count: usize,
        gate: Option<i32>,
    ) -> Result<Gated> {
        let mut gate = match gate {
            // ZooKeeper reads an expected version of -1 as "any": move the
            // gate past it (it wraps there after 2^32 limited claims).
            Some(-1) => return self.step_gate(paths).await.map(|_| Gated::Contended),
            Some(version) => Gate {
                path: &paths.claims,
                version,
            },
            None => return self.ensure_claim_gate(paths).await.map(|_| Gated::Contended),
        };
        let mut claimed = Vec::new();
        for k in candidates {
            if claimed.len() >= count || gate.version == -1 {
                break;
            }
            let attempt = self.try_claim(paths, k, claimer, Some(&gate)).await;
            match self.noted(paths, k, attempt, &mut claimed) {
                Ok(Noted::Contended) if claimed.is_empty() => return Ok(Gated::Contended),
                Ok(Noted::Contended) => break,
                Ok(Noted::Took) => gate.version = gate.version.wrapping_add(1),
                Ok(Noted::Passed) => {}
                Err(e) if claimed.is_empty() => return Err(e),
                Err(e) => {
                    // Keep what we hold; the next claim tries again.
                    tracing::warn!(queue = %paths.queue, error = %e, "claim stopped early");
                    break;
                }
            }
        }
        Ok(Gated::Claimed(claimed))
    }

    /// Sets the gate once, whatever its version.
    async fn step_gate(&self, paths: &QueuePaths) -> Result<()> {
        let what = format!("cannot move the claim gate of queue {}", paths.queue);
        self.read(&what, |client| async move {
            client.set_data(&paths.claims, &[], None).await
        })
        .await?
        .map(drop)
        .map_err(|e| self.session().error(&what, &e))
    }
}

/// `None` for a missing znode.
fn found<T>(read: std::result::Result<T, zk::Error>) -> std::result::Result<Option<T>, zk::Error> {
    match read {
        Ok(t) => Ok(Some(t)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The room a limit of `limit` leaves when `held` jobs are held and
/// `freed` of those were just taken back.
pub(crate) fn room(limit: u32, held: usize, freed: usize) -> usize {
    (limit as usize).saturating_sub(held.saturating_sub(freed))
}

#[cfg(test)]
mod tests {
    use super::room;

    #[test]
    fn room_is_the_limit_less_what_is_still_held() {
        assert_eq!(room(3, 1, 0), 2);
        assert_eq!(room(3, 3, 1), 1);
        assert_eq!(
            room(2, 5, 0),
            0,
            "more held than the limit (named claims): no room"
        );
        assert_eq!(room(2, 1, 4), 2);
    }
}
