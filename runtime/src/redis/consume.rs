//! Consuming jobs: `consume.lua`'s Rust twin, `consume_then_claim.lua`'s
//! (and the pipeline of consumes and a claim for leases of other queues),
//! and the verbs `consume_many` and `consume_then_claim`.

use std::sync::Arc;

use crate::board::{ClaimRequest, MAX_CLAIM_COUNT};
use crate::error::{Error, Result};
use crate::job::{Claimed, Lease};
use crate::redis::board::RedisBoard;
use crate::redis::claim::{claim_args_to, claim_invocation, ClaimArgs};
use crate::redis::connect::{connection_lost, send_again_if_lost, Connection};
use crate::redis::invocation::{is_noscript, Invocation};
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{load_all, run, split_pairs, SCRIPTS};

impl RedisBoard {
    /// Groups leases by queue, in chunks a single `consume.lua` call takes.
    fn consume_batches<'l>(&self, leases: &'l [Lease]) -> Result<Vec<ConsumeBatch<'l>>> {
        let mut queues: Vec<&str> = leases.iter().map(|l| l.queue()).collect();
        queues.sort_unstable();
        queues.dedup();
        let mut batches = Vec::new();
        for queue in queues {
            let keys = self.keys(queue)?;
            let mine: Vec<(usize, &Lease)> = leases
                .iter()
                .enumerate()
                .filter(|(_, l)| l.queue() == queue)
                .collect();
            for chunk in mine.chunks(MAX_CLAIM_COUNT) {
                batches.push((keys.clone(), chunk.to_vec()));
            }
        }
        Ok(batches)
    }

    /// Consumes leases, one `consume.lua` call per batch (see
    /// [`Board::consume_many`](crate::board::Board::consume_many)).
    pub(super) async fn consume_many(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        let batches = self.consume_batches(leases)?;
        let mut replies = Vec::with_capacity(batches.len());
        for (keys, chunk) in &batches {
            let chunk: Vec<&Lease> = chunk.iter().map(|(_, l)| *l).collect();
            replies.push(consume(&self.conn, keys, &chunk, self.opts.history_count).await?);
        }
        Ok(self.consume_results(leases, &batches, replies).await)
    }

    /// Consumes `done` and claims in one round trip (see
    /// [`Board::consume_then_claim`](crate::board::Board::consume_then_claim)):
    /// one call when every lease is of the claim's first queue, else a
    /// pipeline of consume calls and a claim call. When its connection
    /// dropped, the consumes and the claim are sent again, each as itself
    /// ([`lost_round_trip`]); `Err` when the round trip failed otherwise,
    /// so nothing is known to be consumed.
    pub(super) async fn consume_then_claim(
        &self,
        done: &[Lease],
        request: &ClaimRequest<'_>,
    ) -> Result<(Vec<Result<()>>, Result<Vec<Claimed>>)> {
        request.validate()?;
        let Some((first, rest)) = request.queues.split_first() else {
            return Ok((self.consume_many(done).await?, Ok(Vec::new())));
        };
        let batches = self.consume_batches(done)?;
        let keys = self.keys(first)?;
        let pipelined: Vec<(Arc<QueueKeys>, Vec<&Lease>)> = batches
            .iter()
            .map(|(k, chunk)| (k.clone(), chunk.iter().map(|(_, l)| *l).collect()))
            .collect();
        let args = self.claim_args(request, request.count, request.holding == 0);
        let keep = self.opts.history_count;
        let (settled, reply) = match pipelined.as_slice() {
            [(done_keys, leases)] if done_keys.queue == keys.queue => {
                consume_then_claim_one_queue(&self.conn, &keys, leases, keep, &args).await?
            }
            _ => consume_then_claim(&self.conn, &pipelined, keep, &keys, &args).await?,
        };
        let consumed = match settled {
            Ok(replies) => self.consume_results(done, &batches, replies).await,
            Err(lost) => done.iter().map(|_| Err(lost.clone())).collect(),
        };
        let claimed = self.finish_claim(&keys, &args, reply).await;
        let claimed = match claimed {
            Ok(claimed) => self.claim_the_rest(claimed, rest, request).await,
            Err(e) => Err(e),
        };
        Ok((consumed, claimed))
    }

    /// Claims from the `rest` of the queues what the first one did not
    /// give, unless a suspect must run alone.
    async fn claim_the_rest(
        &self,
        mut claimed: Vec<Claimed>,
        rest: &[&str],
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<Claimed>> {
        let count = request.count;
        if claimed.len() < count && !rest.is_empty() && !claimed.iter().any(|c| c.suspect) {
            let rest = ClaimRequest {
                queues: rest,
                count: count - claimed.len(),
                holding: request.holding + claimed.len(),
                // Still a claim from several queues: no hand-off.
                hand_off: None,
                ..*request
            };
            claimed.extend(self.claim_with(&rest).await?);
        }
        Ok(claimed)
    }
}

