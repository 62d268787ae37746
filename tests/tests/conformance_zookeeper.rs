//! The board-contract conformance suite on the ZooKeeper backend.
//!
//! Every board connects under its own root on the test binary's shared
//! ZooKeeper, and every test uses its own queues.

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker_tests::conformance::Harness;
use jobworker_tests::{shared_zookeeper, unique_queue};

/// Boards on the test binary's shared ZooKeeper, all under one root.
struct ZooKeeperHarness;

impl Harness for ZooKeeperHarness {
    type B = ZooKeeperBoard;

    async fn board(&self) -> ZooKeeperBoard {
        let connect = format!("{}/conformance", shared_zookeeper().connect_string());
        ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
            .await
            .expect("connect to the test ZooKeeper")
    }
}

/// The harness is not the only user of the shared server: a fresh root
/// must work too (made on demand).
#[tokio::test]
async fn a_fresh_root_is_made_on_demand() {
    use jobworker::{Board, JobState, NewJob};
    let root = unique_queue("zk-root");
    let connect = format!("{}/{root}/nested", shared_zookeeper().connect_string());
    let board = ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
        .await
        .unwrap();
    let q = unique_queue("fresh");
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
    let id = board.post(&q, NewJob::new("x")).await.unwrap();
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Ready);
    assert_eq!(board.jobs_path(&q).unwrap(), format!("/{root}/nested/{q}/jobs"));
}

jobworker_tests::conformance_tests!(ZooKeeperHarness);

/// Tests of what only the ZooKeeper board has (or lacks).
mod zookeeper_only {
    use std::time::{Duration, Instant};

    use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
    use jobworker::{Abandon, Board, JobState, ListFilter, NewJob, Page, Priority};
    use jobworker_tests::conformance::{let_pass, Harness};
    use jobworker_tests::{copy_of, shared_zookeeper, unique_queue};
    use zookeeper_client as zk;

    use super::ZooKeeperHarness;

    const LONG: Duration = Duration::from_secs(120);

    /// Postings ZooKeeper cannot hold, and a dependency that does not
    /// exist, are refused, and nothing is posted.
    #[tokio::test]
    async fn bad_postings_are_refused_and_nothing_is_posted() {
        let board = ZooKeeperHarness.board().await;
        let q = unique_queue("refused");
        let e = board
            .post(&q, NewJob::new("d").depends_on("other"))
            .await
            .unwrap_err();
        assert!(e.is_not_found() && e.message().contains("other"), "{e}");
        let binary = NewJob::new("b").args_value(rmpv::Value::Binary(vec![0, 1]));
        let e = board.post(&q, binary).await.unwrap_err();
        assert!(e.is_invalid() && e.message().contains("json"), "{e}");
        let e = board.post(&q, NewJob::new("s").id("a/b")).await.unwrap_err();
        assert!(e.is_invalid(), "{e}");
        assert_eq!(board.job_count(&q).await.unwrap(), 0, "nothing was posted");
    }

    /// The maintenance runner on ZooKeeper leads and keeps running quietly:
    /// the election works and every service answers `Ok` (the runner logs
    /// a warning only for an `Err`), the index and outbox having nothing to
    /// do on ZooKeeper.
    #[tokio::test]
    async fn maintenance_runs_quietly_and_its_runner_leads() {
        use jobworker::board::Maintenance;
        use jobworker::maintenance::Maintainer;
        let board = ZooKeeperHarness.board().await;
        let q = unique_queue("maintenance");
        assert_eq!(board.index_postings(&q).await.unwrap(), 0);
        assert_eq!(board.release_outbox(&q).await.unwrap(), 0);
        assert_eq!(board.spawn_recurring(&q).await.unwrap(), 0);
        let runner = Maintainer::with_ttl(
            board.clone(),
            vec![q.clone()],
            "w".into(),
            Duration::from_millis(300),
        );
        jobworker_tests::wait_until("the runner leads", Duration::from_secs(30), || async {
            runner.leads(&q)
        })
        .await;
        // Several elections (every ttl / 3) and service passes later it
        // still runs and leads.
        let_pass(&board, Duration::from_millis(600)).await;
        assert!(runner.is_running() && runner.leads(&q));
        assert_eq!(board.leader(&q).await.unwrap().as_deref(), Some("w"));
        runner.stop().await;
        assert_eq!(board.leader(&q).await.unwrap(), None, "a stopped runner resigns");
    }

