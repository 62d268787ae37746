//! Failure groups: trashed jobs grouped by the kind of their failure,
//! retried (one, a group, every group) with fresh attempts, or purged for
//! good.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jobworker::board::Admin;
use jobworker::{Board, Claimed, JobId, JobState, NewJob, Page, Priority};
use serde_json::json;

use super::{listed_ids, FeatureHarness, LONG, SOON};
use crate::features::retry_now;
use crate::{copy_of, unique_queue};

/// Claims up to `count` jobs of `q` as `w` with a [`LONG`] expiry.
async fn claim<B: Board>(b: &B, q: &str, count: usize) -> Vec<Claimed> {
    b.claim(&[q], "w", LONG, count).await.unwrap()
}

/// Claims the one job that must be claimable in `q`.
async fn claim_one<B: Board>(b: &B, q: &str) -> Claimed {
    let mut got = claim(b, q, 1).await;
    assert_eq!(got.len(), 1, "expected one claimable job in {q}");
    got.remove(0)
}

/// Posts `n` jobs named `name` and trashes them with `reason`.
async fn trashed<B: Board>(b: &B, q: &str, name: &str, n: usize, reason: &str) -> Vec<JobId> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(b.post(q, NewJob::new(name).max_attempts(3)).await.unwrap());
    }
    let got = claim(b, q, n).await;
    assert_eq!(got.len(), n, "all {n} claimed");
    for c in got {
        b.trash(c.lease, reason).await.unwrap();
    }
    ids
}

/// The failure groups of `q`: group → count.
async fn groups<B: Admin>(b: &B, q: &str) -> BTreeMap<String, u64> {
    let groups = b.failed(q).await.unwrap();
    groups
        .into_iter()
        .map(|g| {
            assert_eq!(g.queue, q);
            (g.group, g.count)
        })
        .collect()
}

/// Jobs trashed with a reason `kind: …` land in group `kind`, others in
/// `error`; groups come largest first; `show` tells the group and reason.
pub async fn trashed_jobs_go_to_failure_groups_by_reason_kind<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("groups");
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

    let listed = b.failed(&q).await.unwrap();
    assert_eq!(
        (listed[0].group.as_str(), listed[0].count),
        ("error", 2),
        "largest first: {listed:?}"
    );
    assert_eq!(
        groups(&b, &q).await,
        [("error".into(), 2), ("fatal".into(), 1), ("timeout".into(), 1)].into()
    );
    let errors: BTreeSet<JobId> = b
        .failed_jobs(&q, "error", Page::default())
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(errors, [plain, flaky.clone()].into());
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
    let reason = info.reason.as_deref().unwrap_or("");
    assert!(reason.contains("attempts exhausted"), "{info:?}");
}

/// A retried job is ready again with no attempts used and no group; it
/// leaves its group and the trash; a job not in the trash (an unknown one,
/// or the retried one once back at work) is not found.
pub async fn retry_one_job_resets_its_attempts<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("retry-one");
    let id = b.post(&q, NewJob::new("r").max_attempts(2)).await.unwrap();
    for _ in 0..2 {
        let c = claim_one(&b, &q).await;
        b.abandon(c.lease, retry_now("fatal-ish: no")).await.unwrap();
    }
    assert_eq!(b.state(&q, &id).await.unwrap(), JobState::Trashed);
    assert_eq!(b.show(&q, &id).await.unwrap().attempts, 2);
    let results = b.retry(&q, &[id.clone(), "no-such-job".into()]).await.unwrap();
    assert!(results[0].is_ok(), "{results:?}");
    assert!(results[1].as_ref().unwrap_err().is_not_found());
    let info = b.show(&q, &id).await.unwrap();
    assert_eq!(
        (info.state, info.attempts, info.group),
        (JobState::Ready, 0, None)
    );
    assert!(b.failed(&q).await.unwrap().is_empty(), "the group emptied");
    let trash = listed_ids(&b, &q, JobState::Trashed).await;
    assert!(trash.is_empty(), "gone from taskflow's trash: {trash:?}");
    let c = claim_one(&b, &q).await;
    assert_eq!(
        (c.lease.job().clone(), c.attempt, c.max_attempts),
        (id.clone(), 1, 2)
    );
    let again = b.retry(&q, &[id]).await.unwrap();
    assert!(again[0].as_ref().unwrap_err().is_not_found(), "{again:?}");
}

