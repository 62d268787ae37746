//! The board-contract conformance suite, generic over the backend.
//!
//! Each test is an async function taking a [`Harness`]; a backend's test
//! file instantiates them all with [`conformance_tests!`](crate::conformance_tests),
//! so every backend runs exactly the same assertions.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use jobworker::board::Admin;
use jobworker::{Abandon, Board, JobId, JobState, ListFilter, NewJob, Page, Priority};

use crate::{copy_of, unique_queue, wait_until, with_owner};

/// A short lease, for tests that let leases expire.
const SHORT: Duration = Duration::from_millis(300);
/// A lease that outlives any test.
const LONG: Duration = Duration::from_secs(120);

/// Waits until `span` has passed on the board's own clock (the one leases
/// are measured on): for tests of what the passage of time does.
pub async fn let_pass<B: Admin>(board: &B, span: Duration) {
    let end = board.server_ms().await.unwrap() + span.as_millis() as i64;
    let what = format!("the board's clock to pass {end} ms");
    wait_until(&what, span + Duration::from_secs(10), || async {
        board.server_ms().await.unwrap() > end
    })
    .await;
}

/// Gives the suite fresh boards of one backend.
pub trait Harness: Sync {
    /// The backend's board.
    type B: Board + Admin + Clone + Send + Sync + 'static;
    /// A board with its own connection.
    fn board(&self) -> impl Future<Output = Self::B> + Send;
}

/// Instantiates every conformance test as a `#[tokio::test]` for a harness
/// expression.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::conformance_tests!(@each $harness;
            post_then_show, claim_order_across_queues, claim_takes_at_most_count,
            concurrent_claimers_never_share, stale_lease_refused_by_every_verb,
            expired_lease_reaped_with_attempt_counted, exhausted_retries_end_in_trash,
            stalls_exhaust_attempts_into_trash, release_does_not_count_an_attempt,
            retry_delay_schedules_the_job, delayed_post_becomes_claimable,
            consume_completes_the_job, claim_job_takes_a_named_job,
            wait_wakes_on_post, wait_times_out_on_empty_queue, list_pages_in_claim_order,
            bad_input_is_refused, book_travels_with_the_job, claim_without_expiry_is_held_until_released,
            lease_time_left_and_last_modified_are_shown);
    };
    (@each $harness:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let harness = $harness;
                $crate::conformance::$name(&harness).await;
            }
        )*
    };
}

async fn post_n<B: Board>(board: &B, queue: &str, name: &str, n: usize) -> Vec<JobId> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let job = NewJob::new(name).args(&serde_json_like(i)).expect("args encode");
        ids.push(board.post(queue, job).await.expect("post"));
    }
    ids
}

fn serde_json_like(i: usize) -> std::collections::BTreeMap<String, usize> {
    [("i".to_owned(), i)].into_iter().collect()
}

/// A posted job shows up ready with its name, args and priority.
pub async fn post_then_show<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("show");
    let job = NewJob::new("resize")
        .args(&("a.png", 640u32))
        .unwrap()
        .priority(Priority::HIGH);
    let id = board.post(&q, job).await.unwrap();
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Ready);
    assert_eq!(info.name, "resize");
    assert_eq!(info.priority, 1);
    assert_eq!(info.args, serde_json::json!(["a.png", 640]));
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Ready);
    assert_eq!(board.job_count(&q).await.unwrap(), 1);
    assert_eq!(board.find_owner(&q, &id).await.unwrap(), None);
    let missing = board.show(&q, &JobId::from("no-such-job")).await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    assert!(
        missing.message().contains("no-such-job") && missing.message().contains(&q),
        "{missing}"
    );
}

