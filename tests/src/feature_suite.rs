//! The feature suite both backends run: the operator features of the
//! capability traits (`Admin`, `Events`), each test generic over a
//! [`FeatureHarness`], instantiated by `tests/tests/features_redis.rs` and
//! `tests/tests/features_zookeeper.rs` with [`feature_tests!`].
//!
//! It grows one capability at a time as ZooKeeper gains them; the Redis
//! feature tests (`tests/tests/redis_*.rs`) keep what only Redis has.

use std::future::Future;
use std::time::Duration;

use futures_util::StreamExt;
use jobworker::board::{Admin, Events};
use jobworker::{Board, JobId, JobState, ListFilter, NewJob, Page};

use crate::conformance::let_pass;
use crate::{copy_of, unique_queue};

/// An expiry no test outlives.
pub const LONG: Duration = Duration::from_secs(120);

/// How long a test waits for something that should happen at once: generous
/// for a busy machine.
pub const SOON: Duration = Duration::from_secs(20);

/// Boards of one backend for the feature suite.
pub trait FeatureHarness: Sync {
    /// The backend's board.
    type B: Board + Admin + Events + Clone + Send + Sync + 'static;
    /// A board with its own connection.
    fn board(&self) -> impl Future<Output = Self::B> + Send;
}

/// Instantiates every test of the feature suite as a `#[tokio::test]` for a
/// harness expression.
#[macro_export]
macro_rules! feature_tests {
    ($harness:expr) => {
        $crate::feature_tests!(@each $harness;
            cancel_takes_waiting_work_off_the_board, cancel_is_all_or_nothing,
            cancel_of_a_held_job_tells_its_owner_and_revokes_the_lease,
            a_cancel_racing_claims_leaves_each_job_one_ending,
            a_paused_queue_hands_out_nothing_until_resumed,
            a_paused_queue_still_takes_back_expired_leases,
            wait_on_a_paused_queue_sleeps_until_resumed);
    };
    (@each $harness:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let harness = $harness;
                $crate::feature_suite::$name(&harness).await;
            }
        )*
    };
}

/// Cancelled ready and scheduled jobs leave the board: not claimable,
/// listed as cancelled; a second cancel, or one of an unknown job, is
/// refused.
pub async fn cancel_takes_waiting_work_off_the_board<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("cancel-waiting");
    let ready = b.post(&q, NewJob::new("r")).await.unwrap();
    let later = b
        .post(&q, NewJob::new("s").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(b.state(&q, &later).await.unwrap(), JobState::Scheduled);
    let mut done = b
        .cancel(&q, &[ready.clone(), later.clone()], false)
        .await
        .unwrap();
    done.sort();
    let mut want = vec![(q.clone(), ready.clone()), (q.clone(), later.clone())];
    want.sort();
    assert_eq!(done, want);
    for id in [&ready, &later] {
        assert_eq!(b.state(&q, id).await.unwrap(), JobState::Cancelled, "{id}");
    }
    assert!(
        b.claim(&[&q], "w", LONG, 10).await.unwrap().is_empty(),
        "nothing to claim"
    );
    let mut both = vec![ready.to_string(), later.to_string()];
    both.sort();
    assert_eq!(listed_ids(&b, &q, JobState::Cancelled).await, both);
    let completed = listed_ids(&b, &q, JobState::Completed).await;
    assert!(
        completed.is_empty(),
        "cancelled jobs are not completed: {completed:?}"
    );
    let again = b
        .cancel(&q, std::slice::from_ref(&ready), false)
        .await
        .unwrap_err();
    assert!(again.is_finished(), "{again}");
    let unknown = JobId::from("no-such-job");
    let e = b.cancel(&q, &[unknown], false).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

/// The ids `list` gives for `state` in `q` (the first 10), sorted.
async fn listed_ids<B: Board>(b: &B, q: &str, state: JobState) -> Vec<String> {
    let page = Page { offset: 0, limit: 10 };
    let listed = b.list(q, ListFilter::State(state), page).await.unwrap();
    let mut ids: Vec<String> = listed.into_iter().map(|j| j.id.to_string()).collect();
    ids.sort();
    ids
}

/// A cancel of several jobs does nothing unless it can cancel them all.
pub async fn cancel_is_all_or_nothing<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("cancel-all");
    let finished = b.post(&q, NewJob::new("f")).await.unwrap();
    let c = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    b.consume(c.lease).await.unwrap();
    let ready = b.post(&q, NewJob::new("r")).await.unwrap();
    let e = b
        .cancel(&q, &[ready.clone(), finished.clone()], false)
        .await
        .unwrap_err();
    assert!(e.is_finished(), "{e}");
    assert_eq!(b.state(&q, &ready).await.unwrap(), JobState::Ready, "untouched");
    assert_eq!(b.state(&q, &finished).await.unwrap(), JobState::Completed);
}

