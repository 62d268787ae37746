//! Recurring jobs: templates that post a run per slot of their rule (an
//! interval, or a cron expression in a time zone).
//!
//! Any claim of the queue notices templates that are due (no scheduler
//! process) and spawns their runs: the client computes the due slots from
//! the rule, and `recur_spawn.lua` posts them only if the template's next
//! slot is still the one the client read, so racing workers post each slot
//! once. Missed slots (no worker running) are caught up, at most `backlog`
//! of the latest.

use std::collections::HashMap;
use std::time::Duration;

use crate::codec::details_of;
use crate::codec::posting_parts;
use crate::error::{Error, Result};
use crate::job::{validate_word, JobId, Priority, DEFAULT_MAX_ATTEMPTS};
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{self, SCRIPTS};
use crate::schedule::{due_slots, Rule};

/// Templates examined per spawn pass.
const SPAWN_BATCH: usize = 20;
/// Default of [`RecurringJob::backlog`].
pub const DEFAULT_BACKLOG: u32 = 1;

/// A recurring job to create or update with [`RedisBoard::recur`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecurringJob {
    /// Template id; choosing one makes `recur` an upsert.
    pub id: Option<String>,
    /// Name of the jobs it posts (selects the handler).
    pub name: String,
    /// Arguments of every run.
    pub args: rmpv::Value,
    /// When runs are due.
    pub rule: Rule,
    /// Delay of the first run of an interval rule (qless's offset).
    pub offset: Duration,
    /// Priority of the runs.
    pub priority: Priority,
    /// Tries of each run.
    pub max_attempts: u32,
    /// Tags of the runs.
    pub tags: Vec<String>,
    /// Most missed runs posted when catching up (the latest ones).
    pub backlog: u32,
}

impl RecurringJob {
    /// Runs of `name` on `rule`.
    pub fn new(name: impl Into<String>, rule: Rule) -> Self {
        RecurringJob {
            id: None,
            name: name.into(),
            args: rmpv::Value::Nil,
            rule,
            offset: Duration::ZERO,
            priority: Priority::NORMAL,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            tags: Vec::new(),
            backlog: DEFAULT_BACKLOG,
        }
    }

    /// Sets the template id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the arguments from any serde value.
    pub fn args<T: serde::Serialize + ?Sized>(mut self, args: &T) -> Result<Self> {
        self.args = crate::job::NewJob::new(&self.name).args(args)?.args;
        Ok(self)
    }

    /// Delays the first run of an interval rule.
    pub fn offset(mut self, offset: Duration) -> Self {
        self.offset = offset;
        self
    }

    /// Sets the priority of the runs.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the tries of each run.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Adds a tag to the runs.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets how many missed runs are caught up (at least 1).
    pub fn backlog(mut self, n: u32) -> Self {
        self.backlog = n;
        self
    }

    fn validate(&self) -> Result<()> {
        crate::job::NewJob::new(&self.name)
            .max_attempts(self.max_attempts)
            .priority(self.priority)
            .validate()?;
        if let Some(id) = &self.id {
            validate_word("recurring job id", id)?;
        }
        for tag in &self.tags {
            validate_word("tag", tag)?;
        }
        if self.backlog == 0 {
            return Err(Error::invalid("a recurring job's backlog must be at least 1"));
        }
        Ok(())
    }
}

/// A stored recurring job, as listed by [`RedisBoard::recurring`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RecurringInfo {
    /// Template id.
    pub id: String,
    /// Name of the jobs it posts.
    pub name: String,
    /// The rule, for humans.
    pub rule: String,
    /// Next slot (ms since the epoch).
    pub next_ms: i64,
    /// Runs posted so far.
    pub runs: u64,
    /// Backlog.
    pub backlog: u32,
    /// Priority of the runs.
    pub priority: i32,
    /// Tags of the runs.
    pub tags: Vec<String>,
}

type Template = HashMap<String, Vec<u8>>;

fn text(t: &Template, field: &str) -> String {
    t.get(field)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default()
}

impl RedisBoard {
    /// The server's clock, in ms since the epoch (`TIME`).
    pub async fn server_ms(&self) -> Result<i64> {
        let (secs, micros): (i64, i64) = self.conn.query(&redis::cmd("TIME")).await?;
        Ok(secs * 1000 + micros / 1000)
    }

