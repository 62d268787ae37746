//! Priority changes: a ready job moves at once (for every board), a
//! claimed one keeps the new priority for its next run, and changes of
//! finished, unknown or out-of-range ones are refused.

use jobworker::board::Admin;
use jobworker::{Abandon, Board, JobId, JobState, ListFilter, NewJob, Page, Priority};

use super::{FeatureHarness, LONG};
use crate::unique_queue;

async fn post_each<B: Board>(b: &B, q: &str, names: &[&str]) -> Vec<JobId> {
    let mut ids = Vec::new();
    for name in names {
        ids.push(b.post(q, NewJob::new(*name)).await.unwrap());
    }
    ids
}

/// The ready jobs of `q` in the order claims take them, by name.
async fn listed<B: Board>(b: &B, q: &str) -> Vec<String> {
    let jobs = b.list(q, ListFilter::Live, Page::default()).await.unwrap();
    jobs.into_iter().map(|j| j.name).collect()
}

/// A ready job's new priority moves it at once, also for a board that
/// read the queue before the change.
pub async fn changing_a_ready_jobs_priority_moves_it_at_once<H: FeatureHarness>(h: &H) {
    let (b, other) = (h.board().await, h.board().await);
    let q = unique_queue("prio-set");
    let ids = post_each(&b, &q, &["a", "b", "c", "d"]).await;
    assert_eq!(listed(&other, &q).await, ["a", "b", "c", "d"]);
    assert_eq!(
        b.set_priority(&q, &ids[3], Priority::HIGH).await.unwrap(),
        JobState::Ready
    );
    assert_eq!(
        b.set_priority(&q, &ids[0], Priority::LOW).await.unwrap(),
        JobState::Ready
    );
    assert_eq!(
        listed(&b, &q).await,
        ["d", "b", "c", "a"],
        "listing follows the new order"
    );
    let got = other.claim(&[&q], "w", LONG, 4).await.unwrap();
    let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["d", "b", "c", "a"],
        "another board claims in the new order"
    );
    assert_eq!(got[0].priority, Priority::HIGH);
    assert_eq!(got[0].lease.job(), &ids[3], "the job keeps its id");
    assert_eq!(b.show(&q, &ids[0]).await.unwrap().priority, -1);
}

/// A claimed job's new priority orders it once it is ready again.
pub async fn a_claimed_jobs_new_priority_applies_once_it_is_ready_again<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("prio-claimed");
    let held = b.post(&q, NewJob::new("held")).await.unwrap();
    let c = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    post_each(&b, &q, &["n1", "n2"]).await;
    let very = Priority::VERY_HIGH;
    assert_eq!(b.set_priority(&q, &held, very).await.unwrap(), JobState::Claimed);
    b.abandon(c.lease, Abandon::Release).await.unwrap();
    let got = b.claim(&[&q], "w", LONG, 3).await.unwrap();
    let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["held", "n1", "n2"]);
    assert_eq!(got[0].priority, very);
}

/// Finished and unknown jobs, and priorities out of range, are refused.
pub async fn priority_changes_are_refused_for_finished_missing_or_out_of_range<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("prio-bad");
    let id = b.post(&q, NewJob::new("x")).await.unwrap();
    let e = b
        .set_priority(&q, &id, Priority(Priority::LIMIT + 1))
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
    let c = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    b.consume(c.lease).await.unwrap();
    let e = b.set_priority(&q, &id, Priority::HIGH).await.unwrap_err();
    assert!(e.is_finished(), "{e}");
    let e = b
        .set_priority(&q, &JobId::from("no-such-job"), Priority::HIGH)
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
}
