//! Claiming jobs: the Rust twins of `claim.lua` and `claim_job.lua`, the
//! claim reply reader and the verbs `claim_with` and `claim_job`.

use std::time::{Duration, Instant};

use crate::board::{validate_claim, ClaimRequest};
use crate::codec::{args_of, decode_posting};
use crate::error::{Error, Result};
use crate::job::{Claimed, JobId, Lease, Priority};
use crate::redis::board::RedisBoard;
use crate::redis::call_number::{call_args_to, next_call};
use crate::redis::connect::{again_window, send_again_if_lost, Connection};
use crate::redis::invocation::Invocation;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{millis, SCRIPTS};

impl RedisBoard {
    /// The arguments of one queue's claim for `request`, taking `count`
    /// jobs; `idle` when the claimer holds none (it may take a suspect).
    pub(super) fn claim_args<'a>(
        &self,
        request: &ClaimRequest<'a>,
        count: usize,
        idle: bool,
    ) -> ClaimArgs<'a> {
        ClaimArgs {
            who: request.who,
            expiry: request.expiry,
            count,
            idle,
            // A claimer of several queues takes them in order: a hand-off
            // from one could pass over work waiting in an earlier one.
            hand_off: request.hand_off.filter(|_| request.queues.len() == 1),
            history: (self.opts.history_count, self.opts.history_age),
            trash: (self.opts.trash_count, self.opts.trash_age),
            call: next_call(),
            again: false,
        }
    }

    /// Reads a `claim.lua` reply: the claimed jobs, and the side work the
    /// reply says is owed (left to the maintenance services).
    async fn parse_claim(&self, keys: &QueueKeys, who: &str, reply: Reply) -> Result<(Vec<Claimed>, Owed)> {
        let reply = reply.accept(keys, "(claim)", who)?;
        let owed = Owed {
            unindexed: reply.int(1)? == 1,
            outbox: reply.int(3)? > 0,
            due: reply.int(4)? > 0,
        };
        let mut claimed = Vec::new();
        for j in 0..reply.int(2)? as usize {
            let at = 5 + j * 7;
            let fields = LeaseFields {
                token: reply.int(at + 2)? as u64,
                attempts: reply.int(at + 3)? as u32,
                max_attempts: reply.int(at + 4)? as u32,
                priority: reply.int(at + 5)? as i32,
                suspect: reply.int(at + 6)? == 1,
            };
            let id = reply.string(at)?;
            claimed.extend(self.claimed(keys, who, id, &reply.bytes(at + 1)?, fields).await?);
        }
        Ok((claimed, owed))
    }

    /// The job a claim (or a hand-off) took, from its posting `bytes` and
    /// lease `fields`; `None` when the posting cannot be decoded (it was
    /// quarantined).
    pub(super) async fn claimed(
        &self,
        keys: &QueueKeys,
        who: &str,
        id: String,
        bytes: &[u8],
        fields: LeaseFields,
    ) -> Result<Option<Claimed>> {
        let Some(posting) = self.decode_or_quarantine(keys, &id, bytes).await? else {
            return Ok(None);
        };
        Ok(Some(Claimed {
            lease: Lease::new(keys.queue.clone(), JobId(id), who.to_owned(), fields.token),
            args: args_of(&posting.details),
            details: posting.details,
            book: posting.book,
            name: posting.name,
            attempt: fields.attempts + 1,
            max_attempts: fields.max_attempts,
            priority: Priority(fields.priority),
            suspect: fields.suspect,
        }))
    }

    async fn claim_queue(&self, queue: &str, args: &ClaimArgs<'_>) -> Result<Vec<Claimed>> {
        let keys = self.keys(queue)?;
        let reply = claim(&self.conn, &keys, args).await?;
        self.finish_claim(&keys, args, reply).await
    }

    /// Reads a claim reply. A claim that got jobs is done: it made one
    /// round trip, and the side work it may have seen owed is the
    /// maintenance services' (`crate::maintenance`).
    ///
    /// The no-worker path: a claim that came up EMPTY while work is owed
    /// does that work itself (indexing taskflow's postings, releasing
    /// dependents owed to other queues, spawning due recurring slots) and,
    /// when that made jobs ready here, claims once more. So a program
    /// that claims with no worker (no maintenance) running still sees
    /// taskflow's postings and its recurring runs; with workers running
    /// the services have usually done it first and the claim stays one
    /// round trip.
    pub(super) async fn finish_claim(
        &self,
        keys: &QueueKeys,
        args: &ClaimArgs<'_>,
        reply: Reply,
    ) -> Result<Vec<Claimed>> {
        let (claimed, owed) = self.parse_claim(keys, args.who, reply).await?;
        if !claimed.is_empty() || !owed.any() {
            return Ok(claimed);
        }
        if !self.settle_owed(keys, &owed).await? {
            return Ok(claimed);
        }
        let more = claim(&self.conn, keys, args).await?;
        Ok(self.parse_claim(keys, args.who, more).await?.0)
    }

    /// Does the side work an empty claim found owed (the no-worker path of
    /// [`finish_claim`](Self::finish_claim)); true when it made jobs ready
    /// in this queue. A failed release or spawn is logged, not returned.
    async fn settle_owed(&self, keys: &QueueKeys, owed: &Owed) -> Result<bool> {
        let mut refill = false;
        if owed.outbox {
            self.settle(
                keys,
                "releasing dependents",
                self.flush_outbox(&keys.queue).await.map(drop),
            );
        }
        if owed.due {
            let spawned = self.spawn_due(&keys.queue).await;
            refill |= spawned.as_ref().is_ok_and(|n| *n > 0);
            self.settle(keys, "spawning recurring jobs", spawned.map(drop));
        }
        if owed.unindexed && self.index_foreign(&keys.queue).await? > 0 {
            refill = true;
        }
        Ok(refill)
    }

    /// Claims from the request's queues in order (see
    /// [`Board::claim_with`](crate::board::Board::claim_with)).
    pub(super) async fn claim_with(&self, request: &ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        request.validate()?;
        for queue in request.queues {
            // A name no queue can have is refused before it is registered.
            self.keys(queue)?;
        }
        for queue in request.queues {
            // A full server refuses the registry's write; the claim goes
            // on (its consumes free memory), and the next one adds it.
            if let Err(e) = self.register_queue(queue).await {
                tracing::debug!(queue, error = %e, "cannot add the queue to the registry");
            }
        }
        let mut claimed: Vec<Claimed> = Vec::new();
        for queue in request.queues {
            if claimed.len() >= request.count || claimed.iter().any(|c| c.suspect) {
                break;
            }
            let idle = request.holding == 0 && claimed.is_empty();
            let args = self.claim_args(request, request.count - claimed.len(), idle);
            claimed.extend(self.claim_queue(queue, &args).await?);
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

/// A claimed job's lease and counts, as a claim reply or hand-off gives them.
pub(super) struct LeaseFields {
    /// The lease's fencing token.
    pub token: u64,
    /// Attempts made before this one.
    pub attempts: u32,
    pub max_attempts: u32,
    pub priority: i32,
    pub suspect: bool,
}

/// Side work a claim reply says is owed.
struct Owed {
    /// The claim came up empty and the listings hold jobs the index lacks
    /// (posted by taskflow).
    unindexed: bool,
    /// The queue owes other queues dependency releases.
    outbox: bool,
    /// Recurring slots are due to spawn.
    due: bool,
}

impl Owed {
    fn any(&self) -> bool {
        self.unindexed || self.outbox || self.due
    }
}

/// Arguments of one claim (see `lua/claim.lua`).
pub(crate) struct ClaimArgs<'a> {
    pub who: &'a str,
    pub expiry: Duration,
    pub count: usize,
    pub idle: bool,
    /// Register for a hand-off this long when the claim comes up empty.
    pub hand_off: Option<Duration>,
    pub history: (usize, Duration),
    /// The trash's retention: count and age.
    pub trash: (usize, Duration),
    /// The call's number ([`next_call`]; [`call_args_to`] says how it is
    /// sent).
    pub call: u32,
    /// The call is sent again because its reply was lost: it returns what
    /// its first sending took, if that sending ran and took jobs.
    pub again: bool,
}

impl ClaimArgs<'_> {
    /// The same call, to send again after its reply was lost.
    pub(crate) fn again(&self) -> Self {
        ClaimArgs { again: true, ..*self }
    }
}

