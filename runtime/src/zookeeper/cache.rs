//! What one board knows about a queue's job znodes: the immutable postings
//! (cached by znode name, so a claim does not read every posting again),
//! the uuid → znode index, and the lease deadlines seen in lock bodies.
//!
//! Postings are never rewritten, so a cached one stays true until its znode
//! disappears from a listing. Jobs posted by taskflow are indexed the first
//! time a listing shows them. A znode taskflow cannot read either is moved
//! aside to the quarantine (see
//! [`ZooKeeperBoard::quarantine`](crate::zookeeper::ZooKeeperBoard::quarantine)).

mod fetch;
mod snapshot;

pub(crate) use snapshot::Snapshot;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::job::Priority;

/// Reads per multi-read request (keeps replies well under ZooKeeper's 1 MB
/// packet limit for ordinary postings).
pub(crate) const READ_BATCH: usize = 64;
/// A lock body without a deadline (taskflow's claim) is read again after
/// this long, in case the lock was replaced by a jobworker lease.
const UNTIMED_LOCK_RECHECK: Duration = Duration::from_secs(5);

/// A job znode jobworker can run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Known {
    /// The znode name (`jobNNNNNNNNNN`).
    pub znode: String,
    /// The job id (the posting's uuid).
    pub uuid: String,
    /// The job name (selects the handler).
    pub name: String,
    /// The exact priority (from jobworker's record for `VERY_*` postings).
    pub priority: Priority,
    /// The taskflow sequence number.
    pub seq: i64,
    /// The znode's data version (taskflow's claim checks it).
    pub version: i32,
    /// The znode's ctime (ms), for `created_on`.
    pub ctime_ms: i64,
    /// The posting's `details`.
    pub details: rmpv::Value,
    /// The posting's `book`.
    pub book: Option<crate::codec::Book>,
}

/// A cached job znode.
#[derive(Debug, Clone)]
enum Seen {
    Usable(Arc<Known>),
    /// Readable by taskflow but not by jobworker (e.g. a non-string uuid):
    /// left alone.
    Unusable,
}

/// What a board knows of a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockState {
    /// Never read (or a taskflow lock read a while ago).
    Unknown,
    /// A lease deadline still ahead.
    Ahead(i64),
    /// A lease deadline that passed when last read (it may have been
    /// extended since).
    Passed,
    /// No deadline (taskflow's claim), read recently.
    Untimed,
}

/// A lease deadline read from a lock body.
#[derive(Debug, Clone, Copy)]
struct LockSeen {
    deadline_ms: Option<i64>,
    read_at: Instant,
}

#[derive(Debug, Default)]
struct QueueCache {
    postings: HashMap<String, Seen>,
    by_uuid: HashMap<String, String>,
    locks: HashMap<String, LockSeen>,
    /// Znodes whose record this board has checked (reap's indexing).
    indexed: HashSet<String>,
    /// When a claim last looked for expired leases.
    recovered_at: Option<Instant>,
    /// Znodes whose claim failed or whose expired lease could not be
    /// recovered, and until when `wait` does not count them as work.
    stuck: HashMap<String, Instant>,
    /// uuid → znode learnt from job records (a heartbeat board never lists
    /// the queue); bounded by [`LOCATED_MAX`].
    located: HashMap<String, String>,
    /// The jobs path's creation zxid at the last listing (see `known`).
    jobs_made: Option<i64>,
}

/// Most uuid → znode entries learnt from records kept per queue.
const LOCATED_MAX: usize = 10_000;
/// Most postings (and so uuid index entries) kept per queue once a board
/// posts: a board that only posts never lists the queue, which is what
/// forgets postings whose job is gone. Listings are not bounded by it (a
/// listing forgets what it no longer shows), so a long queue is not read
/// again at every claim.
const POSTINGS_MAX: usize = 10_000;
/// Cached znodes no longer listed that a listing leaves for a later one
/// to forget, at least (see `known`).
const UNLISTED_SLACK: usize = 1_000;
/// Most lock deadlines kept per queue: a backstop, as an ended lease
/// forgets its lock (see [`Caches::unlock`]).
const LOCKS_MAX: usize = 10_000;

/// How long `wait` ignores a job whose claim (or lease recovery) just
/// failed, so a job that cannot be claimed does not make it spin.
const STUCK_BACKOFF: Duration = Duration::from_secs(1);

/// The caches of all queues of a board.
#[derive(Debug, Default)]
pub(crate) struct Caches {
    queues: Mutex<HashMap<String, QueueCache>>,
}

impl Caches {
    fn with<T>(&self, queue: &str, f: impl FnOnce(&mut QueueCache) -> T) -> T {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        f(queues.entry(queue.to_owned()).or_default())
    }

