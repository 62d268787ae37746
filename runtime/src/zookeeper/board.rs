//! `ZooKeeperBoard`: the board contract on ZooKeeper. The verbs live in
//! their own files (`post`, `claim`, `lease`, `recover`, `read`, `wait`,
//! `entities`); this file holds the board, its shared helpers and the
//! [`Board`] impl that dispatches to them.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zookeeper_client as zk;

use crate::board::{
    lease_back, leases_back, validate_claim, Board, ClaimRequest, ReapReport, SettleResult, Woken,
};
use crate::error::{Error, Result};
use crate::job::{Abandon, Claimed, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page};
use crate::zookeeper::cache::Caches;
use crate::zookeeper::config::apply_stored;
use crate::zookeeper::options::ZooKeeperOptions;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::JobRecord;
use crate::zookeeper::session::{is_definite, Session};

/// A job board on ZooKeeper, wire-compatible with taskflow's
/// `ZookeeperJobBoard` (see the [module docs](crate::zookeeper)).
///
/// Cheap to clone; clones share the session, which is closed (releasing
/// every claim still held through it, as taskflow's do) when the last
/// clone is dropped.
#[derive(Clone)]
pub struct ZooKeeperBoard {
    pub(crate) inner: Arc<Inner>,
}

/// The shared state of a board and its clones.
pub(crate) struct Inner {
    pub opts: ZooKeeperOptions,
    /// The root path (`""` or `/a/b`).
    pub root: String,
    pub session: Session,
    pub cache: Caches,
    /// What the last long listing of each queue left for the next claims.
    pub listings: crate::zookeeper::claim::Listings,
    /// Queues whose directories this board has made sure exist.
    pub made: Mutex<HashSet<String>>,
    /// When each queue's history was last pruned, and the jobs this board
    /// consumed since.
    pub pruned: Mutex<std::collections::HashMap<String, crate::zookeeper::retention::Pruned>>,
    /// Whether anyone listens to the events (`events.rs`).
    pub listening: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for ZooKeeperBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperBoard")
            .field("connect", &self.inner.opts.connect)
            .finish()
    }
}

impl ZooKeeperBoard {
    /// Connects with `opts`. The root path is made on demand (with
    /// `world:anyone` ACLs, as kazoo makes it); nothing is written here.
    /// History and trash limits left at their defaults take the board's
    /// stored configuration (`history-count`, `history-age`, `trash-count`,
    /// `trash-age`; see [`ZooKeeperBoard::set_config`]).
    ///
    /// Errors: `is_invalid` for a bad connect string, `is_unavailable` when
    /// no server answers.
    pub async fn connect(opts: ZooKeeperOptions) -> Result<ZooKeeperBoard> {
        opts.validate()?;
        let (hosts, root) = opts.split()?;
        let session =
            Session::connect(&hosts, opts.session_timeout, opts.access()?, opts.tls.clone()).await?;
        let mut board = ZooKeeperBoard {
            inner: Arc::new(Inner {
                opts,
                root,
                session,
                cache: Caches::default(),
                listings: Default::default(),
                made: Mutex::default(),
                pruned: Mutex::default(),
                listening: crate::zookeeper::events::not_listening(),
            }),
        };
        let stored = board.config().await?;
        // Nothing else holds the board yet.
        if let Some(inner) = Arc::get_mut(&mut board.inner) {
            apply_stored(&mut inner.opts, &stored);
        }
        board.watch_listeners();
        Ok(board)
    }

    /// The options this board runs with.
    pub fn options(&self) -> &ZooKeeperOptions {
        &self.inner.opts
    }

    /// The root path under which queues live (`""` for the ZooKeeper root).
    pub fn root(&self) -> &str {
        &self.inner.root
    }

    /// Taskflow's `path` for `queue` (`<root>/<queue>/jobs`): give it to a
    /// Python `ZookeeperJobBoard` to share the queue.
    pub fn jobs_path(&self, queue: &str) -> Result<String> {
        Ok(self.paths(queue)?.jobs)
    }

    /// The id of the current ZooKeeper session (changes when a session
    /// expires and the board connects a new one).
    pub fn session_id(&self) -> i64 {
        self.inner
            .session
            .current()
            .map(|c| c.session_id().0)
            .unwrap_or(0)
    }

