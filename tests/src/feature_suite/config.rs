//! The board-wide configuration, the queue list and the job counts.

use jobworker::board::{Admin, QueueCounts};
use jobworker::{Board, NewJob};

use super::{FeatureHarness, LONG};
use crate::unique_queue;

/// A value is stored, read back, refused when it breaks its key's rule
/// (leaving the stored one), and removed. `grace` is read only when a
/// worker starts, so the tests sharing the board do not feel it.
pub async fn config_values_are_checked_stored_and_removed<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    b.set_config("grace", Some("7.5")).await.unwrap();
    assert_eq!(
        b.config().await.unwrap().get("grace").map(String::as_str),
        Some("7.5")
    );
    let e = b.set_config("grace", Some("soon")).await.unwrap_err();
    assert!(e.is_invalid(), "{e}");
    let e = b.set_config("no-such-key", Some("1")).await.unwrap_err();
    assert!(e.is_invalid() && e.to_string().contains("known keys"), "{e}");
    let again = h.board().await;
    assert_eq!(
        again.config().await.unwrap().get("grace").map(String::as_str),
        Some("7.5"),
        "the refused value changed nothing, and another board reads it"
    );
    b.set_config("grace", None).await.unwrap();
    assert!(!b.config().await.unwrap().contains_key("grace"));
}

/// A queue is listed once a job was posted to it; the counts follow its
/// jobs from listed to claimed, completed and trashed.
pub async fn queues_are_listed_and_their_jobs_counted<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("counts");
    for _ in 0..3 {
        b.post(&q, NewJob::new("c")).await.unwrap();
    }
    assert!(b.queues().await.unwrap().contains(&q));
    let counts = |listed, claimed, completed, trashed| QueueCounts {
        listed,
        claimed,
        completed,
        trashed,
    };
    let queues = std::slice::from_ref(&q);
    assert_eq!(b.counts(queues).await.unwrap(), counts(3, 0, 0, 0));
    let mut got = b.claim(&[&q], "w", LONG, 2).await.unwrap();
    assert_eq!(b.counts(queues).await.unwrap(), counts(3, 2, 0, 0));
    b.consume(got.remove(0).lease).await.unwrap();
    b.trash(got.remove(0).lease, "fatal: no").await.unwrap();
    assert_eq!(b.counts(queues).await.unwrap(), counts(1, 0, 1, 1));
}
