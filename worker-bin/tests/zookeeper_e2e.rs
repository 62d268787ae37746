//! The worker runtime on the ZooKeeper board, end to end: the real
//! `jobworker --zookeeper …` binary with forked workers against a real
//! ZooKeeper. The scripted handler logs a `start` and an `end` line per run
//! to a file (its run log), which works on any board.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::runs::logged;
use common::zookeeper::{board, fresh_root};
use common::{serial, Supervisor};
use jobworker::zookeeper::ZooKeeperBoard;
use jobworker::{Board, JobId, ListFilter, NewJob, Page};
use jobworker_examples::scripted::run_log::{RunLine, RunOutcome};
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::{shared_zookeeper, unique_queue, wait_for, wait_until};

/// How many runs each job in `log` started, and how many ended `ok`
/// (whole lines only: a worker may be writing the last one).
fn tally(log: &Path) -> HashMap<String, (usize, usize)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out: HashMap<String, (usize, usize)> = HashMap::new();
    let whole = text.split_inclusive('\n').filter(|l| l.ends_with('\n'));
    for line in whole.map(str::trim_end) {
        match RunLine::parse(line) {
            Some(RunLine::Start { id, .. }) => out.entry(id).or_default().0 += 1,
            Some(RunLine::End {
                id,
                outcome: RunOutcome::Ok,
                ..
            }) => out.entry(id).or_default().1 += 1,
            Some(RunLine::End { .. }) => {}
            None => panic!("bad log line {line:?}"),
        }
    }
    out
}

fn done_count(log: &Path) -> usize {
    tally(log).values().map(|(_, d)| d).sum()
}

async fn post_all(board: &ZooKeeperBoard, q: &str, s: &Script, n: usize) -> Vec<JobId> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(
            board
                .post(q, NewJob::new("scripted").args(s).unwrap())
                .await
                .unwrap(),
        );
    }
    ids
}

/// Must-show: 2,000 jobs end to end on ZooKeeper with `--workers 2`.
#[tokio::test(flavor = "multi_thread")]
async fn two_thousand_jobs_run_once_on_zookeeper_with_two_workers() {
    let _serial = serial().await;
    let connect = fresh_root("zk-e2e");
    let board = board(&connect).await;
    let q = unique_queue("zk-2000");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let ids = post_all(&board, &q, &logged(Action::Ok, 0, &log), 2000).await;
    let started = Instant::now();
    let mut sup = Supervisor::start_on(
        &["--zookeeper", &connect],
        &q,
        &["--workers", "2", "--concurrency", "8"],
        None,
    );
    wait_until("2,000 jobs done", Duration::from_secs(240), || async {
        done_count(&log) >= 2000
    })
    .await;
    // Workers are registered as taskflow's entities while they run.
    let (code, workers, err) = cli(&connect, &["--json", "workers"]);
    assert_eq!(code, 0, "{err}");
    let workers: Vec<serde_json::Value> = serde_json::from_str(&workers).unwrap();
    let serving = workers.iter().filter(|w| w["queues"][0] == q.as_str()).count();
    assert_eq!(serving, 2, "{workers:?}");
    let elapsed = started.elapsed();
    wait_until("the queue to be empty", Duration::from_secs(30), || async {
        board.job_count(&q).await.unwrap() == 0
    })
    .await;
    assert_single_threaded(&sup);
    sup.signal(libc::SIGTERM);
    assert!(sup.wait_exit(Duration::from_secs(30)).success(), "{}", sup.log());
    let runs = tally(&log);
    println!("2,000 jobs on ZooKeeper with 2 workers in {elapsed:?}");
    assert_eq!(runs.len(), 2000);
    for id in &ids {
        assert_eq!(
            runs.get(id.as_str()),
            Some(&(1, 1)),
            "job {id} ran other than once"
        );
    }
}

