//! The ZooKeeper board (being built: every verb reports "not supported"
//! until it lands).

use std::time::Duration;

use crate::board::{Board, ReapReport};
use crate::error::{Error, Result};
use crate::job::{Abandon, Claimed, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page};

/// Options of a ZooKeeper board.
#[derive(Debug, Clone, PartialEq)]
pub struct ZooKeeperOptions {
    /// `host:port[,host:port…]/root`: the servers and the root path under
    /// which queue `Q` lives at `<root>/<Q>/jobs` (taskflow's `path`).
    pub connect: String,
    /// Session timeout.
    pub session_timeout: Duration,
    /// Tries allowed for jobs posted by taskflow (which has no such field).
    pub default_max_attempts: u32,
}

impl ZooKeeperOptions {
    /// Defaults for `connect`.
    pub fn new(connect: impl Into<String>) -> Self {
        ZooKeeperOptions {
            connect: connect.into(),
            session_timeout: Duration::from_secs(10),
            default_max_attempts: crate::job::DEFAULT_MAX_ATTEMPTS,
        }
    }
}

/// A job board on ZooKeeper, wire-compatible with taskflow's
/// `ZookeeperJobBoard`. Cheap to clone; clones share the session.
#[derive(Debug, Clone)]
pub struct ZooKeeperBoard {
    opts: ZooKeeperOptions,
}

fn unsupported<T>() -> Result<T> {
    Err(Error::unsupported("the ZooKeeper board is not built yet"))
}

impl ZooKeeperBoard {
    /// Connects with `opts`.
    pub async fn connect(opts: ZooKeeperOptions) -> Result<ZooKeeperBoard> {
        let _ = &opts;
        unsupported()
    }

    /// The options this board runs with.
    pub fn options(&self) -> &ZooKeeperOptions {
        &self.opts
    }
}

impl Board for ZooKeeperBoard {
    async fn post(&self, _queue: &str, _job: NewJob) -> Result<JobId> {
        unsupported()
    }
    async fn claim_holding(
        &self,
        _queues: &[&str],
        _who: &str,
        _expiry: Duration,
        _count: usize,
        _holding: usize,
    ) -> Result<Vec<Claimed>> {
        unsupported()
    }
    async fn claim_job(&self, _queue: &str, _job: &JobId, _who: &str, _expiry: Duration) -> Result<Claimed> {
        unsupported()
    }
    async fn extend(&self, _lease: &Lease, _expiry: Duration) -> Result<()> {
        unsupported()
    }
    async fn consume(&self, _lease: &Lease) -> Result<()> {
        unsupported()
    }
    async fn abandon(&self, _lease: &Lease, _how: Abandon) -> Result<JobState> {
        unsupported()
    }
    async fn trash(&self, _lease: &Lease, _reason: &str) -> Result<()> {
        unsupported()
    }
    async fn state(&self, _queue: &str, _job: &JobId) -> Result<JobState> {
        unsupported()
    }
    async fn show(&self, _queue: &str, _job: &JobId) -> Result<JobInfo> {
        unsupported()
    }
    async fn find_owner(&self, _queue: &str, _job: &JobId) -> Result<Option<String>> {
        unsupported()
    }
    async fn list(&self, _queue: &str, _filter: ListFilter, _page: Page) -> Result<Vec<JobInfo>> {
        unsupported()
    }
    async fn job_count(&self, _queue: &str) -> Result<usize> {
        unsupported()
    }
    async fn reap(&self, _queue: &str) -> Result<ReapReport> {
        unsupported()
    }
    async fn wait(&self, _queues: &[&str], _timeout: Duration) -> Result<bool> {
        unsupported()
    }
}