    /// Diagnostics: how many postings, uuid index entries and lease
    /// deadlines the board caches, over all queues. Each cache is bounded;
    /// the numbers are for tests and debugging, not a stable interface.
    #[doc(hidden)]
    pub fn cache_sizes(&self) -> (usize, usize, usize) {
        self.inner.cache.sizes()
    }

    /// How many times the board replaced an ended session.
    pub fn sessions_replaced(&self) -> u64 {
        self.inner.session.generation()
    }

    /// How many attempts to replace an ended session failed (for tests of
    /// their pace; not a stable interface).
    #[doc(hidden)]
    pub fn failed_reconnects(&self) -> u64 {
        self.inner.session.failed_reconnects()
    }

    pub(crate) fn session(&self) -> &Session {
        &self.inner.session
    }

    pub(crate) fn paths(&self, queue: &str) -> Result<QueuePaths> {
        QueuePaths::new(&self.inner.root, queue)
    }

    /// A client of a live session; `what` (naming job and queue) prefixes
    /// the error when there is none.
    pub(crate) async fn client(&self, what: &str) -> Result<zk::Client> {
        self.inner
            .session
            .client()
            .await
            .map_err(|e| Error::unavailable(format!("{what}: {e}")))
    }

    /// Now on the server's clock (ms since the epoch).
    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.session.clock.now_ms()
    }

    /// The server's clock, in ms since the epoch, as well as this board
    /// knows it (learnt from the times of the znodes it writes).
    pub async fn server_ms(&self) -> Result<i64> {
        Ok(self.now_ms())
    }

    /// Runs a read, once more on an error that is not a server verdict
    /// (connection lost, session ended); the inner result carries the
    /// server's verdict (e.g. `NoNode`) for the caller to interpret.
    pub(crate) async fn read<T, F, Fut>(&self, what: &str, mut f: F) -> Result<Result<T, zk::Error>>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = Result<T, zk::Error>>,
    {
        let first = f(self.client(what).await?).await;
        match first {
            Err(e) if !is_definite(&e) => {
                tracing::debug!(error = %e, "{what}: retrying once");
                match f(self.client(what).await?).await {
                    Err(e) if !is_definite(&e) => Err(self.session().error(what, &e)),
                    other => Ok(other),
                }
            }
            other => Ok(other),
        }
    }

    /// Makes the queue's directories (once per board and queue).
    pub(crate) async fn ensure_queue(&self, paths: &QueuePaths) -> Result<()> {
        let made = self
            .inner
            .made
            .lock()
            .map(|m| m.contains(&paths.queue))
            .unwrap_or(false);
        if made {
            return Ok(());
        }
        let what = format!("cannot create queue {}", paths.queue);
        let persistent = &self.session().access().persistent();
        for dir in paths.dirs() {
            self.read(&what, |client| async move { client.mkdir(dir, persistent).await })
                .await?
                .map_err(|e| self.session().error(&what, &e))?;
        }
        if let Ok(mut m) = self.inner.made.lock() {
            m.insert(paths.queue.clone());
        }
        Ok(())
    }

    /// Forgets that the queue's directories exist (someone deleted them).
    pub(crate) fn unmade(&self, queue: &str) {
        if let Ok(mut m) = self.inner.made.lock() {
            m.remove(queue);
        }
    }

    /// Makes the queue's directories again.
    pub(crate) async fn remake(&self, paths: &QueuePaths) -> Result<()> {
        self.unmade(&paths.queue);
        self.ensure_queue(paths).await
    }

    /// The record of job `uuid` and its version; `None` when there is none.
    pub(crate) async fn read_record(
        &self,
        paths: &QueuePaths,
        uuid: &str,
    ) -> Result<Option<(JobRecord, i32)>> {
        let what = format!("cannot read job {uuid} of queue {}", paths.queue);
        let path = paths.record(uuid);
        match self
            .read(&what, |client| {
                let path = path.clone();
                async move { client.get_data(&path).await }
            })
            .await?
        {
            Ok((data, stat)) => Ok(JobRecord::from_bytes(&data).map(|r| (r, stat.version))),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(self.session().error(&what, &e)),
        }
    }

    /// The job znode name of job `uuid`: from the cache, the job's record,
    /// or (for jobs posted by taskflow, or a post whose record update was
    /// lost) a scan of the queue's postings. `None` when the queue's jobs
    /// path holds no such job.
    pub(crate) async fn locate(&self, paths: &QueuePaths, uuid: &str) -> Result<Option<String>> {
        if let Some(name) = self.inner.cache.znode_of(&paths.queue, uuid) {
            return Ok(Some(name));
        }
        if let Some((record, _)) = self.read_record(paths, uuid).await? {
            if let Some(name) = record.job {
                self.inner.cache.located(&paths.queue, uuid, &name);
                return Ok(Some(name));
            }
        }
        let (snap, _) = self.snapshot(paths, false).await?;
        self.known(paths, &snap).await?;
        Ok(self.inner.cache.znode_of(&paths.queue, uuid))
    }
}

