//! Crash recovery on the board: the supervisor gives a dead worker's
//! leases back at once; a crash is blamed on a job only when it was alone
//! in the worker, and jobs that shared a dead worker run alone next.

use jobworker_tests::copy_of;
use std::time::Duration;

use jobworker::board::{ClaimRequest, Recovered, Recovery};
use jobworker::redis::{RedisBoard, RedisOptions, SyncBoard};
use jobworker::{Board, JobState, NewJob};
use jobworker_tests::features::board_url;
use jobworker_tests::unique_queue;
use redis::AsyncCommands;

const LONG: Duration = Duration::from_secs(300);

/// A claim of up to 3 jobs for `who`, who holds `holding` jobs now.
fn request<'a>(queues: &'a [&'a str], who: &'a str, holding: usize) -> ClaimRequest<'a> {
    ClaimRequest {
        queues,
        who,
        expiry: LONG,
        count: 3,
        holding,
        hand_off: None,
    }
}

async fn setup(prefix: &str) -> (RedisBoard, SyncBoard, String) {
    let board = RedisBoard::connect(&board_url()).await.unwrap();
    let sync = SyncBoard::connect(RedisOptions::new(board_url())).unwrap();
    (board, sync, unique_queue(prefix))
}

#[tokio::test]
async fn a_lone_job_that_kills_its_worker_three_times_is_a_poison_pill() {
    let (board, mut sync, q) = setup("poison").await;
    let id = board.post(&q, NewJob::new("p").max_attempts(10)).await.unwrap();
    for round in 1..=3u32 {
        let c = board
            .claim(&[&q], "dead-worker", LONG, 1)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(*c.lease.job(), id);
        // The supervisor's blocking board and the async one run one script.
        let reason = "killed by signal 6 (SIGABRT)";
        let Recovered { back, trashed } = if round == 2 {
            board.recover_owner(&q, "dead-worker", reason).await.unwrap()
        } else {
            sync.recover_owner(&q, "dead-worker", reason).unwrap()
        };
        assert_eq!(
            (back, trashed),
            if round < 3 { (1, 0) } else { (0, 1) },
            "round {round}"
        );
    }
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    let reason = info.reason.unwrap_or_default();
    assert!(
        reason.contains("poison pill") && reason.contains("SIGABRT"),
        "{reason}"
    );
}

#[tokio::test]
async fn jobs_of_a_worker_that_held_several_become_suspects_run_alone() {
    let (board, mut sync, q) = setup("suspects").await;
    let keys = board.keys(&q).unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(board.post(&q, NewJob::new("s")).await.unwrap());
    }
    assert_eq!(board.claim(&[&q], "dead-worker", LONG, 3).await.unwrap().len(), 3);
    assert_eq!(
        sync.recover_owner(&q, "dead-worker", "killed by signal 9 (SIGKILL)")
            .unwrap(),
        Recovered { back: 3, trashed: 0 }
    );
    let mut con = board.connection();
    for id in &ids {
        let info = board.show(&q, id).await.unwrap();
        assert_eq!(
            (info.state, info.attempts),
            (JobState::Ready, 1),
            "given back at once, attempt counted"
        );
        let crashes: Option<i64> = con.hget(keys.job(id.as_str()), "crashes").await.unwrap();
        assert_eq!(
            crashes, None,
            "no crash is blamed on a job that shared its worker"
        );
    }
    // A busy worker gets no suspect; an idle one gets exactly one, alone.
    assert!(board
        .claim_with(&request(&[&q], "busy", 2))
        .await
        .unwrap()
        .is_empty());
    for _ in 0..3 {
        let got = board.claim_with(&request(&[&q], "idle", 0)).await.unwrap();
        assert_eq!(got.len(), 1, "a suspect comes alone");
        assert!(got[0].suspect);
        board.consume(copy_of(&got[0].lease)).await.unwrap();
    }
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
}

#[tokio::test]
async fn recovery_ignores_other_owners() {
    let (board, mut sync, q) = setup("others").await;
    board.post(&q, NewJob::new("a")).await.unwrap();
    let c = board
        .claim(&[&q], "alive-worker", LONG, 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        sync.recover_owner(&q, "dead-worker", "killed").unwrap(),
        Recovered::default()
    );
    board.extend(&c.lease, LONG).await.unwrap();
    board.consume(c.lease).await.unwrap();
}