/// Must-show: kill -9 of a worker holding ZooKeeper claims; its jobs are
/// completed exactly once, by the other workers. With 30 s leases and 10 s
/// sessions, they come back within seconds only because the supervisor's
/// agent gives them back at once (or, without an agent, the worker forked
/// in the dead one's place does).
#[tokio::test(flavor = "multi_thread")]
async fn jobs_of_a_killed_worker_complete_exactly_once_elsewhere() {
    let _serial = serial().await;
    let connect = fresh_root("zk-kill");
    let board = board(&connect).await;
    let q = unique_queue("zk-kill");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let ids = post_all(&board, &q, &logged(Action::Sleep, 1500, &log), 12).await;
    let mut sup = Supervisor::start_on(
        &["--zookeeper", &connect],
        &q,
        &["--workers", "2", "--concurrency", "3", "--expiry", "30"],
        None,
    );
    let owner = wait_for(
        sup.and_log("a worker to claim a job"),
        Duration::from_secs(30),
        || async {
            let live = board.list(&q, ListFilter::Live, Page::default()).await.unwrap();
            live.iter().find_map(|j| j.owner.clone())
        },
    )
    .await;
    let pid: i32 = owner
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("owner ends with the pid");
    let held: Vec<JobId> = board
        .list(&q, ListFilter::Live, Page::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.owner.as_deref() == Some(owner.as_str()))
        .map(|j| JobId::from(j.id))
        .collect();
    // Killed mid-run: each of its jobs has logged its start.
    wait_until(
        sup.and_log("the worker's jobs to start"),
        Duration::from_secs(30),
        || async {
            let started = tally(&log);
            held.iter().all(|id| started.contains_key(id.as_str()))
        },
    )
    .await;
    // SAFETY: killing a worker process of the supervisor we started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    wait_until("all 12 jobs done", Duration::from_secs(60), || async {
        done_count(&log) >= 12
    })
    .await;
    println!(
        "{} claims of the killed worker; all jobs done {:?} after the kill",
        held.len(),
        killed.elapsed()
    );
    let runs = tally(&log);
    for id in &ids {
        assert_eq!(
            runs.get(id.as_str()).map(|r| r.1),
            Some(1),
            "job {id} completed other than once: {runs:?}"
        );
    }
    assert!(!held.is_empty(), "the killed worker held no claims");
    for id in &held {
        assert!(
            runs[id.as_str()].0 >= 2,
            "job {id} of the killed worker was not run again"
        );
    }
    wait_until("the queue to be empty", Duration::from_secs(30), || async {
        board.job_count(&q).await.unwrap() == 0
    })
    .await;
    assert_single_threaded(&sup);
    sup.signal(libc::SIGTERM);
    assert!(sup.wait_exit(Duration::from_secs(30)).success(), "{}", sup.log());
}

/// The supervisor forks, so it must stay single-threaded: a ZooKeeper
/// client in it would leave its I/O thread behind, and the workers it forks
/// next would hang.
fn assert_single_threaded(sup: &Supervisor) {
    let threads = std::fs::read_dir(format!("/proc/{}/task", sup.pid()))
        .unwrap()
        .count();
    assert_eq!(
        threads,
        1,
        "the supervisor has {threads} threads; log:\n{}",
        sup.log()
    );
}

/// Runs the `jobworker` command line on `connect`; returns (exit code,
/// stdout, stderr).
fn cli(connect: &str, args: &[&str]) -> (i32, String, String) {
    common::cli::output_of(
        common::cli::jobworker_command()
            .args(["--zookeeper", connect])
            .args(args),
    )
}

/// A server address the client cannot read is bad input (exit 2), named
/// before any connection: it exited 4, "cannot connect … invalid
/// address", as if the server were down.
#[test]
fn a_bad_zookeeper_address_is_bad_input() {
    for bad in ["127.0.0.1:notaport/jw", "127.0.0.1:0", "[::1"] {
        let (code, _, err) = cli(bad, &["count", "-q", "q"]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("is not host[:port]"), "{bad}: {err}");
    }
}

