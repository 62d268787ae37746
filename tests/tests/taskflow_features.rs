//! Real taskflow 6.5.0 (PyPI) on a queue that uses jobworker's own
//! features (tags, priorities, delays, recurring runs, dependencies, unique
//! keys): it lists, claims and consumes every job it can see, rejects (and
//! so deletes) none of them, and never sees a job that is still waiting for
//! its dependencies.

use std::collections::BTreeSet;
use std::time::Duration;

use jobworker::recurring::RecurringJob;
use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::schedule::Rule;
use jobworker::{Board, JobId, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::features::{server_clock_passes, server_ms};
use jobworker_tests::{run_python_async, shared_redis, unique_queue};
use redis::AsyncCommands;
use serde_json::{json, Value};

const BOARD_SCRIPT: &str = include_str!("../python/taskflow_board.py");
const LONG: Duration = Duration::from_secs(120);

/// Claims and consumes every job taskflow lists, then lists again.
/// Usage: HOST PORT NAMESPACE WHO. Prints {"jobs": [...], "left": [...],
/// "warnings": [...]} where warnings are taskflow's log records at WARNING
/// and above (it logs one before deleting a posting it rejects).
const DRAIN_SCRIPT: &str = r#"
import json
import logging
import sys

from taskflow import exceptions as exc
from taskflow.jobs.backends import impl_redis


class Grab(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


def main():
    host, port, namespace, who = sys.argv[1:]
    grab = Grab()
    logging.getLogger().addHandler(grab)
    logging.getLogger().setLevel(logging.WARNING)
    board = impl_redis.RedisJobBoard(
        "features", {"host": host, "port": int(port), "namespace": namespace}
    )
    board.connect()
    out = []
    try:
        for job in list(board.iterjobs(ensure_fresh=True)):
            seen = {
                "uuid": job.uuid,
                "name": job.name,
                "priority": str(job.priority.value),
                "details": job.details,
            }
            try:
                board.claim(job, who)
                seen["claimed_state"] = job.state
                board.consume(job, who)
                seen["consumed"] = True
            except exc.TaskFlowException as e:
                seen["error"] = "%s: %s" % (type(e).__name__, e)
            out.append(seen)
        left = [job.uuid for job in board.iterjobs(ensure_fresh=True)]
    finally:
        board.close()
    print(json.dumps({"jobs": out, "left": left, "warnings": grab.records}, default=str))


main()
"#;

async fn board(q: &str, ns: &str) -> RedisBoard {
    RedisBoard::with_options(RedisOptions::new(shared_redis().url()).namespace(q, ns))
        .await
        .unwrap()
}

fn port() -> String {
    shared_redis().port().to_string()
}

/// taskflow's `iterjobs` on namespace `ns`, through tests/python/taskflow_board.py.
async fn taskflow_list(ns: &str) -> Vec<Value> {
    let port = port();
    run_python_async(BOARD_SCRIPT, &["127.0.0.1", &port, ns, "list"])
        .await
        .json()
        .as_array()
        .cloned()
        .expect("list returns an array")
}

/// taskflow claims and consumes everything it lists on `ns`.
async fn taskflow_drain(ns: &str, who: &str) -> Value {
    let port = port();
    run_python_async(DRAIN_SCRIPT, &["127.0.0.1", &port, ns, who])
        .await
        .json()
}

fn uuids(jobs: &[Value]) -> BTreeSet<String> {
    jobs.iter()
        .map(|j| j["uuid"].as_str().expect("a uuid").to_owned())
        .collect()
}

fn by_uuid<'a>(jobs: &'a [Value], id: &JobId) -> &'a Value {
    jobs.iter()
        .find(|j| j["uuid"] == id.as_str())
        .unwrap_or_else(|| panic!("taskflow does not list {id}: {jobs:?}"))
}

