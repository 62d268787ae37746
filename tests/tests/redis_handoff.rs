//! Hand-offs on a real redis-server: a claimer whose claim came up empty
//! is handed the next job posted to its queue, lease taken by the post, so
//! that its pickup costs no claim round trip; and nothing is lost or held
//! twice when the claimer is gone, late, paused or stops taking work.

use std::time::Duration;

use jobworker::board::{ClaimRequest, Woken};
use jobworker::redis::RedisBoard;
use jobworker::{Board, Claimed, JobState, NewJob, Priority};
use jobworker_tests::features::board_url;
use jobworker_tests::unique_queue;
use redis::AsyncCommands;

const LONG: Duration = Duration::from_secs(300);

async fn setup(prefix: &str) -> (RedisBoard, String) {
    let board = RedisBoard::connect(&board_url()).await.unwrap();
    (board, unique_queue(prefix))
}

/// An empty claim by `who` on `queues` that registers it for hand-offs
/// for `register`, with leases of `expiry`.
async fn register(board: &RedisBoard, queues: &[&str], who: &str, register: Duration, expiry: Duration) {
    let request = ClaimRequest {
        queues,
        who,
        expiry,
        count: 5,
        holding: 0,
        hand_off: Some(register),
    };
    assert!(board.claim_with(&request).await.unwrap().is_empty());
}

/// Workers registered for hand-offs on `q` (the idle hash).
async fn registered(board: &RedisBoard, q: &str) -> Vec<String> {
    let mut con = board.connection();
    let idle: std::collections::HashMap<String, String> =
        con.hgetall(board.keys(q).unwrap().idle()).await.unwrap();
    let mut who: Vec<String> = idle.into_keys().collect();
    who.sort();
    who
}

/// Waits as `who` (subscribing its hand-off channel) until something comes.
async fn wait_as(board: &RedisBoard, q: &str, who: &str, timeout: Duration) -> Woken {
    board.wait_as(&[q], Some(who), timeout).await.unwrap()
}

