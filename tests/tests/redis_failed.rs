//! Failed jobs on the Redis board against a real server: stalled leases
//! in their group, the trash kept to its count and age, and a purge that
//! leaves no Redis state behind. Failure groups, retry and purge as every
//! board has them are in the feature suite (`feature_suite/failed.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, JobId, JobState, NewJob, Page};
use jobworker_tests::features::*;
use jobworker_tests::{unique_queue, wait_until};
use redis::AsyncCommands;

#[tokio::test]
async fn an_expired_lease_with_no_attempts_left_lands_in_the_stalled_group() {
    let (b, q) = board_and_queue("stalled").await;
    let id = b.post(&q, NewJob::new("s").max_attempts(1)).await.unwrap();
    b.claim(&[&q], "sleepy", Duration::from_millis(100), 1)
        .await
        .unwrap();
    wait_until("the lease to run out on the server", SOON, || async {
        b.find_owner(&q, &id).await.unwrap().is_none()
    })
    .await;
    assert_eq!(b.reap(&q).await.unwrap().stalled, 1);
    let info = b.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert_eq!(info.group.as_deref(), Some("stalled"), "{info:?}");
    assert_eq!(b.failed_jobs(&q, "stalled", Page::default()).await.unwrap(), [id]);
}

/// Posts `n` jobs named `name` and trashes them with `reason`.
async fn trashed(b: &RedisBoard, q: &str, name: &str, n: usize, reason: &str) -> Vec<JobId> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(b.post(q, NewJob::new(name).max_attempts(3)).await.unwrap());
    }
    for c in claim(b, q, n).await {
        b.trash(c.lease, reason).await.unwrap();
    }
    ids
}

/// A board on the shared server with the trash kept to `count` jobs and
/// `age`.
async fn trash_bound_board(count: usize, age: Duration) -> RedisBoard {
    let mut opts = RedisOptions::new(board_url());
    opts.trash_count = count;
    opts.trash_age = age;
    RedisBoard::with_options(opts).await.unwrap()
}

/// Seen: the trash (dead letter) grew forever. Now claims prune it to its
/// count, oldest first, keeping the failure groups' counts right.
#[tokio::test]
async fn the_trash_is_kept_to_its_count_oldest_first() {
    let b = trash_bound_board(5, jobworker::redis::DEFAULT_TRASH_AGE).await;
    let q = unique_queue("trash-count");
    let mut ids = Vec::new();
    for _ in 0..8 {
        // One at a time, each in a later ms: their trash times differ.
        ids.extend(trashed(&b, &q, "dead", 1, "fatal: gone").await);
        next_server_ms(&b).await;
    }
    for _ in 0..3 {
        claim(&b, &q, 1).await;
    }
    let kept = ids_in(&b, &q, JobState::Trashed).await;
    assert_eq!(
        kept,
        ids[3..].iter().cloned().collect::<BTreeSet<_>>(),
        "the 5 newest stay"
    );
    for id in &ids[..3] {
        let e = b.state(&q, id).await.unwrap_err();
        assert!(e.is_not_found(), "{id} pruned: {e}");
    }
    let groups = b.failed(&q).await.unwrap();
    assert_eq!(groups.iter().map(|g| g.count).sum::<u64>(), 5, "{groups:?}");
    let trash_len: usize = b.connection().hlen(b.keys(&q).unwrap().trash()).await.unwrap();
    assert_eq!(trash_len, 5, "taskflow's trash holds the 5 kept");
}

/// Trashed jobs older than the trash's age go, and a trashed job's id
/// posted again (a new life) is not pruned with its old entry.
#[tokio::test]
async fn the_trash_is_kept_to_its_age_and_spares_a_reposted_id() {
    let b = trash_bound_board(jobworker::redis::DEFAULT_TRASH_COUNT, Duration::from_millis(300)).await;
    let q = unique_queue("trash-age");
    let old = trashed(&b, &q, "dead", 3, "fatal: gone").await;
    let trashed_at = server_ms(&b).await;
    let reposted = b.post(&q, NewJob::new("again").id(old[0].clone())).await.unwrap();
    // The trashed jobs age past the trash's age on the server's clock.
    server_clock_passes(&b, trashed_at + 400).await;
    claim(&b, &q, 1).await.into_iter().for_each(drop);
    assert!(ids_in(&b, &q, JobState::Trashed).await.is_empty());
    assert!(b.failed(&q).await.unwrap().is_empty());
    assert_eq!(
        b.show(&q, &reposted).await.unwrap().name,
        "again",
        "the new life is kept"
    );
}

/// Purged jobs leave no Redis state behind: no history, no per-job keys,
/// nothing in taskflow's trash (the feature suite's purge test checks what
/// every board shows).
#[tokio::test]
async fn purge_leaves_no_state_behind() {
    let (b, q) = board_and_queue("purge").await;
    let keys = b.keys(&q).unwrap();
    let one = trashed(&b, &q, "p", 1, "fatal: x").await.remove(0);
    trashed(&b, &q, "p", 3, "boom").await;
    assert!(b.purge(&q, std::slice::from_ref(&one)).await.unwrap()[0].is_ok());
    assert!(b.history(&q, &one).await.unwrap_err().is_not_found());
    assert_eq!(b.settle_failed(&q, None, true).await.unwrap(), 3);
    let mut con = b.connection();
    let trash: usize = con.hlen(keys.trash()).await.unwrap();
    assert_eq!(trash, 0, "taskflow's trash is empty");
    let pattern = format!(
        "{}:jw.job.*",
        keys.namespace.replace('{', "\\{").replace('}', "\\}")
    );
    let left: Vec<String> = con.keys(pattern).await.unwrap();
    assert!(left.is_empty(), "purged jobs left state behind: {left:?}");
}