async fn listing_ids(b: &RedisBoard, q: &str) -> BTreeSet<String> {
    let keys = b.keys(q).unwrap();
    let fields: Vec<String> = b.connection().hkeys(keys.listings()).await.unwrap();
    fields.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn taskflow_lists_claims_and_consumes_jobs_that_use_jobworker_features() {
    let q = unique_queue("tf-feat");
    let ns = format!("features-{q}");
    let b = board(&q, &ns).await;

    // Tags and arguments.
    let tagged = b
        .post(
            &q,
            NewJob::new("tagged")
                .args(&("img.png", 3u8))
                .unwrap()
                .tag("red")
                .tag("blue"),
        )
        .await
        .unwrap();
    // Priorities: taskflow's names, a value beyond them, and a change that
    // taskflow does not see (the posting is never rewritten).
    let urgent = b
        .post(&q, NewJob::new("urgent").priority(Priority::VERY_HIGH))
        .await
        .unwrap();
    let seven = b
        .post(&q, NewJob::new("seven").priority(Priority(7)))
        .await
        .unwrap();
    let lowered = b
        .post(&q, NewJob::new("lowered").priority(Priority::LOW))
        .await
        .unwrap();
    b.set_priority(&q, &lowered, Priority::HIGH).await.unwrap();
    let very_low = b
        .post(&q, NewJob::new("very-low").priority(Priority(-5)))
        .await
        .unwrap();
    // A delayed job.
    let delayed = b
        .post(&q, NewJob::new("delayed").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(b.state(&q, &delayed).await.unwrap(), JobState::Scheduled);
    // Runs of a recurring template (backlog 2 after several missed slots).
    b.recur(
        &q,
        RecurringJob::new("tick", Rule::every(Duration::from_millis(100)).unwrap())
            .id("tick")
            .backlog(2)
            .tag("periodic")
            .args(&json!({"n": 1}))
            .unwrap(),
    )
    .await
    .unwrap();
    // Several slots go by on the server's clock with nobody claiming.
    let recurring_since = server_ms(&b).await;
    server_clock_passes(&b, recurring_since + 400).await;
    assert_eq!(b.spawn_due(&q).await.unwrap(), 2);
    b.unrecur(&q, "tick").await.unwrap();
    let ticks: Vec<JobId> = b
        .list(&q, ListFilter::Live, Page::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.name == "tick")
        .map(|j| JobId::from(j.id))
        .collect();
    assert_eq!(ticks.len(), 2);
    // A dependency: the child waits, outside the listings.
    let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
    let child = b
        .post(&q, NewJob::new("child").depends_on(parent.clone()))
        .await
        .unwrap();
    assert_eq!(b.state(&q, &child).await.unwrap(), JobState::Waiting);
    // A unique key: the second post is the first job.
    let unique = b
        .post(&q, NewJob::new("unique").unique("nightly-report", LONG))
        .await
        .unwrap();
    let again = b
        .post(&q, NewJob::new("unique").unique("nightly-report", LONG))
        .await
        .unwrap();
    assert_eq!(again, unique);

    let mut expected: BTreeSet<String> = [
        &tagged, &urgent, &seven, &lowered, &very_low, &delayed, &parent, &unique,
    ]
    .iter()
    .map(|id| id.to_string())
    .collect();
    expected.extend(ticks.iter().map(|id| id.to_string()));

    // taskflow lists exactly those, rejects none, and cannot see the child.
    let before = listing_ids(&b, &q).await;
    assert_eq!(before, expected, "jobworker's listings");
    let jobs = taskflow_list(&ns).await;
    assert_eq!(uuids(&jobs), expected, "taskflow lists every live job once");
    assert!(
        !uuids(&jobs).contains(child.as_str()),
        "a waiting job is invisible to taskflow"
    );
    assert_eq!(
        listing_ids(&b, &q).await,
        before,
        "taskflow deleted postings it rejected"
    );
    for j in &jobs {
        assert_eq!(j["state"], "UNCLAIMED", "{j}");
        assert!(j["sequence"].is_u64(), "{j}");
    }
    for (id, name) in [
        (&urgent, "VERY_HIGH"),
        (&seven, "VERY_HIGH"),
        (&lowered, "LOW"),
        (&very_low, "VERY_LOW"),
        (&tagged, "NORMAL"),
        (&delayed, "NORMAL"),
    ] {
        assert_eq!(by_uuid(&jobs, id)["priority"], name, "{id}");
    }
    assert_eq!(
        by_uuid(&jobs, &tagged)["details"],
        json!({"args": ["img.png", 3]})
    );
    for tick in &ticks {
        let j = by_uuid(&jobs, tick);
        assert_eq!(
            (&j["name"], &j["details"]),
            (&json!("tick"), &json!({"args": {"n": 1}}))
        );
    }
    let sequences: BTreeSet<u64> = jobs.iter().map(|j| j["sequence"].as_u64().unwrap()).collect();
    assert_eq!(sequences.len(), jobs.len(), "taskflow needs distinct sequences");

    // Consuming the parent releases the child into the listings.
    let c = b.claim_job(&q, &parent, "jw-1", Some(LONG)).await.unwrap();
    b.consume(c.lease).await.unwrap();
    assert_eq!(b.state(&q, &child).await.unwrap(), JobState::Ready);
    expected.remove(parent.as_str());
    expected.insert(child.to_string());
    let jobs = taskflow_list(&ns).await;
    assert_eq!(uuids(&jobs), expected, "the released child is listed");
    assert_eq!(by_uuid(&jobs, &child)["name"], "child");

    // taskflow claims and consumes every one of them.
    let drained = taskflow_drain(&ns, "tf-worker").await;
    let done = drained["jobs"].as_array().unwrap();
    assert_eq!(uuids(done), expected);
    for j in done {
        assert_eq!(j["error"], Value::Null, "taskflow failed on {j}");
        assert_eq!(j["claimed_state"], "CLAIMED", "{j}");
        assert_eq!(j["consumed"], true, "{j}");
    }
    // taskflow goes by the priority names of the postings (the lowered
    // job stays LOW for it, although jobworker runs it as HIGH).
    let names: Vec<&str> = done.iter().map(|j| j["name"].as_str().unwrap()).collect();
    let first: BTreeSet<&str> = names[..2].iter().copied().collect();
    assert_eq!(first, ["urgent", "seven"].into(), "{names:?}");
    assert_eq!(&names[names.len() - 2..], ["lowered", "very-low"], "{names:?}");
    assert_eq!(drained["left"], json!([]));
    assert_eq!(drained["warnings"], json!([]), "taskflow complained");

    // Nothing was rejected, quarantined or trashed along the way.
    assert_eq!(b.job_count(&q).await.unwrap(), 0);
    for state in [JobState::Quarantined, JobState::Trashed, JobState::Waiting] {
        let left = b
            .list(&q, ListFilter::State(state), Page::default())
            .await
            .unwrap();
        assert!(left.is_empty(), "{state} jobs left: {left:?}");
    }
    assert!(b.claim(&[&q], "jw-1", LONG, 100).await.unwrap().is_empty());
    assert!(taskflow_list(&ns).await.is_empty());
}

/// A job taskflow consumes is consumed: jobs waiting for it are released
/// (by the next claim or reap of its queue), not left waiting forever.
#[tokio::test(flavor = "multi_thread")]
async fn a_dependency_consumed_by_taskflow_releases_its_dependents() {
    let q = unique_queue("tf-dep");
    let ns = format!("features-{q}");
    let b = board(&q, &ns).await;
    let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
    let child = b
        .post(&q, NewJob::new("child").depends_on(parent.clone()))
        .await
        .unwrap();
    let drained = taskflow_drain(&ns, "tf-worker").await;
    assert_eq!(
        uuids(drained["jobs"].as_array().unwrap()),
        [parent.to_string()].into()
    );
    assert_eq!(drained["jobs"][0]["consumed"], true, "{drained}");
    b.reap(&q).await.unwrap();
    let claimed = b.claim(&[&q], "jw-1", LONG, 10).await.unwrap();
    let again = b.claim(&[&q], "jw-1", LONG, 10).await.unwrap();
    let ids: Vec<&JobId> = claimed.iter().chain(&again).map(|c| c.lease.job()).collect();
    let state = b.state(&q, &child).await;
    assert_eq!(
        ids,
        [&child],
        "the child of a job taskflow consumed is never released (state {state:?})"
    );
}
