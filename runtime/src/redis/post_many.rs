//! Bulk posts: `post_many`, [`POST_BATCH`] jobs per `post.lua` call,
//! streamed on a plain connection (the server runs one call while the
//! client prepares the next) or in one pipeline behind sentinels, on a
//! cluster or with a durability; and how a bulk goes on after its
//! connection dropped midway.

use std::time::Instant;

use futures_util::stream::{FuturesOrdered, StreamExt};
use futures_util::FutureExt;

use crate::error::{Error, Result};
use crate::job::{JobId, NewJob};
use crate::redis::board::RedisBoard;
use crate::redis::connect::again_window;
use crate::redis::connect::{connection_lost, Connection};
use crate::redis::invocation::{is_noscript, Invocation};
use crate::redis::keys::QueueKeys;
use crate::redis::post::{post_invocation, Prepared, POST_BATCH};
use crate::redis::reply::Reply;
use crate::redis::scripts::split_pairs;

/// How many times a bulk post goes on after its connection dropped.
const RESUMES: usize = 3;

/// A bulk post's batch (its jobs, with their places in the bulk) and the
/// server's answer.
type Answered = (Vec<(usize, Prepared)>, redis::RedisResult<redis::Value>);

/// One result per job of a bulk post, filled as the answers come.
type Results = Vec<Option<Result<JobId>>>;

