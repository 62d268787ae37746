//! Key names of one queue (taskflow's core plus jobworker's own keys).

use crate::error::{Error, Result};

/// Namespace prefix of jobworker queues: queue `Q` lives in `jw:{Q}`.
pub const DEFAULT_PREFIX: &str = "jw";

/// The queue keys' names after the namespace's `NS:`, in the order of
/// `lua::KEY_NAMES` (the Functions library builds them from NS in Lua).
pub(crate) const PIECES: [&str; 19] = [
    "listings",
    "sequence",
    "trash",
    "jw.ready",
    "jw.scheduled",
    "jw.leases",
    "jw.completed",
    "jw.quarantine",
    "jw.quarantine.reason",
    "jw.waiting",
    "jw.queue",
    "jw.tags",
    "jw.failed",
    "jw.recurring",
    "jw.outbox",
    "jw.tracked",
    "jw.trashed",
    "jw.cancelled",
    "jw.idle",
];

/// Every key of one queue, in the order of `lua::KEY_NAMES` (each script
/// takes the ones its header names, see `lua/README.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    /// The queue name.
    pub queue: String,
    /// The taskflow namespace (e.g. `jw:{emails}` or `taskflow`).
    pub namespace: String,
    /// `NS:listings`, `NS:sequence`, …: the queue keys of `lua/README.md`.
    pub keys: [String; 19],
    /// The pub/sub channel that announces new work.
    pub notify: String,
    /// Prefix of the event channels (`<prefix>:log`, `<prefix>:ev:<event>`;
    /// on a cluster the namespace, so they sit in the queue's slot).
    pub events: String,
    /// On a cluster: the queue's channels are sharded (`SPUBLISH`).
    pub sharded: bool,
}

impl QueueKeys {
    /// Keys of `queue` stored under `namespace`; its events go to the
    /// channels under `events` (the board's prefix).
    pub fn new(queue: &str, namespace: &str, events: &str) -> Self {
        let k = |piece: &str| format!("{namespace}:{piece}");
        QueueKeys {
            queue: queue.to_owned(),
            namespace: namespace.to_owned(),
            keys: PIECES.map(k),
            notify: k("jw.notify"),
            events: events.to_owned(),
            sharded: false,
        }
    }

    /// The keys of `queue` on a cluster: every channel in its slot
    /// (events under the namespace) and sharded. Refuses a namespace
    /// without a hash tag (`{…}`), whose keys would spread over slots.
    pub fn on_cluster(queue: &str, namespace: &str) -> Result<Self> {
        let tagged = namespace
            .find('{')
            .is_some_and(|open| namespace[open + 1..].find('}').is_some_and(|len| len > 0));
        if !tagged {
            return Err(Error::invalid(format!(
                "queue {queue:?} is stored under namespace {namespace:?}, which has no hash tag: on a redis \
                 cluster a queue's keys must share one slot (use a namespace like \"{{{queue}}}\")"
            )));
        }
        Ok(QueueKeys {
            sharded: true,
            ..QueueKeys::new(queue, namespace, namespace)
        })
    }

    /// The default namespace of a queue: `<prefix>:{<queue>}` (the braces
    /// are a Redis Cluster hash tag, so one queue sits in one slot).
    pub fn default_namespace(prefix: &str, queue: &str) -> Result<String> {
        validate_queue(queue)?;
        Ok(format!("{prefix}:{{{queue}}}"))
    }

    /// `NS:` — the prefix every per-job key is built from.
    pub fn prefix(&self) -> String {
        format!("{}:", self.namespace)
    }

    /// `NS:listings`.
    pub fn listings(&self) -> &str {
        &self.keys[0]
    }
    /// `NS:sequence` (taskflow's posting counter).
    pub fn sequence(&self) -> &str {
        &self.keys[1]
    }
    /// `NS:trash`.
    pub fn trash(&self) -> &str {
        &self.keys[2]
    }
    /// `NS:jw.ready`.
    pub fn ready(&self) -> &str {
        &self.keys[3]
    }
    /// `NS:jw.scheduled`.
    pub fn scheduled(&self) -> &str {
        &self.keys[4]
    }
    /// `NS:jw.leases`.
    pub fn leases(&self) -> &str {
        &self.keys[5]
    }
    /// `NS:jw.completed`.
    pub fn completed(&self) -> &str {
        &self.keys[6]
    }
    /// `NS:jw.quarantine`.
    pub fn quarantine(&self) -> &str {
        &self.keys[7]
    }
    /// `NS:jw.quarantine.reason`.
    pub fn quarantine_reason(&self) -> &str {
        &self.keys[8]
    }
    /// `NS:jw.waiting`: jobs waiting for dependencies.
    pub fn waiting(&self) -> &str {
        &self.keys[9]
    }
    /// `NS:jw.queue`: the queue's settings (`paused`, `limit`).
    pub fn settings(&self) -> &str {
        &self.keys[10]
    }
    /// `NS:jw.tags`: tag → number of jobs carrying it.
    pub fn tags(&self) -> &str {
        &self.keys[11]
    }
    /// `NS:jw.failed`: failure group → number of trashed jobs in it.
    pub fn failed(&self) -> &str {
        &self.keys[12]
    }
    /// `NS:jw.recurring`: recurring template id → next slot (ms).
    pub fn recurring(&self) -> &str {
        &self.keys[13]
    }
    /// `NS:jw.outbox`: dependency releases owed to other queues.
    pub fn outbox(&self) -> &str {
        &self.keys[14]
    }
    /// `NS:jw.trashed`: job trashed through jobworker → trash time (the
    /// trash's retention index).
    pub fn trashed(&self) -> &str {
        &self.keys[16]
    }
    /// `NS:jw.cancelled`: zset id → cancel time: the cancelled jobs kept
    /// (bounded like the completed history).
    pub fn cancelled(&self) -> &str {
        &self.keys[17]
    }

