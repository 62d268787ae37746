//! `RedisBoard`: the board contract on Redis.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::board::{validate_claim, Board, ReapReport, MAX_CLAIM_COUNT};
use crate::codec::args_of;
use crate::codec::details_of;
use crate::codec::{decode_posting, posting_parts, Posting};
use crate::error::{Error, ErrorKind, Result};
use crate::job::{
    Abandon, Claimed, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page, Priority,
    DEFAULT_MAX_ATTEMPTS,
};
use crate::redis::connect::{connect, Connection};
use crate::redis::keys::{QueueKeys, DEFAULT_PREFIX};
use crate::redis::read;
use crate::redis::reply::Reply;
use crate::redis::scripts::{self, AbandonMode, ClaimArgs, Consumed, PostArgs};
use crate::redis::wait::Waiter;

/// Completed jobs kept in a queue's history by default.
pub const DEFAULT_HISTORY_COUNT: usize = 50_000;
/// How long completed jobs are kept by default.
pub const DEFAULT_HISTORY_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Default count of trashed jobs kept per queue (Sidekiq's dead set keeps
/// 10,000).
pub const DEFAULT_TRASH_COUNT: usize = 10_000;
/// Default time trashed jobs are kept (Sidekiq's dead set: six months).
pub const DEFAULT_TRASH_AGE: Duration = Duration::from_secs(180 * 24 * 3600);
/// Listing entries examined per call when looking for jobs posted by
/// taskflow that are not indexed yet.
const INDEX_SCAN_BUDGET: usize = 2000;

/// Options of a Redis board.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisOptions {
    /// Server URL: `redis://`, `rediss://` or `unix://`, with optional
    /// `user:password@`.
    pub url: String,
    /// Prefix of default namespaces: queue `Q` is `<prefix>:{Q}`.
    pub prefix: String,
    /// Queues stored under another namespace, e.g. `"legacy" → "taskflow"`
    /// to share taskflow's default board.
    pub namespaces: HashMap<String, String>,
    /// Completed jobs kept per queue (0 keeps none).
    pub history_count: usize,
    /// How long completed jobs are kept.
    pub history_age: Duration,
    /// Trashed jobs (the dead letter) kept per queue; the oldest go first.
    pub trash_count: usize,
    /// How long trashed jobs are kept.
    pub trash_age: Duration,
    /// Tries allowed for jobs posted by taskflow (which has no such field).
    pub default_max_attempts: u32,
}

impl RedisOptions {
    /// Defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        RedisOptions {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            namespaces: HashMap::new(),
            history_count: DEFAULT_HISTORY_COUNT,
            history_age: DEFAULT_HISTORY_AGE,
            trash_count: DEFAULT_TRASH_COUNT,
            trash_age: DEFAULT_TRASH_AGE,
            default_max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// The keys of `queue`: its mapped namespace, or `<prefix>:{queue}`.
    pub fn keys(&self, queue: &str) -> Result<QueueKeys> {
        let namespace = match self.namespaces.get(queue) {
            Some(ns) => ns.clone(),
            None => QueueKeys::default_namespace(&self.prefix, queue)?,
        };
        Ok(QueueKeys::new(queue, &namespace, &self.prefix))
    }

    /// The hash of live workers (`<prefix>:workers`).
    pub fn workers_key(&self) -> String {
        format!("{}:workers", self.prefix)
    }

    /// Stores `queue` under `namespace` instead of `<prefix>:{queue}`.
    pub fn namespace(mut self, queue: impl Into<String>, namespace: impl Into<String>) -> Self {
        self.namespaces.insert(queue.into(), namespace.into());
        self
    }
}

/// A job board on Redis, wire-compatible with taskflow's `RedisJobBoard`.
/// Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct RedisBoard {
    pub(crate) conn: Connection,
    opts: Arc<RedisOptions>,
    waiter: Arc<tokio::sync::Mutex<Option<Waiter>>>,
    scan_cursors: Arc<Mutex<HashMap<String, u64>>>,
    pub(crate) known_queues: Arc<Mutex<std::collections::HashSet<String>>>,
}

impl std::fmt::Debug for RedisBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBoard")
            .field("url", &crate::redis::connect::redact(&self.conn.url))
            .finish()
    }
}

/// A count left at its default takes the stored configuration.
fn stored_count(option: &mut usize, default: usize, stored: Option<usize>) {
    if let (Some(n), true) = (stored, *option == default) {
        *option = n;
    }
}