pub(super) fn claim_invocation<'k>(keys: &'k QueueKeys, a: &ClaimArgs<'_>) -> Invocation<'k> {
    let mut inv = Invocation::new(&SCRIPTS.claim, keys);
    claim_args_to(&mut inv, a);
    inv
}

/// Appends a claim's own arguments (`claim.lua`'s ARGV 4-15).
pub(super) fn claim_args_to(inv: &mut Invocation<'_>, a: &ClaimArgs<'_>) {
    inv.arg(a.who)
        .arg(millis(a.expiry))
        .arg(a.count)
        .arg(if a.idle { "1" } else { "0" });
    inv.arg(a.history.0).arg(millis(a.history.1));
    inv.arg(a.trash.0).arg(millis(a.trash.1));
    inv.arg(a.hand_off.map_or(0, millis));
    inv.arg(crate::redis::handoff::clock_ms());
    call_args_to(inv, a.call, a.again);
}

/// Twin of `claim.lua`. A call whose connection dropped is sent once more
/// as itself ([`ClaimArgs::again`]): it gets back the jobs its first
/// sending took, or claims when that sending took none or never ran (a
/// lost reply used to leave its leases to expire, each counted as a
/// failed attempt).
pub(crate) async fn claim(conn: &Connection, keys: &QueueKeys, a: &ClaimArgs<'_>) -> Result<Reply> {
    let value = send_again_if_lost(
        claim_invocation(keys, a).invoke(conn),
        || async move { claim_invocation(keys, &a.again()).invoke(conn).await },
        "claiming",
    )
    .await?;
    Reply::from_value(value)
}

/// Twin of `claim_job.lua`; `index` = (priority, sequence, max attempts)
/// used only for a job that was never indexed; an expiry of `None` holds
/// the claim until it is released. A call whose connection dropped is
/// sent once more saying since when: the job claimed by `who` in that
/// time is the first sending's claim, not one "already claimed".
pub(crate) async fn claim_job(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    expiry: Option<Duration>,
    index: (i32, i64, u32),
) -> Result<Reply> {
    let call = |again: Duration| {
        let mut inv = Invocation::new(&SCRIPTS.claim_job, keys);
        inv.arg(id)
            .arg(who)
            .arg(expiry.map_or(0, millis))
            .arg(index.0)
            .arg(index.1)
            .arg(index.2)
            .arg(millis(again));
        inv
    };
    let first = Instant::now();
    let value = send_again_if_lost(
        call(Duration::ZERO).invoke(conn),
        || async move { call(again_window(first)).invoke(conn).await },
        "claiming a named job",
    )
    .await?;
    Reply::from_value(value)
}
