//! jobworker's own per-job state on ZooKeeper and the lock body.
//!
//! - A [`JobRecord`] lives at `<root>/<Q>/.jw/ids/<uuid>` (outside the
//!   taskflow jobs path): the job's exact priority, attempts, retry time,
//!   last fencing token, failure reason and, once the job is gone from the
//!   jobs path, how it ended. Compact JSON; only jobworker reads it.
//! - A [`LockBody`] is the `.lock` znode's JSON: taskflow's `{"owner": …}`
//!   plus jobworker's lease deadline, lease length and claim id, extra keys
//!   that taskflow ignores. Written in Python's format.

use rmpv::Value;
use serde::{Deserialize, Serialize};

use crate::zookeeper::json;

/// Where a job is, as far as its record tells (the jobs path tells the
/// rest: a live job is ready, scheduled or claimed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Ending {
    /// Still on the board (or consumed by taskflow, which leaves the record
    /// as it was).
    #[default]
    Live,
    /// Consumed by jobworker.
    Completed,
    /// Trashed by jobworker.
    Trashed,
    /// Cancelled by an operator (kept in the history like a completed job).
    Cancelled,
}

impl Ending {
    /// The state of a job that ended so (`None` while it is live).
    pub(crate) fn state(self) -> Option<crate::job::JobState> {
        use crate::job::JobState;
        match self {
            Ending::Live => None,
            Ending::Completed => Some(JobState::Completed),
            Ending::Trashed => Some(JobState::Trashed),
            Ending::Cancelled => Some(JobState::Cancelled),
        }
    }
}

/// jobworker's state of one job (`.jw/ids/<uuid>`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct JobRecord {
    /// The job znode's name (`jobNNNNNNNNNN`), once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The job name.
    pub name: String,
    /// The exact priority (the posting shows the nearest taskflow name).
    pub priority: i32,
    /// Tries allowed.
    pub max_attempts: u32,
    /// Failed tries so far.
    pub attempts: u32,
    /// When a retry falls due (ms since the epoch, server clock), 0 for none.
    pub run_at_ms: i64,
    /// Fencing token of the last claim that ended through jobworker.
    pub token: u64,
    /// Times a worker died holding this job alone (a poison pill's count).
    #[serde(skip_serializing_if = "is_zero")]
    pub crashes: u32,
    /// How the job ended.
    pub ending: Ending,
    /// Last failure or trash reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Failure group of the reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Tags given at post.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The dependencies the job still waits for (`deps.rs`): while there
    /// are any, its posting is kept in `R/Q/.jw/waiting`, off the jobs path.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends: Vec<DepRef>,
    /// Set by the first post of a job that waits for this one: its consume
    /// then leaves an owed entry and releases them (`deps.rs`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dependents: bool,
    /// When it was posted (ms, server clock estimate).
    pub posted_ms: i64,
    /// When it ended (ms), for completed and trashed jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// A random id of the post that made the record, to recognise a post
    /// whose reply was lost.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nonce: String,
    /// The job's history events, oldest first, without `queue` and `job`
    /// (`history.rs`): at most `history::HISTORY_LIMIT`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<serde_json::Value>,
    /// The events logged since the record was read (not stored): what a
    /// write of it tells the event stream (`events.rs`).
    #[serde(skip)]
    pub fresh: Vec<serde_json::Value>,
}

/// A job of any queue (of the same root), as dependencies name them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct DepRef {
    /// Its queue.
    pub queue: String,
    /// Its id.
    pub id: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl JobRecord {
    /// Encodes the record.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes a record; `None` when it is not one.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<JobRecord> {
        match serde_json::from_slice::<serde_json::Value>(bytes).ok()? {
            v @ serde_json::Value::Object(_) => serde_json::from_value(v).ok(),
            _ => None,
        }
    }

    /// Whether the job waits for dependencies (its posting is in the
    /// waiting path, not on the jobs path).
    pub(crate) fn is_waiting(&self) -> bool {
        self.ending == Ending::Live && !self.depends.is_empty()
    }

    /// Records a failure `reason` (and its group).
    pub(crate) fn fail(&mut self, reason: &str) {
        self.reason = Some(reason.to_owned());
        self.group = Some(crate::job::failure_group(reason));
    }
}