/// An age left at its default takes the stored configuration (seconds).
fn stored_age(option: &mut Duration, default: Duration, stored: Option<f64>) {
    if let (Some(secs), true) = (stored, *option == default) {
        *option = Duration::try_from_secs_f64(secs).unwrap_or(default);
    }
}

impl RedisBoard {
    /// Connects with default options.
    pub async fn connect(url: &str) -> Result<RedisBoard> {
        Self::with_options(RedisOptions::new(url)).await
    }

    /// Connects, checks the server version and loads the scripts. History
    /// and trash limits left at their defaults take the board's stored
    /// configuration (`history-count`, `history-age`, `trash-count`,
    /// `trash-age`; see [`RedisBoard::set_config`]).
    pub async fn with_options(mut opts: RedisOptions) -> Result<RedisBoard> {
        for ns in opts.namespaces.values() {
            if ns.is_empty() {
                return Err(Error::invalid("a queue namespace must not be empty"));
            }
        }
        let conn = connect(&opts.url).await?;
        scripts::load_all(&conn).await?;
        let stored: (Option<usize>, Option<f64>, Option<usize>, Option<f64>) = conn
            .query(
                redis::cmd("HMGET")
                    .arg(format!("{}:config", opts.prefix))
                    .arg(&["history-count", "history-age", "trash-count", "trash-age"][..]),
            )
            .await?;
        let (history_count, history_age, trash_count, trash_age) = stored;
        stored_count(&mut opts.history_count, DEFAULT_HISTORY_COUNT, history_count);
        stored_age(&mut opts.history_age, DEFAULT_HISTORY_AGE, history_age);
        stored_count(&mut opts.trash_count, DEFAULT_TRASH_COUNT, trash_count);
        stored_age(&mut opts.trash_age, DEFAULT_TRASH_AGE, trash_age);
        Ok(RedisBoard {
            conn,
            opts: Arc::new(opts),
            waiter: Arc::default(),
            scan_cursors: Arc::default(),
            known_queues: Arc::default(),
        })
    }

    /// The options this board runs with.
    pub fn options(&self) -> &RedisOptions {
        &self.opts
    }

    /// The keys of `queue`.
    pub fn keys(&self, queue: &str) -> Result<QueueKeys> {
        self.opts.keys(queue)
    }

    /// A command connection (reconnecting), for tests and tools.
    pub fn connection(&self) -> redis::aio::ConnectionManager {
        self.conn.manager.clone()
    }

    /// Decodes a claimed posting, or quarantines it when it cannot be
    /// decoded (then `None`).
    async fn decode_or_quarantine(
        &self,
        keys: &QueueKeys,
        id: &str,
        bytes: &[u8],
    ) -> Result<Option<Posting>> {
        match decode_posting(bytes) {
            Ok(p) => Ok(Some(p)),
            Err(reason) => {
                tracing::warn!(job = id, queue = %keys.queue, %reason, "quarantining undecodable posting");
                scripts::quarantine(&self.conn, keys, id.as_bytes(), bytes, &reason).await?;
                Ok(None)
            }
        }
    }