/// The board verbs of the command line work on ZooKeeper, dependencies
/// included.
#[tokio::test(flavor = "multi_thread")]
async fn cli_verbs_work_on_zookeeper() {
    let connect = fresh_root("zk-cli");
    let q = unique_queue("zk-cli");
    let (code, id, err) = cli(&connect, &["post", "resize", "-q", &q, "--args", r#"{"w":640}"#]);
    assert_eq!(code, 0, "{err}");
    let id = id.trim().to_owned();
    let (_, listed, _) = cli(&connect, &["--json", "list", "-q", &q]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["args"]["w"], 640);
    let (code, count, _) = cli(&connect, &["count", "-q", &q]);
    assert_eq!((code, count.trim()), (0, "1"));
    // A job id finds its queue without -q.
    let (code, shown, err) = cli(&connect, &["--json", "show", &id]);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["queue"], q.as_str());
    // A claim held by a live session is settled from the command line by
    // its owner string and token (ownership is the owner string).
    let board = board(&connect).await;
    let held = board
        .claim(&[&q], "cli-1", Duration::from_secs(30), 1)
        .await
        .unwrap()
        .remove(0);
    let token = held.lease.token().to_string();
    let (_, shown, _) = cli(&connect, &["--json", "show", &id, "-q", &q]);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        (shown["state"].as_str(), shown["owner"].as_str()),
        (Some("claimed"), Some("cli-1"))
    );
    let (code, _, err) = cli(
        &connect,
        &[
            "consume",
            &id,
            "-q",
            &q,
            "--owner",
            "someone-else",
            "--token",
            &token,
        ],
    );
    assert_eq!(code, 3, "a stale owner is refused: {err}");
    let (code, _, err) = cli(
        &connect,
        &["extend", &id, "-q", &q, "--owner", "cli-1", "--token", &token],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(
        &connect,
        &["consume", &id, "-q", &q, "--owner", "cli-1", "--token", &token],
    );
    assert_eq!(code, 0, "{err}");
    let (_, count, _) = cli(&connect, &["count", "-q", &q]);
    assert_eq!(count.trim(), "0");
    let (code, workers, err) = cli(&connect, &["--json", "workers"]);
    assert_eq!(code, 0, "{err}");
    assert!(workers.trim().starts_with('['), "{workers}");
    // `jobworker claim` takes a job like any claimer; its claim lives with
    // the command's session (taskflow's rule), so it ends after the command
    // exits, at the latest when the session times out.
    let (code, other, err) = cli(&connect, &["post", "resize", "-q", &q]);
    assert_eq!(code, 0, "{err}");
    let (code, claimed, err) = cli(
        &connect,
        &["--json", "claim", "-q", &q, "--owner", "cli-2", "--expiry", "30"],
    );
    assert_eq!(code, 0, "{err}");
    let claimed: serde_json::Value = serde_json::from_str(&claimed).unwrap();
    assert_eq!(claimed[0]["id"], other.trim());
    assert_eq!(claimed[0]["owner"], "cli-2");
    let (code, stats, err) = cli(&connect, &["--json", "stats", "-q", &q]);
    assert_eq!(code, 0, "{err}");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["queue"], q.as_str(), "{stats}");
    let (code, _, err) = cli(&connect, &["post", "x", "-q", &q, "--depends", "some-id"]);
    assert_eq!(code, 3, "a missing dependency is 'not found': {err}");
    assert!(err.contains("some-id"), "{err}");
    let (code, after, err) = cli(&connect, &["post", "after", "-q", &q, "--depends", other.trim()]);
    assert_eq!(code, 0, "{err}");
    let (code, shown, err) = cli(&connect, &["--json", "show", after.trim(), "-q", &q]);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["state"], "waiting", "{shown}");
    let (code, _, err) = cli("127.0.0.1:1/nowhere", &["count", "-q", &q]);
    assert_eq!(code, 4, "an unreachable ZooKeeper is 'unavailable': {err}");
}

/// Seen: `show` of a job posted by a short-lived `jobworker post` and then
/// trashed by taskflow said `completed` with empty fields (the post's
/// record lacked the job's znode name, and show never looked in the trash).
/// Now it says trashed, with the job's name and arguments.
#[tokio::test(flavor = "multi_thread")]
async fn show_of_a_job_taskflow_trashed_says_trashed() {
    let connect = fresh_root("zk-show-trash");
    let root = connect.rsplit_once('/').map(|(_, r)| format!("/{r}")).unwrap();
    let q = unique_queue("zk-show-trash");
    let (code, id, err) = cli(&connect, &["post", "resize", "-q", &q, "--args", r#"{"w":640}"#]);
    assert_eq!(code, 0, "{err}");
    let id = id.trim().to_owned();
    let client = shared_zookeeper().client().await;
    // The post's record names its job znode; a post whose process died
    // before that update leaves a record without it, as here.
    let record_path = format!("{root}/{q}/.jw/ids/{id}");
    let (record, _) = client.get_data(&record_path).await.unwrap();
    let mut record: serde_json::Value = serde_json::from_slice(&record).unwrap();
    assert!(record["job"].is_string(), "the post named its znode: {record}");
    record.as_object_mut().unwrap().remove("job");
    client
        .set_data(&record_path, record.to_string().as_bytes(), None)
        .await
        .unwrap();
    // taskflow's trash: copy the posting to .trash and delete the job znode.
    let jobs = format!("{root}/{q}/jobs");
    let name = client.list_children(&jobs).await.unwrap().remove(0);
    let (posting, stat) = client.get_data(&format!("{jobs}/{name}")).await.unwrap();
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    client
        .mkdir(&format!("{root}/{q}/.trash"), &persistent)
        .await
        .ok();
    let mut w = client.new_multi_writer();
    w.add_create(&format!("{root}/{q}/.trash/{name}"), &posting, &persistent)
        .unwrap();
    w.add_delete(&format!("{jobs}/{name}"), Some(stat.version))
        .unwrap();
    w.commit().await.unwrap();
    let (code, shown, err) = cli(&connect, &["--json", "show", &id, "-q", &q]);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["state"], "trashed", "{shown}");
    assert_eq!(shown["name"], "resize", "{shown}");
    assert_eq!(shown["args"]["w"], 640, "{shown}");
}
