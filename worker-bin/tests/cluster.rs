//! The real `jobworker` supervisor on a Redis Cluster of three masters on
//! loopback ports (`redis+cluster://`): queues spread over the masters by
//! their hash tags, every job run once (counted in the scripted handler's
//! run log, outside Redis), also while one queue's slot migrates to
//! another master during the drain, a cancel reaching a running handler
//! through the sharded channels, and an idle worker hearing posts again
//! after its queue's master died and a replica took over.

mod common;

use std::time::Duration;

use common::runs::{outcome, unrecorded, Outcome};
use common::*;
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::chaos::runs::Runs;
use jobworker_tests::{unique_queue, wait_until, RedisCluster};

/// A scripted job that runs `millis` and logs its run to `log`.
fn logged(log: &std::path::Path, millis: u64) -> NewJob {
    let script = Script {
        log_file: Some(log.display().to_string()),
        count_key: None,
        ..script(Action::Ok, millis, "")
    };
    NewJob::new("scripted").args(&script).unwrap()
}

/// Posts `per_queue` jobs to each of `queues`, in batches.
async fn post_all(board: &RedisBoard, queues: &[String], job: &NewJob, per_queue: usize) -> Vec<JobId> {
    let mut ids = Vec::new();
    for q in queues {
        for _ in 0..per_queue.div_ceil(1000) {
            let batch = vec![job.clone(); per_queue.min(1000)];
            let posted = board.post_many(q, &batch).await.unwrap();
            ids.extend(posted.into_iter().map(Result::unwrap));
        }
    }
    ids
}

/// Waits until a tenth of `total` jobs ran to success (per the run log).
async fn a_tenth_ran(sup: &Supervisor, runs: &mut Runs, total: usize) {
    wait_until(
        sup.and_log("a tenth of the jobs to run"),
        Duration::from_secs(120),
        || {
            runs.poll().unwrap();
            let done = runs.ok_jobs();
            async move { done >= total / 10 }
        },
    )
    .await;
}

/// Waits until every job in `ids` ran to success (per the run log), then
/// stops the supervisor and returns what the drain did.
async fn drained(sup: &mut Supervisor, runs: &mut Runs, ids: &[JobId]) -> Outcome {
    let total = ids.len();
    wait_until(sup.and_log("every job to run"), Duration::from_secs(300), || {
        runs.poll().unwrap();
        let done = runs.ok_jobs();
        async move { done >= total }
    })
    .await;
    sup.stop_cleanly(Duration::from_secs(60));
    runs.poll().unwrap();
    let out = outcome(ids, runs.all(), &unrecorded(&sup.log()));
    eprintln!("{total} jobs, {} runs, {out:?}", runs.all().len());
    out
}

/// The slot of queue `q`'s keys.
fn slot(cluster: &RedisCluster, q: &str) -> u16 {
    cluster.slot_of(&format!("jw:{{{q}}}:listings"))
}

/// Thirty queues spread over three masters, one supervisor of two workers
/// over all of them; a tenth of the way, `redis-cli --cluster reshard`
/// moves the first master's slots up to its lowest queue's to the second
/// master: every job runs once, and none twice at once.
#[tokio::test(flavor = "multi_thread")]
async fn thirty_queues_over_three_masters_run_every_job_once_through_a_reshard() {
    const PER_QUEUE: usize = 300;
    let _serial = serial().await;
    let cluster = RedisCluster::start(3);
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let queues: Vec<String> = (0..30).map(|n| unique_queue(&format!("c{n}"))).collect();
    let masters: std::collections::BTreeSet<u16> = queues
        .iter()
        .map(|q| cluster.port_of_slot(slot(&cluster, q)))
        .collect();
    assert_eq!(masters.len(), 3, "the 30 queues sit on {masters:?}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let ids = post_all(&board, &queues, &logged(&log, 2), PER_QUEUE).await;
    let mut sup = Supervisor::start_on(
        &["--redis", &cluster.url()],
        &queues.join(","),
        &["--workers", "2"],
        None,
    );
    let mut runs = Runs::new(&log);
    a_tenth_ran(&sup, &mut runs, ids.len()).await;
    // `--cluster create` gave the first master slots 0–5460; reshard moves
    // a source's slots from its lowest.
    let [from, to, _] = cluster.ports()[..] else {
        panic!("three masters")
    };
    let lowest = queues
        .iter()
        .map(|q| slot(&cluster, q))
        .filter(|s| cluster.port_of_slot(*s) == from)
        .min()
        .expect("a queue on the first master");
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.reshard(from, to, usize::from(lowest) + 1);
        cluster
    })
    .await
    .unwrap();
    assert_eq!(
        cluster.port_of_slot(lowest),
        to,
        "the reshard did not move slot {lowest}"
    );
    let out = drained(&mut sup, &mut runs, &ids).await;
    assert_eq!(
        (
            out.never_ran,
            out.ran_again,
            out.ran_again_unacknowledged,
            out.concurrent
        ),
        (0, 0, 0, 0),
        "{out:?}"
    );
    for q in &queues {
        assert_eq!(board.job_count(q).await.unwrap(), 0, "queue {q} not drained");
    }
}

