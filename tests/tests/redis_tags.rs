//! What a posting can be found by on the Redis board against a real
//! server: tags (added, removed, found, counted) and unique keys.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jobworker::{Board, JobId, NewJob, Page};
use jobworker_tests::features::*;

#[tokio::test]
async fn tags_are_added_removed_found_and_counted() {
    let (b, q) = board_and_queue("tags").await;
    let a = b.post(&q, NewJob::new("a").tag("red").tag("blue")).await.unwrap();
    let bb = b.post(&q, NewJob::new("b").tag("red")).await.unwrap();
    let c = b
        .post(&q, NewJob::new("c").tag("red").tag("green"))
        .await
        .unwrap();
    assert_eq!(b.show(&q, &a).await.unwrap().tags, ["red", "blue"]);
    // Tag times are in ms: make a's tagging the most recent one.
    next_server_ms(&b).await;
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
    assert_eq!(red, set([&bb, &c]));
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

    assert!(b
        .tag(&q, &"no-such-job".into(), &["x"])
        .await
        .unwrap_err()
        .is_not_found());
    assert!(b.tag(&q, &a, &["bad tag"]).await.unwrap_err().is_invalid());
    assert!(b
        .post(&q, NewJob::new("d").tag(""))
        .await
        .unwrap_err()
        .is_invalid());
}

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