    /// Indexes jobs in the listings that jobworker has not seen (posted by
    /// taskflow), quarantining postings that cannot be decoded. Scans at
    /// most `INDEX_SCAN_BUDGET` entries, resuming where the last call
    /// stopped; returns how many jobs it indexed.
    pub async fn index_foreign(&self, queue: &str) -> Result<usize> {
        let keys = self.keys(queue)?;
        let mut cursor = self
            .scan_cursors
            .lock()
            .map(|c| c.get(queue).copied().unwrap_or(0))
            .unwrap_or(0);
        let mut seen = 0;
        let mut indexed = 0;
        loop {
            let mut scan = redis::cmd("HSCAN");
            scan.arg(keys.listings()).arg(cursor).arg("COUNT").arg(500);
            let (next, flat): (u64, Vec<Vec<u8>>) = self.conn.query(&scan).await?;
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
                .chunks_exact(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect();
            seen += pairs.len();
            indexed += self.index_batch(&keys, &pairs).await?;
            cursor = next;
            if cursor == 0 || seen >= INDEX_SCAN_BUDGET {
                break;
            }
        }
        if let Ok(mut c) = self.scan_cursors.lock() {
            c.insert(queue.to_owned(), cursor);
        }
        Ok(indexed)
    }

    async fn index_batch(&self, keys: &QueueKeys, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<usize> {
        if pairs.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for (field, _) in pairs {
            pipe.exists(keys.job(&String::from_utf8_lossy(field)));
        }
        let exists: Vec<bool> = self.conn.query_pipe(&pipe).await?;
        let mut fresh = Vec::new();
        for ((field, bytes), known) in pairs.iter().zip(exists) {
            if known {
                continue;
            }
            let reason = match String::from_utf8(field.clone()) {
                Err(_) => Err("hash field is not utf-8".to_owned()),
                Ok(id) => decode_posting(bytes).map(|p| (id, p)),
            };
            match reason {
                Ok((id, p)) => fresh.push((id, p.priority.0, p.sequence.unwrap_or(0))),
                Err(reason) => {
                    tracing::warn!(queue = %keys.queue, field = %String::from_utf8_lossy(field), %reason, "quarantining undecodable posting");
                    scripts::quarantine(&self.conn, keys, field, bytes, &reason).await?;
                }
            }
        }
        if fresh.is_empty() {
            return Ok(0);
        }
        let reply = scripts::index(&self.conn, keys, self.opts.default_max_attempts, &fresh).await?;
        Ok(reply.int(1)? as usize)
    }

    fn claim_args<'a>(&self, who: &'a str, expiry: Duration, count: usize, idle: bool) -> ClaimArgs<'a> {
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
                lease: Lease {
                    queue: keys.queue.clone(),
                    job: JobId(id),
                    owner: who.to_owned(),
                    token: reply.int(at + 2)? as u64,
                },
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
        let reply = scripts::claim(&self.conn, &keys, &self.claim_args(who, expiry, count, idle)).await?;
        self.finish_claim(&keys, who, expiry, count, idle, reply).await
    }

    /// Reads a claim reply; when it came up short because taskflow posted
    /// jobs the index lacks, indexes them and claims once more.
    async fn finish_claim(
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
            let more = scripts::claim(&self.conn, keys, &args).await?;
            claimed.extend(self.parse_claim(keys, who, more).await?.0);
        }
        Ok(claimed)
    }

    /// Logs a failed side task of a claim or consume; the jobs it took or
    /// settled count more (the task is retried by the next claim).
    fn settle(&self, keys: &QueueKeys, what: &str, result: Result<()>) {
        if let Err(e) = result {
            tracing::warn!(queue = %keys.queue, error = %e, "{what} failed; the next claim retries");
        }
    }

    /// Groups leases by queue, in chunks a single `consume.lua` call takes.
    fn consume_batches<'l>(&self, leases: &'l [Lease]) -> Result<Vec<ConsumeBatch<'l>>> {
        let mut queues: Vec<&str> = leases.iter().map(|l| l.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        let mut batches = Vec::new();
        for queue in queues {
            let keys = self.keys(queue)?;
            let mine: Vec<(usize, &Lease)> = leases
                .iter()
                .enumerate()
                .filter(|(_, l)| l.queue == queue)
                .collect();
            for chunk in mine.chunks(MAX_CLAIM_COUNT) {
                batches.push((keys.clone(), chunk.to_vec()));
            }
        }
        Ok(batches)
    }
}

/// Why a claim that came up short may find more at once.
struct Refill {
    /// The listings hold jobs the index lacks (posted by taskflow).
    unindexed: bool,
    /// Recurring runs fell due and were just posted.
    spawned: bool,
}

/// Leases of one queue for one `consume.lua` call, with their positions in
/// the caller's list.
type ConsumeBatch<'l> = (QueueKeys, Vec<(usize, &'l Lease)>);

impl RedisBoard {
    /// Reads the consume replies of `batches` into one result per lease,
    /// then resolves dependents the consumed jobs owe other queues.
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
            results[*at] = Some(reply.accept(keys, l.job.as_str(), &l.owner).map(drop));
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::codec("missing consume reply"))))
        .collect()
}