impl Board for ZooKeeperBoard {
    async fn post(&self, queue: &str, job: NewJob) -> Result<JobId> {
        self.post_job(queue, job).await
    }
    async fn claim_with(&self, request: &ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        request.validate()?;
        let ClaimRequest {
            queues,
            who,
            expiry,
            count,
            holding,
            ..
        } = *request;
        let mut claimed: Vec<Claimed> = Vec::new();
        for queue in queues {
            // A suspect is claimed alone.
            if claimed.len() >= count || claimed.iter().any(|c| c.suspect) {
                break;
            }
            let wanted = (count - claimed.len(), holding + claimed.len());
            match self.claim_queue(queue, who, expiry, wanted).await {
                Ok(more) => claimed.extend(more),
                Err(e) if claimed.is_empty() => return Err(e),
                Err(e) => {
                    // Hand back what the earlier queues gave; the next claim
                    // tries this queue again.
                    tracing::warn!(queue, error = %e, "claim stopped early");
                    break;
                }
            }
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
        self.claim_named(queue, job.as_str(), who, expiry).await
    }
    async fn extend(&self, lease: &Lease, expiry: Duration) -> Result<()> {
        validate_claim(lease.owner(), expiry, 1)?;
        self.extend_lease(lease, expiry).await
    }
    async fn consume(&self, lease: Lease) -> SettleResult {
        lease_back(self.consume_lease(&lease).await, lease)
    }
    /// All at once: the transactions are pipelined on the session.
    async fn consume_many(&self, leases: Vec<Lease>) -> Vec<SettleResult> {
        let results = futures_util::future::join_all(leases.iter().map(|l| self.consume_lease(l))).await;
        leases_back(Ok(results), leases)
    }
    async fn abandon(&self, lease: Lease, how: Abandon) -> SettleResult<JobState> {
        lease_back(self.abandon_lease(&lease, how).await, lease)
    }
    async fn trash(&self, lease: Lease, reason: &str) -> SettleResult {
        lease_back(self.trash_lease(&lease, reason).await, lease)
    }
    async fn state(&self, queue: &str, job: &JobId) -> Result<JobState> {
        Ok(self.show_job(queue, job.as_str()).await?.state)
    }
    async fn show(&self, queue: &str, job: &JobId) -> Result<JobInfo> {
        self.show_job(queue, job.as_str()).await
    }
    async fn find_owner(&self, queue: &str, job: &JobId) -> Result<Option<String>> {
        self.find_owner_of(queue, job.as_str()).await
    }
    async fn list(&self, queue: &str, filter: ListFilter, page: Page) -> Result<Vec<JobInfo>> {
        self.list_jobs(queue, filter, page).await
    }
    async fn job_count(&self, queue: &str) -> Result<usize> {
        self.count_jobs(queue).await
    }
    async fn reap(&self, queue: &str) -> Result<ReapReport> {
        self.reap_queue(queue).await
    }
    async fn wait(&self, queues: &[&str], timeout: Duration) -> Result<bool> {
        Ok(self.wait_for_work(queues, timeout).await?.work)
    }
    async fn wait_as(&self, queues: &[&str], _who: Option<&str>, timeout: Duration) -> Result<Woken> {
        self.wait_for_work(queues, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shareable<T: Board + Clone + Send + Sync + 'static>() {}

    #[test]
    fn the_board_can_be_shared_across_tasks() {
        shareable::<ZooKeeperBoard>();
        shareable::<crate::AnyBoard>();
    }
}
