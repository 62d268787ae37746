//! Interop with real taskflow 6.5.0 (PyPI, kazoo) on the same ZooKeeper:
//! each side lists, claims and consumes the other's jobs, sees the other's
//! claims (a taskflow claim is held by a live Python process, since it
//! lasts as long as its session) and cannot take them; taskflow trashes and
//! abandons jobworker's jobs; jobworker's own znodes never break
//! taskflow's `iterjobs`.

use jobworker_tests::copy_of;
use std::time::Duration;

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Abandon, Board, JobId, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::{run_python_async, shared_zookeeper, unique_queue, wait_until};
use serde_json::{json, Value};
use zookeeper_client as zk;

const LONG: Duration = Duration::from_secs(120);

/// Drives a real taskflow `ZookeeperJobBoard`; prints one JSON line.
const SCRIPT: &str = r#"
import json, sys, time
from taskflow import exceptions as exc
from taskflow.types import entity
from taskflow.jobs.backends import impl_zookeeper
from taskflow.persistence import models
from oslo_serialization import jsonutils

hosts, path, command, *args = sys.argv[1:]
board = impl_zookeeper.ZookeeperJobBoard("interop", {"hosts": hosts, "path": path})
board.connect()

def find(uuid):
    for job in board.iterjobs(ensure_fresh=True):
        if job.uuid == uuid:
            return job
    raise SystemExit("job %s is not listed" % uuid)

def guarded(call):
    try:
        call()
        return {"ok": True}
    except exc.TaskFlowException as e:
        return {"error": type(e).__name__, "message": str(e)}

def listing():
    out = []
    for job in board.iterjobs(ensure_fresh=True):
        raw, _ = board._client.get(job.path)
        out.append({
            "uuid": job.uuid, "name": job.name, "state": job.state,
            "owner": board.find_owner(job), "priority": job.priority.value,
            "details": job.details, "sequence": job.sequence, "path": job.path,
            "created_on": job.created_on.isoformat() if job.created_on else None,
            "canonical": jsonutils.dumps(json.loads(raw)).encode() == raw,
            "book_name": job.book_name, "book_uuid": job.book_uuid,
        })
    return out

try:
    if command == "post":
        name, priority, details, *book = args
        book = models.LogBook(book[0], uuid=book[1]) if book else None
        job = board.post(name, book=book, details=json.loads(details), priority=priority)
        out = {"uuid": job.uuid, "path": job.path}
    elif command == "list":
        out = listing()
    elif command == "ops":
        # One session: e.g. "claim,abandon" or "claim,trash".
        uuid, who, ops = args
        out = [guarded(lambda op=op: getattr(board, op)(find(uuid), who)) for op in ops.split(",")]
    elif command == "hold":
        # Claims, says so, holds the claim until RELEASE exists, then
        # consumes (its data "consume") or abandons.
        uuid, who, release = args
        print(json.dumps({"held": guarded(lambda: board.claim(find(uuid), who))}), flush=True)
        deadline = time.time() + 60
        while not board._client.exists(release) and time.time() < deadline:
            time.sleep(0.02)
        data, _ = board._client.get(release)
        op = data.decode() or "abandon"
        out = {op: guarded(lambda: getattr(board, op)(find(uuid), who)), "after": listing()}
    elif command == "register":
        name, = args
        board.register_entity(entity.Entity("conductor", name, {"hostname": "h", "pid": 7}))
        out = {"entity_path": board.entity_path}
    else:
        raise SystemExit("unknown command %r" % command)
finally:
    board.close()
print(json.dumps(out, default=str))
"#;

/// A jobworker board on a fresh root of the shared ZooKeeper, and queue
/// `q`'s taskflow path.
struct Setup {
    board: ZooKeeperBoard,
    q: String,
    path: String,
}

async fn setup(name: &str) -> Setup {
    let root = unique_queue(&format!("zk-{name}"));
    let connect = format!("{}/{root}", shared_zookeeper().connect_string());
    let board = ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
        .await
        .unwrap();
    let q = unique_queue(name);
    let path = board.jobs_path(&q).unwrap();
    Setup { board, q, path }
}

impl Setup {
    async fn taskflow(&self, args: &[&str]) -> Value {
        let hosts = shared_zookeeper().connect_string();
        let mut all = vec![hosts.as_str(), self.path.as_str()];
        all.extend_from_slice(args);
        run_python_async(SCRIPT, &all).await.json()
    }

