//! Claiming jobs: the Rust twins of `claim.lua` and `claim_job.lua`, the
//! claim reply reader and the verbs `claim_with` and `claim_job`.

use std::time::Duration;

use redis::ScriptInvocation;

use crate::board::{validate_claim, ClaimRequest};
use crate::codec::{args_of, decode_posting};
use crate::error::{Error, Result};
use crate::job::{Claimed, JobId, Lease, Priority};
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{invocation, millis, run, SCRIPTS};

impl RedisBoard {
    pub(super) fn claim_args<'a>(
        &self,
        who: &'a str,
        expiry: Duration,
        count: usize,
        idle: bool,
    ) -> ClaimArgs<'a> {
        ClaimArgs {
            who,
            expiry,
            count,
            idle,
            history: (self.opts.history_count, self.opts.history_age),
            trash: (self.opts.trash_count, self.opts.trash_age),
        }
    }

    /// Reads a `claim.lua` reply; returns the claimed jobs and whether
    /// more may be claimable now: the listings hold jobs the index lacks,
    /// or recurring runs fell due and were posted. Settles what the claim
    /// found owed: dependency releases for other queues, recurring runs.
    async fn parse_claim(&self, keys: &QueueKeys, who: &str, reply: Reply) -> Result<(Vec<Claimed>, Refill)> {
        let reply = reply.accept(keys, "(claim)", who)?;
        let mut refill = Refill {
            unindexed: reply.int(1)? == 1,
            spawned: false,
        };
        if reply.int(3)? > 0 {
            self.settle(
                keys,
                "releasing dependents",
                self.flush_outbox(&keys.queue).await.map(drop),
            );
        }
        if reply.int(4)? > 0 {
            let spawned = self.spawn_due(&keys.queue).await;
            refill.spawned = spawned.as_ref().is_ok_and(|n| *n > 0);
            self.settle(keys, "spawning recurring jobs", spawned.map(drop));
        }
        let mut claimed = Vec::new();
        for j in 0..reply.int(2)? as usize {
            let at = 5 + j * 7;
            let id = reply.string(at)?;
            let bytes = reply.bytes(at + 1)?;
            let Some(posting) = self.decode_or_quarantine(keys, &id, &bytes).await? else {
                continue;
            };
            claimed.push(Claimed {
                lease: Lease::new(
                    keys.queue.clone(),
                    JobId(id),
                    who.to_owned(),
                    reply.int(at + 2)? as u64,
                ),
                args: args_of(&posting.details),
                details: posting.details,
                book: posting.book,
                name: posting.name,
                attempt: reply.int(at + 3)? as u32 + 1,
                max_attempts: reply.int(at + 4)? as u32,
                priority: Priority(reply.int(at + 5)? as i32),
                suspect: reply.int(at + 6)? == 1,
            });
        }
        Ok((claimed, refill))
    }

    async fn claim_queue(
        &self,
        queue: &str,
        who: &str,
        expiry: Duration,
        count: usize,
        idle: bool,
    ) -> Result<Vec<Claimed>> {
        let keys = self.keys(queue)?;
        let reply = claim(&self.conn, &keys, &self.claim_args(who, expiry, count, idle)).await?;
        self.finish_claim(&keys, who, expiry, count, idle, reply).await
    }

    /// Reads a claim reply; when it came up short because taskflow posted
    /// jobs the index lacks, indexes them and claims once more.
    pub(super) async fn finish_claim(
        &self,
        keys: &QueueKeys,
        who: &str,
        expiry: Duration,
        count: usize,
        idle: bool,
        reply: Reply,
    ) -> Result<Vec<Claimed>> {
        let (mut claimed, refill) = self.parse_claim(keys, who, reply).await?;
        let short = claimed.len() < count;
        if short && (refill.spawned || (refill.unindexed && self.index_foreign(&keys.queue).await? > 0)) {
            let args = self.claim_args(who, expiry, count - claimed.len(), idle && claimed.is_empty());
            let more = claim(&self.conn, keys, &args).await?;
            claimed.extend(self.parse_claim(keys, who, more).await?.0);
        }
        Ok(claimed)
    }

    /// Claims from the request's queues in order (see
    /// [`Board::claim_with`](crate::board::Board::claim_with)).
    pub(super) async fn claim_with(&self, request: &ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        request.validate()?;
        let ClaimRequest {
            queues,
            who,
            expiry,
            count,
            holding,
        } = *request;
        for queue in queues {
            self.register_queue(queue).await?;
        }
        let mut claimed: Vec<Claimed> = Vec::new();
        for queue in queues {
            if claimed.len() >= count || claimed.iter().any(|c| c.suspect) {
                break;
            }
            let idle = holding == 0 && claimed.is_empty();
            let more = self
                .claim_queue(queue, who, expiry, count - claimed.len(), idle)
                .await?;
            claimed.extend(more);
        }
        Ok(claimed)
    }

    /// Claims one given job (see
    /// [`Board::claim_job`](crate::board::Board::claim_job)).
    pub(super) async fn claim_job(
        &self,
        queue: &str,
        job: &JobId,
        who: &str,
        expiry: Option<Duration>,
    ) -> Result<Claimed> {
        validate_claim(who, expiry, 1)?;
        let keys = self.keys(queue)?;
        let bytes: Option<Vec<u8>> = self
            .conn
            .query(redis::cmd("HGET").arg(keys.listings()).arg(job.as_str()))
            .await?;
        let bytes = bytes.ok_or_else(|| Error::not_found(queue, job.as_str()))?;
        let Some(posting) = self.decode_or_quarantine(&keys, job.as_str(), &bytes).await? else {
            return Err(Error::codec(format!(
                "job {job} in queue {queue} has an undecodable posting; it was quarantined"
            )));
        };
        let index = (
            posting.priority.0,
            posting.sequence.unwrap_or(0),
            self.opts.default_max_attempts,
        );
        let reply = claim_job(&self.conn, &keys, job.as_str(), who, expiry, index).await?;
        let reply = reply.accept(&keys, job.as_str(), who)?;
        let posting = decode_posting(&reply.bytes(1)?).map_err(|r| {
            Error::codec(format!(
                "job {job} in queue {queue}: posting changed while claiming: {r}"
            ))
        })?;
        Ok(Claimed {
            lease: Lease::new(
                queue.to_owned(),
                job.clone(),
                who.to_owned(),
                reply.int(2)? as u64,
            ),
            args: args_of(&posting.details),
            details: posting.details,
            book: posting.book,
            name: posting.name,
            attempt: reply.int(3)? as u32 + 1,
            max_attempts: reply.int(4)? as u32,
            priority: Priority(reply.int(5)? as i32),
            suspect: false,
        })
    }
}

