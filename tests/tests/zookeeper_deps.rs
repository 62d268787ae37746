//! Dependencies on ZooKeeper beyond the shared feature suite: a release
//! left owed by a consumer that died settles through the queue's
//! maintenance, and a job taskflow posted (it has no record of
//! jobworker's) can be depended on.

use std::time::Duration;

use jobworker::board::Maintenance;
use jobworker::maintenance::Maintainer;
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobState, NewJob};
use jobworker_tests::{copy_of, shared_zookeeper, unique_queue, wait_until};
use zookeeper_client as zk;

const LONG: Duration = Duration::from_secs(120);

const PERSISTENT: &zk::CreateOptions<'static> = &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
const PERSISTENT_SEQUENTIAL: &zk::CreateOptions<'static> =
    &zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());

/// A board under a root of its own, and that root.
async fn board() -> (ZooKeeperBoard, String) {
    let root = format!("/{}", unique_queue("deps"));
    let opts = ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()));
    let board = ZooKeeperBoard::connect(opts)
        .await
        .expect("connect to the test ZooKeeper");
    (board, root)
}

#[tokio::test]
async fn a_release_left_owed_is_settled_by_the_queues_maintenance() {
    let (b, root) = board().await;
    let (q1, q2) = (unique_queue("owes"), unique_queue("owed"));
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let d = b
        .post(&q2, NewJob::new("d").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Waiting);
    // What a consumer killed between its consume's transaction (which
    // creates the owed entry) and its releases leaves behind.
    let owed = format!("{root}/{q1}/.jw/owed/{a}");
    let client = shared_zookeeper().client().await;
    client.create(&owed, b"", PERSISTENT).await.unwrap();
    let runner = Maintainer::with_ttl(
        b.clone(),
        vec![q1.clone()],
        "releaser".into(),
        Duration::from_millis(600),
    );
    wait_until("the dependent is released", Duration::from_secs(30), || async {
        b.state(&q2, &d).await.unwrap() == JobState::Ready
    })
    .await;
    runner.stop().await;
    assert_eq!(
        client.check_stat(&owed).await.unwrap(),
        None,
        "the entry is settled"
    );
    let dir = format!("{root}/{q1}/.jw/dependents/{a}");
    assert_eq!(client.check_stat(&dir).await.unwrap(), None, "and its dependents");
    assert_eq!(
        b.release_outbox(&q1).await.unwrap(),
        0,
        "nothing is owed any more"
    );
    let got = b.claim(&[&q2], "w", LONG, 10).await.unwrap();
    assert_eq!(got.len(), 1, "released once");
    assert_eq!(got[0].lease.job(), d);
}

#[tokio::test]
async fn a_job_posted_by_taskflow_can_be_depended_on() {
    let (b, _) = board().await;
    let q = unique_queue("tf-dep");
    b.post(&q, NewJob::new("first")).await.unwrap(); // makes the queue
    let jobs = b.jobs_path(&q).unwrap();
    let uuid = "0b5a1d2e-3c4f-4a6b-8c7d-9e0f1a2b3c55";
    let body = format!(r#"{{"uuid": "{uuid}", "name": "tf", "priority": "NORMAL", "details": {{}}}}"#);
    let client = shared_zookeeper().client().await;
    client
        .create(&format!("{jobs}/job"), body.as_bytes(), PERSISTENT_SEQUENTIAL)
        .await
        .unwrap();
    let d = b
        .post(&q, NewJob::new("after-tf").depends_on(uuid))
        .await
        .unwrap();
    assert_eq!(b.state(&q, &d).await.unwrap(), JobState::Waiting);
    let mut tf_consumed = false;
    let mut ran_d = false;
    loop {
        let got = b.claim(&[&q], "w", LONG, 1).await.unwrap();
        let Some(c) = got.into_iter().next() else {
            break;
        };
        if c.lease.job() == d {
            assert!(tf_consumed, "released before taskflow's job was consumed");
            ran_d = true;
        }
        tf_consumed |= c.lease.job().as_str() == uuid;
        b.consume(copy_of(&c.lease)).await.unwrap();
    }
    assert!(ran_d, "the dependent was released and ran");
    assert_eq!(b.state(&q, &d).await.unwrap(), JobState::Completed);
}

/// A dependency consumed by another board that keeps no history (its
/// record goes with it) is not on the board any more, although the poster
/// still has it in its cache: the post fails instead of waiting forever.
#[tokio::test]
async fn a_dependency_consumed_elsewhere_without_history_is_not_found() {
    let (poster, root) = board().await;
    let q = unique_queue("gone-dep");
    let x = poster.post(&q, NewJob::new("x")).await.unwrap();
    let mut opts = ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()));
    opts.history_count = 0;
    let other = ZooKeeperBoard::connect(opts).await.unwrap();
    let c = other.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.lease.job(), x);
    other.consume(c.lease).await.unwrap();
    let e = poster
        .post(&q, NewJob::new("d").depends_on(x.clone()))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

/// A waiting job whose posting was deleted behind jobworker's back is
/// marked trashed, saying so, when its last dependency is consumed.
#[tokio::test]
async fn a_waiting_job_whose_posting_is_gone_is_marked_trashed() {
    let (b, root) = board().await;
    let q = unique_queue("gone-posting");
    let x = b.post(&q, NewJob::new("x")).await.unwrap();
    let d = b.post(&q, NewJob::new("d").depends_on(x)).await.unwrap();
    let client = shared_zookeeper().client().await;
    client
        .delete(&format!("{root}/{q}/.jw/waiting/{d}"), None)
        .await
        .unwrap();
    let c = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    b.consume(c.lease).await.unwrap();
    let info = b.show(&q, &d).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert!(info.reason.unwrap_or_default().starts_with("lost:"));
}
