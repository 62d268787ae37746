//! Operator verbs on a Redis board: priorities, tags, tracking, failure
//! groups, queue pause / concurrency limits, per-job history and the
//! queue registry. Each change is one script or one atomic command in the
//! queue's slot.

use std::collections::HashMap;

use crate::board::{FailureGroup, QueueSettings};
use crate::error::{Error, Result};
use crate::job::{validate_word, JobId, JobState, Page, Priority};
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
    /// Changes the priority of a job that has not finished; a ready job
    /// moves to its new place at once. Returns the job's state.
    pub async fn set_priority(&self, queue: &str, job: &JobId, priority: Priority) -> Result<JobState> {
        let keys = self.keys(queue)?;
        let priority = priority.validated()?;
        let reply = scripts::call(
            &self.conn,
            &SCRIPTS.priority,
            &keys,
            &[job.as_str(), &priority.0.to_string()],
        )
        .await?;
        match reply.status().as_str() {
            "ok" => JobState::parse(&reply.string(1)?),
            "finished" => Err(Error::finished(queue, job.as_str(), &reply.string(1)?)),
            _ => Err(Error::not_found(queue, job.as_str())),
        }
    }

    /// Adds tags to a job; returns its tags.
    pub async fn tag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        self.change_tags(queue, job, "add", tags).await
    }

    /// Removes tags from a job; returns its tags.
    pub async fn untag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        self.change_tags(queue, job, "remove", tags).await
    }

    async fn change_tags(&self, queue: &str, job: &JobId, mode: &str, tags: &[&str]) -> Result<Vec<String>> {
        for tag in tags {
            validate_word("tag", tag)?;
        }
        let keys = self.keys(queue)?;
        let mut args = vec![mode, job.as_str()];
        args.extend(tags);
        let reply = scripts::call(&self.conn, &SCRIPTS.tag, &keys, &args).await?;
        let reply = reply.accept(&keys, job.as_str(), "")?;
        serde_json::from_str(&reply.string(1)?).map_err(|e| Error::codec(format!("bad tag list: {e}")))
    }

    /// Jobs carrying `tag`, most recently tagged first.
    pub async fn tagged(&self, queue: &str, tag: &str, page: Page) -> Result<Vec<JobId>> {
        let keys = self.keys(queue)?;
        let ids: Vec<String> = self.conn.query(&rev_range(&keys.tag(tag), page)).await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    /// The most used tags of `queue` with their job counts.
    pub async fn top_tags(&self, queue: &str, page: Page) -> Result<Vec<(String, u64)>> {
        let keys = self.keys(queue)?;
        let mut cmd = rev_range(keys.tags(), page);
        cmd.arg("WITHSCORES");
        let pairs: Vec<(String, f64)> = self.conn.query(&cmd).await?;
        Ok(pairs.into_iter().map(|(t, n)| (t, n as u64)).collect())
    }

    /// Tracks a job: its events are also published on
    /// `<prefix>:ev:<event>`.
    pub async fn track(&self, queue: &str, job: &JobId) -> Result<()> {
        self.set_tracking(queue, job, "track").await
    }

    /// Stops tracking a job.
    pub async fn untrack(&self, queue: &str, job: &JobId) -> Result<()> {
        self.set_tracking(queue, job, "untrack").await
    }

    async fn set_tracking(&self, queue: &str, job: &JobId, mode: &str) -> Result<()> {
        let keys = self.keys(queue)?;
        let reply = scripts::call(&self.conn, &SCRIPTS.track, &keys, &[mode, job.as_str()]).await?;
        reply.accept(&keys, job.as_str(), "").map(drop)
    }

    /// Tracked jobs of `queue`.
    pub async fn tracked(&self, queue: &str) -> Result<Vec<JobId>> {
        let keys = self.keys(queue)?;
        let ids: Vec<String> = self
            .conn
            .query(redis::cmd("ZRANGE").arg(keys.tracked()).arg(0).arg(-1))
            .await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

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

    /// Stops claims from handing out jobs of `queue` (jobs already claimed
    /// run on).
    pub async fn pause(&self, queue: &str) -> Result<()> {
        let keys = self.keys(queue)?;
        self.conn
            .query::<()>(redis::cmd("HSET").arg(keys.settings()).arg("paused").arg(1))
            .await
    }

    /// Lets claims hand out jobs of `queue` again and wakes idle workers.
    pub async fn resume(&self, queue: &str) -> Result<()> {
        let keys = self.keys(queue)?;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hdel(keys.settings(), "paused")
            .ignore()
            .publish(&keys.notify, "resumed")
            .ignore();
        self.conn.query_pipe::<()>(&pipe).await
    }

    /// Sets (or with `None` removes) the cluster-wide concurrency limit of
    /// `queue`: claims hand out jobs only while fewer are claimed.
    pub async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        let keys = self.keys(queue)?;
        let cmd = match limit {
            Some(0) => return Err(Error::invalid("a concurrency limit must be at least 1")),
            Some(n) => redis::cmd("HSET")
                .arg(keys.settings())
                .arg("limit")
                .arg(n)
                .clone(),
            None => redis::cmd("HDEL").arg(keys.settings()).arg("limit").clone(),
        };
        self.conn.query::<()>(&cmd).await?;
        if limit.is_none() {
            self.conn
                .query::<()>(redis::cmd("PUBLISH").arg(&keys.notify).arg("limit"))
                .await?;
        }
        Ok(())
    }

    /// The settings of `queue`.
    pub async fn settings(&self, queue: &str) -> Result<QueueSettings> {
        let keys = self.keys(queue)?;
        let (paused, limit): (Option<String>, Option<u32>) = self
            .conn
            .query(
                redis::cmd("HMGET")
                    .arg(keys.settings())
                    .arg("paused")
                    .arg("limit"),
            )
            .await?;
        Ok(QueueSettings {
            paused: paused.as_deref() == Some("1"),
            limit,
        })
    }

    /// A job's history, oldest event first: JSON objects with `event`,
    /// `queue`, `job`, `at` (ms) and details (`worker`, `reason`,
    /// `attempt`, …). Posted, the latest claim and consumed come from the
    /// job's state (see `record` in `lua/prelude.lua`).
    pub async fn history(&self, queue: &str, job: &JobId) -> Result<Vec<serde_json::Value>> {
        let keys = self.keys(queue)?;
        let id = job.as_str();
        let mut pipe = redis::pipe();
        pipe.lrange(keys.history(id), 0, -1)
            .cmd("HMGET")
            .arg(keys.job(id))
            .arg(&[
                "posted",
                "name",
                "state",
                "finished",
                "token",
                "logged",
                "claimed_at",
                "claimed_by",
            ]);
        let (entries, fields): (Vec<String>, Vec<Option<String>>) = self.conn.query_pipe(&pipe).await?;
        let field = |k: usize| fields.get(k).cloned().flatten();
        let num = |k: usize| field(k).and_then(|v| v.parse::<i64>().ok());
        let (posted, state, finished, token) = (num(0), field(2), num(3), num(4));
        let Some(posted) = posted else {
            return Err(Error::not_found(queue, id));
        };
        let event =
            |event: &str, at: i64| serde_json::json!({ "event": event, "queue": queue, "job": id, "at": at });
        let mut out = vec![event("posted", posted)];
        out[0]["name"] = field(1).unwrap_or_default().into();
        for e in &entries {
            out.push(
                serde_json::from_str(e).map_err(|err| Error::codec(format!("bad history entry: {err}")))?,
            );
        }
        let worker = field(7).unwrap_or_default();
        if let (Some(token), Some(at)) = (token.filter(|t| *t > 0), num(6)) {
            if num(5) != Some(token) {
                let mut claimed = event("claimed", at);
                claimed["worker"] = worker.clone().into();
                claimed["token"] = token.into();
                out.push(claimed);
            }
        }
        if let (Some("completed"), Some(at)) = (state.as_deref(), finished) {
            let mut consumed = event("consumed", at);
            consumed["worker"] = worker.into();
            out.push(consumed);
        }
        Ok(out)
    }

    /// Remembers that `queue` exists (for commands over every queue).
    pub(crate) async fn register_queue(&self, queue: &str) -> Result<()> {
        let fresh = self
            .known_queues
            .lock()
            .map(|mut k| k.insert(queue.to_owned()))
            .unwrap_or(true);
        if fresh {
            self.conn
                .query::<()>(redis::cmd("SADD").arg(self.queues_key()).arg(queue))
                .await?;
        }
        Ok(())
    }

    /// Every queue jobs were posted to through jobworker, sorted.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let mut queues: Vec<String> = self
            .conn
            .query(redis::cmd("SMEMBERS").arg(self.queues_key()))
            .await?;
        queues.sort();
        Ok(queues)
    }

    fn queues_key(&self) -> String {
        format!("{}:queues", self.options().prefix)
    }

    /// The board-wide configuration stored in Redis (`<prefix>:config`).
    pub async fn config(&self) -> Result<HashMap<String, String>> {
        self.conn
            .query(redis::cmd("HGETALL").arg(self.config_key()))
            .await
    }

    /// Sets (or with `None` removes) a configuration value. Known keys:
    /// see [`CONFIG_KEYS`]; values are checked before they are stored.
    pub async fn set_config(&self, key: &str, value: Option<&str>) -> Result<()> {
        let Some((_, check)) = CONFIG_KEYS.iter().find(|(k, _)| *k == key) else {
            let known: Vec<&str> = CONFIG_KEYS.iter().map(|(k, _)| *k).collect();
            return Err(Error::invalid(format!(
                "unknown config key {key:?}; known keys: {}",
                known.join(", ")
            )));
        };
        match value {
            Some(v) => {
                check(v).map_err(|e| Error::invalid(format!("config {key}: {e}")))?;
                self.conn
                    .query::<()>(redis::cmd("HSET").arg(self.config_key()).arg(key).arg(v))
                    .await
            }
            None => {
                self.conn
                    .query::<()>(redis::cmd("HDEL").arg(self.config_key()).arg(key))
                    .await
            }
        }
    }

    fn config_key(&self) -> String {
        format!("{}:config", self.options().prefix)
    }
}

type Check = fn(&str) -> std::result::Result<(), String>;

fn seconds(v: &str) -> std::result::Result<(), String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(()),
        _ => Err(format!("{v:?} is not a positive number of seconds")),
    }
}

fn count(v: &str) -> std::result::Result<(), String> {
    v.parse::<usize>()
        .map(drop)
        .map_err(|e| format!("{v:?} is not a count: {e}"))
}

/// Configuration keys stored in Redis, read by workers and clients when
/// they start (a command-line flag, or an option changed from its default
/// in code, wins): `expiry` and `grace` (seconds: lease length, drain
/// time on TERM), `history-count` and `history-age` (completed jobs kept;
/// age in seconds), `trash-count` and `trash-age` (trashed jobs kept, the
/// dead letter; age in seconds).
pub const CONFIG_KEYS: &[(&str, Check)] = &[
    ("expiry", seconds),
    ("grace", seconds),
    ("history-count", count),
    ("history-age", seconds),
    ("trash-count", count),
    ("trash-age", seconds),
];

fn rev_range(key: &str, page: Page) -> redis::Cmd {
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(key)
        .arg(page.offset)
        .arg((page.offset + page.limit).saturating_sub(1) as i64)
        .arg("REV");
    cmd
}
