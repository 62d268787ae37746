//! `RedisBoard`: its options, its connection and the board contract on
//! Redis, each verb handed to its own file (`post.rs`, `claim.rs`, …).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::board::config::{stored_age, stored_count};
use crate::board::{lease_back, leases_back, Board, ClaimRequest, ReapReport, SettleResult, Woken};
use crate::error::{Error, Result};
use crate::job::{
    Abandon, Claimed, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page, DEFAULT_MAX_ATTEMPTS,
};
use crate::redis::connect::{connect, Connection, RedisConnection, FUNCTIONS_ENV};
use crate::redis::durability::Durability;
use crate::redis::keys::{QueueKeys, DEFAULT_PREFIX};
use crate::redis::post_group::PostGroups;
use crate::redis::read;
use crate::redis::scripts;
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

/// Options of a Redis board.
///
/// ```
/// use jobworker::redis::RedisOptions;
///
/// // Queue "legacy" is taskflow's default namespace; the others are jw:{Q}.
/// let opts = RedisOptions::new("redis://127.0.0.1:6379/0").namespace("legacy", "taskflow");
/// assert_eq!(opts.namespaces["legacy"], "taskflow");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RedisOptions {
    /// Server URL: `redis://`, `rediss://` or `unix://`, with optional
    /// `user:password@`; or the sentinels of a master,
    /// `redis+sentinel://[user:password@]host:port[,host:port…]/MASTER[/db]`
    /// (`rediss+sentinel://` for TLS); or a cluster's seed nodes,
    /// `redis+cluster://[user:password@]host:port[,host:port…]`
    /// (`rediss+cluster://` for TLS).
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
    /// Acknowledge each call only once this many replicas hold its writes
    /// (`--durability wait:N[:ms]`); none by default.
    pub durability: Option<Durability>,
    /// Run the board's Lua as a Redis Functions library (FCALL) where the
    /// server has Functions (Redis 7, not a cluster); off, or on older
    /// servers, each verb is a script (EVALSHA). On by default unless
    /// `JOBWORKER_REDIS_FUNCTIONS=0`.
    pub functions: bool,
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
            durability: None,
            functions: std::env::var(FUNCTIONS_ENV).map_or(true, |v| v != "0"),
        }
    }

    /// The keys of `queue`: its mapped namespace, or `<prefix>:{queue}`.
    pub fn keys(&self, queue: &str) -> Result<QueueKeys> {
        let namespace = match self.namespaces.get(queue) {
            Some(ns) => ns.clone(),
            None => QueueKeys::default_namespace(&self.prefix, queue)?,
        };
        if self.on_cluster() {
            return QueueKeys::on_cluster(queue, &namespace);
        }
        Ok(QueueKeys::new(queue, &namespace, &self.prefix))
    }

    /// Whether the URL names a Redis Cluster.
    pub fn on_cluster(&self) -> bool {
        crate::redis::cluster::parse(&self.url).is_some()
    }

    /// The hash of live workers (`<prefix>:workers`).
    pub fn workers_key(&self) -> String {
        format!("{}:workers", self.prefix)
    }

    /// Runs the board's Lua as a Functions library where the server has
    /// Functions (`true`, the default), or always as scripts (`false`).
    pub fn functions(mut self, on: bool) -> Self {
        self.functions = on;
        self
    }

    /// Stores `queue` under `namespace` instead of `<prefix>:{queue}`.
    pub fn namespace(mut self, queue: impl Into<String>, namespace: impl Into<String>) -> Self {
        self.namespaces.insert(queue.into(), namespace.into());
        self
    }
}

/// Queues whose keys a board keeps built; past that it starts over (a
/// program that posts to ever new queue names).
const KEY_CACHE_QUEUES: usize = 1024;

/// A job board on Redis, wire-compatible with taskflow's `RedisJobBoard`.
/// Cheap to clone; clones share the connection.
///
/// ```
/// # use jobworker::embedded::{RedisServer, ServerOptions};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// # let server = RedisServer::start(ServerOptions::default())?;
/// # let url = server.url();
/// use jobworker::redis::RedisBoard;
/// use jobworker::{Board, NewJob};
///
/// let board = RedisBoard::connect(&url).await?;
/// let ids = board.post_many("emails", &[NewJob::new("a"), NewJob::new("b")]).await?;
/// assert_eq!(ids.len(), 2);
/// assert_eq!(board.job_count("emails").await?, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisBoard {
    pub(crate) conn: Connection,
    pub(super) opts: Arc<RedisOptions>,
    waiter: Arc<tokio::sync::Mutex<Option<Waiter>>>,
    pub(super) scan_cursors: Arc<Mutex<HashMap<String, u64>>>,
    pub(crate) known_queues: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The keys of the queues used so far (building them is a score of
    /// formatted strings, on every call).
    key_cache: Arc<Mutex<HashMap<String, Arc<QueueKeys>>>>,
    /// Concurrent posts waiting to share a call.
    pub(super) posts: Arc<PostGroups>,
}