    /// (postings, uuid index entries, lock deadlines) cached over all
    /// queues (diagnostics).
    pub(crate) fn sizes(&self) -> (usize, usize, usize) {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .values()
            .map(QueueCache::sizes)
            .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
    }

    /// The znode name of job `uuid`, when known.
    pub(crate) fn znode_of(&self, queue: &str, uuid: &str) -> Option<String> {
        self.with(queue, |c| {
            c.by_uuid.get(uuid).or_else(|| c.located.get(uuid)).cloned()
        })
    }

    /// Forgets where job `uuid` was (it is gone).
    pub(crate) fn unlocate(&self, queue: &str, uuid: &str) {
        self.with(queue, |c| c.located.remove(uuid));
    }

    /// Remembers the znode of job `uuid` (read from its record).
    pub(crate) fn located(&self, queue: &str, uuid: &str, znode: &str) {
        self.with(queue, |c| {
            if c.located.len() >= LOCATED_MAX {
                c.located.clear();
            }
            c.located.insert(uuid.to_owned(), znode.to_owned());
        });
    }

    /// The cached posting of znode `znode`.
    pub(crate) fn known(&self, queue: &str, znode: &str) -> Option<Arc<Known>> {
        self.with(queue, |c| match c.postings.get(znode) {
            Some(Seen::Usable(k)) => Some(k.clone()),
            _ => None,
        })
    }

    /// Caches a posting read from ZooKeeper.
    pub(crate) fn insert(&self, queue: &str, known: Known) {
        self.with(queue, |c| c.insert(Arc::new(known)));
    }

    /// Caches a posting this board just posted, making room (see
    /// [`POSTINGS_MAX`]) by forgetting any other: a posting missing from
    /// the cache is only read again.
    pub(crate) fn insert_posted(&self, queue: &str, known: Known) {
        self.with(queue, |c| {
            if c.postings.len() >= POSTINGS_MAX && !c.postings.contains_key(&known.znode) {
                c.evict_posting();
            }
            c.insert(Arc::new(known));
        });
    }

    /// Forgets a znode that is gone (job `uuid`'s, when known).
    pub(crate) fn forget(&self, queue: &str, znode: &str) {
        self.with(queue, |c| {
            if let Some(Seen::Usable(k)) = c.postings.remove(znode) {
                c.by_uuid.remove(&k.uuid);
                c.located.remove(&k.uuid);
            }
            c.locks.remove(znode);
            c.indexed.remove(znode);
            c.stuck.remove(znode);
        });
    }

    /// Remembers that claiming `znode` (or recovering its expired lease)
    /// failed just now.
    pub(crate) fn stuck(&self, queue: &str, znode: &str) {
        self.with(queue, |c| {
            c.stuck.insert(znode.to_owned(), Instant::now() + STUCK_BACKOFF)
        });
    }

    /// Forgets that claiming `znode` failed (it was claimed).
    pub(crate) fn unstuck(&self, queue: &str, znode: &str) {
        self.with(queue, |c| c.stuck.remove(znode));
    }

    /// How long `wait` still ignores `znode` (see [`Caches::stuck`]).
    pub(crate) fn stuck_for(&self, queue: &str, znode: &str) -> Option<Duration> {
        self.with(queue, |c| {
            let left = c.stuck.get(znode)?.checked_duration_since(Instant::now());
            if left.is_none() {
                c.stuck.remove(znode);
            }
            left
        })
    }

    /// True (and remembered) when a claim should look for expired leases:
    /// at most once per `every` (reading the bodies of new locks costs a
    /// read each).
    pub(crate) fn recovery_due(&self, queue: &str, every: Duration) -> bool {
        self.with(queue, |c| match c.recovered_at {
            Some(at) if at.elapsed() < every => false,
            _ => {
                c.recovered_at = Some(Instant::now());
                true
            }
        })
    }

    /// True when the record of `znode` was checked by reap's indexing.
    pub(crate) fn indexed(&self, queue: &str, znode: &str) -> bool {
        self.with(queue, |c| c.indexed.contains(znode))
    }

    /// Remembers that the record of `znode` exists.
    pub(crate) fn mark_indexed(&self, queue: &str, znode: &str) {
        self.with(queue, |c| c.indexed.insert(znode.to_owned()));
    }

    /// What the board knows of `znode`'s lock at `now_ms`.
    fn lock_state(&self, queue: &str, znode: &str, now_ms: i64) -> LockState {
        self.with(queue, |c| match c.locks.get(znode) {
            Some(LockSeen {
                deadline_ms: Some(d), ..
            }) if *d > now_ms => LockState::Ahead(*d),
            Some(LockSeen {
                deadline_ms: Some(_), ..
            }) => LockState::Passed,
            Some(LockSeen {
                deadline_ms: None,
                read_at,
            }) if read_at.elapsed() < UNTIMED_LOCK_RECHECK => LockState::Untimed,
            _ => LockState::Unknown,
        })
    }