    /// `NS:jw.idle`: worker → `<until ms> <lease ms>`, the workers waiting
    /// for a hand-off (`lua/lib/handoff.lua`).
    pub fn idle(&self) -> &str {
        &self.keys[18]
    }

    /// The channel on which posts hand `who` its jobs (`NS:jw.handoff.<who>`).
    pub fn handoff(&self, who: &str) -> String {
        format!("{}:jw.handoff.{who}", self.namespace)
    }

    /// `NS:jw.fence`: a key that never exists, declared by every script
    /// call on a cluster so that none runs while the queue's slot migrates
    /// (see `redis/cluster.rs`).
    pub fn fence(&self) -> String {
        format!("{}:jw.fence", self.namespace)
    }

    /// `NS:jw.tracked`: tracked job → time tracking began.
    pub fn tracked(&self) -> &str {
        &self.keys[15]
    }
    /// `NS:jw.tag.<tag>`: jobs carrying `tag`, by time tagged.
    pub fn tag(&self, tag: &str) -> String {
        format!("{}:jw.tag.{tag}", self.namespace)
    }
    /// `NS:jw.failed.<group>`: trashed jobs of a failure group, by time.
    pub fn failed_group(&self, group: &str) -> String {
        format!("{}:jw.failed.{group}", self.namespace)
    }
    /// `NS:jw.history.<id>`: the job's history (JSON events, oldest first).
    pub fn history(&self, id: &str) -> String {
        format!("{}:jw.history.{id}", self.namespace)
    }
    /// `NS:jw.dependents.<id>`: jobs (`queue\nid`) waiting for this one.
    pub fn dependents(&self, id: &str) -> String {
        format!("{}:jw.dependents.{id}", self.namespace)
    }
    /// `NS:jw.deps.<id>`: unmet dependencies (`queue\nid`) of this job.
    pub fn deps(&self, id: &str) -> String {
        format!("{}:jw.deps.{id}", self.namespace)
    }
    /// `NS:jw.minutes.<hour>`: jobs completed and failed per minute of an
    /// hour (hours since the Unix epoch; field `<minute>.<kind>`).
    pub fn minutes(&self, hour: i64) -> String {
        format!("{}:jw.minutes.{hour}", self.namespace)
    }
    /// `NS:jw.recur.<id>`: a recurring job's template.
    pub fn recur(&self, id: &str) -> String {
        format!("{}:jw.recur.{id}", self.namespace)
    }
    /// `NS:jw.stats.<day>`: the queue's statistics of a UTC day (days
    /// since the Unix epoch).
    pub fn stats(&self, day: i64) -> String {
        format!("{}:jw.stats.{day}", self.namespace)
    }
    /// `NS:<id>.owned` (taskflow's owner key).
    pub fn owned(&self, id: &str) -> String {
        format!("{}:{id}.owned", self.namespace)
    }
    /// `NS:<id>.last_modified` (taskflow's).
    pub fn last_modified(&self, id: &str) -> String {
        format!("{}:{id}.last_modified", self.namespace)
    }
    /// `NS:jw.leader`: the owner string of the worker leading the queue's
    /// maintenance (expires unless renewed; see `lua/leader.lua`).
    pub fn leader(&self) -> String {
        format!("{}:jw.leader", self.namespace)
    }
    /// `NS:jw.took`: claimers by the lease deadline of their last claim
    /// call that got jobs (see `lua/lib/claim_jobs.lua`).
    pub fn took(&self) -> String {
        format!("{}:jw.took", self.namespace)
    }
    /// `NS:jw.job.<id>` (jobworker's per-job state hash).
    pub fn job(&self, id: &str) -> String {
        format!("{}:jw.job.{id}", self.namespace)
    }
}

/// Queue names: 1–200 characters, no braces, colons or whitespace (they
/// would break the hash tag or the key layout).
pub(super) fn validate_queue(queue: &str) -> Result<()> {
    let bad = |c: char| c == '{' || c == '}' || c == ':' || c.is_whitespace() || c.is_control();
    if queue.is_empty() || queue.len() > 200 || queue.chars().any(bad) {
        return Err(Error::invalid(format!(
            "queue name {queue:?} must be 1 to 200 characters without braces, colons or spaces"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_taskflow_layout() {
        let k = QueueKeys::new("emails", "jw:{emails}", "jw");
        assert_eq!(k.listings(), "jw:{emails}:listings");
        assert_eq!(k.keys[1], "jw:{emails}:sequence");
        assert_eq!(k.trash(), "jw:{emails}:trash");
        assert_eq!(k.owned("u1"), "jw:{emails}:u1.owned");
        assert_eq!(k.last_modified("u1"), "jw:{emails}:u1.last_modified");
        assert_eq!(k.leader(), "jw:{emails}:jw.leader");
        let tf = QueueKeys::new("tf", "taskflow", "jw");
        assert_eq!(tf.listings(), "taskflow:listings");
    }

    #[test]
    fn bad_queue_names_are_refused() {
        for bad in ["", "a b", "a{b", "a:b", "x}"] {
            assert!(QueueKeys::default_namespace("jw", bad).unwrap_err().is_invalid());
        }
        assert_eq!(
            QueueKeys::default_namespace("jw", "emails").unwrap(),
            "jw:{emails}"
        );
    }
}
