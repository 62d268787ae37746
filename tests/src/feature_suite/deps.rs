//! Dependencies within and across queues: chains, missing and finished
//! dependencies, waiting jobs (listed, counted, reprioritised, cancelled),
//! cancel with dependents, the diamond under concurrent claimers, and
//! posts racing a consume or a cancel of their dependency.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobworker::board::{Admin, Inspect};
use jobworker::{Board, JobId, JobState, NewJob, Priority};
use tokio::time::Instant;

use super::{FeatureHarness, LONG};
use crate::features::{claim, claim_and_consume, claim_one, event_kinds, ids_in, set};
use crate::{copy_of, unique_queue, wait_until};

/// A chain in one queue runs one job at a time, each released by the consume
/// of the one before (its history says so); waiting jobs are not listed.
pub async fn a_same_queue_chain_runs_in_order<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("chain");
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

/// A dependency in another queue releases its dependent when consumed, not
/// when claimed.
pub async fn a_cross_queue_dependency_is_released_when_consumed<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q1, q2) = (unique_queue("xq-a"), unique_queue("xq-b"));
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

/// A job with dependencies in two queues waits until both are consumed.
pub async fn a_job_waits_for_all_of_its_dependencies<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q1, q2) = (unique_queue("all-a"), unique_queue("all-b"));
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

/// A dependency consumed before the post is met: the job is ready at once.
pub async fn a_dependency_already_consumed_leaves_the_job_ready_at_once<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q1, q2) = (unique_queue("done-a"), unique_queue("done-b"));
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

/// A dependency that does not exist fails the post, which leaves nothing
/// behind; the id can be posted once the dependency exists.
pub async fn a_missing_dependency_fails_the_post_and_leaves_nothing_behind<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q1, q2) = (unique_queue("miss-a"), unique_queue("miss-b"));
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

/// Cancelling a job that others wait for is refused (naming them) unless
/// they are cancelled with it: then the whole chain, across queues, goes.
pub async fn cancel_is_refused_with_dependents_and_cancels_the_chain_with_them<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q1, q2) = (unique_queue("cx-a"), unique_queue("cx-b"));
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
pub async fn diamond_across_two_queues_runs_in_dependency_order<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q1, q2) = (unique_queue("diamond-1"), unique_queue("diamond-2"));
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

/// A cancel with dependents takes a graph where a job waits both for the
/// root and for another dependent of it (fan-in, across queues): each goes
/// after the jobs that wait for it, and all go.
pub async fn cancel_with_dependents_takes_a_fan_in_graph<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (q1, q2) = (unique_queue("fan-in-a"), unique_queue("fan-in-b"));
    let root = b.post(&q1, NewJob::new("root")).await.unwrap();
    let a = b
        .post(&q1, NewJob::new("a").depends_on(root.clone()))
        .await
        .unwrap();
    let c = b
        .post(
            &q2,
            NewJob::new("c")
                .depends_on_in(&q1, root.clone())
                .depends_on_in(&q1, a.clone()),
        )
        .await
        .unwrap();
    let cancelled: BTreeSet<(String, JobId)> = b
        .cancel(&q1, std::slice::from_ref(&root), true)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let all: BTreeSet<(String, JobId)> = [
        (q1.clone(), root.clone()),
        (q1.clone(), a.clone()),
        (q2.clone(), c.clone()),
    ]
    .into();
    assert_eq!(cancelled, all);
    for (q, id) in &all {
        assert_eq!(b.state(q, id).await.unwrap(), JobState::Cancelled, "{q}/{id}");
    }
    // A finished root is refused before any dependent goes.
    let done = b.post(&q1, NewJob::new("done")).await.unwrap();
    claim_and_consume(&b, &q1).await;
    let e = b.cancel(&q1, &[done], true).await.unwrap_err();
    assert!(e.is_finished(), "{e}");
}