    /// Forgets what was read of `znode`'s lock (it is gone, or the lease
    /// it carried ended: a lock seen there later is another one).
    pub(crate) fn unlock(&self, queue: &str, znode: &str) {
        self.with(queue, |c| c.locks.remove(znode));
    }

    /// Remembers a lock's deadline.
    pub(crate) fn saw_lock(&self, queue: &str, znode: &str, deadline_ms: Option<i64>) {
        self.with(queue, |c| {
            if c.locks.len() >= LOCKS_MAX && !c.locks.contains_key(znode) {
                // Any one: a lock not cached is only read again.
                let any = c.locks.keys().next().cloned();
                if let Some(any) = any {
                    c.locks.remove(&any);
                }
            }
            c.locks.insert(
                znode.to_owned(),
                LockSeen {
                    deadline_ms,
                    read_at: Instant::now(),
                },
            );
        });
    }
}

impl QueueCache {
    /// Forgets the cached znodes that `listed` (a whole listing's job
    /// znodes) no longer shows.
    fn forget_unlisted(&mut self, listed: &[String]) {
        let listed: HashSet<&String> = listed.iter().collect();
        let gone: Vec<String> = (self.postings.keys())
            .filter(|n| !listed.contains(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(Seen::Usable(k)) = self.postings.remove(&name) {
                self.by_uuid.remove(&k.uuid);
            }
            self.locks.remove(&name);
            self.indexed.remove(&name);
            self.stuck.remove(&name);
        }
    }

    /// Caches a posting and indexes its uuid.
    fn insert(&mut self, known: Arc<Known>) {
        self.by_uuid.insert(known.uuid.clone(), known.znode.clone());
        self.postings.insert(known.znode.clone(), Seen::Usable(known));
    }

    /// Forgets any one cached posting (and its uuid's index entry).
    fn evict_posting(&mut self) {
        let Some(any) = self.postings.keys().next().cloned() else {
            return;
        };
        if let Some(Seen::Usable(k)) = self.postings.remove(&any) {
            if self.by_uuid.get(&k.uuid) == Some(&any) {
                self.by_uuid.remove(&k.uuid);
            }
        }
    }

    /// (postings, uuid index entries, lock deadlines) cached.
    fn sizes(&self) -> (usize, usize, usize) {
        (self.postings.len(), self.by_uuid.len(), self.locks.len())
    }
}

/// Job `i` of a queue whose postings differ only by number (for tests).
#[cfg(test)]
pub(crate) fn numbered_known(i: usize) -> Known {
    Known {
        znode: format!("job{i:010}"),
        uuid: format!("uuid-{i}"),
        name: "f".to_owned(),
        priority: Priority::NORMAL,
        seq: i as i64,
        version: 0,
        ctime_ms: 0,
        details: rmpv::Value::Nil,
        book: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(i: usize) -> Known {
        numbered_known(i)
    }

    #[test]
    fn posting_keeps_the_postings_and_their_index_bounded() {
        let caches = Caches::default();
        for i in 0..POSTINGS_MAX + 100 {
            caches.insert_posted("q", known(i));
        }
        let (postings, by_uuid, _) = caches.sizes();
        assert_eq!(postings, POSTINGS_MAX);
        assert_eq!(by_uuid, POSTINGS_MAX);
        // The latest post is cached, and every indexed uuid has its posting.
        let last = known(POSTINGS_MAX + 99);
        assert_eq!(
            caches.znode_of("q", &last.uuid).as_deref(),
            Some(last.znode.as_str())
        );
        caches.with("q", |c| {
            for (uuid, znode) in &c.by_uuid {
                assert!(matches!(c.postings.get(znode), Some(Seen::Usable(k)) if &k.uuid == uuid));
            }
        });
    }

    #[test]
    fn lock_deadlines_are_bounded_and_forgotten_when_a_lease_ends() {
        let caches = Caches::default();
        for i in 0..LOCKS_MAX + 100 {
            caches.saw_lock("q", &format!("job{i:010}"), Some(1));
        }
        assert_eq!(caches.sizes().2, LOCKS_MAX);
        let last = format!("job{:010}", LOCKS_MAX + 99);
        assert_eq!(caches.lock_state("q", &last, 0), LockState::Ahead(1));
        caches.unlock("q", &last);
        assert_eq!(caches.lock_state("q", &last, 0), LockState::Unknown);
        assert_eq!(caches.sizes().2, LOCKS_MAX - 1);
    }
}
