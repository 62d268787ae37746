//! A job's history on ZooKeeper: the events jobworker writes into the job's
//! record, in the same transaction as the change they describe, read back
//! with the events the board's state implies.
//!
//! The record keeps what it cannot tell otherwise, as Redis' history list
//! does: each claim that ended through jobworker (written when it ends:
//! claims themselves write nothing, to keep them one transaction), then
//! how it ended (`consumed`, `abandoned`, `failed`, `retried`, `trashed`,
//! `stalled`), and `priority`, `cancelled` and `retried` (out of the
//! trash). `posted` comes from the record and the claim in force from the
//! lock when read. Not kept on ZooKeeper: tracking events, a claim that
//! taskflow ended (taskflow writes no record), and the events of a job
//! consumed while no history is kept (its record goes).

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::job::JobId;
use crate::zookeeper::record::{Ending, JobRecord, LockBody};
use crate::zookeeper::ZooKeeperBoard;

/// Events kept in one job's record (the oldest go first), as on Redis.
pub(crate) const HISTORY_LIMIT: usize = 100;

impl JobRecord {
    /// Appends `event` at `at_ms` with `fields` (a JSON object).
    pub(crate) fn log(&mut self, at_ms: i64, event: &str, fields: Value) {
        let mut entry = json!({ "event": event, "at": at_ms });
        if let (Value::Object(to), Value::Object(from)) = (&mut entry, fields) {
            to.extend(from);
        }
        self.fresh.push(entry.clone());
        self.history.push(entry);
        let over = self.history.len().saturating_sub(HISTORY_LIMIT);
        self.history.drain(..over);
    }

    /// Since when the job has been ready (ms): its post, its retry time, or
    /// the end of the last claim that gave it back (for the statistics'
    /// wait times).
    pub(crate) fn ready_since(&self) -> i64 {
        let given_back = self
            .history
            .iter()
            .rev()
            .find(|e| e["event"] == "abandoned" || e["event"] == "retried")
            .and_then(|e| e["at"].as_i64());
        self.posted_ms.max(self.run_at_ms).max(given_back.unwrap_or(0))
    }

    /// Appends the claim with fencing `token` (made at `at_ms` by `worker`)
    /// unless it is there already.
    pub(crate) fn log_claim(&mut self, worker: Option<&str>, token: u64, at_ms: i64) {
        if !self.logged_claim(token) {
            self.log(
                at_ms,
                "claimed",
                json!({ "worker": worker.unwrap_or(""), "token": token }),
            );
            // The claim told the event stream when it was made.
            self.fresh.pop();
        }
    }

    /// Whether the claim with fencing `token` is in the history.
    fn logged_claim(&self, token: u64) -> bool {
        self.history
            .iter()
            .rev()
            .any(|e| e["event"] == "claimed" && e["token"] == token)
    }

    /// Appends a failed try: `failed`, with the attempt it was (the
    /// attempts counted) and `reason`.
    pub(crate) fn log_failed(&mut self, at_ms: i64, reason: &str) {
        let attempt = self.attempts;
        self.log(at_ms, "failed", json!({ "attempt": attempt, "reason": reason }));
    }

    /// `trashed` (with group and reason) when the record ended so, else
    /// `retried` (with the attempt).
    pub(crate) fn log_outcome(&mut self, at_ms: i64, attempt: u32) {
        if self.ending == Ending::Trashed {
            let fields = json!({ "group": self.group, "reason": self.reason });
            self.log(at_ms, "trashed", fields);
        } else {
            self.log(at_ms, "retried", json!({ "attempt": attempt }));
        }
    }
}

impl ZooKeeperBoard {
    /// A job's history, oldest event first (see the module docs).
    pub(crate) async fn job_history(&self, queue: &str, id: &JobId) -> Result<Vec<Value>> {
        let paths = self.paths(queue)?;
        let uuid = id.as_str();
        let Some((record, _)) = self.read_record(&paths, uuid).await? else {
            return Err(Error::not_found(queue, uuid));
        };
        let mut events = vec![json!({ "event": "posted", "at": record.posted_ms, "name": record.name })];
        events.extend(record.history.iter().cloned());
        if record.ending == Ending::Live {
            if let Some(znode) = self.locate(&paths, uuid).await? {
                let what = format!("cannot read the history of job {uuid} in queue {queue}");
                let read = self.read_many(&what, vec![paths.lock(&znode)]).await?;
                if let Some(Some((data, stat))) = read.into_iter().next() {
                    let token = stat.czxid as u64;
                    if !record.logged_claim(token) {
                        let worker = LockBody::parse(&data).owner.unwrap_or_default();
                        let at = stat.ctime;
                        events
                            .push(json!({ "event": "claimed", "at": at, "worker": worker, "token": token }));
                    }
                }
            }
        }
        for e in &mut events {
            e["queue"] = queue.into();
            e["job"] = uuid.into();
        }
        Ok(events)
    }
}
