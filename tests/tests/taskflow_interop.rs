//! Interop with real taskflow 6.5.0 (PyPI) on the same Redis: each side
//! lists, claims and consumes the other's jobs, sees the other's claims,
//! and cannot take them.

use std::time::Duration;

use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, JobId, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::{run_python_async, shared_redis, unique_queue};
use serde_json::{json, Value};

const SCRIPT: &str = include_str!("../python/taskflow_board.py");
const LONG: Duration = Duration::from_secs(120);

/// A jobworker board whose queue `q` is the taskflow namespace `ns`.
async fn board(q: &str, ns: &str) -> RedisBoard {
    RedisBoard::with_options(RedisOptions::new(shared_redis().url()).namespace(q, ns))
        .await
        .unwrap()
}

/// Runs one taskflow command on namespace `ns`.
async fn taskflow(ns: &str, args: &[&str]) -> Value {
    let port = shared_redis().port().to_string();
    let mut all = vec!["127.0.0.1", port.as_str(), ns];
    all.extend_from_slice(args);
    run_python_async(SCRIPT, &all).await.json()
}

async fn taskflow_jobs(ns: &str) -> Vec<Value> {
    taskflow(ns, &["list"])
        .await
        .as_array()
        .cloned()
        .expect("list returns an array")
}