/// Leases of one queue for one `consume.lua` call, with their positions in
/// the caller's list.
type ConsumeBatch<'l> = (Arc<QueueKeys>, Vec<(usize, &'l Lease)>);

impl RedisBoard {
    /// Reads the consume replies of `batches` into one result per lease,
    /// then resolves dependents the consumed jobs owe other queues. Kept
    /// here rather than left to the outbox maintenance service: a
    /// dependent in another queue is ready as soon as `consume` returns
    /// (callers and tests rely on it, with or without workers); the
    /// service settles only what a crash or a failure left behind.
    async fn consume_results(
        &self,
        leases: &[Lease],
        batches: &[ConsumeBatch<'_>],
        replies: Vec<Consumed>,
    ) -> Vec<Result<()>> {
        for ((keys, _), consumed) in batches.iter().zip(&replies) {
            if consumed.outbox > 0 {
                self.settle(
                    keys,
                    "releasing dependents",
                    self.flush_outbox(&keys.queue).await.map(drop),
                );
            }
        }
        consume_results(leases, batches, replies)
    }
}

/// Reads the consume replies of `batches` into one result per lease.
fn consume_results(
    leases: &[Lease],
    batches: &[ConsumeBatch<'_>],
    replies: Vec<Consumed>,
) -> Vec<Result<()>> {
    let mut results: Vec<Option<Result<()>>> = leases.iter().map(|_| None).collect();
    for ((keys, chunk), consumed) in batches.iter().zip(replies) {
        for ((at, l), reply) in chunk.iter().zip(consumed.replies) {
            results[*at] = Some(reply.accept(keys, l.job().as_str(), l.owner()).map(drop));
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::codec("missing consume reply"))))
        .collect()
}

/// The consumes of a settle-and-take round trip: their replies, or the
/// error of consumes whose connection dropped twice (whether they ran is
/// unknown).
type Settled = Result<Vec<Consumed>>;

/// `consume.lua` for each batch, then `claim.lua`, in one pipeline (one
/// round trip): a worker settles what finished and takes what is next.
/// After a dropped connection each is sent again as itself ([`lost_round_trip`]).
pub(crate) async fn consume_then_claim(
    conn: &Connection,
    batches: &[(Arc<QueueKeys>, Vec<&crate::job::Lease>)],
    keep: usize,
    claim_keys: &QueueKeys,
    claim: &ClaimArgs<'_>,
) -> Result<(Settled, Reply)> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for (keys, leases) in batches {
        consume_invocation(keys, leases, keep, false).add_to(&mut pipe, conn);
    }
    claim_invocation(claim_keys, claim).add_to(&mut pipe, conn);
    let mut results: Vec<redis::RedisResult<redis::Value>> =
        match pipe.query_async(&mut conn.link.clone()).await {
            Ok(results) => results,
            Err(e) if connection_lost(&e) => {
                let consumes: Vec<(&QueueKeys, &[&crate::job::Lease])> =
                    batches.iter().map(|(k, l)| (&**k, l.as_slice())).collect();
                return lost_round_trip(conn, &consumes, keep, (claim_keys, claim), e).await;
            }
            Err(e) => return Err(e.into()),
        };
    // A script the server lost (restart, SCRIPT FLUSH) did not run: load
    // them all and run just that one again. Everything else ran once.
    let claimed = match results.pop() {
        Some(Ok(v)) => v,
        Some(Err(e)) if is_noscript(&e) => {
            load_all(conn).await?;
            claim_invocation(claim_keys, claim).invoke(conn).await?
        }
        Some(Err(e)) => return Err(e.into()),
        None => return Err(crate::error::Error::codec("empty pipeline reply")),
    };
    let mut consumed = Vec::with_capacity(batches.len());
    for (result, (keys, leases)) in results.into_iter().zip(batches) {
        let value = match result {
            Ok(v) => v,
            Err(e) if is_noscript(&e) => {
                load_all(conn).await?;
                return_value(run(conn, &consume_invocation(keys, leases, keep, false)).await?)
            }
            Err(e) => return Err(e.into()),
        };
        consumed.push(consume_reply(&Reply::from_value(value)?, leases.len()));
    }
    Ok((Ok(consumed), Reply::from_value(claimed)?))
}

