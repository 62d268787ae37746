//! Faults on the ZooKeeper board, against the test binary's shared server:
//! znodes the board cannot read or use, written raw beside its jobs, must
//! cost only their own job, never the claims of the others, and never
//! leave a lock behind.

use jobworker_tests::copy_of;
use std::time::Duration;

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Abandon, Board, JobId, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::{shared_zookeeper, unique_queue};
use zookeeper_client as zk;

const LONG: Duration = Duration::from_secs(120);

const PERSISTENT_SEQUENTIAL: &zk::CreateOptions<'static> =
    &zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());

/// A board under a root of its own, and that root.
async fn board(opts: impl FnOnce(&mut ZooKeeperOptions)) -> (ZooKeeperBoard, String) {
    let root = format!("/{}", unique_queue("faults"));
    let mut o = ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()));
    opts(&mut o);
    let board = ZooKeeperBoard::connect(o)
        .await
        .expect("connect to the test ZooKeeper");
    (board, root)
}

/// Another board (its own session) under `root`.
async fn board_at(root: &str) -> ZooKeeperBoard {
    let o = ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()));
    ZooKeeperBoard::connect(o)
        .await
        .expect("connect to the test ZooKeeper")
}

/// The `.lock` znodes in `jobs`.
async fn locks(client: &zk::Client, jobs: &str) -> Vec<String> {
    let mut locks: Vec<String> = client
        .list_children(jobs)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.ends_with(".lock"))
        .collect();
    locks.sort();
    locks
}

/// A claim batch in which one job's record cannot be read (no read
/// permission) still returns the other jobs, and leaves no lock on the
/// unreadable one; claiming only that one fails naming job and queue.
#[tokio::test]
async fn an_unreadable_record_costs_only_its_own_job() {
    let (board, root) = board(|_| {}).await;
    let q = unique_queue("unreadable");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(board.post(&q, NewJob::new("f")).await.unwrap());
    }
    let client = shared_zookeeper().client().await;
    let no_read = [zk::Acl::new(
        zk::Permission::WRITE | zk::Permission::CREATE | zk::Permission::DELETE | zk::Permission::ADMIN,
        zk::AuthId::anyone(),
    )];
    let record = format!("{root}/{q}/.jw/ids/{}", ids[1]);
    client.set_acl(&record, &no_read, None).await.unwrap();

    let claimed = board.claim(&[&q], "w", LONG, 3).await.unwrap();
    let mut got: Vec<JobId> = claimed.iter().map(|c| c.lease.job().clone()).collect();
    got.sort();
    let mut want = vec![ids[0].clone(), ids[2].clone()];
    want.sort();
    assert_eq!(got, want, "the readable jobs are handed back");
    let jobs = board.jobs_path(&q).unwrap();
    assert_eq!(locks(&client, &jobs).await.len(), 2, "no orphaned lock");

    let failed_at = std::time::Instant::now();
    let e = board.claim(&[&q], "w", LONG, 1).await.unwrap_err();
    assert!(
        e.message().contains(ids[1].as_str()) && e.message().contains(&q),
        "{e}"
    );
    assert_eq!(locks(&client, &jobs).await.len(), 2, "no orphaned lock");
    // wait does not spin on the job it cannot claim: not work while its
    // one-second backoff lasts (a busy machine may have used it up by
    // now), then work again (a timer, not a busy loop).
    let woke = board.wait(&[&q], Duration::from_millis(300)).await.unwrap();
    assert!(
        !woke || failed_at.elapsed() >= Duration::from_secs(1),
        "wait woke {:?} after the failed claim, within its backoff",
        failed_at.elapsed()
    );
    assert!(board.wait(&[&q], Duration::from_secs(10)).await.unwrap());
    for c in &claimed {
        board.consume(copy_of(&c.lease)).await.unwrap();
    }
    assert!(locks(&client, &jobs).await.is_empty());
}