/// The body of a `.lock` znode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockBody {
    /// taskflow's `owner` (absent or not a string: nobody owns it by name).
    pub owner: Option<String>,
    /// jobworker's lease deadline (ms since the epoch, server clock); `None`
    /// for a claim made by taskflow, which lives as long as its session.
    pub deadline_ms: Option<i64>,
    /// The lease length asked for, in ms.
    pub lease_ms: Option<i64>,
    /// A random id of the claim, to recognise a claim whose reply was lost.
    pub claim_id: Option<String>,
}

impl LockBody {
    /// A jobworker lease for `owner` until `deadline_ms`.
    pub(crate) fn lease(owner: &str, deadline_ms: i64, lease_ms: i64, claim_id: &str) -> LockBody {
        LockBody {
            owner: Some(owner.to_owned()),
            deadline_ms: Some(deadline_ms),
            lease_ms: Some(lease_ms),
            claim_id: Some(claim_id.to_owned()),
        }
    }

    /// A claim of `owner` without a deadline (as taskflow's): it lasts as
    /// long as the claiming session, or until released.
    pub(crate) fn held(owner: &str, claim_id: &str) -> LockBody {
        LockBody {
            owner: Some(owner.to_owned()),
            deadline_ms: None,
            lease_ms: None,
            claim_id: Some(claim_id.to_owned()),
        }
    }

    /// Reads a lock body; anything that is not a JSON object has no owner.
    pub(crate) fn parse(bytes: &[u8]) -> LockBody {
        let root = json::loads(bytes).unwrap_or(Value::Nil);
        let text = |k: &str| json::get(&root, k).and_then(Value::as_str).map(str::to_owned);
        let int = |k: &str| json::get(&root, k).and_then(Value::as_i64);
        LockBody {
            owner: text("owner"),
            deadline_ms: int("lease_deadline_ms"),
            lease_ms: int("lease_ms"),
            claim_id: text("claim_id"),
        }
    }

    /// The JSON, in Python's format: `{"owner": …}` first, as taskflow
    /// writes it, then jobworker's keys.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut entries = Vec::new();
        if let Some(owner) = &self.owner {
            entries.push((Value::from("owner"), Value::from(owner.as_str())));
        }
        if let Some(d) = self.deadline_ms {
            entries.push((Value::from("lease_deadline_ms"), Value::from(d)));
        }
        if let Some(l) = self.lease_ms {
            entries.push((Value::from("lease_ms"), Value::from(l)));
        }
        if let Some(c) = &self.claim_id {
            entries.push((Value::from("claim_id"), Value::from(c.as_str())));
        }
        json::dumps(&Value::Map(entries))
            .map(String::into_bytes)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_bodies_extend_taskflow_s() {
        let taskflow = LockBody::parse(br#"{"owner": "worker-1"}"#);
        assert_eq!(taskflow.owner.as_deref(), Some("worker-1"));
        assert_eq!(taskflow.deadline_ms, None);
        let ours = LockBody::lease("w1", 1_700_000_000_123, 30_000, "c0ffee");
        let bytes = ours.to_bytes();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"owner": "w1", "lease_deadline_ms": 1700000000123, "lease_ms": 30000, "claim_id": "c0ffee"}"#
        );
        assert_eq!(LockBody::parse(&bytes), ours);
        assert_eq!(LockBody::parse(b"garbage").owner, None);
        assert_eq!(LockBody::parse(br#"{"owner": 5}"#).owner, None);
    }

    #[test]
    fn records_round_trip_and_tolerate_missing_fields() {
        let mut r = JobRecord {
            job: Some("job0000000003".into()),
            name: "resize".into(),
            priority: 7,
            max_attempts: 5,
            ..JobRecord::default()
        };
        r.fail("stalled: lease of w1 expired");
        assert_eq!(r.group.as_deref(), Some("stalled"));
        assert_eq!(JobRecord::from_bytes(&r.to_bytes()), Some(r));
        let old = JobRecord::from_bytes(br#"{"name": "x"}"#).unwrap();
        assert_eq!((old.attempts, old.ending), (0, Ending::Live));
        assert_eq!(JobRecord::from_bytes(b"[]"), None);
    }
}
