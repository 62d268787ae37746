//! Pause and resume: a paused queue hands out nothing, still takes back
//! expired leases, and its idle workers sleep until the resume.

use std::time::Duration;

use jobworker::board::Admin;
use jobworker::{Board, JobState, NewJob};

use super::{FeatureHarness, LONG, SOON};
use crate::conformance::let_pass;
use crate::unique_queue;

/// A paused queue hands out nothing and keeps its jobs (new posts too);
/// resumed, it hands them all out.
pub async fn a_paused_queue_hands_out_nothing_until_resumed<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("pause");
    for _ in 0..2 {
        b.post(&q, NewJob::new("p")).await.unwrap();
    }
    assert!(!b.settings(&q).await.unwrap().paused);
    b.pause(&q).await.unwrap();
    b.pause(&q).await.unwrap();
    assert!(b.settings(&q).await.unwrap().paused, "paused (twice is once)");
    assert!(
        b.claim(&[&q], "w", LONG, 10).await.unwrap().is_empty(),
        "claimed from a paused queue"
    );
    b.post(&q, NewJob::new("p")).await.unwrap();
    assert!(b.claim(&[&q], "w", LONG, 10).await.unwrap().is_empty());
    assert_eq!(b.job_count(&q).await.unwrap(), 3, "pausing keeps the jobs");
    b.resume(&q).await.unwrap();
    assert!(!b.settings(&q).await.unwrap().paused);
    assert_eq!(b.claim(&[&q], "w", LONG, 10).await.unwrap().len(), 3);
}

/// An idle worker waiting on a paused queue sleeps (it would spin on empty
/// claims otherwise) until the resume, which wakes it.
pub async fn wait_on_a_paused_queue_sleeps_until_resumed<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("pause-wait");
    b.post(&q, NewJob::new("p")).await.unwrap();
    b.pause(&q).await.unwrap();
    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move { b.wait(&[&q], Duration::from_secs(30)).await.unwrap() })
    };
    // Kept: what is tested is that the wait sleeps through this time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "wait returned while the queue was paused");
    let resumed = std::time::Instant::now();
    b.resume(&q).await.unwrap();
    let woke = tokio::time::timeout(SOON, waiter)
        .await
        .expect("the resume woke no wait")
        .unwrap();
    assert!(woke, "wait timed out instead of waking");
    println!("the resume woke the wait {:?} later", resumed.elapsed());
}

/// A claim on a paused queue hands out nothing but still takes back an
/// expired lease (its attempt counted), so the job is ready, not stuck as
/// claimed by a dead worker, when the queue is resumed.
pub async fn a_paused_queue_still_takes_back_expired_leases<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("pause-expired");
    let id = b.post(&q, NewJob::new("p")).await.unwrap();
    let short = Duration::from_millis(300);
    let first = b.claim(&[&q], "dead-worker", short, 1).await.unwrap().remove(0);
    b.pause(&q).await.unwrap();
    let_pass(&b, short + Duration::from_millis(200)).await;
    assert!(b.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty(), "paused");
    assert_eq!(
        b.state(&q, &id).await.unwrap(),
        JobState::Ready,
        "the expired lease was taken back"
    );
    let e = b.extend(&first.lease, LONG).await.unwrap_err();
    assert!(!e.is_cancelled(), "{e}");
    b.resume(&q).await.unwrap();
    let again = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(
        (again.lease.job(), again.attempt),
        (&id, 2),
        "claimed again, its attempt counted"
    );
}
