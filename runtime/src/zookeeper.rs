//! The ZooKeeper board: taskflow's `ZookeeperJobBoard` layout, so Python
//! taskflow and jobworker share jobs, plus jobworker's own state beside it.
//!
//! # Layout
//!
//! Queue `Q` of a board connected to `host:port/R` is the taskflow board
//! whose `path` is `R/Q/jobs` (see [`ZooKeeperBoard::jobs_path`]):
//!
//! - `R/Q/jobs/jobNNNNNNNNNN`: one persistent sequential znode per job with
//!   taskflow's JSON posting `{"uuid", "name", "priority", "details"}`,
//!   written once, byte for byte as Python writes it. The job id is the
//!   posting's `uuid`; jobworker's arguments are `details["args"]`, and
//!   jobworker priorities beyond taskflow's five names show as the nearest
//!   name (the exact value is in jobworker's record).
//! - `R/Q/jobs/jobNNNNNNNNNN.lock`: the claim, an ephemeral sibling with
//!   `{"owner": "<who>", "lease_deadline_ms": …, "lease_ms": …, "claim_id":
//!   …}`. Taskflow reads only `owner`; the rest is jobworker's lease.
//! - `R/Q/.trash/…`, `R/Q/.entities/conductor/…`: taskflow's trash and
//!   entities (its rule: the last path component replaced).
//! - `R/Q/.jw/…`: jobworker's own znodes, outside the jobs path so taskflow
//!   never lists them: `ids/<uuid>` (the job's record: exact priority,
//!   attempts, retry time, last token, reason, how it ended), `delayed/
//!   <uuid>@<ms>` (not claimable before `ms`), `history/<hour>/<uuid>`
//!   (completed jobs, pruned to the history limits), `quarantine/` (job
//!   znodes nobody can read, moved aside with the reason), `recurring/<id>`
//!   (recurring templates), `leader` (the maintenance leader, ephemeral)
//!   and `waiting/<uuid>` (the posting of a job waiting for dependencies:
//!   it has no job znode until they are consumed, `deps.rs`); see
//!   `paths.rs` for all of them.
//!
//! # Claims and leases
//!
//! A claim is taskflow's transaction (check the job znode's version +
//! create the ephemeral lock) with a lease deadline in the lock body; the
//! fencing token is the lock znode's creation zxid (ZooKeeper's global,
//! ever-growing transaction id), so a later claim of the job always has a
//! larger token. `extend` rewrites the deadline (version-checked); claims
//! and `reap` recover locks whose deadline passed (delete the lock, count an
//! attempt, trash the job once its attempts are used up) and never touch a
//! lock without a deadline (taskflow's claims, which live as long as their
//! session). Every recovery and every end of a claim rewrites the job's
//! record at the version read, and extends check it too, so a lock made
//! again after a recovery (version 0, like the one recovered) is never
//! taken for the old one by a late recoverer or a stale holder. Deadlines and retry times are on the server's clock, estimated
//! from the mtime of the znodes the board writes. A claim also ends with
//! the session that made it, as in taskflow.
//!
//! # Access
//!
//! Without credentials every znode is `world:anyone` (kazoo's default).
//! With digest credentials (`user:password@host:port/root`, see
//! [`ZooKeeperOptions::digest`]) the session authenticates and every znode
//! it creates is creator-only, plus read for an optional reader identity.
//! With [`ZooKeeperOptions::tls`] every server is reached over TLS (see
//! [`ZooKeeperTls`]).
//!
//! # Features
//!
//! The qless features are here, dependencies within and across queues
//! included (see `capabilities.rs`).

mod abandon;
mod access;
mod board;
mod cache;
mod cancel;
mod capabilities;
mod claim;
mod claim_named;
mod config;
mod connect;
mod consume;
mod deps;
mod entities;
mod events;
mod extend;
mod failed;
mod finish;
mod history;
mod json;
mod leader;
mod lease;
mod limit;
mod locate;
mod options;
mod paths;
mod post;
mod posting;
mod priority;
mod read;
mod reconnect;
mod record;
mod recover;
mod recurring;
mod retention;
mod session;
mod settings;
mod stats;
mod tags;
mod take_back;
mod tally;
mod tls;
mod track;
mod trash;
mod unique;
mod wait;

pub use access::Digest;
pub use board::ZooKeeperBoard;
pub use tls::ZooKeeperTls;
/// Fuzzing entry: a JSON posting decodes, re-encodes and decodes the same.
///
/// Every decoded posting must encode (its values came from JSON, and the
/// writer allows the nesting the reader does), and "the same" is checked on
/// the bytes: the second decode must encode to exactly the first encoding.
/// Comparing the values would fail on a `NaN` in `details`, which Python's
/// JSON allows and which never equals itself.
#[doc(hidden)]
pub fn fuzz_posting(bytes: &[u8]) {
    let encode = |p: &posting::JsonPosting| {
        posting::encode(&p.uuid, &p.name, p.priority, &p.details, p.book.as_ref())
            .unwrap_or_else(|e| panic!("a decoded posting does not encode: {e}"))
    };
    let Ok(p) = posting::decode(bytes) else {
        return;
    };
    let encoded = encode(&p);
    let again =
        posting::decode(&encoded).unwrap_or_else(|e| panic!("a re-encoded posting does not decode: {e:?}"));
    assert_eq!(encode(&again), encoded, "a posting changed through a re-encode");
    assert_eq!(
        (&again.uuid, &again.name, again.priority),
        (&p.uuid, &p.name, p.priority),
        "a posting's fields changed through a re-encode"
    );
}

/// Fuzzing entry: lock bodies and job records parse without panicking, and
/// a lock body survives its own encoding.
#[doc(hidden)]
pub fn fuzz_lock_and_record(bytes: &[u8]) {
    let body = record::LockBody::parse(bytes);
    assert_eq!(
        record::LockBody::parse(&body.to_bytes()),
        body,
        "a lock body changed through a re-encode"
    );
    if let Some(r) = record::JobRecord::from_bytes(bytes) {
        assert_eq!(
            record::JobRecord::from_bytes(&r.to_bytes()),
            Some(r),
            "a record changed through a re-encode"
        );
    }
}

pub use options::{ZooKeeperOptions, DEFAULT_HISTORY_AGE, DEFAULT_HISTORY_COUNT, DEFAULT_SESSION_TIMEOUT};
