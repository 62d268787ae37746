//! Failed jobs on the Redis board against a real server: failure groups
//! by reason kind, stalled leases, the trash kept to its count and age,
//! retry and purge.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, JobId, JobState, NewJob, Page};
use jobworker_tests::features::*;
use jobworker_tests::{copy_of, unique_queue, wait_until};
use redis::AsyncCommands;

#[tokio::test]
async fn trashed_jobs_go_to_failure_groups_by_reason_kind() {
    let (b, q) = board_and_queue("groups").await;
    let fatal = b.post(&q, NewJob::new("fatal")).await.unwrap();
    let plain = b.post(&q, NewJob::new("plain")).await.unwrap();
    let slow = b.post(&q, NewJob::new("slow").max_attempts(1)).await.unwrap();
    let flaky = b.post(&q, NewJob::new("flaky").max_attempts(2)).await.unwrap();
    let got = claim(&b, &q, 4).await;
    let lease = |id: &JobId| copy_of(&got.iter().find(|c| c.lease.job() == id).unwrap().lease);
    b.trash(lease(&fatal), "fatal: bad input").await.unwrap();
    b.trash(lease(&plain), "something broke").await.unwrap();
    let to = retry_now("Timeout: took too long");
    assert_eq!(b.abandon(lease(&slow), to).await.unwrap(), JobState::Trashed);
    let retry = retry_now("flaky failure");
    assert_eq!(
        b.abandon(lease(&flaky), retry.clone()).await.unwrap(),
        JobState::Ready,
        "one attempt of two used"
    );
    let again = claim_one(&b, &q).await;
    assert_eq!((again.attempt, again.max_attempts), (2, 2));
    assert_eq!(b.abandon(again.lease, retry).await.unwrap(), JobState::Trashed);

    let groups: Vec<(String, u64)> = b
        .failed(&q)
        .await
        .unwrap()
        .into_iter()
        .map(|g| {
            assert_eq!(g.queue, q);
            (g.group, g.count)
        })
        .collect();
    assert_eq!(groups[0], ("error".to_owned(), 2), "largest first: {groups:?}");
    let groups: BTreeMap<String, u64> = groups.into_iter().collect();
    assert_eq!(
        groups,
        [("error".into(), 2), ("fatal".into(), 1), ("timeout".into(), 1)].into()
    );
    let errors: BTreeSet<JobId> = b
        .failed_jobs(&q, "error", Page::default())
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(errors, set([&plain, &flaky]));
    assert_eq!(
        b.failed_jobs(&q, "fatal", Page::default()).await.unwrap(),
        std::slice::from_ref(&fatal)
    );
    let info = b.show(&q, &fatal).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert_eq!(info.group.as_deref(), Some("fatal"));
    assert_eq!(info.reason.as_deref(), Some("fatal: bad input"));
    let info = b.show(&q, &flaky).await.unwrap();
    assert_eq!(info.attempts, 2);
    assert!(
        info.reason
            .as_deref()
            .unwrap_or("")
            .contains("attempts exhausted"),
        "{info:?}"
    );
}

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

#[tokio::test]
async fn retry_one_job_resets_its_attempts() {
    let (b, q) = board_and_queue("retry-one").await;
    let id = b.post(&q, NewJob::new("r").max_attempts(2)).await.unwrap();
    for _ in 0..2 {
        let c = claim_one(&b, &q).await;
        b.abandon(c.lease, retry_now("fatal-ish: no")).await.unwrap();
    }
    assert_eq!(b.state(&q, &id).await.unwrap(), JobState::Trashed);
    assert_eq!(b.show(&q, &id).await.unwrap().attempts, 2);
    let results = b.retry(&q, &[id.clone(), "no-such-job".into()]).await.unwrap();
    assert!(results[0].is_ok());
    assert!(results[1].as_ref().unwrap_err().is_not_found());
    let info = b.show(&q, &id).await.unwrap();
    assert_eq!(
        (info.state, info.attempts, info.group),
        (JobState::Ready, 0, None)
    );
    assert!(b.failed(&q).await.unwrap().is_empty(), "the group emptied");
    assert!(
        ids_in(&b, &q, JobState::Trashed).await.is_empty(),
        "gone from taskflow's trash"
    );
    let c = claim_one(&b, &q).await;
    assert_eq!(
        (c.lease.job().clone(), c.attempt, c.max_attempts),
        (id.clone(), 1, 2)
    );
    // Retrying a job that is not trashed is refused.
    assert!(b.retry(&q, &[id]).await.unwrap()[0]
        .as_ref()
        .unwrap_err()
        .is_not_found());
}

#[tokio::test]
async fn retry_a_whole_group_or_every_group() {
    let (b, q) = board_and_queue("retry-group").await;
    let fatal = trashed(&b, &q, "f", 2, "fatal: x").await;
    let errors = trashed(&b, &q, "e", 3, "oops").await;
    let crashed = trashed(&b, &q, "c", 1, "crashed: signal 9").await;
    assert_eq!(b.settle_failed(&q, Some("error"), false).await.unwrap(), 3);
    for id in &errors {
        let info = b.show(&q, id).await.unwrap();
        assert_eq!((info.state, info.attempts), (JobState::Ready, 0));
    }
    let groups: BTreeSet<String> = b.failed(&q).await.unwrap().into_iter().map(|g| g.group).collect();
    assert_eq!(groups, ["crashed".to_owned(), "fatal".to_owned()].into());
    assert_eq!(b.settle_failed(&q, None, false).await.unwrap(), 3);
    assert!(b.failed(&q).await.unwrap().is_empty());
    for id in fatal.iter().chain(&crashed) {
        assert_eq!(b.state(&q, id).await.unwrap(), JobState::Ready);
    }
    assert_eq!(b.job_count(&q).await.unwrap(), 6);
    assert_eq!(claim(&b, &q, 10).await.len(), 6);
}

#[tokio::test]
async fn purge_deletes_trashed_jobs_for_good() {
    let (b, q) = board_and_queue("purge").await;
    let keys = b.keys(&q).unwrap();
    let one = trashed(&b, &q, "p", 1, "fatal: x").await.remove(0);
    let rest = trashed(&b, &q, "p", 3, "boom").await;
    let results = b.purge(&q, &[one.clone(), "no-such-job".into()]).await.unwrap();
    assert!(results[0].is_ok());
    assert!(results[1].as_ref().unwrap_err().is_not_found());
    assert!(b.state(&q, &one).await.unwrap_err().is_not_found());
    assert!(b.history(&q, &one).await.unwrap_err().is_not_found());
    let groups: Vec<String> = b.failed(&q).await.unwrap().into_iter().map(|g| g.group).collect();
    assert_eq!(groups, ["error"]);
    assert_eq!(b.settle_failed(&q, None, true).await.unwrap(), 3);
    assert!(b.failed(&q).await.unwrap().is_empty());
    for id in &rest {
        assert!(b.state(&q, id).await.unwrap_err().is_not_found());
    }
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