/// Taskflow-style postings whose uuid cannot be a job id (`""`, `"a/b"`),
/// written raw into the jobs path, are left alone: never claimed, listed
/// or quarantined, and list, claim and reap keep working for the others.
#[tokio::test]
async fn postings_whose_uuid_cannot_be_a_job_id_are_left_alone() {
    let (board, _) = board(|_| {}).await;
    let q = unique_queue("bad-uuid");
    let first = board.post(&q, NewJob::new("f")).await.unwrap();
    let jobs = board.jobs_path(&q).unwrap();
    let client = shared_zookeeper().client().await;
    let mut raw = Vec::new();
    for uuid in ["", "a/b"] {
        let body = format!(r#"{{"uuid": "{uuid}", "name": "odd", "priority": "HIGH", "details": {{}}}}"#);
        let (_, seq) = client
            .create(&format!("{jobs}/job"), body.as_bytes(), PERSISTENT_SEQUENTIAL)
            .await
            .unwrap();
        raw.push(format!("{jobs}/job{seq}"));
    }
    let second = board.post(&q, NewJob::new("f")).await.unwrap();

    let listed = board
        .list(&q, ListFilter::default(), Page::default())
        .await
        .unwrap();
    let mut ids: Vec<JobId> = listed.into_iter().map(|j| JobId::from(j.id)).collect();
    ids.sort();
    let mut want = vec![first.clone(), second.clone()];
    want.sort();
    assert_eq!(ids, want);
    board.reap(&q).await.unwrap();
    let claimed = board.claim(&[&q], "w", LONG, 4).await.unwrap();
    let mut got: Vec<JobId> = claimed.iter().map(|c| c.lease.job().clone()).collect();
    got.sort();
    assert_eq!(got, want, "only the usable jobs are claimed");
    for c in &claimed {
        board.consume(copy_of(&c.lease)).await.unwrap();
    }
    board.reap(&q).await.unwrap();
    assert!(board.claim(&[&q], "w", LONG, 4).await.unwrap().is_empty());
    for path in &raw {
        assert!(
            client.check_stat(path).await.unwrap().is_some(),
            "{path} left alone"
        );
    }
    assert!(locks(&client, &jobs).await.is_empty());
}

/// Completed history entries of queue `q` under `root`.
async fn history_entries(client: &zk::Client, root: &str, q: &str) -> usize {
    let history = format!("{root}/{q}/.jw/history");
    let mut n = 0;
    for hour in client.list_children(&history).await.unwrap_or_default() {
        n += client
            .list_children(&format!("{history}/{hour}"))
            .await
            .map_or(0, |c| c.len());
    }
    n
}

/// Workers that only claim and consume (never reap) still keep the
/// completed history near `history_count`.
#[tokio::test]
async fn claims_prune_the_history() {
    const KEEP: usize = 3;
    let (board, root) = board(|o| o.history_count = KEEP).await;
    let q = unique_queue("history");
    for _ in 0..10 {
        board.post(&q, NewJob::new("h")).await.unwrap();
    }
    loop {
        let claimed = board.claim(&[&q], "w", LONG, 1).await.unwrap();
        let Some(c) = claimed.first() else { break };
        board.consume(copy_of(&c.lease)).await.unwrap();
    }
    let client = shared_zookeeper().client().await;
    jobworker_tests::wait_until("claims to prune the history", Duration::from_secs(10), || {
        let (board, client, root, q) = (board.clone(), client.clone(), root.clone(), q.clone());
        async move {
            assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
            history_entries(&client, &root, &q).await <= KEEP
        }
    })
    .await;
    // The newest completed jobs are the ones kept.
    assert_eq!(history_entries(&client, &root, &q).await, KEEP);
}

/// A job given back with `Abandon::Release` is claimable at once and shows
/// as ready, even when an earlier try had scheduled a retry.
#[tokio::test]
async fn a_released_job_shows_as_ready() {
    let (board, _) = board(|_| {}).await;
    let q = unique_queue("release");
    let id = board.post(&q, NewJob::new("r")).await.unwrap();
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    let retry = Abandon::Retry {
        delay: LONG,
        error: "boom".into(),
    };
    assert_eq!(board.abandon(c.lease, retry).await.unwrap(), JobState::Scheduled);
    let c = board.claim_job(&q, &id, "w", Some(LONG)).await.unwrap();
    assert_eq!(
        board.abandon(c.lease, Abandon::Release).await.unwrap(),
        JobState::Ready
    );
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Ready);
}