/// Why a claim that came up short may find more at once.
struct Refill {
    /// The listings hold jobs the index lacks (posted by taskflow).
    unindexed: bool,
    /// Recurring runs fell due and were just posted.
    spawned: bool,
}

/// Arguments of one claim (see `lua/claim.lua`).
pub(crate) struct ClaimArgs<'a> {
    pub who: &'a str,
    pub expiry: Duration,
    pub count: usize,
    pub idle: bool,
    pub history: (usize, Duration),
    /// The trash's retention: count and age.
    pub trash: (usize, Duration),
}

pub(super) fn claim_invocation<'s>(keys: &QueueKeys, a: &ClaimArgs<'_>) -> ScriptInvocation<'s> {
    let mut inv = invocation(&SCRIPTS.claim, keys);
    inv.arg(a.who)
        .arg(millis(a.expiry))
        .arg(a.count)
        .arg(if a.idle { "1" } else { "0" });
    inv.arg(a.history.0).arg(millis(a.history.1));
    inv.arg(a.trash.0).arg(millis(a.trash.1));
    inv
}

/// Twin of `claim.lua`. Not retried after a dropped connection: a claim
/// whose reply was lost must not take more jobs (its leases expire).
pub(crate) async fn claim(conn: &Connection, keys: &QueueKeys, a: &ClaimArgs<'_>) -> Result<Reply> {
    let value = claim_invocation(keys, a)
        .invoke_async::<redis::Value>(&mut conn.manager.clone())
        .await?;
    Reply::from_value(value)
}

/// Twin of `claim_job.lua`; `index` = (priority, sequence, max attempts)
/// used only for a job that was never indexed; an expiry of `None` holds
/// the claim until it is released.
pub(crate) async fn claim_job(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    expiry: Option<Duration>,
    index: (i32, i64, u32),
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.claim_job, keys);
    inv.arg(id)
        .arg(who)
        .arg(expiry.map_or(0, millis))
        .arg(index.0)
        .arg(index.1)
        .arg(index.2);
    run(conn, &inv).await
}