/// A job made ready for `post.lua`: its id and the posting bytes around
/// the server-side time and sequence.
struct Prepared {
    id: JobId,
    /// The id was generated here (a uuid4): an "exists" reply can only be
    /// this very post, retried after a dropped connection.
    generated: bool,
    parts: crate::codec::PostingParts,
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
            parts,
            delay: job.run_at.delay(),
            extra: post_extra(job, queue)?,
        })
    }

    fn args<'a>(&'a self, job: &'a NewJob) -> PostArgs<'a> {
        PostArgs {
            id: self.id.as_str(),
            name: &job.name,
            head: &self.parts.head,
            tail: &self.parts.tail,
            priority: job.priority.0,
            max_attempts: job.max_attempts,
            delay: self.delay,
            extra: &self.extra,
        }
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
    /// Posts many jobs in one pipeline (one round trip; each post is still
    /// its own atomic script). Returns one result per job, in order.
    pub async fn post_many(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Result<JobId>>> {
        let keys = self.keys(queue)?;
        self.register_queue(queue).await?;
        let mut prepared = Vec::with_capacity(jobs.len());
        let mut results: Vec<Option<Result<JobId>>> = Vec::with_capacity(jobs.len());
        for job in jobs {
            match Prepared::new(job, queue) {
                Ok(p) => {
                    prepared.push((results.len(), p, job));
                    results.push(None);
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        let args: Vec<PostArgs<'_>> = prepared.iter().map(|(_, p, job)| p.args(job)).collect();
        let batches: Vec<&[PostArgs<'_>]> = args.chunks(scripts::POST_BATCH).collect();
        let replies: Vec<Reply> = scripts::post_batches(&self.conn, &keys, &batches)
            .await?
            .into_iter()
            .flatten()
            .collect();
        drop(batches);
        drop(args);
        for ((at, p, job), reply) in prepared.into_iter().zip(replies) {
            let waiting = reply.status() == "waiting";
            let mut result = p.accept(reply, &keys);
            if let (true, Ok(id)) = (waiting, &result) {
                if let Err(e) = self.link_dependencies(&keys, id, job).await {
                    result = Err(e);
                }
            }
            results[at] = Some(result);
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::codec("missing reply"))))
            .collect())
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

impl Board for RedisBoard {
    async fn post(&self, queue: &str, job: NewJob) -> Result<JobId> {
        let keys = self.keys(queue)?;
        let prepared = Prepared::new(&job, queue)?;
        self.register_queue(queue).await?;
        let mut replies = scripts::post(&self.conn, &keys, &[prepared.args(&job)]).await?;
        let reply = replies.remove(0);
        let waiting = reply.status() == "waiting";
        let id = prepared.accept(reply, &keys)?;
        if waiting {
            self.link_dependencies(&keys, &id, &job).await?;
        }
        Ok(id)
    }

    /// One pipeline of `post.lua` calls (see the inherent
    /// [`RedisBoard::post_many`]).
    async fn post_many(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Result<JobId>>> {
        RedisBoard::post_many(self, queue, jobs).await
    }

    async fn claim_holding(
        &self,
        queues: &[&str],
        who: &str,
        expiry: Duration,
        count: usize,
        holding: usize,
    ) -> Result<Vec<Claimed>> {
        validate_claim(who, expiry, count)?;
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

    async fn claim_job(
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
        let reply = scripts::claim_job(&self.conn, &keys, job.as_str(), who, expiry, index).await?;
        let reply = reply.accept(&keys, job.as_str(), who)?;
        let posting = decode_posting(&reply.bytes(1)?).map_err(|r| {
            Error::codec(format!(
                "job {job} in queue {queue}: posting changed while claiming: {r}"
            ))
        })?;
        Ok(Claimed {
            lease: Lease {
                queue: queue.to_owned(),
                job: job.clone(),
                owner: who.to_owned(),
                token: reply.int(2)? as u64,
            },
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

    async fn extend(&self, lease: &Lease, expiry: Duration) -> Result<()> {
        validate_claim(&lease.owner, expiry, 1)?;
        let keys = self.keys(&lease.queue)?;
        let reply = scripts::extend(
            &self.conn,
            &keys,
            lease.job.as_str(),
            &lease.owner,
            lease.token,
            expiry,
        )
        .await?;
        reply.accept(&keys, lease.job.as_str(), &lease.owner).map(drop)
    }

    async fn consume(&self, lease: &Lease) -> Result<()> {
        self.consume_many(std::slice::from_ref(lease)).await?.remove(0)
    }

    async fn consume_many(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        let batches = self.consume_batches(leases)?;
        let mut replies = Vec::with_capacity(batches.len());
        for (keys, chunk) in &batches {
            let chunk: Vec<&Lease> = chunk.iter().map(|(_, l)| *l).collect();
            replies.push(scripts::consume(&self.conn, keys, &chunk, self.opts.history_count).await?);
        }
        Ok(self.consume_results(leases, &batches, replies).await)
    }

    async fn consume_then_claim(
        &self,
        done: &[Lease],
        queues: &[&str],
        who: &str,
        expiry: Duration,
        count: usize,
        holding: usize,
    ) -> Result<(Vec<Result<()>>, Vec<Claimed>)> {
        validate_claim(who, expiry, count)?;
        let Some((first, rest)) = queues.split_first() else {
            return Ok((self.consume_many(done).await?, Vec::new()));
        };
        let batches = self.consume_batches(done)?;
        let keys = self.keys(first)?;
        let pipelined: Vec<(QueueKeys, Vec<&Lease>)> = batches
            .iter()
            .map(|(k, chunk)| (k.clone(), chunk.iter().map(|(_, l)| *l).collect()))
            .collect();
        let args = self.claim_args(who, expiry, count, holding == 0);
        let (replies, reply) =
            scripts::consume_then_claim(&self.conn, &pipelined, self.opts.history_count, &keys, &args)
                .await?;
        let consumed = self.consume_results(done, &batches, replies).await;
        let mut claimed = self
            .finish_claim(&keys, who, expiry, count, holding == 0, reply)
            .await?;
        if claimed.len() < count && !rest.is_empty() && !claimed.iter().any(|c| c.suspect) {
            let held = holding + claimed.len();
            claimed.extend(
                self.claim_holding(rest, who, expiry, count - claimed.len(), held)
                    .await?,
            );
        }
        Ok((consumed, claimed))
    }

    async fn abandon(&self, lease: &Lease, how: Abandon) -> Result<JobState> {
        let keys = self.keys(&lease.queue)?;
        let mode = match &how {
            Abandon::Release => AbandonMode::Release,
            Abandon::Retry { delay, error } => AbandonMode::Retry { delay: *delay, error },
        };
        let reply = scripts::abandon(
            &self.conn,
            &keys,
            lease.job.as_str(),
            &lease.owner,
            lease.token,
            mode,
        )
        .await?;
        let reply = reply.accept(&keys, lease.job.as_str(), &lease.owner)?;
        JobState::parse(&reply.string(1)?)
    }

    async fn trash(&self, lease: &Lease, reason: &str) -> Result<()> {
        let keys = self.keys(&lease.queue)?;
        let reply = scripts::trash(
            &self.conn,
            &keys,
            lease.job.as_str(),
            &lease.owner,
            lease.token,
            reason,
        )
        .await?;
        reply.accept(&keys, lease.job.as_str(), &lease.owner).map(drop)
    }

    async fn state(&self, queue: &str, job: &JobId) -> Result<JobState> {
        Ok(read::show(self, &self.keys(queue)?, job.as_str()).await?.state)
    }

    async fn show(&self, queue: &str, job: &JobId) -> Result<JobInfo> {
        read::show(self, &self.keys(queue)?, job.as_str()).await
    }

    async fn find_owner(&self, queue: &str, job: &JobId) -> Result<Option<String>> {
        let keys = self.keys(queue)?;
        let owner: Option<Vec<u8>> = self
            .conn
            .query(redis::cmd("GET").arg(keys.owned(job.as_str())))
            .await?;
        Ok(owner.map(|o| String::from_utf8_lossy(&o).into_owned()))
    }

    async fn list(&self, queue: &str, filter: ListFilter, page: Page) -> Result<Vec<JobInfo>> {
        let keys = self.keys(queue)?;
        if read::has_unindexed(self, &keys).await? {
            self.index_foreign(queue).await?;
        }
        read::list(self, &keys, filter, page).await
    }

    async fn job_count(&self, queue: &str) -> Result<usize> {
        let keys = self.keys(queue)?;
        let n: usize = self.conn.query(redis::cmd("HLEN").arg(keys.listings())).await?;
        Ok(n)
    }

    async fn reap(&self, queue: &str) -> Result<ReapReport> {
        let keys = self.keys(queue)?;
        let reply: Reply = scripts::reap(&self.conn, &keys).await?;
        let indexed = if read::has_unindexed(self, &keys).await? {
            self.index_foreign(queue).await?
        } else {
            0
        };
        Ok(ReapReport {
            promoted: reply.int(1)? as usize,
            stalled: reply.int(2)? as usize,
            indexed,
        })
    }

    async fn wait(&self, queues: &[&str], timeout: Duration) -> Result<bool> {
        let keys = queues.iter().map(|q| self.keys(q)).collect::<Result<Vec<_>>>()?;
        let mut waiter = self.waiter.lock().await;
        let w = match waiter.as_mut() {
            Some(w) => w,
            None => waiter.insert(Waiter::open(&self.conn).await?),
        };
        let result = w.wait(self, &keys, timeout).await;
        if result.is_err() {
            *waiter = None;
        }
        result
    }
}