impl RedisBoard {
    /// Posts many jobs, 100 per call (each call is its own atomic script).
    /// On a plain connection to one server each call is sent as soon as
    /// its jobs are prepared, so the server runs one while the client
    /// prepares the next; otherwise (sentinels, a cluster, a durability)
    /// all go in one pipeline. Returns one result per job, in order.
    ///
    /// When the connection drops, the calls that got no answer are sent
    /// again as themselves, in one pipeline, once it is back (a job their
    /// first sending posted is not posted twice; see `post.lua`'s
    /// 'again'), and the bulk goes on with the jobs not sent yet, up to
    /// three times. The order of the jobs then follows the calls as
    /// they ran (a call sent just after the drop may run before an
    /// earlier one sent again; a job depending on a job of that earlier
    /// call is then refused as a bad dependency). A call that fails again
    /// fails only its own jobs, whose error names them and says they may
    /// have been posted; the jobs not sent yet are not sent, and say so.
    pub async fn post_many(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Result<JobId>>> {
        let keys = self.keys(queue)?;
        crate::board::check_new_queue(queue)?;
        self.register_queue(queue).await?;
        let started = Instant::now();
        let mut results: Results = (0..jobs.len()).map(|_| None).collect();
        let (mut from, mut gave_up) = (0, false);
        for round in 0..=RESUMES {
            let done = self.send_bulk(&keys, jobs, from, &mut results).await;
            let whole = self.answer_bulk(&keys, jobs, done, started, &mut results).await;
            let Some(next) = results.iter().position(Option::is_none) else {
                break;
            };
            if !whole {
                break;
            }
            if round == RESUMES {
                gave_up = true;
                break;
            }
            from = next;
        }
        let not_sent = || Err(Error::unavailable(not_sent_because(gave_up)));
        Ok(results.into_iter().map(|r| r.unwrap_or_else(not_sent)).collect())
    }

    /// Prepares `jobs` from `from` on (an invalid one's error goes in
    /// `results`) and sends their calls: each as soon as it is prepared on
    /// a connection that keeps their order, else all in one pipeline.
    /// After a call that failed (a dropped connection) no more are sent.
    async fn send_bulk(
        &self,
        keys: &QueueKeys,
        jobs: &[NewJob],
        from: usize,
        results: &mut Results,
    ) -> Vec<Answered> {
        let streamed = self.conn.link.keeps_call_order();
        let mut sent = FuturesOrdered::new();
        let mut done = Vec::new();
        let mut held = Vec::new();
        let mut batch = Vec::with_capacity(POST_BATCH.min(jobs.len() - from));
        for (at, job) in jobs.iter().enumerate().skip(from) {
            match Prepared::new(job, &keys.queue) {
                Ok(p) => batch.push((at, p)),
                Err(e) => results[at] = Some(Err(e)),
            }
            if batch.len() < POST_BATCH && (at + 1 < jobs.len() || batch.is_empty()) {
                continue;
            }
            let full = std::mem::replace(&mut batch, Vec::with_capacity(POST_BATCH));
            if !streamed {
                held.push(full);
                continue;
            }
            sent.push_back(send_batch(&self.conn, keys, full));
            // Polled once, the call is queued on the connection (calls
            // already answered are taken); the yield lets the connection's
            // task write it on a single-threaded runtime.
            let mut failed = false;
            while let Some(Some(a)) = sent.next().now_or_never() {
                failed |= a.1.as_ref().is_err_and(|e| !is_noscript(e));
                done.push(a);
            }
            if failed {
                break;
            }
            tokio::task::yield_now().await;
        }
        while let Some(a) = sent.next().await {
            done.push(a);
        }
        if !held.is_empty() {
            done = send_pipeline(&self.conn, keys, held, None).await;
        }
        done
    }

    /// Reads the answers of a bulk's calls into `results`. A call refused
    /// for want of the Lua (restart, FUNCTION FLUSH) did not run: it runs
    /// again. The calls whose connection dropped are sent again as
    /// themselves, in one pipeline (and once more, after the Lua is loaded,
    /// if the server lost it meanwhile). False when a call failed for good: its
    /// jobs may have been posted (their errors say so), and the bulk stops.
    async fn answer_bulk(
        &self,
        keys: &QueueKeys,
        jobs: &[NewJob],
        done: Vec<Answered>,
        started: Instant,
        results: &mut Results,
    ) -> bool {
        let mut answered = Vec::with_capacity(done.len());
        let mut lost = Vec::new();
        for (batch, answer) in done {
            match answer {
                Err(e) if is_noscript(&e) => {
                    match batch_invocation(keys, &batch, None).invoke(&self.conn).await {
                        Err(e) if connection_lost(&e) => lost.push((batch, e)),
                        value => answered.push((batch, value)),
                    }
                }
                Err(e) if connection_lost(&e) => lost.push((batch, e)),
                other => answered.push((batch, other)),
            }
        }
        if let Some((_, e)) = lost.first() {
            tracing::warn!(error = %e, calls = lost.len(), "redis connection lost during a bulk post; sending its calls again");
            let batches = lost.into_iter().map(|(batch, _)| batch).collect();
            for (batch, answer) in send_pipeline(&self.conn, keys, batches, Some(started)).await {
                let value = match answer {
                    // The server lost the Lua meanwhile: this call did not run.
                    Err(e) if is_noscript(&e) => {
                        let again = batch_invocation(keys, &batch, Some(started));
                        again.invoke(&self.conn).await
                    }
                    other => other,
                };
                answered.push((batch, value));
            }
        }
        let mut whole = true;
        for (batch, value) in answered {
            match value.map_err(Error::from).and_then(Reply::from_value) {
                Ok(reply) => self.accept_batch(keys, jobs, batch, &reply, results).await,
                Err(e) => {
                    whole = false;
                    for (at, p) in batch {
                        results[at] = Some(Err(maybe_posted(p.id(), &e)));
                    }
                }
            }
        }
        whole
    }

    /// Reads one call's reply into its jobs' results; a job waiting for
    /// dependencies in other queues gets them linked.
    async fn accept_batch(
        &self,
        keys: &QueueKeys,
        jobs: &[NewJob],
        batch: Vec<(usize, Prepared)>,
        reply: &Reply,
        results: &mut Results,
    ) {
        let replies = split_pairs(reply, batch.len());
        for ((at, p), reply) in batch.into_iter().zip(replies) {
            let waiting = reply.status() == "waiting";
            let mut result = p.accept(reply, keys);
            if let (true, Ok(id)) = (waiting, &result) {
                if let Err(e) = self.link_dependencies(keys, id, &jobs[at]).await {
                    let message = format!(
                        "job {id} is posted, waiting, but its dependencies may not all be linked: {}",
                        e.message()
                    );
                    result = Err(Error::new(e.kind().clone(), message));
                }
            }
            results[at] = Some(result);
        }
    }
}

/// The error of a job whose call failed and may have run.
fn maybe_posted(id: &JobId, e: &Error) -> Error {
    let message = format!(
        "job {id}: {}; its post may have run: look for the job before posting it again",
        e.message()
    );
    Error::new(e.kind().clone(), message)
}

/// Why a job of a bulk post was not sent: a call before it failed, or
/// (`gave_up`) the connection dropped more than [`RESUMES`] times.
fn not_sent_because(gave_up: bool) -> String {
    if gave_up {
        format!("not posted: the connection dropped more than {RESUMES} times during this bulk post, and this job was not sent")
    } else {
        "not posted: an earlier call of this bulk post failed, and this job was not sent".to_owned()
    }
}

/// The `post.lua` call of a bulk post's batch; with `again`, sent again
/// after the bulk (begun then) lost its connection.
fn batch_invocation<'k>(
    keys: &'k QueueKeys,
    batch: &[(usize, Prepared)],
    again: Option<Instant>,
) -> Invocation<'k> {
    let jobs: Vec<&Prepared> = batch.iter().map(|(_, p)| p).collect();
    post_invocation(keys, &jobs, again.map(again_window))
}

/// One `post.lua` call of `batch`, sent once (see
/// [`RedisBoard::answer_bulk`] for what follows a failure).
async fn send_batch(conn: &Connection, keys: &QueueKeys, batch: Vec<(usize, Prepared)>) -> Answered {
    let answer = batch_invocation(keys, &batch, None).send(conn).await;
    (batch, answer)
}

/// The `post.lua` calls of `batches` in one pipeline (one round trip),
/// each sent once as [`send_batch`] sends it; with `again`, as calls sent
/// again after the bulk (begun then) lost its connection.
async fn send_pipeline(
    conn: &Connection,
    keys: &QueueKeys,
    batches: Vec<Vec<(usize, Prepared)>>,
    again: Option<Instant>,
) -> Vec<Answered> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for batch in &batches {
        batch_invocation(keys, batch, again).add_to(&mut pipe, conn);
    }
    // A pipeline that failed as a whole (a dropped connection) fails
    // each of its calls: any of them may have run.
    let answers: Vec<redis::RedisResult<redis::Value>> = match pipe.query_async(&mut conn.link.clone()).await
    {
        Ok(answers) => answers,
        Err(e) => vec![Err(e); batches.len()],
    };
    batches.into_iter().zip(answers).collect()
}