impl std::fmt::Debug for RedisBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBoard")
            .field("url", &crate::redis::connect::redact(&self.conn.url))
            .finish()
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
        crate::redis::namespaces::check(&opts)?;
        if opts.on_cluster() && opts.prefix.contains(['{', '}']) {
            return Err(Error::invalid(format!(
                "prefix {:?} has braces: on a redis cluster they would make every queue's hash tag the same",
                opts.prefix
            )));
        }
        let mut conn = connect(&opts.url, opts.durability).await?;
        conn.functions &= opts.functions;
        scripts::prepare(&mut conn).await?;
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
            key_cache: Arc::default(),
            posts: Arc::default(),
        })
    }

    /// The options this board runs with.
    pub fn options(&self) -> &RedisOptions {
        &self.opts
    }

    /// The keys of `queue`, built once per queue and board.
    pub fn keys(&self, queue: &str) -> Result<Arc<QueueKeys>> {
        let mut cache = self.key_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(keys) = cache.get(queue) {
            return Ok(keys.clone());
        }
        let keys = Arc::new(self.opts.keys(queue)?);
        if cache.len() >= KEY_CACHE_QUEUES {
            cache.clear();
        }
        cache.insert(queue.to_owned(), keys.clone());
        Ok(keys)
    }

    /// The keys of each of `queues`.
    fn keys_of(&self, queues: &[&str]) -> Result<Vec<Arc<QueueKeys>>> {
        queues.iter().map(|q| self.keys(q)).collect()
    }

    /// Runs `call` on the kept pub/sub waiter, opened on first use; a
    /// failed call drops it, so the next one opens a new connection.
    async fn with_waiter<T>(&self, call: impl AsyncFnOnce(&mut Waiter) -> Result<T>) -> Result<T> {
        let mut waiter = self.waiter.lock().await;
        let w = match waiter.as_mut() {
            Some(w) => w,
            None => waiter.insert(Waiter::open(&self.conn).await?),
        };
        let result = call(w).await;
        if result.is_err() {
            *waiter = None;
        }
        result
    }

    /// A command connection (reconnecting), for tests and tools.
    pub fn connection(&self) -> RedisConnection {
        self.conn.link.clone()
    }

    /// Logs a failed side task of a claim or consume; the jobs it took or
    /// settled count more (the task is retried by the queue's maintenance).
    pub(super) fn settle(&self, keys: &QueueKeys, what: &str, result: Result<()>) {
        if let Err(e) = result {
            tracing::warn!(queue = %keys.queue, error = %e, "{what} failed; maintenance retries");
        }
    }
}

impl Board for RedisBoard {
    async fn post(&self, queue: &str, job: NewJob) -> Result<JobId> {
        RedisBoard::post(self, queue, job).await
    }

    /// `post.lua` calls of 100 jobs, each sent as soon as it is prepared
    /// on a plain connection, else in one pipeline (see the inherent
    /// [`RedisBoard::post_many`]).
    async fn post_many(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Result<JobId>>> {
        RedisBoard::post_many(self, queue, jobs).await
    }

    async fn claim_with(&self, request: &ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        RedisBoard::claim_with(self, request).await
    }

    async fn claim_job(
        &self,
        queue: &str,
        job: &JobId,
        who: &str,
        expiry: Option<Duration>,
    ) -> Result<Claimed> {
        RedisBoard::claim_job(self, queue, job, who, expiry).await
    }

    async fn extend(&self, lease: &Lease, expiry: Duration) -> Result<()> {
        RedisBoard::extend(self, lease, expiry).await
    }

    async fn consume(&self, lease: Lease) -> SettleResult {
        let mut results = <Self as Board>::consume_many(self, vec![lease]).await;
        results.pop().expect("one result per lease")
    }

    async fn consume_many(&self, leases: Vec<Lease>) -> Vec<SettleResult> {
        leases_back(RedisBoard::consume_many(self, &leases).await, leases)
    }

    async fn consume_then_claim(
        &self,
        done: Vec<Lease>,
        request: &ClaimRequest<'_>,
    ) -> (Vec<SettleResult>, Result<Vec<Claimed>>) {
        match RedisBoard::consume_then_claim(self, &done, request).await {
            Ok((consumed, claimed)) => (leases_back(Ok(consumed), done), claimed),
            // The round trip failed (not a dropped connection, whose
            // consumes fail one by one): nothing is known to be consumed.
            Err(e) => (leases_back(Err(e.clone()), done), Err(e)),
        }
    }

    async fn abandon(&self, lease: Lease, how: Abandon) -> SettleResult<JobState> {
        lease_back(RedisBoard::abandon(self, &lease, how).await, lease)
    }

    async fn trash(&self, lease: Lease, reason: &str) -> SettleResult {
        lease_back(RedisBoard::trash(self, &lease, reason).await, lease)
    }

    async fn state(&self, queue: &str, job: &JobId) -> Result<JobState> {
        Ok(read::show(self, &*self.keys(queue)?, job.as_str()).await?.state)
    }

    async fn show(&self, queue: &str, job: &JobId) -> Result<JobInfo> {
        read::show(self, &*self.keys(queue)?, job.as_str()).await
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
        RedisBoard::reap(self, queue).await
    }

    async fn wait(&self, queues: &[&str], timeout: Duration) -> Result<bool> {
        Ok(self.wait_as(queues, None, timeout).await?.work)
    }

    async fn wait_as(&self, queues: &[&str], who: Option<&str>, timeout: Duration) -> Result<Woken> {
        let keys = self.keys_of(queues)?;
        self.with_waiter(async |w| w.wait(self, &keys, who, timeout).await)
            .await
    }

    async fn handed_to(&self, queues: &[&str], who: &str, timeout: Duration) -> Result<Vec<Claimed>> {
        let keys = self.keys_of(queues)?;
        self.with_waiter(async |w| w.wait_handoffs(self, &keys, who, timeout).await)
            .await
    }

    async fn withdraw(&self, queues: &[&str], who: &str) -> Result<Vec<Claimed>> {
        let keys = self.keys_of(queues)?;
        if self.waiter.lock().await.is_none() {
            // Never waited: nothing was handed, no channel to read.
            return self.unregister_idle(&keys, who).await.map(|()| Vec::new());
        }
        self.with_waiter(async |w| w.withdraw(self, &keys, who).await)
            .await
    }

    async fn release_unread(&self, queues: &[&str], who: &str) -> Result<usize> {
        self.release_owner(queues, who).await
    }
}