/// Queues are served in the order given; within a queue higher priority
/// first, then FIFO.
pub async fn claim_order_across_queues<H: Harness>(h: &H) {
    let board = h.board().await;
    let (q1, q2) = (unique_queue("order-a"), unique_queue("order-b"));
    let post = |q: &str, name: &str, p: Priority| {
        let (board, q, name) = (board.clone(), q.to_owned(), name.to_owned());
        async move { board.post(&q, NewJob::new(name).priority(p)).await.unwrap() }
    };
    post(&q2, "b-high", Priority::VERY_HIGH).await;
    post(&q1, "a-low", Priority::LOW).await;
    post(&q1, "a-normal-1", Priority::NORMAL).await;
    post(&q1, "a-high", Priority::HIGH).await;
    post(&q1, "a-normal-2", Priority::NORMAL).await;
    post(&q2, "b-normal", Priority::NORMAL).await;
    post(&q1, "a-custom-7", Priority(7)).await;
    let claimed = board.claim(&[&q1, &q2], "w1", LONG, 10).await.unwrap();
    let names: Vec<&str> = claimed.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "a-custom-7",
            "a-high",
            "a-normal-1",
            "a-normal-2",
            "a-low",
            "b-high",
            "b-normal"
        ]
    );
    assert!(claimed
        .iter()
        .all(|c| c.attempt == 1 && c.lease.token() >= 1 && c.lease.owner() == "w1"));
}

/// A claim takes at most `count` jobs and nothing from an empty queue.
pub async fn claim_takes_at_most_count<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("count");
    post_n(&board, &q, "n", 3).await;
    assert_eq!(board.claim(&[&q], "w", LONG, 2).await.unwrap().len(), 2);
    assert_eq!(board.claim(&[&q], "w", LONG, 2).await.unwrap().len(), 1);
    assert!(board.claim(&[&q], "w", LONG, 2).await.unwrap().is_empty());
}

/// 8 concurrent claimers over 2,000 jobs never receive the same job twice.
pub async fn concurrent_claimers_never_share<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("race");
    let posted: HashSet<JobId> = post_n(&board, &q, "race", 2000).await.into_iter().collect();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (board, q) = (h.board().await, q.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = board.claim(&[&q], &format!("w{w}"), LONG, 7).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                for c in got {
                    mine.push(c.lease.job().clone());
                    board.consume(c.lease).await.unwrap();
                }
            }
        }));
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    for t in tasks {
        for id in t.await.unwrap() {
            total += 1;
            assert!(seen.insert(id.clone()), "job {id} was claimed twice");
        }
    }
    assert_eq!(total, 2000);
    assert_eq!(seen, posted);
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
}

/// A lease that expired and was re-claimed (same owner, older token) or that
/// names another owner is refused by extend, consume, abandon and trash,
/// and the job is left as it was.
pub async fn stale_lease_refused_by_every_verb<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("stale");
    let id = board.post(&q, NewJob::new("s")).await.unwrap();
    let first = board.claim(&[&q], "w1", SHORT, 1).await.unwrap().remove(0).lease;
    // Expired and not yet re-claimed: the lease is gone.
    let_pass(&board, SHORT + Duration::from_millis(200)).await;
    let err = board.extend(&first, LONG).await.unwrap_err();
    assert!(err.is_not_owner(), "{err}");
    // Re-claimed by the same owner string: only the token tells them apart.
    let second = board.claim(&[&q], "w1", LONG, 1).await.unwrap().remove(0).lease;
    assert!(second.token() > first.token(), "fencing token must grow");
    let other_owner = with_owner(&second, "intruder");
    for stale in [&first, &other_owner] {
        let e = board.extend(stale, LONG).await.unwrap_err();
        assert!(e.is_not_owner(), "extend: {e}");
        let e = board.consume(copy_of(stale)).await.unwrap_err();
        assert!(e.is_not_owner(), "consume: {e}");
        let e = board.abandon(copy_of(stale), Abandon::Release).await.unwrap_err();
        assert!(e.is_not_owner(), "abandon: {e}");
        let e = board.trash(copy_of(stale), "x").await.unwrap_err();
        assert!(e.is_not_owner(), "trash: {e}");
        assert!(
            e.message().contains(id.as_str()) && e.message().contains(&q),
            "{e}"
        );
    }
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Claimed);
    assert_eq!(info.owner.as_deref(), Some("w1"));
    assert_eq!(info.token, second.token());
    board.extend(&second, LONG).await.unwrap();
    board.consume(second).await.unwrap();
}