    /// The leadership is the board's session's: the same worker name on
    /// another session does not lead, and a board that goes (its session
    /// closed) frees it long before its term would end.
    #[tokio::test]
    async fn the_leadership_belongs_to_the_session_that_took_it() {
        use jobworker::board::Maintenance;
        let (first, second) = (ZooKeeperHarness.board().await, ZooKeeperHarness.board().await);
        let q = unique_queue("leader-session");
        assert!(first.elect(&q, "w", LONG).await.unwrap());
        assert!(
            !second.elect(&q, "w", LONG).await.unwrap(),
            "same name, other session"
        );
        drop(first);
        jobworker_tests::wait_until(
            "the closed session's leadership goes",
            Duration::from_secs(30),
            || async { second.leader(&q).await.unwrap().is_none() },
        )
        .await;
        assert!(second.elect(&q, "w", LONG).await.unwrap());
    }

    /// Priorities beyond taskflow's five names show as the nearest name on
    /// the wire; a board that never saw the post still orders them exactly.
    #[tokio::test]
    async fn exact_priorities_survive_on_a_cold_board() {
        let poster = ZooKeeperHarness.board().await;
        let q = unique_queue("exact");
        for (name, p) in [("m5", -5), ("p2", 2), ("m2", -2), ("p9", 9)] {
            poster
                .post(&q, NewJob::new(name).priority(Priority(p)))
                .await
                .unwrap();
        }
        let cold = ZooKeeperHarness.board().await;
        let claimed = cold.claim(&[&q], "w", LONG, 4).await.unwrap();
        let order: Vec<(&str, i32)> = claimed.iter().map(|c| (c.name.as_str(), c.priority.0)).collect();
        assert_eq!(order, [("p9", 9), ("p2", 2), ("m2", -2), ("m5", -5)]);
    }