/// `settle_failed` retries one group, then every group; all the jobs are
/// claimable.
pub async fn retry_a_whole_group_or_every_group<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("retry-group");
    let fatal = trashed(&b, &q, "f", 2, "fatal: x").await;
    let errors = trashed(&b, &q, "e", 3, "oops").await;
    let crashed = trashed(&b, &q, "c", 1, "crashed: signal 9").await;
    assert_eq!(b.settle_failed(&q, Some("error"), false).await.unwrap(), 3);
    for id in &errors {
        let info = b.show(&q, id).await.unwrap();
        assert_eq!((info.state, info.attempts), (JobState::Ready, 0));
    }
    let left: BTreeSet<String> = groups(&b, &q).await.into_keys().collect();
    assert_eq!(left, ["crashed".to_owned(), "fatal".to_owned()].into());
    assert_eq!(b.settle_failed(&q, None, false).await.unwrap(), 3);
    assert!(b.failed(&q).await.unwrap().is_empty());
    for id in fatal.iter().chain(&crashed) {
        assert_eq!(b.state(&q, id).await.unwrap(), JobState::Ready);
    }
    assert_eq!(b.job_count(&q).await.unwrap(), 6);
    assert_eq!(claim(&b, &q, 10).await.len(), 6);
}

/// Purged jobs are gone: not found, in no group, not in the trash.
pub async fn purge_deletes_trashed_jobs_for_good<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("purge");
    let one = trashed(&b, &q, "p", 1, "fatal: x").await.remove(0);
    let rest = trashed(&b, &q, "p", 3, "boom").await;
    let results = b.purge(&q, &[one.clone(), "no-such-job".into()]).await.unwrap();
    assert!(results[0].is_ok(), "{results:?}");
    assert!(results[1].as_ref().unwrap_err().is_not_found());
    assert!(b.state(&q, &one).await.unwrap_err().is_not_found());
    assert!(b.show(&q, &one).await.unwrap_err().is_not_found());
    assert_eq!(groups(&b, &q).await, [("error".into(), 3)].into());
    assert_eq!(b.settle_failed(&q, None, true).await.unwrap(), 3);
    assert!(b.failed(&q).await.unwrap().is_empty());
    for id in &rest {
        assert!(b.state(&q, id).await.unwrap_err().is_not_found());
        assert!(b.show(&q, id).await.unwrap_err().is_not_found());
    }
    let trash = listed_ids(&b, &q, JobState::Trashed).await;
    assert!(trash.is_empty(), "taskflow's trash is empty: {trash:?}");
    let again = b.purge(&q, &[one]).await.unwrap();
    assert!(again[0].as_ref().unwrap_err().is_not_found(), "{again:?}");
}

/// A retried job is the same job: claimed again with its id, name,
/// arguments and priority; its retry wakes a worker waiting on the queue.
pub async fn a_retried_job_keeps_its_id_name_and_args<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("retry-same");
    let args = json!({"path": "a.png", "sizes": [64, 128], "note": "é"});
    let job = NewJob::new("resize")
        .args(&args)
        .unwrap()
        .priority(Priority::VERY_HIGH);
    let id = b.post(&q, job).await.unwrap();
    let first = claim_one(&b, &q).await;
    let (name, got_args, priority) = (first.name.clone(), first.args.clone(), first.priority);
    b.trash(first.lease, "fatal: try later").await.unwrap();
    assert!(claim(&b, &q, 1).await.is_empty(), "nothing left to claim");
    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move { b.wait(&[&q], Duration::from_secs(60)).await.unwrap() })
    };
    let results = b.retry(&q, std::slice::from_ref(&id)).await.unwrap();
    assert!(results[0].is_ok(), "{results:?}");
    let woke = tokio::time::timeout(SOON, waiter)
        .await
        .expect("the retry woke no wait")
        .unwrap();
    assert!(woke, "wait timed out instead of waking");
    let again = claim_one(&b, &q).await;
    assert_eq!(again.lease.job(), &id);
    assert_eq!(
        (again.name.as_str(), &again.args, again.priority),
        (name.as_str(), &got_args, priority)
    );
    assert_eq!(
        (again.name.as_str(), again.priority),
        ("resize", Priority::VERY_HIGH)
    );
    assert_eq!(again.attempt, 1, "a fresh start");
    assert_eq!(b.show(&q, &id).await.unwrap().args, args);
}
