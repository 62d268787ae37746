//! Failure groups on ZooKeeper next to real taskflow 6.5.0 (PyPI, kazoo):
//! a job taskflow trashed is in taskflow's trash but in no failure group
//! (jobworker's record does not say it trashed it), so retry and purge
//! answer not found for it and leave it where it is, as on Redis. The
//! behaviour every board shares is in the feature suite
//! (`feature_suite/failed.rs`).

use std::time::Duration;

use jobworker::board::Admin;
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobState, ListFilter, NewJob, Page};
use jobworker_tests::{run_python_async, shared_zookeeper, unique_queue};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(120);

/// Claims and trashes one job with a real taskflow `ZookeeperJobBoard`, in
/// one session; prints one JSON line.
const TRASH: &str = r#"
import json, sys
from taskflow.jobs.backends import impl_zookeeper

hosts, path, uuid, who = sys.argv[1:]
board = impl_zookeeper.ZookeeperJobBoard("failed", {"hosts": hosts, "path": path})
board.connect()
try:
    job = next(j for j in board.iterjobs(ensure_fresh=True) if j.uuid == uuid)
    board.claim(job, who)
    board.trash(job, who)
finally:
    board.close()
print(json.dumps({"trashed": uuid}))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_job_taskflow_trashed_is_in_no_failure_group() {
    let root = unique_queue("zk-failed");
    let connect = format!("{}/{root}", shared_zookeeper().connect_string());
    let b = ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
        .await
        .unwrap();
    let q = unique_queue("tf-trashed");
    let by_taskflow = b.post(&q, NewJob::new("t")).await.unwrap();
    let by_us = b.post(&q, NewJob::new("j")).await.unwrap();
    // Claimed and let go once by jobworker: its record names its znode.
    let c = b.claim_job(&q, &by_taskflow, "jw", Some(LONG)).await.unwrap();
    b.abandon(c.lease, jobworker::Abandon::Release).await.unwrap();
    let c = b.claim_job(&q, &by_us, "jw", Some(LONG)).await.unwrap();
    b.trash(c.lease, "fatal: bad input").await.unwrap();

    let hosts = shared_zookeeper().connect_string();
    let path = b.jobs_path(&q).unwrap();
    let args = [hosts.as_str(), path.as_str(), by_taskflow.as_str(), "tf-1"];
    let out: Value = run_python_async(TRASH, &args).await.json();
    assert_eq!(out, json!({"trashed": by_taskflow.as_str()}));
    assert_eq!(b.state(&q, &by_taskflow).await.unwrap(), JobState::Trashed);

    let groups: Vec<(String, u64)> = b
        .failed(&q)
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.group, g.count))
        .collect();
    assert_eq!(groups, [("fatal".to_owned(), 1)], "only jobworker's trashed job");
    assert_eq!(
        b.failed_jobs(&q, "fatal", Page::default()).await.unwrap(),
        std::slice::from_ref(&by_us)
    );
    for results in [
        b.retry(&q, std::slice::from_ref(&by_taskflow)).await.unwrap(),
        b.purge(&q, std::slice::from_ref(&by_taskflow)).await.unwrap(),
    ] {
        assert!(results[0].as_ref().unwrap_err().is_not_found(), "{results:?}");
    }
    assert_eq!(
        b.settle_failed(&q, None, false).await.unwrap(),
        1,
        "every group: jobworker's job alone"
    );
    assert_eq!(b.state(&q, &by_us).await.unwrap(), JobState::Ready);
    // Taskflow's trashed job is left where taskflow put it.
    assert_eq!(b.state(&q, &by_taskflow).await.unwrap(), JobState::Trashed);
    let trash = b
        .list(&q, ListFilter::State(JobState::Trashed), Page::default())
        .await
        .unwrap();
    let ids: Vec<&str> = trash.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, [by_taskflow.as_str()]);
    let claimed = b.claim(&[&q], "jw", LONG, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].lease.job(), &by_us);
}
