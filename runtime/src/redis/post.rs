//! Posting jobs: `post.lua`'s Rust twin and the verbs `post` and
//! `post_many` that prepare jobs for it.

use std::time::{Duration, Instant};

use futures_util::stream::{FuturesOrdered, StreamExt};
use futures_util::FutureExt;

use crate::codec::{details_of, posting_parts};
use crate::error::{Error, ErrorKind, Result};
use crate::job::{JobId, NewJob};
use crate::redis::board::RedisBoard;
use crate::redis::connect::{connection_lost, Connection};
use crate::redis::invocation::{is_noscript, Invocation};
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{millis, split_pairs, SCRIPTS};

/// A job made ready for `post.lua`: its id and the posting bytes around
/// the server-side time and sequence, owned (it may wait for a grouped
/// call, see [`post_group`](crate::redis::post_group)).
pub(crate) struct Prepared {
    id: JobId,
    /// The id was generated here (a uuid4): no other post has it, so the
    /// job cannot have had an earlier life.
    generated: bool,
    name: String,
    parts: crate::codec::PostingParts,
    priority: i32,
    max_attempts: u32,
    /// How long after the post (server clock) it becomes claimable.
    delay: Duration,
    /// Tags, tracking, unique key and dependencies as JSON ('' for none).
    extra: String,
}

impl Prepared {
    fn new(job: &NewJob, queue: &str) -> Result<Prepared> {
        job.validate()?;
        let id = job.id.clone().unwrap_or_else(JobId::random);
        let parts = posting_parts(
            id.as_str(),
            &job.name,
            job.priority,
            &details_of(&job.args),
            job.book.as_ref(),
        );
        Ok(Prepared {
            id,
            generated: job.id.is_none(),
            name: job.name.clone(),
            parts,
            priority: job.priority.0,
            max_attempts: job.max_attempts,
            delay: job.run_at.delay(),
            extra: post_extra(job, queue)?,
        })
    }

    /// Appends its values after the posting: priority, max attempts,
    /// delay, name, extras and whether its id was generated.
    fn values(&self, inv: &mut Invocation<'_>) {
        inv.arg(self.priority)
            .arg(self.max_attempts)
            .arg(millis(self.delay))
            .arg(&self.name)
            .arg(&self.extra)
            .arg(if self.generated { "1" } else { "" });
    }

    /// Whether it has the same [`values`](Self::values) as `other`.
    fn same_values(&self, other: &Prepared) -> bool {
        (self.priority, self.max_attempts, self.delay, self.generated)
            == (other.priority, other.max_attempts, other.delay, other.generated)
            && (&self.name, &self.extra) == (&other.name, &other.extra)
    }

    /// About the bytes this job adds to a call.
    pub(crate) fn size(&self) -> usize {
        self.id.as_str().len()
            + self.name.len()
            + self.parts.head.len()
            + self.parts.tail.len()
            + self.extra.len()
    }

    fn accept(self, reply: Reply, keys: &QueueKeys) -> Result<JobId> {
        match reply.status().as_str() {
            "ready" | "scheduled" | "waiting" => Ok(self.id),
            "duplicate" => Ok(JobId(reply.string(1)?)),
            "bad_dependency" => Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "job {} cannot depend on job {} of queue {}: it is not on the board, or was cancelled",
                    self.id,
                    reply.string(1)?,
                    keys.queue
                ),
            )),
            "again" => Ok(self.id),
            "exists" if self.generated => Ok(self.id),
            "exists" => Err(Error::new(
                ErrorKind::Exists,
                format!("job {} already exists in queue {}", self.id, keys.queue),
            )),
            other => Err(Error::codec(format!(
                "unexpected reply {other:?} posting job {} in queue {}",
                self.id, keys.queue
            ))),
        }
    }
}

impl RedisBoard {
    /// Posts one job (see [`Board::post`](crate::board::Board::post)); posts
    /// made at once from many tasks share calls (see
    /// [`post_group`](crate::redis::post_group)).
    pub(super) async fn post(&self, queue: &str, job: NewJob) -> Result<JobId> {
        let keys = self.keys(queue)?;
        let prepared = Prepared::new(&job, queue)?;
        self.register_queue(queue).await?;
        let (prepared, reply) = self.posts.post(&self.conn, &keys, prepared).await?;
        let waiting = reply.status() == "waiting";
        let id = prepared.accept(reply, &keys)?;
        if waiting {
            self.link_dependencies(&keys, &id, &job).await?;
        }
        Ok(id)
    }