/// A settle-and-take round trip whose connection dropped: its consumes
/// and its claim are sent again, each as itself, so that what the first
/// sending did counts. A consume that ran is 'ok' (not refused as gone),
/// and the claim gets back what it took (its leases would otherwise
/// expire, each counted as a failed attempt). When a consume fails again,
/// the claim is still sent, and the consumes fail (they may have run).
async fn lost_round_trip(
    conn: &Connection,
    consumes: &[(&QueueKeys, &[&crate::job::Lease])],
    keep: usize,
    (claim_keys, claim): (&QueueKeys, &ClaimArgs<'_>),
    e: redis::RedisError,
) -> Result<(Settled, Reply)> {
    tracing::warn!(error = %e, "redis connection lost while consuming and claiming; sending both again");
    let mut consumed = Ok(Vec::new());
    for &(keys, leases) in consumes {
        match consume_invocation(keys, leases, keep, true).invoke(conn).await {
            Ok(value) => {
                if let Ok(replies) = &mut consumed {
                    replies.push(consume_reply(&Reply::from_value(value)?, leases.len()));
                }
            }
            Err(again) => {
                consumed = Err(Error::unavailable(format!(
                    "redis connection lost while consuming ({e}; sent again: {again}): the job may have been consumed"
                )));
            }
        }
    }
    let claimed = claim_invocation(claim_keys, &claim.again()).invoke(conn).await?;
    Ok((consumed, Reply::from_value(claimed)?))
}

/// `consume_then_claim.lua`: consumes `leases` (all of `keys`' queue) and
/// claims from that queue in one call, which reads the clock, checks for
/// event listeners and counts the outbox once for both. After a dropped
/// connection its consume and its claim are sent again, each as itself
/// ([`lost_round_trip`]).
async fn consume_then_claim_one_queue(
    conn: &Connection,
    keys: &QueueKeys,
    leases: &[&crate::job::Lease],
    keep: usize,
    claim: &ClaimArgs<'_>,
) -> Result<(Settled, Reply)> {
    let mut inv = Invocation::new(&SCRIPTS.consume_then_claim, keys);
    claim_args_to(&mut inv, claim);
    consume_args_to(&mut inv, leases, keep, false);
    let value = match inv.invoke(conn).await {
        Ok(value) => value,
        Err(e) if connection_lost(&e) => {
            return lost_round_trip(conn, &[(keys, leases)], keep, (keys, claim), e).await
        }
        Err(e) => return Err(e.into()),
    };
    let mut both = Reply::from_value(value)?.0.into_iter();
    let (Some(consumed), Some(claimed), None) = (both.next(), both.next(), both.next()) else {
        return Err(Error::codec("consume_then_claim replies with two parts"));
    };
    let consumed = consume_reply(&Reply::from_value(consumed)?, leases.len());
    Ok((Ok(vec![consumed]), Reply::from_value(claimed)?))
}

fn return_value(reply: Reply) -> redis::Value {
    redis::Value::Array(reply.0)
}

/// A `consume.lua` call; `again`: sent again after its reply was lost (a
/// job its first sending consumed is then 'ok').
fn consume_invocation<'k>(
    keys: &'k QueueKeys,
    leases: &[&crate::job::Lease],
    keep: usize,
    again: bool,
) -> Invocation<'k> {
    let mut inv = Invocation::new(&SCRIPTS.consume, keys);
    consume_args_to(&mut inv, leases, keep, again);
    inv
}

/// Appends a consume's own arguments: the history count limit (and
/// whether the call is sent again), then each lease's job, owner and
/// fencing token.
fn consume_args_to(inv: &mut Invocation<'_>, leases: &[&crate::job::Lease], keep: usize, again: bool) {
    if again {
        inv.arg(format!("{keep} again"));
    } else {
        inv.arg(keep);
    }
    for l in leases {
        inv.arg(l.job().as_str()).arg(l.owner()).arg(l.token());
    }
}

/// A `consume.lua` reply: one `[status, owner]` per lease, and the
/// number of dependency releases the queue owes other queues.
pub(crate) struct Consumed {
    pub replies: Vec<Reply>,
    pub outbox: i64,
}

fn consume_reply(reply: &Reply, leases: usize) -> Consumed {
    Consumed {
        replies: split_pairs(reply, leases),
        outbox: reply.int(1 + 2 * leases).unwrap_or(0),
    }
}

/// Twin of `consume.lua`: consumes `leases` (all of `keys`' queue, at most
/// [`MAX_CLAIM_COUNT`](crate::redis::MAX_CLAIM_COUNT)) in one call; `keep`
/// is the history count limit.
pub(crate) async fn consume(
    conn: &Connection,
    keys: &QueueKeys,
    leases: &[&crate::job::Lease],
    keep: usize,
) -> Result<Consumed> {
    let value = send_again_if_lost(
        consume_invocation(keys, leases, keep, false).invoke(conn),
        || async move { consume_invocation(keys, leases, keep, true).invoke(conn).await },
        "consuming",
    )
    .await?;
    Ok(consume_reply(&Reply::from_value(value)?, leases.len()))
}
