//! The setup shared by the Redis feature tests (`tests/tests/redis_*.rs`):
//! a board on the test binary's shared redis-server (or, with
//! `JOBWORKER_TEST_BOARD=cluster`, its shared Redis Cluster) and a fresh queue,
//! posting, claiming and consuming in one call, the server's clock, and
//! the listings those tests compare.
//!
//! The helpers that take a board work on any backend (the feature suite
//! uses them too). Every helper panics with a message naming what failed,
//! so a test reads as its steps.

use std::collections::BTreeSet;
use std::time::Duration;

use jobworker::board::Admin;
use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Abandon, Board, Claimed, JobId, JobState, ListFilter, NewJob, Page};

use crate::{shared_cluster, shared_redis, unique_queue, wait_for, wait_until};

/// Environment variable choosing the board of the feature tests: `redis`
/// (the default) or `cluster`.
pub const TEST_BOARD_ENV: &str = "JOBWORKER_TEST_BOARD";

/// The URL of the board the feature tests run on: the test binary's
/// shared redis-server, or its shared 3-master cluster when
/// [`TEST_BOARD_ENV`] is `cluster`.
pub fn board_url() -> String {
    match std::env::var(TEST_BOARD_ENV).as_deref() {
        Ok("cluster") => shared_cluster().url(),
        Ok("redis") | Err(_) => shared_redis().url().to_owned(),
        Ok(other) => panic!("{TEST_BOARD_ENV}={other}: expected redis or cluster"),
    }
}

/// An expiry no test outlives: leases that must not run out.
pub const LONG: Duration = Duration::from_secs(60);

/// One day in milliseconds.
pub const DAY_MS: i64 = 86_400_000;

/// How long a test waits for something it expects to happen soon (a job
/// falling due, a clock passing a point): generous for a busy machine.
pub const SOON: Duration = Duration::from_secs(10);

/// A board on the feature tests' server ([`board_url`]).
pub async fn board() -> RedisBoard {
    RedisBoard::connect(&board_url())
        .await
        .expect("connect to the test board")
}

/// The start of most tests: a board and a fresh queue named after `prefix`.
pub async fn board_and_queue(prefix: &str) -> (RedisBoard, String) {
    (board().await, unique_queue(prefix))
}

/// A board and one fresh queue per prefix of `prefixes`, for tests across
/// queues: `let (b, [q1, q2]) = board_and_queues(["a", "b"]).await;`.
pub async fn board_and_queues<const N: usize>(prefixes: [&str; N]) -> (RedisBoard, [String; N]) {
    (board().await, prefixes.map(unique_queue))
}

/// A board whose prefix (config key, event channels, namespaces) is its own.
pub async fn private_prefix_board(prefix: &str) -> RedisBoard {
    let mut opts = RedisOptions::new(board_url());
    opts.prefix = prefix.to_owned();
    RedisBoard::with_options(opts).await.unwrap()
}

/// The first `limit` entries.
pub fn page(limit: usize) -> Page {
    Page { offset: 0, limit }
}

/// What taskflow's claim of job `id` does (its owner key, nothing of
/// jobworker's), and the lease a verb without a token (`--any-token`)
/// settles it through.
pub async fn claimed_outside(b: &RedisBoard, q: &str, id: &JobId, owner: &str) -> jobworker::Lease {
    let keys = b.keys(q).unwrap();
    let _: () = redis::cmd("SET")
        .arg(keys.owned(id.as_str()))
        .arg(owner)
        .query_async(&mut b.connection())
        .await
        .unwrap();
    jobworker::Lease::new(q, id.clone(), owner, 0)
}

/// Claims up to `count` jobs of `q` as `w` with a [`LONG`] expiry.
pub async fn claim<B: Board>(b: &B, q: &str, count: usize) -> Vec<Claimed> {
    b.claim(&[q], "w", LONG, count).await.unwrap()
}

/// Claims the one job that must be claimable in `q`.
pub async fn claim_one<B: Board>(b: &B, q: &str) -> Claimed {
    let mut got = claim(b, q, 1).await;
    assert_eq!(got.len(), 1, "expected one claimable job in {q}");
    got.remove(0)
}

/// Claims the next job of `q` and consumes it; returns the claim (its
/// lease already settled: read it, do not settle it again).
pub async fn claim_and_consume<B: Board>(b: &B, q: &str) -> Claimed {
    let c = claim_one(b, q).await;
    b.consume(crate::copy_of(&c.lease)).await.unwrap();
    c
}

/// Claims until one job comes back (claims only: no reap), or panics.
pub async fn claim_within<B: Board>(b: &B, q: &str, timeout: Duration) -> Claimed {
    let what = format!("something claimable in {q}");
    wait_for(&what, timeout, || async {
        claim(b, q, 1).await.into_iter().next()
    })
    .await
}

/// Posts one job per name of `names`, in order; returns their ids.
pub async fn post_each<B: Board>(b: &B, q: &str, names: &[&str]) -> Vec<JobId> {
    let mut ids = Vec::new();
    for name in names {
        ids.push(b.post(q, NewJob::new(*name)).await.unwrap());
    }
    ids
}

/// Posts `n` jobs named `name`; returns their ids.
pub async fn post_n<B: Board>(b: &B, q: &str, name: &str, n: usize) -> Vec<JobId> {
    post_each(b, q, &vec![name; n]).await
}

/// An abandon that counts an attempt and retries at once with `error`.
pub fn retry_now(error: &str) -> Abandon {
    Abandon::Retry {
        delay: Duration::ZERO,
        error: error.into(),
    }
}

/// The Redis server's clock (`TIME`) in milliseconds: the clock the
/// board's scripts use.
pub async fn server_ms<B: Admin>(b: &B) -> i64 {
    b.server_ms().await.expect("read the server's clock")
}

/// Waits until the server's clock is past `ms`: for tests of what the
/// passage of time does (delays, expiries, ages), on the board's own clock.
pub async fn server_clock_passes<B: Admin>(b: &B, ms: i64) {
    let left = u64::try_from(ms - server_ms(b).await).unwrap_or(0);
    let what = format!("the server's clock to pass {ms} ms");
    wait_until(&what, SOON + Duration::from_millis(left), || async {
        server_ms(b).await > ms
    })
    .await;
}

/// Waits until the server's clock moves to its next millisecond, so that
/// what happens next carries a later time than what happened before.
pub async fn next_server_ms<B: Admin>(b: &B) {
    let now = server_ms(b).await;
    server_clock_passes(b, now).await;
}

/// The names of `claimed`, in order.
pub fn names(claimed: &[Claimed]) -> Vec<&str> {
    claimed.iter().map(|c| c.name.as_str()).collect()
}

/// The ids of the jobs of `q` in `state`.
pub async fn ids_in<B: Board>(b: &B, q: &str, state: JobState) -> BTreeSet<JobId> {
    b.list(q, ListFilter::State(state), page(10_000))
        .await
        .unwrap()
        .into_iter()
        .map(|j| JobId::from(j.id))
        .collect()
}

/// The set of `ids`.
pub fn set<const N: usize>(ids: [&JobId; N]) -> BTreeSet<JobId> {
    ids.into_iter().cloned().collect()
}

/// The kinds of the events in the history of job `id`, oldest first.
pub async fn event_kinds<B: Admin>(b: &B, q: &str, id: &JobId) -> Vec<String> {
    b.history(q, id)
        .await
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect()
}