fn by_uuid<'a>(jobs: &'a [Value], uuid: &str) -> &'a Value {
    jobs.iter()
        .find(|j| j["uuid"] == uuid)
        .unwrap_or_else(|| panic!("taskflow does not list {uuid}: {jobs:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn taskflow_posts_jobworker_lists_claims_and_consumes() {
    let q = unique_queue("tf-in");
    let ns = format!("interop-{q}");
    let low = taskflow(&ns, &["post", "report", "LOW", r#"{"store": {"x": 1}}"#]).await;
    let high = taskflow(&ns, &["post", "resize", "HIGH", r#"{"path": "a.png"}"#]).await;
    let (low, high) = (
        low["uuid"].as_str().unwrap().to_owned(),
        high["uuid"].as_str().unwrap().to_owned(),
    );
    let board = board(&q, &ns).await;

    let listed = board.list(&q, ListFilter::Live, Page::default()).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        ["resize", "report"],
        "jobworker lists taskflow's jobs in claim order"
    );
    assert_eq!(board.job_count(&q).await.unwrap(), 2);

    let c = board.claim(&[&q], "jw-1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.lease.job().as_str(), high);
    assert_eq!(c.name, "resize");
    assert_eq!(c.priority, Priority::HIGH);
    assert_eq!(jobworker::codec::value_to_json(&c.args), json!({"path": "a.png"}));

    // taskflow sees jobworker's claim, with the owner, and cannot take it.
    let jobs = taskflow_jobs(&ns).await;
    let seen = by_uuid(&jobs, &high);
    assert_eq!(seen["state"], "CLAIMED");
    assert_eq!(seen["owner"], "jw-1");
    assert!(
        seen["last_modified"].is_string(),
        "taskflow must read jobworker's last_modified: {seen}"
    );
    let refused = taskflow(&ns, &["claim", &high, "tf-1"]).await;
    assert_eq!(refused["error"], "UnclaimableJob", "{refused}");

    board.consume(c.lease).await.unwrap();
    let c2 = board.claim(&[&q], "jw-1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c2.lease.job().as_str(), low);
    board.consume(c2.lease).await.unwrap();
    assert!(
        taskflow_jobs(&ns).await.is_empty(),
        "taskflow sees both jobs consumed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn jobworker_posts_taskflow_lists_claims_and_consumes() {
    let q = unique_queue("tf-out");
    let ns = format!("interop-{q}");
    let board = board(&q, &ns).await;
    let a = board
        .post(
            &q,
            NewJob::new("email")
                .args(&("bob", 3u8))
                .unwrap()
                .priority(Priority::VERY_HIGH),
        )
        .await
        .unwrap();
    let b = board
        .post(&q, NewJob::new("email").args(&("eve", 4u8)).unwrap())
        .await
        .unwrap();

    let jobs = taskflow_jobs(&ns).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let ja = by_uuid(&jobs, a.as_str());
    assert_eq!(
        (&ja["name"], &ja["state"], &ja["priority"]),
        (&json!("email"), &json!("UNCLAIMED"), &json!("VERY_HIGH"))
    );
    assert_eq!(ja["details"], json!({"args": ["bob", 3]}));
    assert_eq!(by_uuid(&jobs, b.as_str())["priority"], "NORMAL");

    // taskflow claims a: jobworker sees it claimed by tf-1 and cannot take it.
    assert_eq!(
        taskflow(&ns, &["claim", a.as_str(), "tf-1"]).await,
        json!({"ok": true})
    );
    assert_eq!(board.state(&q, &a).await.unwrap(), JobState::Claimed);
    assert_eq!(board.find_owner(&q, &a).await.unwrap().as_deref(), Some("tf-1"));
    let e = board.claim_job(&q, &a, "jw-1", Some(LONG)).await.unwrap_err();
    assert!(e.is_already_claimed() && e.message().contains("tf-1"), "{e}");
    let next = board.claim(&[&q], "jw-1", LONG, 5).await.unwrap();
    let next: Vec<&JobId> = next.iter().map(|c| c.lease.job()).collect();
    assert_eq!(next, [&b], "the claim in order skips the job taskflow holds");

    assert_eq!(
        taskflow(&ns, &["consume", a.as_str(), "tf-1"]).await,
        json!({"ok": true})
    );
    let jobs = taskflow_jobs(&ns).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["owner"], "jw-1");
    assert_eq!(board.job_count(&q).await.unwrap(), 1);
    // Seen: a job taskflow consumed read "not found" on Redis and
    // "completed" on ZooKeeper. Both say completed now (taskflow itself
    // says COMPLETE), before and after jobworker's next claim notices.
    assert_eq!(board.state(&q, &a).await.unwrap(), JobState::Completed);
    // Taskflow may not consume jobworker's claim.
    let refused = taskflow(&ns, &["consume", b.as_str(), "tf-1"]).await;
    assert_eq!(refused["error"], "JobFailure", "{refused}");
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_jobworker_claim_is_claimable_by_taskflow() {
    let q = unique_queue("tf-exp");
    let ns = format!("interop-{q}");
    let board = board(&q, &ns).await;
    // The taskflow virtualenv is made before the claim: on a fresh machine
    // making it takes longer than the lease.
    jobworker_tests::taskflow_python();
    let id = board.post(&q, NewJob::new("slow")).await.unwrap();
    let lease = board
        .claim(&[&q], "jw-1", Duration::from_secs(3), 1)
        .await
        .unwrap()
        .remove(0)
        .lease;
    let jobs = taskflow_jobs(&ns).await;
    assert_eq!(by_uuid(&jobs, id.as_str())["state"], "CLAIMED");
    // (3 s: the Python process above may take a while to start on a busy
    // machine; the claim must still be held when it looks.)
    jobworker_tests::wait_until("the lease to expire", Duration::from_secs(10), || async {
        board.find_owner(&q, &id).await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        taskflow(&ns, &["claim", id.as_str(), "tf-2", "30"]).await,
        json!({"ok": true})
    );
    // jobworker's stale lease is refused, and jobworker sees the new owner.
    assert!(board.consume(lease).await.unwrap_err().is_not_owner());
    assert_eq!(board.find_owner(&q, &id).await.unwrap().as_deref(), Some("tf-2"));
    assert_eq!(
        taskflow(&ns, &["consume", id.as_str(), "tf-2"]).await,
        json!({"ok": true})
    );
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn taskflow_trash_and_abandon_of_jobworker_jobs() {
    let q = unique_queue("tf-trash");
    let ns = format!("interop-{q}");
    let board = board(&q, &ns).await;
    let id = board.post(&q, NewJob::new("t")).await.unwrap();
    assert_eq!(
        taskflow(&ns, &["claim", id.as_str(), "tf-1"]).await,
        json!({"ok": true})
    );
    assert_eq!(
        taskflow(&ns, &["abandon", id.as_str(), "tf-1"]).await,
        json!({"ok": true})
    );
    let c = board.claim_job(&q, &id, "jw-1", Some(LONG)).await.unwrap();
    board.abandon(c.lease, jobworker::Abandon::Release).await.unwrap();
    assert_eq!(
        taskflow(&ns, &["claim", id.as_str(), "tf-1"]).await,
        json!({"ok": true})
    );
    assert_eq!(
        taskflow(&ns, &["trash", id.as_str(), "tf-1"]).await,
        json!({"ok": true})
    );
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Trashed);
}

/// Must-show: taskflow posts a job with a book (a logbook's name and uuid);
/// jobworker shows it and hands it to the claimer with the whole details
/// (an `args` key beside other keys loses nothing). jobworker posts with a
/// book; taskflow shows it.
#[tokio::test(flavor = "multi_thread")]
async fn books_and_whole_details_travel_both_ways() {
    let q = unique_queue("tf-book");
    let ns = format!("interop-{q}");
    let board = board(&q, &ns).await;
    let book_uuid = JobId::random().to_string();
    let details = r#"{"args": {"n": 1}, "flow_uuid": "f-1", "store": {"x": 2}}"#;
    let posted = taskflow(&ns, &["post", "flow", "NORMAL", details, "nightly", &book_uuid]).await;
    let tf_id = JobId::from(posted["uuid"].as_str().unwrap());
    let shown = board.show(&q, &tf_id).await.unwrap();
    let book = shown.book.clone().expect("taskflow's book is shown");
    assert_eq!(
        (book.name.as_str(), book.uuid.as_str()),
        ("nightly", book_uuid.as_str())
    );
    assert_eq!(shown.details["store"], json!({"x": 2}), "{shown:?}");
    println!(
        "jobworker shows taskflow's job: book {book:?}, details {}",
        shown.details
    );
    let c = board.claim(&[&q], "jw-1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.book, Some(book));
    assert_eq!(jobworker::codec::value_to_json(&c.args), json!({"n": 1}));
    let whole = jobworker::codec::value_to_json(&c.details);
    assert_eq!(whole, serde_json::from_str::<Value>(details).unwrap());
    board.consume(c.lease).await.unwrap();

    let jw_book = JobId::random().to_string();
    let id = board
        .post(&q, NewJob::new("report").book("weekly", &jw_book))
        .await
        .unwrap();
    let jobs = taskflow_jobs(&ns).await;
    let seen = by_uuid(&jobs, id.as_str());
    println!(
        "taskflow shows jobworker's job: book {} ({})",
        seen["book_name"], seen["book_uuid"]
    );
    assert_eq!(
        (&seen["book_name"], &seen["book_uuid"]),
        (&json!("weekly"), &json!(jw_book))
    );
}
