//! Dependencies and cancel on the Redis board against a real server:
//! chains within and across queues, missing and finished dependencies,
//! cancelling jobs in every state and with their dependents, and the
//! diamond across two queues under concurrent claimers.

use jobworker_tests::copy_of;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobworker::{Abandon, Board, JobId, JobState, NewJob};
use jobworker_tests::features::*;
use jobworker_tests::wait_until;
use tokio::time::Instant;

#[tokio::test]
async fn a_same_queue_chain_runs_in_order() {
    let (b, q) = board_and_queue("chain").await;
    let a = b.post(&q, NewJob::new("a")).await.unwrap();
    let bb = b.post(&q, NewJob::new("b").depends_on(a.clone())).await.unwrap();
    let c = b.post(&q, NewJob::new("c").depends_on(bb.clone())).await.unwrap();
    assert_eq!(b.state(&q, &a).await.unwrap(), JobState::Ready);
    assert_eq!(b.state(&q, &bb).await.unwrap(), JobState::Waiting);
    assert_eq!(b.state(&q, &c).await.unwrap(), JobState::Waiting);
    assert_eq!(ids_in(&b, &q, JobState::Waiting).await, set([&bb, &c]));
    assert_eq!(
        b.job_count(&q).await.unwrap(),
        1,
        "waiting jobs are not in the listings"
    );

    for (expect, next) in [(&a, Some(&bb)), (&bb, Some(&c)), (&c, None)] {
        let got = claim(&b, &q, 10).await;
        assert_eq!(got.len(), 1, "only the head of the chain is claimable");
        assert_eq!(&got[0].lease.job(), expect);
        if let Some(next) = next {
            assert_eq!(b.state(&q, next).await.unwrap(), JobState::Waiting);
        }
        b.consume(copy_of(&got[0].lease)).await.unwrap();
        if let Some(next) = next {
            assert_eq!(b.state(&q, next).await.unwrap(), JobState::Ready);
        }
    }
    assert_eq!(
        event_kinds(&b, &q, &c).await,
        ["posted", "released", "claimed", "consumed"]
    );
}

#[tokio::test]
async fn a_cross_queue_dependency_is_released_when_consumed() {
    let (b, [q1, q2]) = board_and_queues(["xq-a", "xq-b"]).await;
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let d = b
        .post(&q2, NewJob::new("d").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Waiting);
    assert!(claim(&b, &q2, 10).await.is_empty());
    let c = claim_one(&b, &q1).await;
    assert!(claim(&b, &q2, 10).await.is_empty(), "a claim is not a consume");
    b.consume(c.lease).await.unwrap();
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Ready);
    assert_eq!(claim_one(&b, &q2).await.lease.job(), d);
}

#[tokio::test]
async fn a_job_waits_for_all_of_its_dependencies() {
    let (b, [q1, q2]) = board_and_queues(["all-a", "all-b"]).await;
    let x = b.post(&q1, NewJob::new("x")).await.unwrap();
    let y = b.post(&q2, NewJob::new("y")).await.unwrap();
    let d = b
        .post(
            &q2,
            NewJob::new("d")
                .depends_on_in(&q1, x.clone())
                .depends_on(y.clone()),
        )
        .await
        .unwrap();
    assert_eq!(claim_and_consume(&b, &q2).await.lease.job(), y);
    assert_eq!(
        b.state(&q2, &d).await.unwrap(),
        JobState::Waiting,
        "x is still due"
    );
    assert!(claim(&b, &q2, 10).await.is_empty());
    claim_and_consume(&b, &q1).await;
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Ready);
    assert_eq!(claim_one(&b, &q2).await.lease.job(), d);
}