    /// Creates a recurring job in `queue`, or updates the one with the same
    /// id (its next slot is kept unless the rule or offset changed).
    /// Returns the template id.
    pub async fn recur(&self, queue: &str, job: RecurringJob) -> Result<String> {
        job.validate()?;
        let keys = self.keys(queue)?;
        self.register_queue(queue).await?;
        let id = job.id.clone().unwrap_or_else(|| JobId::random().0);
        let key = keys.recur(&id);
        let rule = job.rule.encode();
        let (old_rule, old_offset): (Option<String>, Option<u64>) = self
            .conn
            .query(redis::cmd("HMGET").arg(&key).arg("rule").arg("offset"))
            .await?;
        let offset_ms = job.offset.as_millis() as u64;
        let mut next: Option<i64> = None;
        if old_rule.as_deref() != Some(rule.as_str()) || old_offset != Some(offset_ms) {
            let now = self.server_ms().await?;
            next = Some(match &job.rule {
                Rule::Every { .. } => now + offset_ms as i64,
                rule => rule.next_after(now).unwrap_or(i64::MAX),
            });
        }
        let mut args = Vec::new();
        rmpv::encode::write_value(&mut args, &job.args)
            .map_err(|e| Error::codec(format!("cannot encode arguments of recurring job {id}: {e}")))?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.hset_multiple(
            &key,
            &[
                ("name", job.name.as_bytes().to_vec()),
                ("args", args),
                ("rule", rule.into_bytes()),
                ("offset", offset_ms.to_string().into_bytes()),
                ("prio", job.priority.0.to_string().into_bytes()),
                ("max", job.max_attempts.to_string().into_bytes()),
                ("backlog", job.backlog.to_string().into_bytes()),
            ],
        );
        if job.tags.is_empty() {
            pipe.hdel(&key, "tags");
        } else {
            pipe.hset(&key, "tags", serde_json::json!(job.tags).to_string());
        }
        if let Some(next) = next {
            pipe.hset(&key, "next", next).zadd(keys.recurring(), &id, next);
        }
        self.conn.query_pipe::<()>(&pipe).await?;
        Ok(id)
    }

    /// Deletes a recurring job (runs already posted stay).
    pub async fn unrecur(&self, queue: &str, id: &str) -> Result<()> {
        let keys = self.keys(queue)?;
        let mut pipe = redis::pipe();
        pipe.atomic().del(keys.recur(id)).zrem(keys.recurring(), id);
        let (deleted, _): (usize, usize) = self.conn.query_pipe(&pipe).await?;
        if deleted == 0 {
            return Err(Error::not_found(queue, id));
        }
        Ok(())
    }

    /// The recurring jobs of `queue`, by next slot.
    pub async fn recurring(&self, queue: &str) -> Result<Vec<RecurringInfo>> {
        let keys = self.keys(queue)?;
        let ids: Vec<String> = self
            .conn
            .query(redis::cmd("ZRANGE").arg(keys.recurring()).arg(0).arg(-1))
            .await?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let t: Template = self
                .conn
                .query(redis::cmd("HGETALL").arg(keys.recur(&id)))
                .await?;
            if t.is_empty() {
                continue;
            }
            let rule = Rule::decode(&text(&t, "rule"))?;
            out.push(RecurringInfo {
                name: text(&t, "name"),
                rule: rule.to_string(),
                next_ms: text(&t, "next").parse().unwrap_or(0),
                runs: text(&t, "runs").parse().unwrap_or(0),
                backlog: text(&t, "backlog").parse().unwrap_or(DEFAULT_BACKLOG),
                priority: text(&t, "prio").parse().unwrap_or(0),
                tags: serde_json::from_str(&text(&t, "tags")).unwrap_or_default(),
                id,
            });
        }
        Ok(out)
    }

    /// Posts the runs of `queue`'s recurring jobs that are due; returns how
    /// many were posted. Claims call it when their queue has any due, so it
    /// needs no scheduler; racing callers post each slot once.
    pub async fn spawn_due(&self, queue: &str) -> Result<usize> {
        let keys = self.keys(queue)?;
        let now = self.server_ms().await?;
        let ids: Vec<String> = self
            .conn
            .query(
                redis::cmd("ZRANGEBYSCORE")
                    .arg(keys.recurring())
                    .arg("-inf")
                    .arg(now)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(SPAWN_BATCH),
            )
            .await?;
        let mut posted = 0;
        for tid in ids {
            let t: Template = self
                .conn
                .query(redis::cmd("HGETALL").arg(keys.recur(&tid)))
                .await?;
            if t.is_empty() {
                self.conn
                    .query::<()>(redis::cmd("ZREM").arg(keys.recurring()).arg(&tid))
                    .await?;
                continue;
            }
            let seen = text(&t, "next");
            let rule = Rule::decode(&text(&t, "rule"))?;
            let next: i64 = seen.parse().map_err(|_| {
                Error::codec(format!(
                    "recurring job {tid} in queue {queue} has a bad next slot"
                ))
            })?;
            let backlog = text(&t, "backlog").parse().unwrap_or(DEFAULT_BACKLOG);
            let (slots, new_next) = due_slots(&rule, next, now, backlog);
            let name = text(&t, "name");
            let args = rmpv::decode::read_value(&mut t.get("args").map(Vec::as_slice).unwrap_or(&[0xc0]))
                .map_err(|e| {
                    Error::codec(format!(
                        "recurring job {tid} in queue {queue}: bad arguments: {e}"
                    ))
                })?;
            let priority = Priority(text(&t, "prio").parse().unwrap_or(0));
            let mut argv: Vec<Vec<u8>> = vec![
                tid.clone().into_bytes(),
                seen.into_bytes(),
                new_next.to_string().into_bytes(),
            ];
            for _ in &slots {
                let id = JobId::random();
                let parts = posting_parts(id.as_str(), &name, priority, &details_of(&args), None);
                argv.push(id.0.into_bytes());
                argv.push(parts.head);
                argv.push(parts.tail);
            }
            let reply = scripts::call(&self.conn, &SCRIPTS.recur_spawn, &keys, &argv).await?;
            posted += reply.int(1)? as usize;
        }
        Ok(posted)
    }
}