/// Waits as `who` until a hand-off comes (a wait also returns at once
/// while the queue holds ready jobs, before the hand-off may be read).
async fn handed(board: &RedisBoard, q: &str, who: &str) -> Vec<Claimed> {
    for _ in 0..200 {
        let woken = wait_as(board, q, who, Duration::from_secs(10)).await;
        assert!(woken.work);
        if !woken.handed.is_empty() {
            return woken.handed;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no hand-off for {who}");
}

/// Claims for `who` until a job comes back to the queue (given back, or
/// recovered once its lease ran out); panics after 20 s.
async fn claim_when_back(board: &RedisBoard, q: &str, who: &str) -> Claimed {
    for _ in 0..400 {
        if let Some(c) = board.claim(&[q], who, LONG, 1).await.unwrap().pop() {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no job came back to {q}");
}

#[tokio::test]
async fn an_idle_claimer_is_handed_the_next_post_with_its_lease() {
    let (board, q) = setup("handoff").await;
    // Subscribe first (a wait that times out), then register.
    assert!(wait_as(&board, &q, "w1", Duration::from_millis(50))
        .await
        .handed
        .is_empty());
    register(&board, &[&q], "w1", LONG, LONG).await;
    assert_eq!(registered(&board, &q).await, ["w1"]);

    let id = board
        .post(
            &q,
            NewJob::new("greet").args(&"hi").unwrap().priority(Priority(3)),
        )
        .await
        .unwrap();
    let mut handed = handed(&board, &q, "w1").await;
    assert_eq!(handed.len(), 1, "{handed:?}");
    let job = handed.remove(0);
    assert_eq!(*job.lease.job(), id);
    assert_eq!(job.lease.owner(), "w1");
    assert_eq!(
        (job.name.as_str(), job.attempt, job.priority),
        ("greet", 1, Priority(3))
    );
    assert_eq!(job.args, rmpv::Value::from("hi"));
    assert_eq!(board.show(&q, &id).await.unwrap().state, JobState::Claimed);
    // One hand-off per registration; the lease is a real one.
    assert!(registered(&board, &q).await.is_empty());
    assert!(board.claim(&[&q], "w2", LONG, 5).await.unwrap().is_empty());
    board.extend(&job.lease, LONG).await.unwrap();
    board.consume(job.lease).await.unwrap();
    assert_eq!(board.show(&q, &id).await.unwrap().state, JobState::Completed);
    let stats = board.stats(&q, None).await.unwrap();
    assert_eq!(stats.wait.count, 1, "the hand-off counts its wait like a claim");
    assert_eq!(stats.wait.histogram, [("s0".to_owned(), 1)]);
    // It waited 0 ms, so it is counted apart from the sums (one HINCRBY)…
    let day = board.server_ms().await.unwrap().div_euclid(86_400_000);
    let stats_key = board.keys(&q).unwrap().stats(day);
    let zero: Option<String> = board.connection().hget(&stats_key, "wait.zero").await.unwrap();
    assert_eq!(zero.as_deref(), Some("1"));
    // …and read with the waits in the sums as one day's figures: 0 and x
    // have mean x/2 and standard deviation x/2.
    board.post(&q, NewJob::new("later")).await.unwrap();
    let posted = board.server_ms().await.unwrap();
    while board.server_ms().await.unwrap() < posted + 50 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let claimed = board.claim(&[&q], "w2", LONG, 1).await.unwrap().remove(0);
    board.consume(claimed.lease).await.unwrap();
    let wait = board.stats(&q, None).await.unwrap().wait;
    assert_eq!(wait.count, 2, "{wait:?}");
    assert!(wait.mean_ms >= 25.0, "{wait:?}");
    assert!((wait.std_dev_ms - wait.mean_ms).abs() < 1e-6, "{wait:?}");
    assert_eq!(wait.histogram.iter().map(|(_, n)| n).sum::<u64>(), 2, "{wait:?}");
}

#[tokio::test]
async fn one_job_per_registration_and_the_best_one_first() {
    let (board, q) = setup("handoff-one").await;
    wait_as(&board, &q, "w1", Duration::from_millis(50)).await;
    register(&board, &[&q], "w1", LONG, LONG).await;
    let jobs = [
        NewJob::new("low"),
        NewJob::new("high").priority(Priority(9)),
        NewJob::new("mid").priority(Priority(5)),
    ];
    let ids: Vec<_> = board
        .post_many(&q, &jobs)
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let handed = handed(&board, &q, "w1").await;
    assert_eq!(handed.len(), 1);
    assert_eq!(*handed[0].lease.job(), ids[1], "the highest priority goes first");
    let rest = board.claim(&[&q], "w2", LONG, 5).await.unwrap();
    let rest: Vec<_> = rest.iter().map(|c| c.lease.job().clone()).collect();
    assert_eq!(rest, [ids[2].clone(), ids[0].clone()]);
    // A claim that got jobs, with a registration asked, drops it.
    register(&board, &[&q], "w3", LONG, LONG).await;
    board.post(&q, NewJob::new("x")).await.unwrap();
    assert!(registered(&board, &q).await.is_empty());
}

#[tokio::test]
async fn two_idle_claimers_get_one_lone_post_each() {
    let (board, q) = setup("handoff-two").await;
    for who in ["w1", "w2"] {
        wait_as(&board, &q, who, Duration::from_millis(50)).await;
        register(&board, &[&q], who, LONG, LONG).await;
    }
    let first = board.post(&q, NewJob::new("a")).await.unwrap();
    // The lone post went to one of them; the other is still registered,
    // and gets the next one.
    let left = registered(&board, &q).await;
    assert_eq!(left.len(), 1, "{left:?}");
    let (taker, other) = if left[0] == "w2" {
        ("w1", "w2")
    } else {
        ("w2", "w1")
    };
    let got = handed(&board, &q, taker).await;
    assert_eq!(got.iter().map(|c| c.lease.job()).collect::<Vec<_>>(), [&first]);
    let second = board.post(&q, NewJob::new("b")).await.unwrap();
    let got = handed(&board, &q, other).await;
    assert_eq!(got.iter().map(|c| c.lease.job()).collect::<Vec<_>>(), [&second]);
    assert!(registered(&board, &q).await.is_empty());
    for id in [&first, &second] {
        assert_eq!(board.show(&q, id).await.unwrap().state, JobState::Claimed);
    }
}

#[tokio::test]
async fn a_claimer_that_does_not_listen_or_is_late_is_skipped() {
    let (board, q) = setup("handoff-gone").await;
    // Registered but never subscribed (or dead: its connection closed).
    register(&board, &[&q], "ghost", LONG, LONG).await;
    // Subscribed, but its registration ran out.
    wait_as(&board, &q, "late", Duration::from_millis(50)).await;
    register(&board, &[&q], "late", Duration::from_millis(1), LONG).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let id = board.post(&q, NewJob::new("x")).await.unwrap();
    assert_eq!(board.show(&q, &id).await.unwrap().state, JobState::Ready);
    assert!(
        registered(&board, &q).await.is_empty(),
        "stale registrations are dropped"
    );
    let woken = wait_as(&board, &q, "late", Duration::from_millis(100)).await;
    assert!(woken.handed.is_empty());
    assert_eq!(
        *board.claim(&[&q], "w", LONG, 1).await.unwrap()[0].lease.job(),
        id
    );
}

#[tokio::test]
async fn a_paused_queue_or_one_at_its_limit_hands_nothing_over() {
    let (board, q) = setup("handoff-closed").await;
    wait_as(&board, &q, "w1", Duration::from_millis(50)).await;
    register(&board, &[&q], "w1", LONG, LONG).await;
    board.pause(&q).await.unwrap();
    let paused = board.post(&q, NewJob::new("x")).await.unwrap();
    board.resume(&q).await.unwrap();
    assert_eq!(board.show(&q, &paused).await.unwrap().state, JobState::Ready);
    assert_eq!(registered(&board, &q).await, ["w1"]);
    // Limit 1, held by someone else.
    board.set_limit(&q, Some(1)).await.unwrap();
    assert_eq!(board.claim(&[&q], "holder", LONG, 1).await.unwrap().len(), 1);
    let limited = board.post(&q, NewJob::new("y")).await.unwrap();
    assert_eq!(board.show(&q, &limited).await.unwrap().state, JobState::Ready);
    assert!(wait_as(&board, &q, "w1", Duration::from_millis(100))
        .await
        .handed
        .is_empty());
}

#[tokio::test]
async fn a_claim_from_several_queues_does_not_register() {
    let (board, q) = setup("handoff-multi").await;
    let q2 = unique_queue("handoff-multi-b");
    register(&board, &[&q, &q2], "w1", LONG, LONG).await;
    assert!(registered(&board, &q).await.is_empty());
    assert!(registered(&board, &q2).await.is_empty());
    // Nor does a worker's settle-and-claim step over both.
    board.post(&q, NewJob::new("x")).await.unwrap();
    let done = board.claim(&[&q], "w1", LONG, 1).await.unwrap().remove(0).lease;
    let request = ClaimRequest {
        queues: &[&q, &q2],
        who: "w1",
        expiry: LONG,
        count: 5,
        holding: 0,
        hand_off: Some(LONG),
    };
    let (consumed, claimed) = board.consume_then_claim(vec![done], &request).await;
    assert!(consumed[0].is_ok() && claimed.unwrap().is_empty());
    assert!(registered(&board, &q).await.is_empty());
    assert!(registered(&board, &q2).await.is_empty());
}

#[tokio::test]
async fn withdrawing_returns_what_was_handed_and_ends_the_registration() {
    let (board, q) = setup("handoff-withdraw").await;
    wait_as(&board, &q, "w1", Duration::from_millis(50)).await;
    register(&board, &[&q], "w1", LONG, LONG).await;
    let id = board.post(&q, NewJob::new("x")).await.unwrap();
    // Handed, not read: the worker stops taking work.
    register(&board, &[&q], "w1", LONG, LONG).await;
    let mut handed = board.withdraw(&[&q], "w1").await.unwrap();
    assert_eq!(handed.len(), 1);
    assert_eq!(*handed[0].lease.job(), id);
    assert!(registered(&board, &q).await.is_empty());
    let after = board.post(&q, NewJob::new("y")).await.unwrap();
    assert_eq!(board.show(&q, &after).await.unwrap().state, JobState::Ready);
    // Given back, the handed job is claimable again.
    board
        .abandon(handed.remove(0).lease, jobworker::Abandon::Release)
        .await
        .unwrap();
    let claimed = board.claim(&[&q], "w2", LONG, 5).await.unwrap();
    assert_eq!(claimed.len(), 2);
}

#[tokio::test]
async fn a_hand_off_never_read_expires_and_the_job_is_recovered() {
    let (board, q) = setup("handoff-lost").await;
    wait_as(&board, &q, "frozen", Duration::from_millis(50)).await;
    register(&board, &[&q], "frozen", LONG, Duration::from_millis(300)).await;
    let id = board.post(&q, NewJob::new("x").max_attempts(5)).await.unwrap();
    assert_eq!(board.show(&q, &id).await.unwrap().state, JobState::Claimed);
    // "frozen" never reads its hand-off; the lease runs out.
    let got = claim_when_back(&board, &q, "w2").await;
    assert_eq!(*got.lease.job(), id);
    assert_eq!(got.attempt, 2, "the expired hand-off counts as an attempt");
    // Read late, the stale hand-off is not handed on, and giving it back
    // does not disturb the job's new holder.
    let late = wait_as(&board, &q, "frozen", Duration::from_secs(1)).await;
    assert!(late.handed.is_empty(), "{late:?}");
    board.consume(got.lease).await.unwrap();
}

/// A hand-off read when its lease may have less than half its time left
/// (by the claimer's own clock, since it sent the claim that registered)
/// is given back, not started: however late, the job runs elsewhere once.
#[tokio::test]
async fn a_hand_off_read_late_is_given_back_not_started() {
    let (board, q) = setup("handoff-late").await;
    wait_as(&board, &q, "slow", Duration::from_millis(50)).await;
    register(&board, &[&q], "slow", LONG, Duration::from_millis(2000)).await;
    let id = board.post(&q, NewJob::new("x").max_attempts(5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let late = wait_as(&board, &q, "slow", Duration::from_secs(1)).await;
    assert!(late.handed.is_empty(), "{late:?}");
    // Given back at once (not counted), or, on a slow machine, recovered
    // once its lease ran out: either way another claimer gets it.
    let got = claim_when_back(&board, &q, "w2").await;
    assert_eq!(*got.lease.job(), id);
    board.consume(got.lease).await.unwrap();
}

/// A server that stops answering after the wait's pub/sub connection
/// opened (frozen here; a cut link looks the same): a wait that must
/// subscribe fails within its reply timeout, instead of holding its
/// worker until the server answers; once it answers, the next wait opens
/// a new connection and sees work again.
#[tokio::test]
async fn a_wait_whose_subscribe_goes_unanswered_fails_and_the_next_one_works() {
    use jobworker::embedded::{RedisServer, ServerOptions};
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let (q1, q2) = (unique_queue("unanswered"), unique_queue("unanswered-new"));
    // The wait's connection, open and subscribed to q1's channels.
    board
        .wait_as(&[&q1], Some("w"), Duration::from_millis(10))
        .await
        .unwrap();

    let pid = server.pid() as i32;
    // SAFETY: signals to the test's own redis-server.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        board.wait_as(&[&q2], Some("w"), Duration::from_secs(1)),
    )
    .await;
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let failed = waited.expect("the wait was still waiting for its subscribe after 60 s");
    assert!(failed.is_err(), "a wait on a frozen server: {failed:?}");

    board.post(&q2, NewJob::new("after")).await.unwrap();
    let woken = board
        .wait_as(&[&q2], Some("w"), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(woken.work, "{woken:?}");
}