#[tokio::test]
async fn a_dependency_already_consumed_leaves_the_job_ready_at_once() {
    let (b, [q1, q2]) = board_and_queues(["done-a", "done-b"]).await;
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    claim_and_consume(&b, &q1).await;
    let same = b
        .post(&q1, NewJob::new("same").depends_on(a.clone()))
        .await
        .unwrap();
    let other = b
        .post(&q2, NewJob::new("other").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    assert_eq!(b.state(&q1, &same).await.unwrap(), JobState::Ready);
    assert_eq!(b.state(&q2, &other).await.unwrap(), JobState::Ready);
    assert_eq!(claim_one(&b, &q1).await.lease.job(), same);
    assert_eq!(claim_one(&b, &q2).await.lease.job(), other);
}

#[tokio::test]
async fn a_missing_dependency_fails_the_post_and_leaves_nothing_behind() {
    let (b, [q1, q2]) = board_and_queues(["miss-a", "miss-b"]).await;
    let e = b
        .post(&q1, NewJob::new("x").id("dep-same").depends_on("no-such-job"))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(e.message().contains("no-such-job"), "{e}");
    assert!(b.state(&q1, &"dep-same".into()).await.unwrap_err().is_not_found());

    let e = b
        .post(
            &q2,
            NewJob::new("y").id("dep-cross").depends_on_in(&q1, "no-such-job"),
        )
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(e.message().contains("no-such-job"), "{e}");
    let left = b.state(&q2, &"dep-cross".into()).await;
    assert!(
        matches!(&left, Err(e) if e.is_not_found()) || matches!(left, Ok(JobState::Cancelled)),
        "the failed post left {left:?}"
    );
    assert_eq!(b.job_count(&q2).await.unwrap(), 0);
    assert!(ids_in(&b, &q2, JobState::Waiting).await.is_empty());
    assert!(claim(&b, &q2, 10).await.is_empty());

    // The same id can be posted again once its dependency exists.
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let again = b
        .post(&q2, NewJob::new("y").id("dep-cross").depends_on_in(&q1, a))
        .await
        .unwrap();
    assert_eq!(b.state(&q2, &again).await.unwrap(), JobState::Waiting);
}

#[tokio::test]
async fn cancel_is_refused_with_dependents_and_cancels_the_chain_with_them() {
    let (b, [q1, q2]) = board_and_queues(["cx-a", "cx-b"]).await;
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let bb = b
        .post(&q2, NewJob::new("b").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    let c = b
        .post(&q1, NewJob::new("c").depends_on_in(&q2, bb.clone()))
        .await
        .unwrap();
    let d = b
        .post(&q2, NewJob::new("d").depends_on(bb.clone()))
        .await
        .unwrap();

    let e = b.cancel(&q1, std::slice::from_ref(&a), false).await.unwrap_err();
    assert!(e.is_invalid(), "{e}");
    assert!(e.message().contains(bb.as_str()), "names the dependent: {e}");
    assert_eq!(
        b.state(&q1, &a).await.unwrap(),
        JobState::Ready,
        "nothing changed"
    );
    assert_eq!(b.state(&q2, &bb).await.unwrap(), JobState::Waiting);

    let cancelled: BTreeSet<(String, JobId)> = b
        .cancel(&q1, std::slice::from_ref(&a), true)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let expected: BTreeSet<(String, JobId)> = [
        (q1.clone(), a.clone()),
        (q2.clone(), bb.clone()),
        (q1.clone(), c.clone()),
        (q2.clone(), d.clone()),
    ]
    .into();
    assert_eq!(cancelled, expected);
    for (q, id) in &expected {
        assert_eq!(b.state(q, id).await.unwrap(), JobState::Cancelled, "{q}/{id}");
    }
    assert_eq!(b.job_count(&q1).await.unwrap(), 0);
    assert_eq!(b.job_count(&q2).await.unwrap(), 0);
    assert!(ids_in(&b, &q1, JobState::Waiting).await.is_empty());
    assert!(ids_in(&b, &q2, JobState::Waiting).await.is_empty());
    assert!(claim(&b, &q1, 10).await.is_empty());
    assert!(claim(&b, &q2, 10).await.is_empty());
    assert_eq!(ids_in(&b, &q2, JobState::Cancelled).await, set([&bb, &d]));
}

/// The must-show diamond: A (q1) → B (q1) and C (q2) → D (q2), driven by
/// several concurrent claimers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn diamond_across_two_queues_runs_in_dependency_order() {
    let (b, [q1, q2]) = board_and_queues(["diamond-1", "diamond-2"]).await;
    let a = b.post(&q1, NewJob::new("A")).await.unwrap();
    let bb = b.post(&q1, NewJob::new("B").depends_on(a.clone())).await.unwrap();
    let c = b
        .post(&q2, NewJob::new("C").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    let d = b
        .post(
            &q2,
            NewJob::new("D")
                .depends_on_in(&q1, bb.clone())
                .depends_on(c.clone()),
        )
        .await
        .unwrap();
    assert_eq!(b.state(&q1, &a).await.unwrap(), JobState::Ready);
    for (q, id) in [(&q1, &bb), (&q2, &c), (&q2, &d)] {
        assert_eq!(b.state(q, id).await.unwrap(), JobState::Waiting);
    }

    // (job name, "start" | "done"), in the order claimers saw them; "done"
    // is recorded before the consume that releases dependents.
    let log: Arc<Mutex<Vec<(String, &'static str)>>> = Arc::default();
    let finished = Arc::new(AtomicUsize::new(0));
    let d_seen_waiting = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut tasks = Vec::new();
    for k in 0..4 {
        let (b, q1, q2) = (b.clone(), q1.clone(), q2.clone());
        let (log, finished, d_seen_waiting) = (log.clone(), finished.clone(), d_seen_waiting.clone());
        let (c_id, d_id) = (c.clone(), d.clone());
        tasks.push(tokio::spawn(async move {
            let who = format!("claimer-{k}");
            while finished.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
                let got = b.claim(&[&q1, &q2], &who, LONG, 1).await.unwrap();
                let Some(job) = got.into_iter().next() else {
                    // Idle until the board has work again (or a while).
                    b.wait(&[&q1, &q2], Duration::from_millis(100)).await.unwrap();
                    continue;
                };
                log.lock().unwrap().push((job.name.clone(), "start"));
                if job.name == "C" {
                    // C runs until B is consumed and D seen still waiting.
                    let seen = &d_seen_waiting;
                    wait_until(
                        "D seen waiting after B's consume",
                        Duration::from_secs(20),
                        || async { seen.load(Ordering::SeqCst) },
                    )
                    .await;
                }
                log.lock().unwrap().push((job.name.clone(), "done"));
                b.consume(job.lease).await.unwrap();
                if job.name == "B" {
                    // Read D first: if C is still unconsumed afterwards, it
                    // was when D was read.
                    let d_state = b.state(&q2, &d_id).await.unwrap();
                    let c_state = b.state(&q2, &c_id).await.unwrap();
                    if matches!(c_state, JobState::Ready | JobState::Claimed) {
                        assert_eq!(d_state, JobState::Waiting, "D released with only B consumed");
                        d_seen_waiting.store(true, Ordering::SeqCst);
                    }
                }
                finished.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(finished.load(Ordering::SeqCst), 4, "not all jobs ran: {log:?}");
    let at = |name: &str, what: &str| {
        let hits: Vec<usize> = log
            .iter()
            .enumerate()
            .filter(|(_, (n, w))| n == name && *w == what)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(hits.len(), 1, "{name} {what} seen {} times: {log:?}", hits.len());
        hits[0]
    };
    assert!(at("A", "done") < at("B", "start"), "{log:?}");
    assert!(at("A", "done") < at("C", "start"), "{log:?}");
    assert!(at("B", "done") < at("D", "start"), "{log:?}");
    assert!(at("C", "done") < at("D", "start"), "{log:?}");
    assert!(
        d_seen_waiting.load(Ordering::SeqCst),
        "D's state was never checked between B's and C's consume: {log:?}"
    );
    for (q, id) in [(&q1, &a), (&q1, &bb), (&q2, &c), (&q2, &d)] {
        assert_eq!(b.state(q, id).await.unwrap(), JobState::Completed, "{id}");
    }
}

// ------------------------------------------------------------------- cancel

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