/// An expired lease is reaped and the job re-claimed with attempts + 1.
pub async fn expired_lease_reaped_with_attempt_counted<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("reap");
    let id = board.post(&q, NewJob::new("r").max_attempts(3)).await.unwrap();
    let first = board.claim(&[&q], "w1", SHORT, 1).await.unwrap().remove(0);
    assert_eq!(first.attempt, 1);
    let_pass(&board, SHORT + Duration::from_millis(200)).await;
    let report = board.reap(&q).await.unwrap();
    assert_eq!(report.stalled, 1, "{report:?}");
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Ready, 1));
    assert!(
        info.reason.as_deref().unwrap_or("").contains("stalled"),
        "{info:?}"
    );
    let again = board.claim(&[&q], "w2", LONG, 1).await.unwrap().remove(0);
    assert_eq!(*again.lease.job(), id);
    assert_eq!(again.attempt, 2);
    assert!(again.lease.token() > first.lease.token());
}

/// Counted retries that use up the attempts end in the trash with the
/// error as the reason.
pub async fn exhausted_retries_end_in_trash<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("exhaust");
    let id = board.post(&q, NewJob::new("x").max_attempts(2)).await.unwrap();
    let retry = || Abandon::Retry {
        delay: Duration::ZERO,
        error: "boom: disk full".into(),
    };
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(board.abandon(c.lease, retry()).await.unwrap(), JobState::Ready);
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.attempt, 2);
    assert_eq!(board.abandon(c.lease, retry()).await.unwrap(), JobState::Trashed);
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert_eq!(info.attempts, 2);
    let reason = info.reason.unwrap_or_default();
    assert!(
        reason.contains("boom: disk full") && reason.contains("exhausted"),
        "{reason}"
    );
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
    let trashed = board
        .list(&q, ListFilter::State(JobState::Trashed), Page::default())
        .await
        .unwrap();
    assert_eq!(trashed.len(), 1);
    assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
}

/// Expired leases count as attempts too; the last one trashes the job.
pub async fn stalls_exhaust_attempts_into_trash<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("stall");
    let id = board.post(&q, NewJob::new("s").max_attempts(1)).await.unwrap();
    board.claim(&[&q], "w", SHORT, 1).await.unwrap().remove(0);
    let_pass(&board, SHORT + Duration::from_millis(200)).await;
    // The next claim recovers the lease first, and finds nothing to take.
    assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert!(info.reason.unwrap_or_default().contains("stalled"));
}

/// Abandon without counting leaves the attempts as they were.
pub async fn release_does_not_count_an_attempt<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("release");
    let id = board.post(&q, NewJob::new("r").max_attempts(1)).await.unwrap();
    for _ in 0..3 {
        let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
        assert_eq!(c.attempt, 1);
        assert_eq!(
            board.abandon(c.lease, Abandon::Release).await.unwrap(),
            JobState::Ready
        );
    }
    assert_eq!(board.show(&q, &id).await.unwrap().attempts, 0);
}

/// A counted retry with a delay schedules the job; it comes back once due.
pub async fn retry_delay_schedules_the_job<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("backoff");
    let id = board.post(&q, NewJob::new("b")).await.unwrap();
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    let how = Abandon::Retry {
        delay: Duration::from_millis(400),
        error: "later".into(),
    };
    assert_eq!(board.abandon(c.lease, how).await.unwrap(), JobState::Scheduled);
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Scheduled);
    assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
    wait_until("the retried job to come back", Duration::from_secs(5), || {
        let (board, q) = (board.clone(), q.clone());
        async move { !board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty() }
    })
    .await;
}

/// A delayed job is scheduled, not claimable, until it falls due.
pub async fn delayed_post_becomes_claimable<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("delay");
    let start = Instant::now();
    let id = board
        .post(&q, NewJob::new("d").delay(Duration::from_millis(500)))
        .await
        .unwrap();
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Scheduled);
    assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
    wait_until("the delayed job to fall due", Duration::from_secs(5), || {
        let (board, q) = (board.clone(), q.clone());
        async move { !board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty() }
    })
    .await;
    assert!(
        start.elapsed() >= Duration::from_millis(450),
        "claimed too early: {:?}",
        start.elapsed()
    );
}

