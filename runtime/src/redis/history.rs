//! A job's history: its recorded events and those its state implies.

use crate::codec::{decode_posting, CreatedOn};
use crate::error::{Error, Result};
use crate::job::JobId;
use crate::redis::board::RedisBoard;
use crate::redis::keys::QueueKeys;

/// `history_facts`' reply.
type HistoryFacts = (
    Vec<String>,
    Vec<Option<String>>,
    Option<f64>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<f64>,
);

impl RedisBoard {
    /// A job's history, oldest event first: JSON objects with `event`,
    /// `queue`, `job`, `at` (ms) and details (`worker`, `reason`,
    /// `attempt`, …). Posted, the latest claim and consumed come from the
    /// job's state (see `record` in `lua/lib/history.lua`).
    pub async fn history(&self, queue: &str, job: &JobId) -> Result<Vec<serde_json::Value>> {
        let keys = self.keys(queue)?;
        let id = job.as_str();
        let (entries, fields, completed_at, listing, trashed, ready) = self.history_facts(&keys, id).await?;
        let field = |k: usize| fields.get(k).cloned().flatten();
        let num = |k: usize| field(k).and_then(|v| v.parse::<i64>().ok());
        let (state, finished, token) = (field(2), num(3), num(4));
        let posted = num(0)
            .map(|at| (at, field(1)))
            .or_else(|| lean_posted(listing.or(trashed)));
        if posted.is_none() && fields.iter().all(Option::is_none) {
            // (Only its place in the ready index: a lean job taskflow
            // consumed before a claim met it, which has no history.)
            return match ready {
                Some(_) => Ok(Vec::new()),
                None => Err(Error::not_found(queue, id)),
            };
        }
        let event =
            |event: &str, at: i64| serde_json::json!({ "event": event, "queue": queue, "job": id, "at": at });
        // (No posted event for a lean job taskflow consumed before a claim
        // met it: its post time went with its posting.)
        let mut out = Vec::new();
        if let Some((at, name)) = posted {
            out.push(event("posted", at));
            out[0]["name"] = name.unwrap_or_default().into();
        }
        for e in &entries {
            out.push(
                serde_json::from_str(e).map_err(|err| Error::codec(format!("bad history entry: {err}")))?,
            );
        }
        let worker = claimer(field(7).unwrap_or_default());
        if let (Some(token), Some(at)) = (token.filter(|t| *t > 0), num(6)) {
            if num(5) != Some(token) {
                let mut claimed = event("claimed", at);
                claimed["worker"] = worker.clone().into();
                claimed["token"] = token.into();
                out.push(claimed);
            }
        }
        // Consumed: in the history index, whose score is the finish time
        // (jobworker's consume leaves the job hash as it was), or recorded in the
        // hash (an older jobworker, or a consume by taskflow found later).
        let consumed_at = completed_at
            .map(|at| at as i64)
            .or(finished.filter(|_| state.as_deref() == Some("completed")));
        if let Some(at) = consumed_at {
            let mut consumed = event("consumed", at);
            consumed["worker"] = worker.into();
            out.push(consumed);
        }
        Ok(out)
    }

    /// What `history` reads of job `id`, in one round trip: its history
    /// list, the hash fields it rebuilds events from, its finish time in
    /// the history index, its posting (listed or in the trash) and its
    /// ready-index place.
    async fn history_facts(&self, keys: &QueueKeys, id: &str) -> Result<HistoryFacts> {
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
            ])
            .zscore(keys.completed(), id)
            .hget(keys.listings(), id)
            .hget(keys.trash(), id)
            .zscore(keys.ready(), id);
        self.conn.query_pipe(&pipe).await
    }
}

/// A lean job's post time (ms) and name, from its posting (listed, or
/// in the trash): it has no job hash before its first claim
/// (`lua/lib/lean.lua`).
fn lean_posted(posting: Option<Vec<u8>>) -> Option<(i64, Option<String>)> {
    let p = decode_posting(&posting?).ok()?;
    match p.created_on {
        CreatedOn::DateTime(at) => Some((at.to_unix_micros() / 1000, Some(p.name))),
        CreatedOn::Other(_) => None,
    }
}

/// The worker of a job's latest claim, from its `claimed_by` field: a
/// claim call marks it with a newline, its number and for a suspect a '!'
/// (`lua/lib/claim_jobs.lua`).
fn claimer(claimed_by: String) -> String {
    match claimed_by.rsplit_once('\n') {
        Some((who, call)) if is_call_mark(call) => who.to_owned(),
        _ => claimed_by,
    }
}

/// Whether `mark` is a claim call's: digits (on a cluster after hex
/// digits and a dot: the process's mark), and perhaps a '!'.
fn is_call_mark(mark: &str) -> bool {
    let number = mark.strip_suffix('!').unwrap_or(mark);
    let (process, digits) = number.split_once('.').unwrap_or(("", number));
    let hex = process.bytes().all(|b| b.is_ascii_hexdigit());
    hex && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::claimer;

    #[test]
    fn a_claim_calls_mark_is_not_shown() {
        assert_eq!(claimer("w1\n17".into()), "w1");
        assert_eq!(claimer("w1\n17!".into()), "w1");
        assert_eq!(claimer("w1\n734e17.439105".into()), "w1", "on a cluster");
        assert_eq!(claimer("w1\n734e17.439105!".into()), "w1");
        assert_eq!(claimer("odd\nname.5".into()), "odd\nname.5");
        assert_eq!(claimer("w1".into()), "w1");
        assert_eq!(claimer("odd\nname".into()), "odd\nname");
    }
}
