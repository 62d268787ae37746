//! Recurring jobs: templates that post a run per slot of their rule (an
//! interval, or a cron expression in a time zone).
//!
//! The queue's recurring maintenance service (`maintenance/recurring.rs`,
//! on the worker elected to lead the queue; no scheduler process) spawns
//! the runs of due templates, and so does a claim that comes up empty
//! while some are due (the no-worker path): the client computes the due
//! slots from the rule, and `recur_spawn.lua` posts them only if the
//! template's next slot is still the one the client read, so racing
//! spawners post each slot once. Missed slots (no worker running) are caught up, at most `backlog`
//! of the latest.

use std::collections::HashMap;

use crate::codec::details_of;
use crate::codec::posting_parts;
use crate::error::{Error, Result};
use crate::job::{JobId, Priority};
use crate::recurring::{RecurringInfo, RecurringJob, DEFAULT_BACKLOG};
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{self, SCRIPTS};
use crate::schedule::{due_slots, Rule};

/// Templates examined per spawn pass.
const SPAWN_BATCH: usize = 20;
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
        crate::board::check_new_queue(queue)?;
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
            return Err(Error::recurring_not_found(queue, id));
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
    /// many were posted. The recurring maintenance service calls it, and an
    /// empty claim when some are due, so it needs no scheduler; racing
    /// callers post each slot once.
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
