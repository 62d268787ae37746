//! Unique keys: a post with a key that holds answers the existing job.

use std::time::Duration;

use jobworker::board::Admin;
use jobworker::{Board, NewJob};

use super::{FeatureHarness, SOON};
use crate::{unique_queue, wait_until};

/// Waits until the board's clock passed `ms`.
async fn clock_passes<B: Admin>(b: &B, ms: i64) {
    wait_until("the board's clock to pass the key's ttl", SOON, || async {
        b.server_ms().await.unwrap() > ms
    })
    .await;
}

/// A duplicate returns the existing id until the key's TTL passes (per
/// queue; in `post_many` too); then a post takes the key anew.
pub async fn a_unique_key_returns_the_existing_job_until_its_ttl_passes<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q, other_q) = (unique_queue("unique"), unique_queue("unique-other"));
    let ttl = Duration::from_millis(500);
    let first = b
        .post(&q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    let first_posted = b.server_ms().await.unwrap();
    let dup = b
        .post(&q, NewJob::new("u").args(&1u8).unwrap().unique("report-42", ttl))
        .await
        .unwrap();
    assert_eq!(dup, first, "a duplicate returns the existing id");
    assert_eq!(b.job_count(&q).await.unwrap(), 1);
    let jobs = [
        NewJob::new("u").unique("report-42", ttl),
        NewJob::new("u").unique("report/43", ttl),
    ];
    let many = b.post_many(&q, &jobs).await.unwrap();
    assert_eq!(many[0].as_ref().unwrap(), &first);
    assert_ne!(many[1].as_ref().unwrap(), &first, "another key is another job");
    let elsewhere = b
        .post(&other_q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    assert_ne!(elsewhere, first, "unique keys are per queue");
    assert_eq!(b.job_count(&q).await.unwrap(), 2);
    clock_passes(&b, first_posted + ttl.as_millis() as i64 + 50).await;
    let fresh = b
        .post(&q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    assert_ne!(fresh, first, "the key expired");
    assert_eq!(b.job_count(&q).await.unwrap(), 3);
    let again = b
        .post(&q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    assert_eq!(again, fresh, "the new job holds the key now");
    let e = b
        .post(&q, NewJob::new("u").unique("has space", ttl))
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
}

/// Of many posts racing for one key, one job is posted and every post
/// answers its id.
pub async fn posts_racing_for_a_unique_key_post_one_job<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("unique-race");
    let ttl = Duration::from_secs(60);
    let posts = (0..8).map(|_| {
        let b = b.clone();
        let q = q.clone();
        tokio::spawn(async move { b.post(&q, NewJob::new("r").unique("once", ttl)).await })
    });
    let ids: Vec<_> = futures_util::future::join_all(posts)
        .await
        .into_iter()
        .map(|r| r.unwrap().unwrap())
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(b.job_count(&q).await.unwrap(), 1);
}
