//! Races between live claimers on the ZooKeeper board, each claimer with a
//! session of its own, run many times against the shared server.

use jobworker_tests::copy_of;
use std::collections::HashSet;
use std::time::Duration;

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobId, NewJob};
use jobworker_tests::{shared_zookeeper, unique_queue, wait_until};

/// A board (its own session) under `root`.
async fn board(root: &str) -> ZooKeeperBoard {
    let o = ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()));
    ZooKeeperBoard::connect(o)
        .await
        .expect("connect to the test ZooKeeper")
}

/// Seen: when two workers recovered the same expired lease at the same
/// moment, both claimed the job and both handlers ran (a late recoverer
/// deleted the new holder's lock, which had the same version, 0). Here A
/// claims jobs with a lease that expires at once; then B and C, on sessions
/// of their own, claim at the same moment. 2,000 races (200 rounds of 10
/// jobs): a job is never held by both.
#[tokio::test(flavor = "multi_thread")]
async fn two_claimers_recovering_one_expired_lease_never_both_hold_it() {
    const ROUNDS: usize = 200;
    const JOBS: usize = 10;
    let root = format!("/{}", unique_queue("races"));
    let (a, b, c) = (board(&root).await, board(&root).await, board(&root).await);
    let q = unique_queue("expired");
    let (mut races, mut recovered) = (0, 0);
    for round in 0..ROUNDS {
        let mut posted = Vec::new();
        for _ in 0..JOBS {
            posted.push(a.post(&q, NewJob::new("race")).await.unwrap());
        }
        let held = a.claim(&[&q], "A", Duration::from_millis(1), JOBS).await.unwrap();
        assert_eq!(held.len(), JOBS, "round {round}: A claims every job");
        // The 1 ms lease runs out on both claimers' clocks.
        let expired_at = a.server_ms().await.unwrap() + 1;
        for claimer in [&b, &c] {
            wait_until("the lease to run out", Duration::from_secs(10), || async {
                claimer.server_ms().await.unwrap() > expired_at
            })
            .await;
        }
        let queues = [q.as_str()];
        let (by_b, by_c) = tokio::join!(
            b.claim(&queues, "B", Duration::from_secs(60), JOBS),
            c.claim(&queues, "C", Duration::from_secs(60), JOBS),
        );
        let ids = |claimed: &[jobworker::Claimed]| -> HashSet<JobId> {
            claimed.iter().map(|x| x.lease.job().clone()).collect()
        };
        let (by_b, by_c) = (by_b.unwrap(), by_c.unwrap());
        let (held_b, held_c) = (ids(&by_b), ids(&by_c));
        let both: Vec<&JobId> = held_b.intersection(&held_c).collect();
        assert!(
            both.is_empty(),
            "round {round}: B and C both hold {both:?} (B tokens {:?}, C tokens {:?})",
            by_b.iter().map(|x| x.lease.token()).collect::<Vec<_>>(),
            by_c.iter().map(|x| x.lease.token()).collect::<Vec<_>>()
        );
        races += JOBS;
        recovered += by_b.len() + by_c.len();
        // Every holder that the board says holds a job can extend it.
        for x in by_b.iter().chain(&by_c) {
            let board = if x.lease.owner() == "B" { &b } else { &c };
            board
                .extend(&x.lease, Duration::from_secs(60))
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "round {round}: {} holds {} but cannot extend: {e}",
                        x.lease.owner(),
                        x.lease.job()
                    )
                });
            board.consume(copy_of(&x.lease)).await.unwrap();
        }
        // Whatever neither took (both lost a race to the other) is cleaned up.
        for id in posted {
            if let Ok(Some(_)) | Err(_) = a.find_owner(&q, &id).await {
                continue;
            }
            if let Ok(claimed) = a
                .claim_job(&q, &id, "cleanup", Some(Duration::from_secs(60)))
                .await
            {
                a.consume(claimed.lease).await.unwrap();
            }
        }
    }
    println!(
        "{races} races of two claimers over an expired lease; {recovered} jobs recovered, none held twice"
    );
    assert!(
        recovered >= races / 2,
        "the claimers recovered only {recovered} of {races} jobs"
    );
}

/// Seen once under load: `show` said trashed with the reason of the try
/// before (its record was read before the trash landed, its paths after).
/// Here one board fails jobs twice (the second try trashes them) while
/// another shows them without pause: a trashed job always shows the
/// trash's reason.
#[tokio::test(flavor = "multi_thread")]
async fn show_of_a_job_being_trashed_gives_the_trash_reason() {
    const JOBS: usize = 40;
    let root = format!("/{}", unique_queue("races-show"));
    let (worker, reader) = (board(&root).await, board(&root).await);
    let q = unique_queue("show");
    for _ in 0..JOBS {
        let id = worker
            .post(&q, NewJob::new("doomed").max_attempts(2))
            .await
            .unwrap();
        let (reader, q2, id2) = (reader.clone(), q.clone(), id.clone());
        let watching = tokio::spawn(async move {
            loop {
                let info = reader.show(&q2, &id2).await.unwrap();
                if info.state == jobworker::JobState::Trashed {
                    return info.reason.unwrap_or_default();
                }
            }
        });
        for error in ["first", "second"] {
            let c = worker
                .claim(&[&q], "w", Duration::from_secs(60), 1)
                .await
                .unwrap()
                .remove(0);
            assert_eq!(c.lease.job(), &id);
            let retry = jobworker::Abandon::Retry {
                delay: Duration::ZERO,
                error: error.into(),
            };
            worker.abandon(c.lease, retry).await.unwrap();
        }
        let reason = watching.await.unwrap();
        assert!(reason.starts_with("second (attempts exhausted"), "{reason}");
    }
}