/// Consume removes the job from the listings and records it as completed.
pub async fn consume_completes_the_job<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("consume");
    let id = board.post(&q, NewJob::new("c")).await.unwrap();
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(board.find_owner(&q, &id).await.unwrap().as_deref(), Some("w"));
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Claimed);
    board.consume(copy_of(&c.lease)).await.unwrap();
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Completed);
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
    let again = board.consume(c.lease).await.unwrap_err();
    assert!(again.is_not_found(), "{again}");
}

/// taskflow's claim of one named job; a second claimant is told who holds it.
pub async fn claim_job_takes_a_named_job<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("named");
    let ids = post_n(&board, &q, "n", 3).await;
    let c = board.claim_job(&q, &ids[2], "w1", Some(LONG)).await.unwrap();
    assert_eq!(*c.lease.job(), ids[2]);
    let e = board.claim_job(&q, &ids[2], "w2", Some(LONG)).await.unwrap_err();
    assert!(e.is_already_claimed(), "{e}");
    assert!(e.message().contains("w1"), "{e}");
    let e = board
        .claim_job(&q, &JobId::from("nope"), "w2", Some(LONG))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    // The named job is no longer handed out in order.
    let rest = board.claim(&[&q], "w2", LONG, 5).await.unwrap();
    let rest: Vec<&JobId> = rest.iter().map(|c| c.lease.job()).collect();
    assert_eq!(rest, [&ids[0], &ids[1]]);
}

/// wait returns as soon as a job is posted.
pub async fn wait_wakes_on_post<H: Harness>(h: &H) {
    let board = h.board().await;
    let poster = h.board().await;
    let q = unique_queue("wait");
    let q2 = q.clone();
    let post = tokio::spawn(async move {
        // Kept: nothing tells when the wait below listens; the post comes
        // a while later, so that only a wake-up can end the wait early.
        tokio::time::sleep(Duration::from_millis(300)).await;
        poster.post(&q2, NewJob::new("w")).await.unwrap();
    });
    let start = Instant::now();
    assert!(board.wait(&[&q], Duration::from_secs(20)).await.unwrap());
    let waited = start.elapsed();
    post.await.unwrap();
    assert!(waited < Duration::from_secs(5), "wait took {waited:?}");
    assert_eq!(board.claim(&[&q], "w", LONG, 1).await.unwrap().len(), 1);
}

/// wait on an empty queue returns false after the timeout.
pub async fn wait_times_out_on_empty_queue<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("idle");
    let start = Instant::now();
    assert!(!board.wait(&[&q], Duration::from_millis(300)).await.unwrap());
    assert!(start.elapsed() >= Duration::from_millis(250));
}

/// list pages through ready jobs in claim order.
pub async fn list_pages_in_claim_order<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("list");
    let ids = post_n(&board, &q, "l", 5).await;
    let page = |offset, limit| board.list(&q, ListFilter::Live, Page { offset, limit });
    let first: Vec<String> = page(0, 2).await.unwrap().into_iter().map(|j| j.id).collect();
    let second: Vec<String> = page(2, 10).await.unwrap().into_iter().map(|j| j.id).collect();
    let all: Vec<String> = ids.iter().map(JobId::to_string).collect();
    assert_eq!(first, all[..2]);
    assert_eq!(second, all[2..]);
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    let claimed = board
        .list(&q, ListFilter::State(JobState::Claimed), Page::default())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, c.lease.job().as_str());
    assert_eq!(claimed[0].owner.as_deref(), Some("w"));
}

