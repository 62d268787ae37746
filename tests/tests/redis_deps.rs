//! Cancel on the Redis board against a real server: jobs in every state,
//! a claimed job's lease; a waiting job's id is taken. Dependencies (and cancel with dependents) are in
//! the feature suite (`jobworker_tests::feature_suite::deps`), which both
//! backends run.

use std::time::Duration;

use jobworker::{Abandon, Board, JobState, NewJob};
use jobworker_tests::copy_of;
use jobworker_tests::features::*;

#[tokio::test]
async fn cancel_ready_scheduled_and_waiting_jobs() {
    let (b, q) = board_and_queue("cancel").await;
    let ready = b.post(&q, NewJob::new("ready")).await.unwrap();
    let later = b
        .post(&q, NewJob::new("later").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
    let waiting = b
        .post(&q, NewJob::new("waiting").depends_on(parent.clone()))
        .await
        .unwrap();
    let cancelled = b
        .cancel(&q, &[ready.clone(), later.clone(), waiting.clone()], false)
        .await
        .unwrap();
    assert_eq!(cancelled.len(), 3);
    for id in [&ready, &later, &waiting] {
        assert_eq!(b.state(&q, id).await.unwrap(), JobState::Cancelled);
    }
    assert_eq!(
        ids_in(&b, &q, JobState::Cancelled).await,
        set([&ready, &later, &waiting])
    );
    // The parent lost its only dependent, so it can go alone now.
    let got = claim(&b, &q, 10).await;
    assert_eq!(names(&got), ["parent"]);
    b.consume(copy_of(&got[0].lease)).await.unwrap();
    assert_eq!(b.job_count(&q).await.unwrap(), 0);
    let e = b.cancel(&q, &[parent], false).await.unwrap_err();
    assert!(e.is_finished(), "{e}");
    let e = b.cancel(&q, &[ready], false).await.unwrap_err();
    assert!(e.is_finished(), "cancelling twice: {e}");
    let e = b.cancel(&q, &["no-such-job".into()], false).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

#[tokio::test]
async fn cancelling_a_claimed_job_takes_its_lease_away() {
    let (b, q) = board_and_queue("cancel-claimed").await;
    let id = b.post(&q, NewJob::new("running")).await.unwrap();
    let c = b.claim(&[&q], "busy", LONG, 1).await.unwrap().remove(0);
    assert_eq!(
        b.cancel(&q, std::slice::from_ref(&id), false).await.unwrap(),
        [(q.clone(), id.clone())]
    );
    assert_eq!(b.state(&q, &id).await.unwrap(), JobState::Cancelled);
    assert_eq!(b.find_owner(&q, &id).await.unwrap(), None);
    // Every lease verb names the cancel (not "not found" or "not owner"),
    // so a worker that learns of it from a refused extend says why.
    let e = b.extend(&c.lease, LONG).await.unwrap_err();
    assert!(
        e.is_cancelled() && e.is_lease_over(),
        "heartbeat after cancel: {e}"
    );
    assert!(e.to_string().contains("was cancelled"), "{e}");
    let e = b.consume(copy_of(&c.lease)).await.unwrap_err();
    assert!(e.is_cancelled(), "consume after cancel: {e}");
    let e = b.abandon(copy_of(&c.lease), Abandon::Release).await.unwrap_err();
    assert!(e.is_cancelled(), "abandon after cancel: {e}");
    let e = b.trash(c.lease, "fatal: no").await.unwrap_err();
    assert!(e.is_cancelled(), "trash after cancel: {e}");
    assert_eq!(
        b.state(&q, &id).await.unwrap(),
        JobState::Cancelled,
        "still cancelled"
    );
    assert!(claim(&b, &q, 10).await.is_empty());
    assert_eq!(
        event_kinds(&b, &q, &id).await,
        ["posted", "claimed", "cancelled"],
        "the history names the cancel only"
    );
}

/// A job waiting for its dependencies is not listed yet, so the listing
/// cannot tell that its id is taken: the post looks among the waiting
/// jobs, for a plain job (no dependencies) as for one with them.
#[tokio::test]
async fn a_waiting_jobs_id_is_taken_with_or_without_dependencies() {
    let (b, q) = board_and_queue("waiting-id").await;
    let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
    let waiting = NewJob::new("waiting").id("waiting-1");
    b.post(&q, waiting.clone().depends_on(parent.clone()))
        .await
        .unwrap();
    let again = b.post(&q, waiting.clone().depends_on(parent)).await.unwrap_err();
    assert!(again.is_exists(), "{again}");
    let plain = b.post(&q, waiting).await.unwrap_err();
    assert!(plain.is_exists(), "{plain}");
    assert_eq!(b.state(&q, &"waiting-1".into()).await.unwrap(), JobState::Waiting);
    // One life of it: released once its parent is done, and claimed once.
    let got = claim(&b, &q, 10).await;
    assert_eq!(names(&got), ["parent"]);
    b.consume(copy_of(&got[0].lease)).await.unwrap();
    let got = claim(&b, &q, 10).await;
    assert_eq!(names(&got), ["waiting"]);
    assert!(claim(&b, &q, 10).await.is_empty());
}
