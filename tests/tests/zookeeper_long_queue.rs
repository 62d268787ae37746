//! A long ZooKeeper queue: a claim that listed at least a thousand jobs
//! leaves the candidates it did not try to this board's next claims for a
//! moment (`zookeeper/claim/reuse.rs`). Claims from such a listing keep
//! the queue's order, never take a job twice across claimers, and let go
//! of a job another claimer retried with a delay since the listing.

use std::collections::HashSet;
use std::time::Duration;

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Abandon, Board, JobId, JobState, NewJob};
use jobworker_tests::{shared_zookeeper, unique_queue};

const LEASE: Duration = Duration::from_secs(60);
/// Longer than a listing that is reused (1,000 jobs).
const LONG: usize = 1_200;

/// A board (its own session) under `root`.
async fn board(root: &str) -> ZooKeeperBoard {
    let o = ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()));
    ZooKeeperBoard::connect(o)
        .await
        .expect("connect to the test ZooKeeper")
}

/// Posts `n` jobs to `q`, one after the other; their ids in posting
/// order.
async fn post_many(board: &ZooKeeperBoard, q: &str, n: usize) -> Vec<JobId> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(board.post(q, NewJob::new("long")).await.unwrap());
    }
    ids
}

/// Claims up to `count` jobs of `q` as `who`; their ids in claim order.
async fn claim(board: &ZooKeeperBoard, q: &str, who: &str, count: usize) -> Vec<JobId> {
    let claimed = board.claim(&[q], who, LEASE, count).await.unwrap();
    claimed.into_iter().map(|c| c.lease.job().clone()).collect()
}

/// Claims and consumes `q` as `who` until it finds nothing; the ids in
/// claim order.
async fn drain(board: &ZooKeeperBoard, q: &str, who: &str) -> Vec<JobId> {
    let mut taken = Vec::new();
    loop {
        let claimed = board.claim(&[q], who, LEASE, 7).await.unwrap();
        if claimed.is_empty() {
            return taken;
        }
        for c in claimed {
            taken.push(c.lease.job().clone());
            board.consume(c.lease).await.unwrap();
        }
    }
}

/// One claimer takes a long queue in its order (FIFO here: one
/// priority), seven jobs a claim, most of them from a reused listing.
#[tokio::test(flavor = "multi_thread")]
async fn one_claimer_takes_a_long_queue_in_order() {
    let root = format!("/{}", unique_queue("long-order"));
    let a = board(&root).await;
    let q = unique_queue("long");
    let posted = post_many(&a, &q, LONG).await;
    assert_eq!(drain(&a, &q, "A").await, posted);
}

/// Two claimers, each reusing its own listings, drain a long queue
/// between them: every job is claimed exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn two_claimers_take_each_job_of_a_long_queue_once() {
    let root = format!("/{}", unique_queue("long-once"));
    let (a, b) = (board(&root).await, board(&root).await);
    let q = unique_queue("long");
    let posted: HashSet<JobId> = post_many(&a, &q, LONG).await.into_iter().collect();
    let (by_a, by_b) = tokio::join!(drain(&a, &q, "A"), drain(&b, &q, "B"));
    let mut seen = HashSet::new();
    for id in by_a.iter().chain(&by_b) {
        assert!(seen.insert(id.clone()), "job {id} was claimed twice");
    }
    assert_eq!(seen, posted, "every job claimed once");
    assert!(!by_a.is_empty() && !by_b.is_empty(), "both claimers took jobs");
}

/// A job that another claimer retried with a delay after this claimer
/// listed the queue is not claimed from that listing before it is due.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_retried_with_a_delay_since_the_listing_waits_its_delay() {
    let root = format!("/{}", unique_queue("long-delay"));
    let (a, b) = (board(&root).await, board(&root).await);
    let q = unique_queue("long");
    post_many(&a, &q, LONG).await;
    // Both boards read every posting once, so that their next listings
    // are quick.
    claim(&a, &q, "A", 1).await;
    claim(&b, &q, "B", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A lists (and keeps the rest); B lists and takes the next job, and
    // retries it in a minute.
    let first = claim(&a, &q, "A", 1).await;
    let retried = b.claim(&[q.as_str()], "B", LEASE, 1).await.unwrap().remove(0);
    let retried_id = retried.lease.job().clone();
    assert_ne!(first[0], retried_id);
    let delay = Duration::from_secs(60);
    b.abandon(
        retried.lease,
        Abandon::Retry {
            delay,
            error: "later".into(),
        },
    )
    .await
    .unwrap();
    let next = claim(&a, &q, "A", 1).await;
    assert_ne!(next[0], retried_id, "claimed before its delay was over");
    assert_eq!(a.state(&q, &retried_id).await.unwrap(), JobState::Scheduled);
}