    /// Posts many jobs, 100 per call (each call is its own atomic script).
    /// On a plain connection to one server each call is sent as soon as
    /// its jobs are prepared, so the server runs one while the client
    /// prepares the next; otherwise (sentinels, a cluster, a durability)
    /// all go in one pipeline. Returns one result per job, in order: a
    /// call that failed (a dropped connection, or the pipeline it was in)
    /// fails only its own jobs, whose error names them and says they may
    /// have been posted; on a streamed connection the jobs after it are
    /// not sent, and say so.
    pub async fn post_many(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Result<JobId>>> {
        let keys = self.keys(queue)?;
        self.register_queue(queue).await?;
        let mut results: Vec<Option<Result<JobId>>> = (0..jobs.len()).map(|_| None).collect();
        let done = self.send_bulk(&keys, jobs, &mut results).await;
        let mut answered = Vec::with_capacity(done.len());
        for (batch, answer) in done {
            // A call the server refused for want of the Lua (restart,
            // FUNCTION FLUSH) did not run: it runs again here, in order.
            let value = match answer {
                Err(e) if is_noscript(&e) => batch_invocation(&keys, &batch).invoke(&self.conn).await,
                other => other,
            };
            match value.map_err(Error::from).and_then(Reply::from_value) {
                Ok(reply) => {
                    let replies = split_pairs(&reply, batch.len());
                    answered.push((batch, replies));
                }
                Err(e) => {
                    for (at, p) in batch {
                        let message = format!(
                            "job {}: {}; its post may have run: look for the job before posting it again",
                            p.id,
                            e.message()
                        );
                        results[at] = Some(Err(Error::new(e.kind().clone(), message)));
                    }
                }
            }
        }
        for (batch, replies) in answered {
            for ((at, p), reply) in batch.into_iter().zip(replies) {
                let waiting = reply.status() == "waiting";
                let mut result = p.accept(reply, &keys);
                if let (true, Ok(id)) = (waiting, &result) {
                    if let Err(e) = self.link_dependencies(&keys, id, &jobs[at]).await {
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
        Ok(results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(Error::unavailable(
                        "not posted: an earlier call of this bulk post failed, and this job was not sent",
                    ))
                })
            })
            .collect())
    }

    /// Prepares `jobs` (an invalid one's error goes in `results`) and sends
    /// their calls: each as soon as it is prepared on a connection that
    /// keeps their order, else all in one pipeline. After a call that
    /// failed (a dropped connection) no more are sent.
    async fn send_bulk(
        &self,
        keys: &QueueKeys,
        jobs: &[NewJob],
        results: &mut [Option<Result<JobId>>],
    ) -> Vec<Answered> {
        let streamed = self.conn.link.keeps_call_order();
        let mut sent = FuturesOrdered::new();
        let mut done = Vec::new();
        let mut held = Vec::new();
        let mut batch = Vec::with_capacity(POST_BATCH.min(jobs.len()));
        for (at, job) in jobs.iter().enumerate() {
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
            done = send_pipeline(&self.conn, keys, held).await;
        }
        done
    }
}

/// The JSON `post.lua` reads for a job's tags, tracking, unique key and
/// dependencies (`""` when it has none, the common case).
fn post_extra(job: &NewJob, queue: &str) -> Result<String> {
    if job.tags.is_empty() && job.depends.is_empty() && job.unique.is_none() && !job.track {
        return Ok(String::new());
    }
    let mut extra = serde_json::Map::new();
    if !job.tags.is_empty() {
        extra.insert("tags".into(), serde_json::json!(job.tags));
    }
    if job.track {
        extra.insert("track".into(), true.into());
    }
    if let Some((key, ttl)) = &job.unique {
        extra.insert(
            "unique".into(),
            serde_json::json!({"key": key, "ttl": ttl.as_millis() as u64}),
        );
    }
    if !job.depends.is_empty() {
        let mut refs = Vec::with_capacity(job.depends.len());
        for d in &job.depends {
            let q = d.queue.as_deref().unwrap_or(queue);
            crate::redis::keys::validate_queue(q)?;
            refs.push(format!("{q}\n{}", d.job));
        }
        extra.insert("deps".into(), serde_json::json!(refs));
    }
    Ok(serde_json::Value::Object(extra).to_string())
}

/// Twin of `post.lua`: posts `jobs` (at most [`POST_BATCH`] of one queue)
/// in one call. One reply per job: `[status, sequence]`. A call whose
/// connection dropped is sent once more, saying since when: a job its
/// first sending posted is not posted again, though it may have run and
/// finished meanwhile, nor reported as already there.
pub(crate) async fn post(conn: &Connection, keys: &QueueKeys, jobs: &[&Prepared]) -> Result<Vec<Reply>> {
    let first = Instant::now();
    let value = match post_invocation(keys, jobs, None).invoke(conn).await {
        Ok(value) => value,
        Err(e) if connection_lost(&e) => {
            tracing::warn!(error = %e, "redis connection lost while posting; sending the post again");
            let again = first.elapsed() + AGAIN_MARGIN;
            post_invocation(keys, jobs, Some(again)).invoke(conn).await?
        }
        Err(e) => return Err(e.into()),
    };
    Ok(split_pairs(&Reply::from_value(value)?, jobs.len()))
}

/// Added to the time since a post was first sent when it is sent again:
/// the new connection may take that long (reconnect attempts) before the
/// call runs. A life of the job's id begun within the window is taken as
/// the first sending's (for a given id: anybody's post of that id then).
const AGAIN_MARGIN: Duration = Duration::from_secs(60);

/// Jobs per `post.lua` call in a bulk post.
pub(crate) const POST_BATCH: usize = 100;

/// A `post.lua` call of `jobs`. When they all share the six values after
/// their postings (a bulk post of alike jobs), those go once ('shared'):
/// a value sent costs the server more than its bytes (parsing, a string
/// object, a Lua string): a job of a bulk post of 1,000 costs the server
/// 0.92× the instructions that way (callgrind, 57,800 against 63,100).
fn post_invocation<'k>(keys: &'k QueueKeys, jobs: &[&Prepared], again: Option<Duration>) -> Invocation<'k> {
    let mut inv = Invocation::new(&SCRIPTS.post, keys);
    inv.arg(&keys.notify);
    let alike = jobs.windows(2).all(|w| w[0].same_values(w[1]));
    let shared = jobs.len() > 1 && alike;
    let mode = if shared { "shared" } else { "each" };
    match again {
        None => inv.arg(mode),
        Some(window) => inv.arg(format!("{mode} again {}", millis(window))),
    };
    if shared {
        jobs[0].values(&mut inv);
    }
    for p in jobs {
        inv.arg(p.id.as_str()).arg(&p.parts.head).arg(&p.parts.tail);
        if !shared {
            p.values(&mut inv);
        }
    }
    inv
}