/// One queue's slot moves to another master while two workers drain it
/// (keys migrate in small batches, so calls meet ASK and TRYAGAIN for a
/// while), a master whose scripts were flushed (like a new node): nothing
/// is lost, nothing runs twice at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_slot_migration_during_a_drain_loses_nothing() {
    const JOBS: usize = 10_000;
    let _serial = serial().await;
    let cluster = RedisCluster::start(3);
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("moving");
    let slot = slot(&cluster, &q);
    let from = cluster.port_of_slot(slot);
    let to = cluster.ports().into_iter().find(|p| *p != from).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let ids = post_all(&board, std::slice::from_ref(&q), &logged(&log, 1), JOBS).await;
    let mut sup = Supervisor::start_on(&["--redis", &cluster.url()], &q, &["--workers", "2"], None);
    let mut runs = Runs::new(&log);
    a_tenth_ran(&sup, &mut runs, JOBS).await;
    // The target forgets every script, as a new node would have none: the
    // workers' calls there load them again.
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut cluster.node(to))
        .unwrap();
    let (before, started) = (runs.ok_jobs(), std::time::Instant::now());
    let moved = tokio::task::spawn_blocking(move || {
        let keys = cluster.migrate_slot(slot, to, 50, Duration::from_millis(2));
        (cluster, keys)
    });
    let (cluster, keys) = moved.await.unwrap();
    runs.poll().unwrap();
    // While the slot migrates, the queue's scripts wait (its fence key):
    // few jobs finish meanwhile, and those were running already.
    eprintln!(
        "moved {keys} keys of slot {slot} from {from} to {to} in {:?}; jobs run: {before} before, {} after",
        started.elapsed(),
        runs.ok_jobs()
    );
    // Each job that ran has a job hash; the queue's keys (the listings,
    // the ready index…) hold the rest, whose jobs have none yet (lean
    // jobs, runtime/lua/lib/lean.lua).
    assert!(keys > before, "only {keys} keys moved");
    assert_eq!(cluster.port_of_slot(slot), to);
    let out = drained(&mut sup, &mut runs, &ids).await;
    assert_eq!(
        (out.never_ran, out.ran_again, out.concurrent),
        (0, 0, 0),
        "{out:?}"
    );
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
}

/// Cancelling a running job on a cluster stops its handler at once: the
/// worker hears the cancel on the queue's sharded channel. "At once" means
/// before the heartbeat (every 10 s with a 30 s lease) could have stopped
/// it, as in the same test on one server (`features_e2e.rs`).
#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_running_job_on_a_cluster_stops_its_handler() {
    let _serial = serial().await;
    let cluster = RedisCluster::start(3);
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("cancel");
    let uncounted = |action, millis| Script {
        count_key: None,
        ..script(action, millis, "")
    };
    let id = post(&board, &q, &uncounted(Action::Sleep, 60_000), 3).await;
    let mut sup = Supervisor::start_on(
        &["--redis", &cluster.url()],
        &q,
        &["--workers", "1", "--expiry", "30"],
        None,
    );
    wait_state(&board, &q, &id, JobState::Claimed, 60).await;
    let cancelled_at = std::time::Instant::now();
    board.cancel(&q, std::slice::from_ref(&id), false).await.unwrap();
    // The only slot is free again: the next job runs.
    let next = post(&board, &q, &uncounted(Action::Ok, 0), 3).await;
    wait_state(&board, &q, &next, JobState::Completed, 30).await;
    let stopped_in = cancelled_at.elapsed();
    assert!(
        stopped_in < Duration::from_secs(9),
        "the handler was stopped only after {stopped_in:?} (by a heartbeat, not the cancel); log:\n{}",
        sup.log()
    );
    assert_eq!(state(&board, &q, &id).await, JobState::Cancelled);
    sup.stop_cleanly(Duration::from_secs(60));
}

