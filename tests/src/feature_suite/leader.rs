//! Maintenance leader election: one worker leads a queue at a time; a
//! leader renews, resigns, or loses its leadership when its term ends
//! unrenewed or its board goes; the runner (`Maintainer`) hands the
//! leadership over.

use std::time::Duration;

use jobworker::board::Maintenance;
use jobworker::maintenance::Maintainer;

use super::{FeatureHarness, LONG};
use crate::{unique_queue, wait_until};

/// Generous: elections run every ttl / 3; this only bounds a broken build.
const DEADLINE: Duration = Duration::from_secs(30);
/// A short leadership, so that a leader that stops renewing goes soon.
const TTL: Duration = Duration::from_secs(2);

fn runner<B: Maintenance + Send + 'static>(board: B, q: &str, who: &str) -> Maintainer {
    Maintainer::with_ttl(board, vec![q.to_owned()], who.to_owned(), TTL)
}

/// `elect` takes a free leadership and renews one's own; it refuses while
/// another holds it; `resign` only gives up one's own; a term that ends
/// unrenewed is free again (and `leader` names nobody meanwhile).
pub async fn elect_takes_renews_and_resigns_a_queues_leadership<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("elect");
    assert_eq!(b.leader(&q).await.unwrap(), None);
    assert!(
        b.elect(&q, "a", LONG).await.unwrap(),
        "a free leadership is taken"
    );
    assert!(b.elect(&q, "a", LONG).await.unwrap(), "and renewed by its holder");
    assert!(!b.elect(&q, "b", LONG).await.unwrap(), "not taken while held");
    assert_eq!(b.leader(&q).await.unwrap().as_deref(), Some("a"));
    b.resign(&q, "b").await.unwrap();
    assert_eq!(
        b.leader(&q).await.unwrap().as_deref(),
        Some("a"),
        "only the holder resigns"
    );
    b.resign(&q, "a").await.unwrap();
    assert_eq!(b.leader(&q).await.unwrap(), None);

    assert!(b.elect(&q, "short", Duration::from_millis(300)).await.unwrap());
    assert!(!b.elect(&q, "next", LONG).await.unwrap());
    wait_until("the unrenewed term ends", DEADLINE, || async {
        b.leader(&q).await.unwrap().is_none()
    })
    .await;
    assert!(
        b.elect(&q, "next", LONG).await.unwrap(),
        "an ended term is taken over"
    );
    assert!(
        !b.elect(&q, "short", LONG).await.unwrap(),
        "and is not the old holder's any more"
    );
    assert_eq!(b.leader(&q).await.unwrap().as_deref(), Some("next"));
}

/// Two runners on their own boards: one leads; when it stops (resigning)
/// the other takes over; when that one dies with its board (no resign) a
/// newcomer takes over; a stopped leader leaves nobody leading.
pub async fn one_runner_leads_and_another_takes_over_when_it_goes<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("elect-run");
    let (first_board, second_board) = (h.board().await, h.board().await);
    let first = runner(first_board, &q, "first");
    let second = runner(second_board, &q, "second");
    wait_until("one runner leads", DEADLINE, || async {
        first.leads(&q) || second.leads(&q)
    })
    .await;
    assert!(!(first.leads(&q) && second.leads(&q)), "exactly one leads");
    let (leader, follower, follower_name) = if first.leads(&q) {
        (first, second, "second")
    } else {
        (second, first, "first")
    };
    let holder = b.leader(&q).await.unwrap().expect("a leader on the board");
    assert_ne!(holder, follower_name, "the board names the runner that leads");

    // A leader that stops resigns: the other takes over at its next election.
    leader.stop().await;
    wait_until("the follower takes over", DEADLINE, || async {
        follower.leads(&q)
    })
    .await;
    assert_eq!(b.leader(&q).await.unwrap().as_deref(), Some(follower_name));

    // A leader that dies (its runner and board dropped, no resign) loses
    // its leadership: its term ends, or (ZooKeeper) its session closes.
    let newcomer = runner(h.board().await, &q, "newcomer");
    drop(follower);
    wait_until("the newcomer takes over", DEADLINE, || async {
        newcomer.leads(&q)
    })
    .await;
    assert_eq!(b.leader(&q).await.unwrap().as_deref(), Some("newcomer"));
    newcomer.stop().await;
    assert_eq!(b.leader(&q).await.unwrap(), None, "a stopped leader resigns");
}