/// A bulk post's batch (its jobs, with their places in the bulk) and the
/// server's answer.
type Answered = (Vec<(usize, Prepared)>, redis::RedisResult<redis::Value>);

/// The `post.lua` call of a bulk post's batch.
fn batch_invocation<'k>(keys: &'k QueueKeys, batch: &[(usize, Prepared)]) -> Invocation<'k> {
    let jobs: Vec<&Prepared> = batch.iter().map(|(_, p)| p).collect();
    post_invocation(keys, &jobs, None)
}

/// One `post.lua` call of `batch`, sent once: after a dropped connection
/// its jobs are reported as maybe posted (see `post_many`), and a call
/// the server refused for want of the Lua is run again by the caller, in
/// order.
async fn send_batch(conn: &Connection, keys: &QueueKeys, batch: Vec<(usize, Prepared)>) -> Answered {
    let answer = batch_invocation(keys, &batch).send(conn).await;
    (batch, answer)
}

/// The `post.lua` calls of `batches` in one pipeline (one round trip),
/// each sent once as [`send_batch`] sends it.
async fn send_pipeline(
    conn: &Connection,
    keys: &QueueKeys,
    batches: Vec<Vec<(usize, Prepared)>>,
) -> Vec<Answered> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for batch in &batches {
        batch_invocation(keys, batch).add_to(&mut pipe, conn);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Priority;

    /// How a call of `jobs` sends them, and how many arguments it has.
    fn layout(jobs: &[NewJob]) -> (String, usize) {
        layout_again(jobs, None)
    }

    /// The same, for a call sent again `again` after its first sending.
    fn layout_again(jobs: &[NewJob], again: Option<Duration>) -> (String, usize) {
        let keys = QueueKeys::new("q", "jw:{q}", "jw");
        let prepared: Vec<Prepared> = jobs.iter().map(|j| Prepared::new(j, "q").unwrap()).collect();
        let refs: Vec<&Prepared> = prepared.iter().collect();
        let inv = post_invocation(&keys, &refs, again);
        let args = inv.args();
        (String::from_utf8(args[4].clone()).unwrap(), args.len())
    }

    #[test]
    fn a_call_sent_again_says_since_when() {
        let again = Some(Duration::from_millis(61_250));
        let one = [NewJob::new("a")];
        assert_eq!(layout_again(&one, again), ("each again 61250".into(), 5 + 9));
        let two = [NewJob::new("a"), NewJob::new("a")];
        assert_eq!(
            layout_again(&two, again),
            ("shared again 61250".into(), 5 + 6 + 2 * 3)
        );
    }

    #[test]
    fn alike_jobs_share_their_values_in_a_call() {
        let high = || NewJob::new("a").priority(Priority::HIGH).tag("t");
        assert_eq!(
            layout(&[high(), high(), high()]),
            ("shared".into(), 5 + 6 + 3 * 3)
        );
        assert_eq!(layout(&[high()]), ("each".into(), 5 + 9), "one job sends its own");
        for other in [
            NewJob::new("b"),
            high().priority(Priority::LOW),
            high().max_attempts(9),
            high().delay(Duration::from_secs(1)),
            high().tag("u"),
            high().id("given"),
        ] {
            assert_eq!(layout(&[high(), other]), ("each".into(), 5 + 2 * 9));
        }
    }
}
