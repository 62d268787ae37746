//! Tags on posted jobs (added, removed, found, counted) and tracking.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jobworker::board::Admin;
use jobworker::{Board, JobId, NewJob, Page};

use super::FeatureHarness;
use crate::unique_queue;

fn page(limit: usize) -> Page {
    Page { offset: 0, limit }
}

/// Waits until the board's clock passed the millisecond it reads now
/// (tag times are in ms on Redis: this orders two taggings).
async fn next_ms<B: Admin>(b: &B) {
    let now = b.server_ms().await.unwrap();
    while b.server_ms().await.unwrap() <= now {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn set(ids: &[&JobId]) -> BTreeSet<JobId> {
    ids.iter().map(|id| (*id).clone()).collect()
}

/// Tags given at post and added later are found, most recently tagged
/// first, and counted; removed ones are not; a tag is not added twice;
/// any word is a tag (slashes and dots too).
pub async fn tags_are_added_removed_found_and_counted<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("tags");
    let a = b.post(&q, NewJob::new("a").tag("red").tag("blue")).await.unwrap();
    let bb = b.post(&q, NewJob::new("b").tag("red")).await.unwrap();
    let c = b
        .post(&q, NewJob::new("c").tag("red").tag("green"))
        .await
        .unwrap();
    assert_eq!(b.show(&q, &a).await.unwrap().tags, ["red", "blue"]);
    next_ms(&b).await;
    assert_eq!(
        b.tag(&q, &a, &["green", "red"]).await.unwrap(),
        ["red", "blue", "green"],
        "an existing tag is not added twice"
    );
    assert_eq!(
        b.untag(&q, &a, &["red", "nope"]).await.unwrap(),
        ["blue", "green"]
    );
    assert_eq!(b.show(&q, &a).await.unwrap().tags, ["blue", "green"]);
    let red: BTreeSet<JobId> = b
        .tagged(&q, "red", Page::default())
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(red, set(&[&bb, &c]));
    let green = b.tagged(&q, "green", Page::default()).await.unwrap();
    assert_eq!(green, [a.clone(), c.clone()], "most recently tagged first");
    assert_eq!(
        b.tagged(&q, "green", page(1)).await.unwrap(),
        std::slice::from_ref(&a)
    );
    assert!(b.tagged(&q, "nobody", Page::default()).await.unwrap().is_empty());
    let top = b.top_tags(&q, Page::default()).await.unwrap();
    assert_eq!(top[0], ("red".to_owned(), 2), "{top:?}");
    let top: BTreeMap<String, u64> = top.into_iter().collect();
    assert_eq!(
        top,
        [("red".into(), 2), ("green".into(), 2), ("blue".into(), 1)].into()
    );
    assert_eq!(b.top_tags(&q, page(1)).await.unwrap().len(), 1);
    let odd = ["a/b", "..", "50%"];
    assert_eq!(b.tag(&q, &bb, &odd).await.unwrap(), ["red", "a/b", "..", "50%"]);
    for tag in odd {
        assert_eq!(
            b.tagged(&q, tag, Page::default()).await.unwrap(),
            std::slice::from_ref(&bb)
        );
    }
    let unknown = JobId::from("no-such-job");
    assert!(b.tag(&q, &unknown, &["x"]).await.unwrap_err().is_not_found());
    assert!(b.tag(&q, &a, &["bad tag"]).await.unwrap_err().is_invalid());
    assert!(b
        .post(&q, NewJob::new("d").tag(""))
        .await
        .unwrap_err()
        .is_invalid());
}

/// A finished job keeps its tags, and is still found by them (once, when
/// it was posted naming a tag twice).
pub async fn a_finished_job_is_still_found_by_its_tags<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("tags-done");
    let job = NewJob::new("t").tag("batch-7").tag("batch-7");
    let id = b.post(&q, job).await.unwrap();
    let c = b.claim(&[&q], "w", super::LONG, 1).await.unwrap().remove(0);
    b.consume(c.lease).await.unwrap();
    assert_eq!(b.tagged(&q, "batch-7", Page::default()).await.unwrap(), [id]);
}

/// Jobs tracked at post or later are listed in the order tracked, until
/// untracked; tracking an unknown job is refused.
pub async fn tracked_jobs_are_listed_until_untracked<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("tracked");
    let first = b.post(&q, NewJob::new("t").track()).await.unwrap();
    let plain = b.post(&q, NewJob::new("p")).await.unwrap();
    let later = b.post(&q, NewJob::new("l")).await.unwrap();
    next_ms(&b).await;
    b.track(&q, &later).await.unwrap();
    b.track(&q, &later).await.unwrap();
    assert_eq!(b.tracked(&q).await.unwrap(), [first.clone(), later.clone()]);
    b.untrack(&q, &first).await.unwrap();
    assert_eq!(b.tracked(&q).await.unwrap(), [later]);
    assert!(!b.tracked(&q).await.unwrap().contains(&plain));
    let unknown = JobId::from("no-such-job");
    assert!(b.track(&q, &unknown).await.unwrap_err().is_not_found());
}