/// A master that dies for good, its replica taking over: an idle worker on
/// a queue of that master's slot picks up a job posted after the failover
/// as it comes (its wake-ups subscribe again, on the new master), not at
/// its next `--interval` (here ten minutes).
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_worker_hears_posts_again_after_its_master_fails_over() {
    let _serial = serial().await;
    let mut cluster = RedisCluster::start_with_replicas(3);
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("failover");
    let quick = Script {
        count_key: None,
        ..script(Action::Ok, 0, "")
    };
    let mut sup = Supervisor::start_on(
        &["--redis", &cluster.url()],
        &q,
        &["--workers", "1", "--interval", "600"],
        None,
    );
    let first = post(&board, &q, &quick, 3).await;
    wait_state(&board, &q, &first, JobState::Completed, 60).await;

    tokio::task::block_in_place(|| cluster.kill_master_of(slot(&cluster, &q)));
    let next = post(&board, &q, &quick, 3).await;
    wait_state(&board, &q, &next, JobState::Completed, 120).await;
    sup.stop_cleanly(Duration::from_secs(60));
}

/// A master that dies for good, its replica taking over, while a job of
/// its slot runs: cancelling the job then still stops its handler as the
/// cancel comes (the worker's cancel listener subscribes again, on the
/// new master), not at the lease's next extend (here every 200 s).
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_after_a_failover_stops_the_running_handler() {
    let _serial = serial().await;
    let mut cluster = RedisCluster::start_with_replicas(3);
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("failover-cancel");
    let uncounted = |action, millis| Script {
        count_key: None,
        ..script(action, millis, "")
    };
    let id = post(&board, &q, &uncounted(Action::Sleep, 900_000), 3).await;
    let mut sup = Supervisor::start_on(
        &["--redis", &cluster.url()],
        &q,
        &["--workers", "1", "--expiry", "600"],
        None,
    );
    wait_state(&board, &q, &id, JobState::Claimed, 60).await;

    tokio::task::block_in_place(|| cluster.kill_master_of(slot(&cluster, &q)));
    let cancelled_at = std::time::Instant::now();
    wait_until("the cancel to go through", Duration::from_secs(60), || async {
        board.cancel(&q, std::slice::from_ref(&id), false).await.is_ok()
    })
    .await;
    // The only slot is free again: the next job runs.
    let next = post(&board, &q, &uncounted(Action::Ok, 0), 3).await;
    // (Past the first extend, which would stop it too.)
    wait_state(&board, &q, &next, JobState::Completed, 300).await;
    let stopped_in = cancelled_at.elapsed();
    assert!(
        stopped_in < Duration::from_secs(120),
        "the handler was stopped only after {stopped_in:?}; log:\n{}",
        sup.log()
    );
    assert_eq!(state(&board, &q, &id).await, JobState::Cancelled);
    sup.stop_cleanly(Duration::from_secs(60));
}

/// What a cluster board cannot do is refused with a clear error (exit 2)
/// and changes nothing: `--durability` (its WAIT would have to follow each
/// call's node), a queue mapped to a namespace without a hash tag (its keys
/// would spread over slots), and `jobworker bench` (it reads one server's
/// INFO; `scripts/bench-cluster` measures a cluster).
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_refuses_what_it_cannot_do() {
    let cluster = RedisCluster::start(3);
    let cli = common::cli::Cli { url: cluster.url() };
    let q = unique_queue("refused");
    let err = cli.fails(2, &["--durability", "wait:1", "post", "x", "-q", &q]);
    assert!(
        err.contains("--durability is not supported on a redis cluster"),
        "{err}"
    );
    let err = cli.fails(2, &["--namespace", &format!("{q}=legacy"), "post", "x", "-q", &q]);
    assert!(err.contains("has no hash tag"), "{err}");
    let err = cli.fails(2, &["bench", "--jobs", "10"]);
    assert!(err.contains("scripts/bench-cluster"), "{err}");
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    assert!(
        board.queues().await.unwrap().is_empty(),
        "a refused post registered a queue"
    );
}