    #[tokio::test]
    async fn completed_history_is_bounded() {
        let mut opts = ZooKeeperOptions::new(format!("{}/conformance", shared_zookeeper().connect_string()));
        opts.history_count = 2;
        let board = ZooKeeperBoard::connect(opts).await.unwrap();
        let q = unique_queue("history");
        let mut ids = Vec::new();
        for _ in 0..4 {
            let id = board.post(&q, NewJob::new("h")).await.unwrap();
            let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
            board.consume(c.lease).await.unwrap();
            ids.push(id);
        }
        let all = |b: &ZooKeeperBoard| {
            let (b, q) = (b.clone(), q.clone());
            async move {
                let mut kept: Vec<String> = b
                    .list(&q, ListFilter::State(JobState::Completed), Page::default())
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|j| j.id)
                    .collect();
                kept.sort();
                kept
            }
        };
        // Claims may have pruned already (in the background); never below
        // the limit.
        assert!((2..=4).contains(&all(&board).await.len()));
        board.reap(&q).await.unwrap();
        let mut newest = vec![ids[2].to_string(), ids[3].to_string()];
        newest.sort();
        assert_eq!(all(&board).await, newest, "the two newest are kept");
        assert!(board.state(&q, &ids[0]).await.unwrap_err().is_not_found());
        assert_eq!(board.state(&q, &ids[3]).await.unwrap(), JobState::Completed);
    }

    /// A board of the conformance root whose trash is kept to `count` jobs
    /// and `age`.
    async fn trash_bound_board(count: usize, age: Duration) -> ZooKeeperBoard {
        let mut opts = ZooKeeperOptions::new(format!("{}/conformance", shared_zookeeper().connect_string()));
        opts.trash_count = count;
        opts.trash_age = age;
        ZooKeeperBoard::connect(opts).await.unwrap()
    }

    /// Trashes `n` jobs one by one (their trash times in order).
    async fn trash_jobs(board: &ZooKeeperBoard, q: &str, n: usize) -> Vec<jobworker::JobId> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(board.post(q, NewJob::new("dead")).await.unwrap());
            let c = board.claim(&[q], "w", LONG, 1).await.unwrap().remove(0);
            board.trash(c.lease, "fatal: gone").await.unwrap();
            let_pass(board, Duration::from_millis(1)).await;
        }
        ids
    }

    /// Seen: the trash (dead letter) grew forever. A prune keeps the newest
    /// `trash_count`, and drops their records with them.
    #[tokio::test]
    async fn the_trash_is_kept_to_its_count_oldest_first() {
        let q = unique_queue("trash-count");
        let ids = trash_jobs(&trash_bound_board(3, Duration::from_secs(3600)).await, &q, 5).await;
        // A fresh board prunes at its first reap.
        let board = trash_bound_board(3, Duration::from_secs(3600)).await;
        board.reap(&q).await.unwrap();
        let kept: Vec<String> = board
            .list(&q, ListFilter::State(JobState::Trashed), Page::default())
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.id)
            .collect();
        let mut newest: Vec<String> = ids[2..].iter().map(|i| i.to_string()).collect();
        let mut kept_sorted = kept.clone();
        newest.sort();
        kept_sorted.sort();
        assert_eq!(kept_sorted, newest, "the three newest are kept");
        for id in &ids[..2] {
            let e = board.state(&q, id).await.unwrap_err();
            assert!(e.is_not_found(), "{id} pruned with its record: {e}");
        }
    }

    /// Trashed jobs older than `trash_age` go at the next prune.
    #[tokio::test]
    async fn the_trash_is_kept_to_its_age() {
        let q = unique_queue("trash-age");
        let trashing = trash_bound_board(100, Duration::from_millis(300)).await;
        let ids = trash_jobs(&trashing, &q, 2).await;
        // They age past `trash_age` on the board's clock.
        let_pass(&trashing, Duration::from_millis(400)).await;
        let board = trash_bound_board(100, Duration::from_millis(300)).await;
        board.reap(&q).await.unwrap();
        let left = board
            .list(&q, ListFilter::State(JobState::Trashed), Page::default())
            .await
            .unwrap();
        assert!(left.is_empty(), "{left:?}");
        assert!(board.state(&q, &ids[0]).await.unwrap_err().is_not_found());
    }

    /// wait also wakes on timers: when a delayed job falls due and when a
    /// lease expires (without any change on the server).
    #[tokio::test(flavor = "multi_thread")]
    async fn wait_wakes_when_a_delay_or_a_lease_runs_out() {
        let board = ZooKeeperHarness.board().await;
        let q = unique_queue("timers");
        // Timed from before the post and the claim: a slow reply to either
        // on a busy machine must not count against the wait.
        let start = Instant::now();
        board
            .post(&q, NewJob::new("d").delay(Duration::from_millis(400)))
            .await
            .unwrap();
        assert!(board.wait(&[&q], Duration::from_secs(30)).await.unwrap());
        let waited = start.elapsed();
        // Woken by the timer, well before the wait's own end.
        assert!(
            waited >= Duration::from_millis(350) && waited < Duration::from_secs(20),
            "{waited:?}"
        );
        let start = Instant::now();
        let c = board
            .claim(&[&q], "w", Duration::from_millis(400), 1)
            .await
            .unwrap()
            .remove(0);
        assert!(board.wait(&[&q], Duration::from_secs(30)).await.unwrap());
        let waited = start.elapsed();
        // Woken by the timer, well before the wait's own end.
        assert!(
            waited >= Duration::from_millis(350) && waited < Duration::from_secs(20),
            "{waited:?}"
        );
        let again = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
        assert_eq!((again.lease.job(), again.attempt), (c.lease.job(), 2));
    }

    /// A dead worker's claims are given back at once, from any session.
    #[tokio::test]
    async fn recover_owner_gives_back_a_dead_worker_s_claims() {
        let worker = ZooKeeperHarness.board().await;
        let supervisor = ZooKeeperHarness.board().await;
        let q = unique_queue("recover");
        for name in ["a", "b", "c"] {
            worker.post(&q, NewJob::new(name).max_attempts(3)).await.unwrap();
        }
        let dead = worker.claim(&[&q], "dead-w", LONG, 2).await.unwrap();
        let alive = worker.claim(&[&q], "alive-w", LONG, 1).await.unwrap().remove(0);
        let back = supervisor
            .recover_owner(&q, "dead-w", "killed by signal 9")
            .await
            .unwrap();
        assert_eq!(back, (2, 0));
        for c in &dead {
            let info = supervisor.show(&q, c.lease.job()).await.unwrap();
            assert_eq!((info.state, info.attempts), (JobState::Ready, 1));
            assert_eq!(info.reason.as_deref(), Some("crashed: killed by signal 9"));
            assert!(worker
                .consume(copy_of(&c.lease))
                .await
                .unwrap_err()
                .is_not_owner());
        }
        assert_eq!(
            supervisor.state(&q, alive.lease.job()).await.unwrap(),
            JobState::Claimed
        );
        worker.abandon(alive.lease, Abandon::Release).await.unwrap();
    }

    /// A posting taskflow reads but jobworker cannot (a number as uuid) is
    /// left alone: not claimed, not listed, not moved, still counted.
    #[tokio::test]
    async fn postings_only_taskflow_reads_are_left_alone() {
        let board = ZooKeeperHarness.board().await;
        let q = unique_queue("foreign");
        let path = board.jobs_path(&q).unwrap();
        let client = shared_zookeeper().client().await;
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client.mkdir(&path, &persistent).await.unwrap();
        let sequential = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let body = br#"{"uuid": 5, "name": "n", "priority": "HIGH", "details": {}}"#;
        client
            .create(&format!("{path}/job"), body, &sequential)
            .await
            .unwrap();
        assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
        assert!(board
            .list(&q, ListFilter::Live, Page::default())
            .await
            .unwrap()
            .is_empty());
        assert!(!board.wait(&[&q], Duration::from_millis(200)).await.unwrap());
        assert_eq!(board.job_count(&q).await.unwrap(), 1);
        let (data, _) = client.get_data(&format!("{path}/job0000000000")).await.unwrap();
        assert_eq!(data, body);
    }
}