/// Bad input gets a clear error and changes nothing.
pub async fn bad_input_is_refused<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("bad");
    assert!(board.post(&q, NewJob::new("")).await.unwrap_err().is_invalid());
    assert!(board
        .post(&q, NewJob::new("x").max_attempts(0))
        .await
        .unwrap_err()
        .is_invalid());
    assert!(board
        .post(&q, NewJob::new("x").priority(Priority(1 << 30)))
        .await
        .unwrap_err()
        .is_invalid());
    assert!(board
        .post("bad queue", NewJob::new("x"))
        .await
        .unwrap_err()
        .is_invalid());
    assert!(board.claim(&[&q], "", LONG, 1).await.unwrap_err().is_invalid());
    assert!(board.claim(&[&q], "w", LONG, 0).await.unwrap_err().is_invalid());
    let id = board.post(&q, NewJob::new("x").id("fixed-id")).await.unwrap();
    let dup = board.post(&q, NewJob::new("y").id("fixed-id")).await.unwrap_err();
    assert!(dup.is_exists() && dup.message().contains("fixed-id"), "{dup}");
    assert_eq!(
        board.show(&q, &id).await.unwrap().name,
        "x",
        "a duplicate post must not overwrite"
    );
    assert_eq!(board.job_count(&q).await.unwrap(), 1);
}

/// taskflow's `book` (a logbook's name and uuid) is posted, shown and
/// handed to the claimer with the job; a job without one has none.
pub async fn book_travels_with_the_job<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("book");
    let book_uuid = JobId::random().to_string();
    let with = board
        .post(&q, NewJob::new("flow").book("nightly", &book_uuid))
        .await
        .unwrap();
    let without = board.post(&q, NewJob::new("plain")).await.unwrap();
    let shown = board.show(&q, &with).await.unwrap();
    let book = shown.book.expect("the posted book is shown");
    assert_eq!(
        (book.name.as_str(), book.uuid.as_str()),
        ("nightly", book_uuid.as_str())
    );
    assert_eq!(board.show(&q, &without).await.unwrap().book, None);
    let claimed = board.claim(&[&q], "w", LONG, 2).await.unwrap();
    assert_eq!(*claimed[0].lease.job(), with);
    assert_eq!(claimed[0].book.as_ref().map(|b| b.name.as_str()), Some("nightly"));
    assert_eq!(claimed[1].book, None);
    let e = board
        .post(&q, NewJob::new("flow").book("", "x"))
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
}

/// taskflow may claim without an expiry: such a claim is held until it is
/// released (on ZooKeeper, as long as the claiming session), never
/// recovered as expired, shows no time left, and ends like any claim.
pub async fn claim_without_expiry_is_held_until_released<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("no-expiry");
    let id = board.post(&q, NewJob::new("held")).await.unwrap();
    let c = board.claim_job(&q, &id, "tf-like", None).await.unwrap();
    let shown = board.show(&q, &id).await.unwrap();
    assert_eq!(shown.state, JobState::Claimed);
    assert_eq!(shown.owner.as_deref(), Some("tf-like"));
    assert_eq!(shown.expires_in_ms, None, "no expiry, no time left");
    // Longer than any lease a test uses: still held after a reap.
    let_pass(&board, SHORT * 2).await;
    board.reap(&q).await.unwrap();
    assert!(board.claim(&[&q], "other", LONG, 1).await.unwrap().is_empty());
    assert_eq!(
        board.find_owner(&q, &id).await.unwrap().as_deref(),
        Some("tf-like")
    );
    board.consume(c.lease).await.unwrap();
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Completed);
}

/// A claimed job shows its lease time left (taskflow's `expires_in`) and
/// taskflow's `last_modified`.
pub async fn lease_time_left_and_last_modified_are_shown<H: Harness>(h: &H) {
    let board = h.board().await;
    let q = unique_queue("expires-in");
    let id = board.post(&q, NewJob::new("timed")).await.unwrap();
    let ready = board.show(&q, &id).await.unwrap();
    assert_eq!(ready.expires_in_ms, None);
    assert!(ready.last_modified.is_some(), "{ready:?}");
    board.claim(&[&q], "w", LONG, 1).await.unwrap();
    let claimed = board.show(&q, &id).await.unwrap();
    let left = claimed.expires_in_ms.expect("a lease has time left");
    assert!(
        left > 0 && left <= LONG.as_millis() as i64,
        "{left} ms left of {LONG:?}"
    );
    let (created, modified) = (claimed.created_on.unwrap(), claimed.last_modified.unwrap());
    assert!(
        modified >= created,
        "last_modified {modified} before created_on {created}"
    );
}
