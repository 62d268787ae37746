//! Posting jobs: `post.lua`'s Rust twin, the verb `post`, and the jobs
//! made ready for its calls (`post_many` is in `post_many.rs`).

use std::time::{Duration, Instant};

use crate::codec::{details_of, posting_parts};
use crate::error::{Error, ErrorKind, Result};
use crate::job::{JobId, NewJob};
use crate::redis::board::RedisBoard;
use crate::redis::connect::{again_window, send_again_if_lost, Connection};
use crate::redis::invocation::Invocation;
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
    pub(crate) fn new(job: &NewJob, queue: &str) -> Result<Prepared> {
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

    /// The job's id.
    pub(crate) fn id(&self) -> &JobId {
        &self.id
    }

    /// About the bytes this job adds to a call.
    pub(crate) fn size(&self) -> usize {
        self.id.as_str().len()
            + self.name.len()
            + self.parts.head.len()
            + self.parts.tail.len()
            + self.extra.len()
    }

    pub(crate) fn accept(self, reply: Reply, keys: &QueueKeys) -> Result<JobId> {
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
        crate::board::check_new_queue(queue)?;
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
    let value = send_again_if_lost(
        post_invocation(keys, jobs, None).invoke(conn),
        || async move {
            post_invocation(keys, jobs, Some(again_window(first)))
                .invoke(conn)
                .await
        },
        "posting",
    )
    .await?;
    Ok(split_pairs(&Reply::from_value(value)?, jobs.len()))
}

/// Jobs per `post.lua` call in a bulk post.
pub(crate) const POST_BATCH: usize = 100;

/// A `post.lua` call of `jobs`. When they all share the six values after
/// their postings (a bulk post of alike jobs), those go once ('shared'):
/// a value sent costs the server more than its bytes (parsing, a string
/// object, a Lua string): a job of a bulk post of 1,000 costs the server
/// 0.92× the instructions that way (callgrind, 57,800 against 63,100).
pub(crate) fn post_invocation<'k>(
    keys: &'k QueueKeys,
    jobs: &[&Prepared],
    again: Option<Duration>,
) -> Invocation<'k> {
    let mut inv = Invocation::new(&SCRIPTS.post, keys);
    inv.arg(&keys.notify);
    // On a cluster, whose client sends a call whose connection dropped
    // again by itself, as it was, a first sending already says 'again'
    // with no window: a generated id's job found is the first sending's.
    let again = again.or(keys.sharded.then_some(Duration::ZERO));
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
    fn a_first_sending_to_a_cluster_says_again_with_no_window() {
        let keys = QueueKeys::on_cluster("q", "jw:{q}").unwrap();
        let prepared = Prepared::new(&NewJob::new("a"), "q").unwrap();
        let inv = post_invocation(&keys, &[&prepared], None);
        assert_eq!(inv.args()[4], b"each again 0");
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