    async fn taskflow_jobs(&self) -> Vec<Value> {
        self.taskflow(&["list"])
            .await
            .as_array()
            .cloned()
            .expect("list returns an array")
    }

    async fn client(&self) -> zk::Client {
        shared_zookeeper().client().await
    }
}

fn by_uuid<'a>(jobs: &'a [Value], uuid: &str) -> &'a Value {
    jobs.iter()
        .find(|j| j["uuid"] == uuid)
        .unwrap_or_else(|| panic!("taskflow does not list {uuid}: {jobs:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn taskflow_posts_jobworker_lists_claims_and_consumes() {
    let s = setup("tf-in").await;
    let low = s
        .taskflow(&["post", "report", "LOW", r#"{"store": {"x": 1}}"#])
        .await;
    let high = s
        .taskflow(&["post", "resize", "high", r#"{"path": "a.png"}"#])
        .await;
    let (low, high) = (low["uuid"].as_str().unwrap(), high["uuid"].as_str().unwrap());

    let listed = s
        .board
        .list(&s.q, ListFilter::Live, Page::default())
        .await
        .unwrap();
    let names: Vec<&str> = listed.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        ["resize", "report"],
        "jobworker lists taskflow's jobs in claim order"
    );
    assert_eq!(listed[1].args, json!({"store": {"x": 1}}));
    assert!(listed
        .iter()
        .all(|j| j.state == JobState::Ready && j.created_on.is_some()));
    assert_eq!(s.board.job_count(&s.q).await.unwrap(), 2);

    let c = s.board.claim(&[&s.q], "jw-1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.lease.job().as_str(), high);
    assert_eq!(
        (c.name.as_str(), c.priority, c.attempt),
        ("resize", Priority::HIGH, 1)
    );
    assert_eq!(jobworker::codec::value_to_json(&c.args), json!({"path": "a.png"}));

    // taskflow sees jobworker's claim, with the owner, and cannot take it.
    let jobs = s.taskflow_jobs().await;
    let seen = by_uuid(&jobs, high);
    assert_eq!(
        (&seen["state"], &seen["owner"]),
        (&json!("CLAIMED"), &json!("jw-1"))
    );
    let refused = s.taskflow(&["ops", high, "tf-1", "claim"]).await;
    // (taskflow 6.5.0 cannot name the owner here: it looks for NodeExists
    // among (op, error) pairs of its failed transaction.)
    assert_eq!(refused[0]["error"], "UnclaimableJob", "{refused}");
    // Nor consume it under another owner name.
    let refused = s.taskflow(&["ops", high, "tf-1", "consume"]).await;
    assert_eq!(refused[0]["error"], "JobFailure", "{refused}");

    s.board.consume(copy_of(&c.lease)).await.unwrap();
    assert_eq!(
        s.board.state(&s.q, c.lease.job()).await.unwrap(),
        JobState::Completed
    );
    let c2 = s.board.claim(&[&s.q], "jw-1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c2.lease.job().as_str(), low);
    s.board.consume(c2.lease).await.unwrap();
    assert!(
        s.taskflow_jobs().await.is_empty(),
        "taskflow sees both jobs consumed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn jobworker_posts_taskflow_lists_claims_and_consumes() {
    let s = setup("tf-out").await;
    let post = |args: (&str, u8), p: Priority| NewJob::new("email").args(&args).unwrap().priority(p);
    let a = s.board.post(&s.q, post(("bob", 3), Priority(7))).await.unwrap();
    let b = s
        .board
        .post(&s.q, post(("eve", 4), Priority::NORMAL))
        .await
        .unwrap();
    let c = s.board.post(&s.q, NewJob::new("bare")).await.unwrap();

    let jobs = s.taskflow_jobs().await;
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    let ja = by_uuid(&jobs, a.as_str());
    assert_eq!(
        (&ja["name"], &ja["state"], &ja["priority"], &ja["owner"]),
        (
            &json!("email"),
            &json!("UNCLAIMED"),
            &json!("VERY_HIGH"),
            &Value::Null
        )
    );
    assert_eq!(ja["details"], json!({"args": ["bob", 3]}));
    assert_eq!(by_uuid(&jobs, b.as_str())["priority"], "NORMAL");
    assert_eq!(by_uuid(&jobs, c.as_str())["details"], json!({}));
    assert!(
        jobs.iter()
            .all(|j| j["canonical"] == true && j["created_on"].is_string()),
        "jobworker's postings are byte for byte what taskflow writes: {jobs:?}"
    );
    let mut sequences: Vec<i64> = jobs.iter().map(|j| j["sequence"].as_i64().unwrap()).collect();
    sequences.sort_unstable();
    assert_eq!(
        sequences,
        [0, 1, 2],
        "taskflow reads jobworker's sequence numbers"
    );

    // A taskflow process claims a and holds it (its claim lives with its
    // session); jobworker sees the claim and its owner and cannot take it.
    let release = format!("{}/release-a", s.path.rsplit_once('/').unwrap().0);
    let holder = {
        let hosts = shared_zookeeper().connect_string();
        let (path, a, release) = (s.path.clone(), a.to_string(), release.clone());
        tokio::spawn(
            async move { run_python_async(SCRIPT, &[&hosts, &path, "hold", &a, "tf-1", &release]).await },
        )
    };
    wait_until("taskflow to hold job a", Duration::from_secs(60), || async {
        s.board.find_owner(&s.q, &a).await.unwrap().as_deref() == Some("tf-1")
    })
    .await;
    assert_eq!(s.board.state(&s.q, &a).await.unwrap(), JobState::Claimed);
    let info = s.board.show(&s.q, &a).await.unwrap();
    assert_eq!((info.owner.as_deref(), info.priority), (Some("tf-1"), 7));
    let e = s.board.claim_job(&s.q, &a, "jw-1", Some(LONG)).await.unwrap_err();
    assert!(e.is_already_claimed() && e.message().contains("tf-1"), "{e}");
    let next = s.board.claim(&[&s.q], "jw-1", LONG, 5).await.unwrap();
    let next: Vec<&JobId> = next.iter().map(|c| c.lease.job()).collect();
    assert_eq!(next, [&b, &c], "the claim in order skips the job taskflow holds");
    // Reaping never touches a taskflow claim (it has no lease deadline).
    assert_eq!(s.board.reap(&s.q).await.unwrap().stalled, 0);
    let claimed = s
        .board
        .list(&s.q, ListFilter::State(JobState::Claimed), Page::default())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);

    // Taskflow consumes a; it sees jobworker's claims on b and c.
    s.client()
        .await
        .create(
            &release,
            b"consume",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let output = holder.await.unwrap();
    let out = output.json();
    let held: Value = serde_json::from_str(output.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(held["held"], json!({"ok": true}), "{output:?}");
    assert_eq!(out["consume"], json!({"ok": true}), "{out}");
    let after = out["after"].as_array().unwrap();
    assert_eq!(after.len(), 2, "{out}");
    assert!(
        after
            .iter()
            .all(|j| j["state"] == "CLAIMED" && j["owner"] == "jw-1"),
        "{out}"
    );
    assert_eq!(s.board.state(&s.q, &a).await.unwrap(), JobState::Completed);
    assert_eq!(s.board.job_count(&s.q).await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_jobworker_claim_is_recovered_then_claimable_by_taskflow() {
    let s = setup("tf-exp").await;
    let id = s.board.post(&s.q, NewJob::new("slow")).await.unwrap();
    let lease = s
        .board
        .claim(&[&s.q], "jw-1", Duration::from_millis(500), 1)
        .await
        .unwrap()
        .remove(0)
        .lease;
    assert_eq!(by_uuid(&s.taskflow_jobs().await, id.as_str())["state"], "CLAIMED");
    wait_until(
        "the lease to expire and be reaped",
        Duration::from_secs(10),
        || async { s.board.reap(&s.q).await.unwrap().stalled == 1 },
    )
    .await;
    // The lock is gone: taskflow claims and trashes it in one session.
    let out = s.taskflow(&["ops", id.as_str(), "tf-2", "claim,trash"]).await;
    assert_eq!(out, json!([{"ok": true}, {"ok": true}]));
    assert!(s.board.consume(lease).await.unwrap_err().is_not_found());
    let info = s.board.show(&s.q, &id).await.unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Trashed, 1), "{info:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn taskflow_abandons_and_trashes_jobworker_jobs() {
    let s = setup("tf-trash").await;
    let id = s
        .board
        .post(&s.q, NewJob::new("t").args(&json!({"k": "é"})).unwrap())
        .await
        .unwrap();
    let out = s.taskflow(&["ops", id.as_str(), "tf-1", "claim,abandon"]).await;
    assert_eq!(out, json!([{"ok": true}, {"ok": true}]));
    let c = s.board.claim_job(&s.q, &id, "jw-1", Some(LONG)).await.unwrap();
    assert_eq!(
        s.board.abandon(c.lease, Abandon::Release).await.unwrap(),
        JobState::Ready
    );

    // Taskflow may end a jobworker claim by owner name (its rule).
    let c = s.board.claim_job(&s.q, &id, "jw-1", Some(LONG)).await.unwrap();
    let out = s.taskflow(&["ops", id.as_str(), "jw-1", "trash"]).await;
    assert_eq!(out, json!([{"ok": true}]));
    assert!(s.board.extend(&c.lease, LONG).await.unwrap_err().is_not_found());
    assert_eq!(s.board.state(&s.q, &id).await.unwrap(), JobState::Trashed);
    let trashed = s
        .board
        .list(&s.q, ListFilter::State(JobState::Trashed), Page::default())
        .await
        .unwrap();
    assert_eq!(trashed.len(), 1);
    assert_eq!(
        (trashed[0].id.as_str(), &trashed[0].args),
        (id.as_str(), &json!({"k": "é"}))
    );
    // The trash copy is where taskflow puts it, with the posting's bytes.
    let client = s.client().await;
    let trash = s.path.replace("/jobs", "/.trash");
    let names = client.list_children(&trash).await.unwrap();
    assert_eq!(names, ["job0000000000"]);
    let (copy, _) = client.get_data(&format!("{trash}/job0000000000")).await.unwrap();
    let text = String::from_utf8(copy).unwrap();
    assert!(text.contains(r#""details": {"args": {"k": "\u00e9"}}"#), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn jobworker_state_never_breaks_taskflow_iterjobs() {
    let s = setup("tf-state").await;
    let b = &s.board;
    // Every kind of jobworker state: delayed, retried, trashed, completed,
    // claimed, a registered worker, and a quarantined znode.
    let delayed = b
        .post(&s.q, NewJob::new("later").delay(Duration::from_secs(600)))
        .await
        .unwrap();
    let retried = b
        .post(&s.q, NewJob::new("retried").max_attempts(5))
        .await
        .unwrap();
    let trashed = b.post(&s.q, NewJob::new("trashed")).await.unwrap();
    let done = b.post(&s.q, NewJob::new("done")).await.unwrap();
    let held = b.post(&s.q, NewJob::new("held")).await.unwrap();
    for (id, end) in [(&retried, "retry"), (&trashed, "trash"), (&done, "consume")] {
        let c = b.claim_job(&s.q, id, "jw", Some(LONG)).await.unwrap();
        match end {
            "retry" => {
                let how = Abandon::Retry {
                    delay: Duration::ZERO,
                    error: "error: flaky".into(),
                };
                assert_eq!(b.abandon(c.lease, how).await.unwrap(), JobState::Ready);
            }
            "trash" => b.trash(c.lease, "fatal: bad input").await.unwrap(),
            _ => b.consume(c.lease).await.unwrap(),
        }
    }
    b.claim_job(&s.q, &held, "jw", Some(LONG)).await.unwrap();
    b.register_worker_for(&[&s.q], "jw@host:1", json!({"pid": 1}))
        .await
        .unwrap();
    // A znode nobody can read: taskflow's iterjobs(ensure_fresh=True) raises
    // on it until jobworker moves it aside.
    let client = s.client().await;
    let opts = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
    client
        .create(&format!("{}/job", s.path), b"{not json", &opts)
        .await
        .unwrap();
    assert_eq!(b.reap(&s.q).await.unwrap().promoted, 0);
    let quarantined = b
        .list(&s.q, ListFilter::State(JobState::Quarantined), Page::default())
        .await
        .unwrap();
    assert_eq!(quarantined.len(), 1);
    assert!(
        quarantined[0].reason.as_deref().unwrap().contains("not json"),
        "{quarantined:?}"
    );

    let jobs = s.taskflow_jobs().await;
    let mut seen: Vec<(String, String)> = jobs
        .iter()
        .map(|j| {
            (
                j["uuid"].as_str().unwrap().to_owned(),
                j["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    let mut want = vec![
        (delayed.to_string(), "UNCLAIMED".to_owned()),
        (retried.to_string(), "UNCLAIMED".to_owned()),
        (held.to_string(), "CLAIMED".to_owned()),
    ];
    want.sort();
    assert_eq!(seen, want, "taskflow lists exactly the live jobs: {jobs:?}");
    // Nothing of jobworker's is under taskflow's jobs path.
    let children = client.list_children(&s.path).await.unwrap();
    assert!(children.iter().all(|c| c.starts_with("job")), "{children:?}");

    let info = b.show(&s.q, &retried).await.unwrap();
    assert_eq!((info.attempts, info.reason.as_deref()), (1, Some("error: flaky")));
    assert_eq!(b.state(&s.q, &delayed).await.unwrap(), JobState::Scheduled);
    assert_eq!(b.state(&s.q, &done).await.unwrap(), JobState::Completed);
    let t = b.show(&s.q, &trashed).await.unwrap();
    assert_eq!((t.state, t.group.as_deref()), (JobState::Trashed, Some("fatal")));
}

#[tokio::test(flavor = "multi_thread")]
async fn workers_are_taskflow_entities() {
    let s = setup("tf-ent").await;
    s.board
        .register_worker_for(
            &[&s.q],
            "jw@host.example:42",
            json!({"hostname": "host.example", "pid": 42}),
        )
        .await
        .unwrap();
    // The same place and body taskflow's register_entity writes.
    let out = s.taskflow(&["register", "cond-1@host.example:4242"]).await;
    let entities = out["entity_path"].as_str().unwrap().to_owned();
    let client = s.client().await;
    let mut names = client
        .list_children(&format!("{entities}/conductor"))
        .await
        .unwrap();
    names.sort();
    assert_eq!(
        names,
        ["jw@host.example:42"],
        "taskflow's entity went with its session"
    );
    let (body, stat) = client
        .get_data(&format!("{entities}/conductor/jw@host.example:42"))
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(body).unwrap(),
        r#"{"kind": "conductor", "name": "jw@host.example:42", "metadata": {"hostname": "host.example", "pid": 42}}"#
    );
    assert_ne!(stat.ephemeral_owner, 0, "entities are ephemeral");
    let workers = s.board.list_workers().await.unwrap();
    assert_eq!(
        workers,
        [
            json!({"kind": "conductor", "name": "jw@host.example:42", "metadata": {"hostname": "host.example", "pid": 42}})
        ]
    );
    s.board.unregister_worker("jw@host.example:42").await.unwrap();
    assert!(s.board.list_workers().await.unwrap().is_empty());
    assert!(client
        .list_children(&format!("{entities}/conductor"))
        .await
        .unwrap()
        .is_empty());
}

/// Must-show: taskflow posts a job with a book (a logbook's name and uuid);
/// jobworker shows it and hands it to the claimer with the whole details
/// (an `args` key beside other keys loses nothing). jobworker posts with a
/// book; taskflow shows it.
#[tokio::test(flavor = "multi_thread")]
async fn books_and_whole_details_travel_both_ways() {
    let s = setup("tf-book").await;
    let book_uuid = JobId::random().to_string();
    let details = r#"{"args": {"n": 1}, "flow_uuid": "f-1", "store": {"x": 2}}"#;
    let posted = s
        .taskflow(&["post", "flow", "NORMAL", details, "nightly", &book_uuid])
        .await;
    let tf_id = JobId::from(posted["uuid"].as_str().unwrap());
    let shown = s.board.show(&s.q, &tf_id).await.unwrap();
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
    let c = s.board.claim(&[&s.q], "jw-1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.book, Some(book));
    assert_eq!(jobworker::codec::value_to_json(&c.args), json!({"n": 1}));
    let whole = jobworker::codec::value_to_json(&c.details);
    assert_eq!(whole, serde_json::from_str::<Value>(details).unwrap());
    s.board.consume(c.lease).await.unwrap();

    let jw_book = JobId::random().to_string();
    let id = s
        .board
        .post(&s.q, NewJob::new("report").book("weekly", &jw_book))
        .await
        .unwrap();
    let jobs = s.taskflow_jobs().await;
    let seen = by_uuid(&jobs, id.as_str());
    println!(
        "taskflow shows jobworker's job: book {} ({})",
        seen["book_name"], seen["book_uuid"]
    );
    assert_eq!(
        (&seen["book_name"], &seen["book_uuid"]),
        (&json!("weekly"), &json!(jw_book))
    );
    assert_eq!(
        seen["canonical"], true,
        "the posting is byte for byte taskflow's: {seen}"
    );
}