/// A cancel of a claimed job is heard by its owner on `cancels_of`, and
/// the owner's extend and consume are refused as cancelled (its result is
/// dropped).
pub async fn cancel_of_a_held_job_tells_its_owner_and_revokes_the_lease<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("cancel-held");
    let owner = unique_queue("w-cancel");
    let id = b.post(&q, NewJob::new("long")).await.unwrap();
    let c = b.claim(&[&q], &owner, LONG, 1).await.unwrap().remove(0);
    let mut heard = b
        .cancels_of(&owner)
        .await
        .unwrap()
        .expect("the board announces cancels");
    b.cancel(&q, std::slice::from_ref(&id), false).await.unwrap();
    let got = tokio::time::timeout(SOON, heard.next()).await;
    assert_eq!(
        got.ok().flatten().as_deref(),
        Some(id.as_str()),
        "the owner hears the cancel"
    );
    let e = b.extend(&c.lease, LONG).await.unwrap_err();
    assert!(e.is_cancelled(), "extend after a cancel: {e}");
    let e = b.consume(copy_of(&c.lease)).await.unwrap_err();
    assert!(e.is_cancelled(), "consume after a cancel: {e}");
    assert_eq!(b.state(&q, &id).await.unwrap(), JobState::Cancelled);
}

/// Claims and consumes racing cancels of the same jobs: every job ends
/// exactly one way. A job whose consume went through is completed and its
/// cancel said finished; a job whose cancel went through is cancelled and
/// its consume (if it was claimed) was refused as cancelled.
pub async fn a_cancel_racing_claims_leaves_each_job_one_ending<H: FeatureHarness>(h: &H) {
    let (b, canceller) = (h.board().await, h.board().await);
    let q = unique_queue("cancel-race");
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(b.post(&q, NewJob::new("x")).await.unwrap());
    }
    let (qw, qc) = (q.clone(), q.clone());
    let worker = tokio::spawn(async move {
        let mut consumed = Vec::new();
        loop {
            let claimed = b.claim(&[&qw], "w-race", LONG, 2).await.unwrap();
            if claimed.is_empty() {
                return consumed;
            }
            for c in claimed {
                let id = c.lease.job().clone();
                match b.consume(c.lease).await {
                    Ok(()) => consumed.push(id),
                    Err(e) => assert!(e.is_cancelled(), "consume of {id}: {e}"),
                }
            }
        }
    });
    let all = ids.clone();
    let cancelling = tokio::spawn(async move {
        let mut cancelled = Vec::new();
        for id in all {
            match canceller.cancel(&qc, std::slice::from_ref(&id), false).await {
                Ok(_) => cancelled.push(id),
                Err(e) => assert!(e.is_finished(), "cancel of {id}: {e}"),
            }
        }
        (canceller, cancelled)
    });
    let consumed = worker.await.unwrap();
    let (board, cancelled) = cancelling.await.unwrap();
    for id in &ids {
        let state = board.state(&q, id).await.unwrap();
        let (c, x) = (consumed.contains(id), cancelled.contains(id));
        assert!(c != x, "job {id}: consumed {c}, cancelled {x}, state {state}");
        let want = if c {
            JobState::Completed
        } else {
            JobState::Cancelled
        };
        assert_eq!(state, want, "job {id}");
    }
    println!("{} consumed, {} cancelled", consumed.len(), cancelled.len());
}

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