/// A waiting job is listed and counted as waiting (not among the listed
/// jobs), shows its dependencies both ways, takes a priority change, is
/// scheduled when released before its run-at time, and can be cancelled,
/// after which its dependency has no dependents left.
pub async fn waiting_jobs_are_listed_counted_reprioritised_and_cancelled<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("waiting");
    let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
    let later = b
        .post(
            &q,
            NewJob::new("later")
                .depends_on(parent.clone())
                .delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    let child = b
        .post(
            &q,
            NewJob::new("child")
                .args(&7u8)
                .unwrap()
                .depends_on(parent.clone()),
        )
        .await
        .unwrap();
    assert_eq!(ids_in(&b, &q, JobState::Waiting).await, set([&later, &child]));
    let shown = b.show(&q, &child).await.unwrap();
    assert_eq!((shown.state, shown.name.as_str()), (JobState::Waiting, "child"));
    assert_eq!(shown.args, serde_json::json!(7));
    assert_eq!(b.job_count(&q).await.unwrap(), 1, "only the parent is listed");
    let overview = b.overview(std::slice::from_ref(&q)).await.unwrap().remove(0);
    assert_eq!(overview.counts.waiting, Some(2));
    assert_eq!(overview.counts.ready, Some(1));

    let deps = b.dependencies(&q, &child).await.unwrap();
    assert_eq!(deps.depends_on, [(q.clone(), parent.clone())]);
    assert!(deps.dependents.is_empty());
    let deps = b.dependencies(&q, &parent).await.unwrap();
    let dependents: BTreeSet<JobId> = deps.dependents.into_iter().map(|(_, id)| id).collect();
    assert_eq!(dependents, set([&later, &child]));

    let state = b.set_priority(&q, &child, Priority::HIGH).await.unwrap();
    assert_eq!(state, JobState::Waiting);
    assert_eq!(b.show(&q, &child).await.unwrap().priority, Priority::HIGH.0);

    assert_eq!(
        b.cancel(&q, std::slice::from_ref(&later), false).await.unwrap(),
        [(q.clone(), later.clone())]
    );
    assert_eq!(b.state(&q, &later).await.unwrap(), JobState::Cancelled);
    let deps = b.dependencies(&q, &parent).await.unwrap();
    assert_eq!(
        deps.dependents,
        [(q.clone(), child.clone())],
        "the cancelled one left"
    );

    assert_eq!(claim_and_consume(&b, &q).await.lease.job(), parent);
    assert!(b.dependencies(&q, &parent).await.unwrap().dependents.is_empty());
    let released = claim_one(&b, &q).await;
    assert_eq!(released.lease.job(), child);
    assert_eq!(released.priority, Priority::HIGH, "the new priority came along");
    b.consume(released.lease).await.unwrap();
    assert!(ids_in(&b, &q, JobState::Waiting).await.is_empty());

    // Released before its run-at time: scheduled, not ready.
    let first = b.post(&q, NewJob::new("first")).await.unwrap();
    let delayed = b
        .post(
            &q,
            NewJob::new("delayed")
                .depends_on(first.clone())
                .delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    claim_and_consume(&b, &q).await;
    assert_eq!(b.state(&q, &delayed).await.unwrap(), JobState::Scheduled);
    assert!(claim(&b, &q, 10).await.is_empty(), "not before its time");
}

/// Dependents posted (from boards of their own) while their dependency is
/// being consumed are each released: none is left waiting for a job that
/// is done, whichever side of the consume its post lands on.
pub async fn dependents_posted_during_their_dependencys_consume_are_all_released<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("dep-race");
    let other = unique_queue("dep-race-other");
    let mut posters = Vec::new();
    for _ in 0..4 {
        posters.push(h.board().await);
    }
    for round in 0..5 {
        let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
        let held = claim_one(&b, &q).await;
        let consumed = Arc::new(AtomicBool::new(false));
        let posts: Vec<_> = posters
            .iter()
            .enumerate()
            .map(|(k, poster)| {
                let (poster, parent, consumed) = (poster.clone(), parent.clone(), consumed.clone());
                let queue = if k % 2 == 0 { q.clone() } else { other.clone() };
                let q = q.clone();
                tokio::spawn(async move {
                    // Post until the consume is done, and once more after.
                    let mut posted = Vec::new();
                    loop {
                        let done = consumed.load(Ordering::SeqCst);
                        let job = NewJob::new("child").depends_on_in(&q, parent.clone());
                        posted.push((queue.clone(), poster.post(&queue, job).await.unwrap()));
                        if done || posted.len() >= 200 {
                            return posted;
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        b.consume(held.lease).await.unwrap();
        consumed.store(true, Ordering::SeqCst);
        for post in posts {
            for (queue, id) in post.await.unwrap() {
                let state = b.state(&queue, &id).await.unwrap();
                assert_eq!(state, JobState::Ready, "round {round}: {queue}/{id} left {state}");
            }
        }
        for queue in [&q, &other] {
            loop {
                let got = claim(&b, queue, 100).await;
                if got.is_empty() {
                    break;
                }
                for c in got {
                    b.consume(c.lease).await.unwrap();
                }
            }
        }
    }
}

/// A cancel of a job racing the post of a job that depends on it: either
/// the cancel wins (the post fails, the job is not found) or the post wins
/// (the cancel is refused); never both, which would leave a job waiting
/// for a cancelled one.
pub async fn a_cancel_racing_a_dependents_post_never_strands_it<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let poster = h.board().await;
    let q = unique_queue("cancel-race");
    let (mut cancels_won, mut posts_won) = (0, 0);
    for round in 0..24u64 {
        let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
        // A first dependent, cancelled: the parent has had dependents, so
        // the racing post only checks its record.
        let first = b
            .post(&q, NewJob::new("first").depends_on(parent.clone()))
            .await
            .unwrap();
        b.cancel(&q, &[first], false).await.unwrap();
        let post = {
            let (poster, q, parent) = (poster.clone(), q.clone(), parent.clone());
            // Started a little later each round, so the rounds sweep the
            // cancel's steps (the outcome is checked, not who wins).
            let lag = Duration::from_micros(400 * (round % 12));
            tokio::spawn(async move {
                tokio::time::sleep(lag).await;
                poster.post(&q, NewJob::new("child").depends_on(parent)).await
            })
        };
        let cancel = b.cancel(&q, std::slice::from_ref(&parent), false).await;
        match (cancel, post.await.unwrap()) {
            (Ok(_), Err(e)) => {
                assert!(e.is_not_found(), "{e}");
                cancels_won += 1;
            }
            (Err(e), Ok(child)) => {
                assert!(e.is_invalid(), "{e}");
                assert_eq!(b.state(&q, &child).await.unwrap(), JobState::Waiting);
                let all = b.cancel(&q, &[parent], true).await.unwrap();
                assert_eq!(all.len(), 2, "{all:?}");
                posts_won += 1;
            }
            (Ok(_), Ok(child)) => panic!("both won: job {child} waits for a cancelled job"),
            (Err(c), Err(p)) => panic!("both lost: {c}; {p}"),
        }
    }
    assert_eq!(cancels_won + posts_won, 24);
    assert!(ids_in(&b, &q, JobState::Waiting).await.is_empty());
}
