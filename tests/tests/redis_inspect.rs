//! The operators' reads on Redis (`Inspect`, what the web app's dashboard
//! and `/metrics` show): every state counted, the oldest ready job across
//! priorities, per-minute throughput, dependencies both ways; and the
//! indexes that keep a page of a state O(log n): cancelled jobs apart from
//! completed ones (bounded like the history), the trash newest first.

use std::time::Duration;

use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::features::*;
use jobworker_tests::unique_queue;
use redis::AsyncCommands;

#[tokio::test]
async fn every_state_is_counted_and_the_oldest_ready_job_is_found_across_priorities() {
    let (b, q) = board_and_queue("inspect-counts").await;
    let before = b.server_ms().await.unwrap();
    let old = b
        .post(&q, NewJob::new("x").priority(Priority::LOW))
        .await
        .unwrap();
    let between = b.server_ms().await.unwrap();
    b.post(&q, NewJob::new("x").priority(Priority::HIGH))
        .await
        .unwrap();
    b.post(&q, NewJob::new("x").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    b.post(&q, NewJob::new("x").depends_on(old.clone()))
        .await
        .unwrap();
    // Claims take the high job first, then the normal ones, then the old
    // low one: two more to claim, consume and trash before it.
    post_each(&b, &q, &["a", "b"]).await;
    let mut got = b.claim(&[q.as_str()], "w", LONG, 3).await.unwrap();
    assert!(
        got.iter().all(|c| c.lease.job() != old),
        "the low-priority job is claimed last"
    );
    b.consume(got.remove(0).lease).await.unwrap();
    b.trash(got.remove(0).lease, "boom").await.unwrap();
    let _held = got.remove(0).lease;
    let cancel_me = b.post(&q, NewJob::new("x")).await.unwrap();
    b.cancel(&q, std::slice::from_ref(&cancel_me), false)
        .await
        .unwrap();
    let keys = b.keys(&q).unwrap();
    let _: () = b
        .connection()
        .hset(keys.listings(), "garbage", b"\xc1".as_slice())
        .await
        .unwrap();
    b.reap(&q).await.unwrap();
    // A newer job of higher priority heads the ready index; the old one is
    // still the one that has waited longest.
    b.post(&q, NewJob::new("x").priority(Priority::HIGH))
        .await
        .unwrap();

    let o = b.overview(std::slice::from_ref(&q)).await.unwrap().remove(0);
    let c = o.counts;
    assert_eq!(
        (
            c.ready,
            c.scheduled,
            c.waiting,
            c.claimed,
            c.completed,
            c.trashed,
            c.cancelled,
            c.quarantined
        ),
        (
            Some(2),
            Some(1),
            Some(1),
            Some(1),
            Some(1),
            Some(1),
            Some(1),
            Some(1)
        ),
        "{c:?}"
    );
    let oldest = o.oldest_ready_ms.expect("a ready job");
    assert!(
        (before..=between).contains(&oldest),
        "oldest ready {oldest} not the low-priority job's ({before}..{between})"
    );
    assert_eq!(o.settings.map(|s| s.paused), Some(false));
    for state in jobworker::board::STATES {
        let n = b
            .list(&q, ListFilter::State(state), page(100))
            .await
            .unwrap()
            .len() as u64;
        assert_eq!(Some(n), c.get(state), "{state}: the page and the count agree");
    }
}

#[tokio::test]
async fn throughput_counts_this_minute_and_dependencies_read_both_ways() {
    let (b, q) = board_and_queue("inspect-tput").await;
    let first = b.post(&q, NewJob::new("x")).await.unwrap();
    let second = b
        .post(&q, NewJob::new("x").depends_on(first.clone()))
        .await
        .unwrap();
    let d = b.dependencies(&q, &second).await.unwrap();
    assert_eq!(d.depends_on, vec![(q.clone(), first.clone())]);
    assert!(d.dependents.is_empty());
    let d = b.dependencies(&q, &first).await.unwrap();
    assert_eq!(d.dependents, vec![(q.clone(), second.clone())]);
    claim_and_consume(&b, &q).await;
    claim_and_consume(&b, &q).await;
    let extra = b.post(&q, NewJob::new("x")).await.unwrap();
    let c = claim_one(&b, &q).await;
    assert_eq!(c.lease.job(), &extra);
    b.trash(c.lease, "boom").await.unwrap();
    // Two minutes, in case the minute turned during the test.
    let minutes = b.throughput(&q, 2).await.unwrap();
    assert_eq!(minutes.len(), 2);
    assert!(minutes[0].at_ms + 60_000 == minutes[1].at_ms);
    let completed: u64 = minutes.iter().map(|m| m.completed).sum();
    let failed: u64 = minutes.iter().map(|m| m.failed).sum();
    assert_eq!((completed, failed), (2, 1));
    assert_eq!(
        b.throughput(&q, 500).await.unwrap().len(),
        120,
        "at most two hours are kept"
    );
    // The counters expire: the day's statistics and the hour's minutes
    // (their expiry is set when a field is new, not on every call).
    let mut con = b.connection();
    for pattern in ["jw.stats.*", "jw.minutes.*"] {
        let keys: Vec<String> = con.keys(format!("jw:{{{q}}}:{pattern}")).await.unwrap();
        assert!(!keys.is_empty(), "{pattern}: no key");
        for key in keys {
            let ttl: i64 = con.ttl(&key).await.unwrap();
            assert!(ttl > 0, "{key} has no expiry ({ttl})");
        }
    }
}

#[tokio::test]
async fn cancelled_jobs_are_kept_apart_from_completed_ones_and_bounded_like_the_history() {
    let mut opts = RedisOptions::new(board_url());
    opts.history_count = 2;
    let b = RedisBoard::with_options(opts).await.unwrap();
    let q = unique_queue("inspect-cancel");
    let mut cancelled = Vec::new();
    for _ in 0..3 {
        let id = b.post(&q, NewJob::new("x")).await.unwrap();
        b.cancel(&q, std::slice::from_ref(&id), false).await.unwrap();
        cancelled.push(id);
        next_ms(&b).await;
    }
    let listed: Vec<String> = b
        .list(&q, ListFilter::State(JobState::Cancelled), page(10))
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    // The oldest went (count 2), newest first; none is in the completed page.
    assert_eq!(
        listed,
        vec![cancelled[2].as_str().to_owned(), cancelled[1].as_str().to_owned()]
    );
    assert!(matches!(b.state(&q, &cancelled[0]).await, Err(e) if e.is_not_found()));
    assert!(b
        .list(&q, ListFilter::State(JobState::Completed), page(10))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn the_trash_pages_newest_first_from_its_retention_index() {
    let (b, q) = board_and_queue("inspect-trash").await;
    let ids = post_each(&b, &q, &["a", "b", "c"]).await;
    for id in &ids {
        let c = b.claim_job(&q, id, "w", Some(LONG)).await.unwrap();
        b.trash(c.lease, "boom").await.unwrap();
        next_ms(&b).await;
    }
    let page_of = |offset| {
        let b = b.clone();
        let q = q.clone();
        async move {
            b.list(
                &q,
                ListFilter::State(JobState::Trashed),
                Page { offset, limit: 2 },
            )
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.id)
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        page_of(0).await,
        vec![ids[2].as_str().to_owned(), ids[1].as_str().to_owned()]
    );
    assert_eq!(page_of(2).await, vec![ids[0].as_str().to_owned()]);
}

/// Waits for the server's clock to pass into the next millisecond, so that
/// the next entry of a time-ordered index (cancel or trash time) sorts
/// after the last one rather than tying with it.
async fn next_ms(b: &RedisBoard) {
    let t = b.server_ms().await.unwrap();
    while b.server_ms().await.unwrap() == t {}
}