/// The board's caches do not outlive what they describe: once every lease
/// of a few hundred jobs ended (consumed, released, retried, trashed,
/// extended first), no lease deadline is cached, and a board that only
/// posts caches at most one posting (and index entry) per job still there.
#[tokio::test]
async fn caches_forget_ended_leases_and_stay_bounded() {
    let (poster, root) = board(|_| {}).await;
    let connect = format!("{}{root}", shared_zookeeper().connect_string());
    let worker = ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
        .await
        .expect("connect to the test ZooKeeper");
    let q = unique_queue("caches");
    const JOBS: usize = 240;
    for _ in 0..JOBS {
        poster.post(&q, NewJob::new("f")).await.unwrap();
    }
    let (postings, by_uuid, locks) = poster.cache_sizes();
    assert!(postings <= JOBS && by_uuid <= JOBS, "{postings} {by_uuid}");
    assert_eq!(locks, 0);

    let mut ended = 0;
    while ended < JOBS {
        let claimed = worker.claim(&[&q], "w", LONG, 40).await.unwrap();
        assert!(
            !claimed.is_empty(),
            "jobs left to claim ({ended} of {JOBS} ended)"
        );
        for (i, c) in claimed.iter().enumerate() {
            worker.extend(&c.lease, LONG).await.unwrap();
            match i % 4 {
                0 => worker.consume(copy_of(&c.lease)).await.unwrap(),
                1 => worker.trash(copy_of(&c.lease), "test").await.unwrap(),
                2 => {
                    let retry = Abandon::Retry {
                        delay: Duration::ZERO,
                        error: "again".into(),
                    };
                    // Claimed again below unless its attempts are used up.
                    if worker.abandon(copy_of(&c.lease), retry).await.unwrap() != JobState::Trashed {
                        continue;
                    }
                }
                _ => {
                    worker.abandon(copy_of(&c.lease), Abandon::Release).await.unwrap();
                    continue;
                }
            }
            ended += 1;
        }
        assert_eq!(
            worker.cache_sizes().2,
            0,
            "no lease deadline kept once leases ended"
        );
    }
    assert!(worker.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
    assert_eq!(worker.cache_sizes().2, 0);
}

/// Settings written by hand that are not JSON block nothing: the queue
/// counts as not paused (a claim hands out its job), and a pause and a
/// resume write them anew.
#[tokio::test]
async fn unreadable_settings_count_as_the_defaults_and_are_written_anew() {
    use jobworker::board::Admin;
    let (board, root) = board(|_| {}).await;
    let q = unique_queue("bad-settings");
    board.post(&q, NewJob::new("f")).await.unwrap();
    let client = shared_zookeeper().client().await;
    let settings = format!("{root}/{q}/.jw/settings");
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    client.create(&settings, b"not json", &open).await.unwrap();
    assert!(!board.settings(&q).await.unwrap().paused);
    board.pause(&q).await.unwrap();
    assert!(
        board.settings(&q).await.unwrap().paused,
        "the pause wrote them anew"
    );
    assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
    board.resume(&q).await.unwrap();
    assert_eq!(board.claim(&[&q], "w", LONG, 1).await.unwrap().len(), 1);
}

/// A job whose record nobody can decode can still be cancelled: the
/// cancel writes the record anew (before, it retried until "keeps
/// changing").
#[tokio::test]
async fn a_job_with_an_undecodable_record_can_be_cancelled() {
    use jobworker::board::Admin;
    let (board, root) = board(|_| {}).await;
    let q = unique_queue("bad-record-cancel");
    let id = board.post(&q, NewJob::new("f")).await.unwrap();
    let client = shared_zookeeper().client().await;
    let record = format!("{root}/{q}/.jw/ids/{id}");
    client.set_data(&record, b"not json", None).await.unwrap();
    let done = board.cancel(&q, std::slice::from_ref(&id), false).await.unwrap();
    assert_eq!(done, [(q.clone(), id.clone())]);
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Cancelled);
    assert!(board.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty());
}

/// A queue's jobs path deleted and made again outside jobworker (its
/// sequence numbers start over, so a new job gets an old job's znode
/// name) hands out the new job, not the posting a board cached for the
/// old one, and consuming it ends the new job.
#[tokio::test]
async fn a_jobs_path_made_again_hands_out_its_new_jobs() {
    let (board, root) = board(|_| {}).await;
    let q = unique_queue("remade");
    // The board reads (and caches) both postings and claims the urgent
    // job; the first one's name comes back below.
    board.post(&q, NewJob::new("old")).await.unwrap();
    board
        .post(&q, NewJob::new("urgent").priority(Priority::HIGH))
        .await
        .unwrap();
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.name, "urgent");
    board.consume(c.lease).await.unwrap();
    let jobs = board.jobs_path(&q).unwrap();
    let client = shared_zookeeper().client().await;
    for child in client.list_children(&jobs).await.unwrap() {
        client.delete(&format!("{jobs}/{child}"), None).await.unwrap();
    }
    client.delete(&jobs, None).await.unwrap();
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    client.create(&jobs, b"", &persistent).await.unwrap();
    // Posted by another board, so that this one's cache does not see it.
    let other = board_at(&root).await;
    let new = other.post(&q, NewJob::new("new")).await.unwrap();
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!((c.lease.job(), c.name.as_str()), (&new, "new"));
    board.consume(c.lease).await.unwrap();
    assert_eq!(board.state(&q, &new).await.unwrap(), JobState::Completed);
}
