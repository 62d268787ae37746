//! What a posting can be found by on the Redis board against a real
//! server: unique keys (tags are in the feature suite both backends run,
//! `tests/src/feature_suite/tags.rs`).

use std::time::Duration;

use jobworker::{Board, NewJob};
use jobworker_tests::features::*;

#[tokio::test]
async fn a_unique_key_returns_the_existing_job_until_its_ttl_passes() {
    let (b, [q, other_q]) = board_and_queues(["unique", "unique-other"]).await;
    let ttl = Duration::from_millis(500);
    let first = b
        .post(&q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    let first_posted = server_ms(&b).await;
    let dup = b
        .post(&q, NewJob::new("u").args(&1u8).unwrap().unique("report-42", ttl))
        .await
        .unwrap();
    assert_eq!(dup, first, "a duplicate returns the existing id");
    assert_eq!(b.job_count(&q).await.unwrap(), 1);
    let many = b
        .post_many(
            &q,
            &[
                NewJob::new("u").unique("report-42", ttl),
                NewJob::new("u").unique("report-43", ttl),
            ],
        )
        .await
        .unwrap();
    assert_eq!(many[0].as_ref().unwrap(), &first);
    assert_ne!(many[1].as_ref().unwrap(), &first, "another key is another job");
    let elsewhere = b
        .post(&other_q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    assert_ne!(elsewhere, first, "unique keys are per queue");
    assert_eq!(b.job_count(&q).await.unwrap(), 2);

    // The key's TTL passes on the server's clock (its expiry is tested).
    server_clock_passes(&b, first_posted + ttl.as_millis() as i64).await;
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
    assert!(b
        .post(&q, NewJob::new("u").unique("has space", ttl))
        .await
        .unwrap_err()
        .is_invalid());
}
