//! Failure groups of trashed jobs: reading them, and the verbs `retry`
//! and `purge` over `retry.lua` and `purge.lua`, one by one or a group at
//! a time.

use crate::board::FailureGroup;
use crate::error::{Error, Result};
use crate::job::{JobId, Page};
use crate::redis::admin::rev_range;
use crate::redis::board::RedisBoard;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{self, SCRIPTS};

/// Most jobs a retry or purge of a whole group handles per script call.
const GROUP_BATCH: usize = 500;

fn ids_of(jobs: &[JobId]) -> Vec<&str> {
    jobs.iter().map(JobId::as_str).collect()
}

/// One result per job from a `{'ok', status, …}` reply.
fn per_job(reply: &Reply, keys: &QueueKeys, jobs: &[&str]) -> Vec<Result<()>> {
    jobs.iter()
        .enumerate()
        .map(|(k, id)| match reply.string(1 + k).as_deref() {
            Ok("ok") => Ok(()),
            _ => Err(Error::not_found(&keys.queue, id)),
        })
        .collect()
}

impl RedisBoard {
    /// The failure groups of `queue`, largest first.
    pub async fn failed(&self, queue: &str) -> Result<Vec<FailureGroup>> {
        let keys = self.keys(queue)?;
        let pairs: Vec<(String, f64)> = self
            .conn
            .query(
                redis::cmd("ZRANGE")
                    .arg(keys.failed())
                    .arg(0)
                    .arg(-1)
                    .arg("REV")
                    .arg("WITHSCORES"),
            )
            .await?;
        Ok(pairs
            .into_iter()
            .map(|(group, n)| FailureGroup {
                queue: queue.to_owned(),
                group,
                count: n as u64,
            })
            .collect())
    }

    /// Jobs of a failure group, most recent first.
    pub async fn failed_jobs(&self, queue: &str, group: &str, page: Page) -> Result<Vec<JobId>> {
        let keys = self.keys(queue)?;
        let ids: Vec<String> = self
            .conn
            .query(&rev_range(&keys.failed_group(group), page))
            .await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    /// Puts trashed jobs back to work with fresh attempts. One result per
    /// job (`is_not_found` when it is not in the trash).
    pub async fn retry(&self, queue: &str, jobs: &[JobId]) -> Result<Vec<Result<()>>> {
        let keys = self.keys(queue)?;
        let ids = ids_of(jobs);
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(GROUP_BATCH) {
            let reply = scripts::call(&self.conn, &SCRIPTS.retry, &keys, chunk).await?;
            out.extend(per_job(&reply, &keys, chunk));
        }
        Ok(out)
    }

    /// Deletes trashed jobs for good. One result per job.
    pub async fn purge(&self, queue: &str, jobs: &[JobId]) -> Result<Vec<Result<()>>> {
        let keys = self.keys(queue)?;
        let ids = ids_of(jobs);
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(GROUP_BATCH) {
            let reply = scripts::call(&self.conn, &SCRIPTS.purge, &keys, chunk).await?;
            out.extend(per_job(&reply, &keys, chunk));
        }
        Ok(out)
    }

    /// Retries (or, with `purge`, deletes) every job of a failure group,
    /// or of all groups when `group` is `None`. Returns how many.
    pub async fn settle_failed(&self, queue: &str, group: Option<&str>, purge: bool) -> Result<usize> {
        let groups = match group {
            Some(g) => vec![g.to_owned()],
            None => self.failed(queue).await?.into_iter().map(|g| g.group).collect(),
        };
        let mut done = 0;
        for g in groups {
            loop {
                let jobs = self
                    .failed_jobs(
                        queue,
                        &g,
                        Page {
                            offset: 0,
                            limit: GROUP_BATCH,
                        },
                    )
                    .await?;
                if jobs.is_empty() {
                    break;
                }
                let results = if purge {
                    self.purge(queue, &jobs).await?
                } else {
                    self.retry(queue, &jobs).await?
                };
                let ok = results.iter().filter(|r| r.is_ok()).count();
                done += ok;
                if ok == 0 {
                    // Entries without a trashed job behind them: drop them.
                    let keys = self.keys(queue)?;
                    let mut zrem = redis::cmd("ZREM");
                    zrem.arg(keys.failed_group(&g));
                    for j in &jobs {
                        zrem.arg(j.as_str());
                    }
                    self.conn.query::<()>(&zrem).await?;
                }
            }
        }
        Ok(done)
    }
}
