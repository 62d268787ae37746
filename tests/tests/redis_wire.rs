//! jobworker writes exactly taskflow's keys and bytes, and reads every
//! posting taskflow accepts; postings taskflow would reject are
//! quarantined (kept with the reason), never deleted.

use jobworker_tests::copy_of;
use std::collections::BTreeSet;
use std::time::Duration;

use jobworker::board::ClaimRequest;
use jobworker::codec::{decode_posting, encode_posting, CreatedOn, OsloDateTime};
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::{fixtures_dir, shared_redis, unique_queue};
use redis::AsyncCommands;

async fn board_on(q: &str, ns: &str) -> RedisBoard {
    RedisBoard::with_options(RedisOptions::new(shared_redis().url()).namespace(q, ns))
        .await
        .unwrap()
}

async fn server_micros(con: &mut jobworker::redis::RedisConnection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(con).await.unwrap();
    s * 1_000_000 + us
}

async fn keys_of(con: &mut jobworker::redis::RedisConnection, ns: &str) -> BTreeSet<String> {
    con.keys::<_, Vec<String>>(format!("{ns}:*"))
        .await
        .unwrap()
        .into_iter()
        .collect()
}

#[tokio::test]
async fn lifecycle_writes_taskflow_keys_and_bytes() {
    let q = unique_queue("wire");
    let ns = format!("wire-{q}");
    let board = board_on(&q, &ns).await;
    let mut con = board.connection();
    let id = "0b5a1d2e-3c4f-4a6b-8c7d-9e0f1a2b3c01";
    let before = server_micros(&mut con).await;
    board
        .post(&q, NewJob::new("job-a").id(id).priority(Priority::HIGH))
        .await
        .unwrap();
    let after = server_micros(&mut con).await;

    // The posting: taskflow's map, created_on from the server's clock.
    let bytes: Vec<u8> = con.hget(format!("{ns}:listings"), id).await.unwrap();
    let posting = decode_posting(&bytes).unwrap();
    assert_eq!((posting.uuid.as_str(), posting.name.as_str()), (id, "job-a"));
    assert_eq!(posting.priority, Priority::HIGH);
    assert_eq!(posting.sequence, Some(1));
    assert_eq!(posting.details, rmpv::Value::Map(vec![]));
    let CreatedOn::DateTime(created) = &posting.created_on else {
        panic!("created_on is not ext 1")
    };
    assert_eq!(created.tz, None, "taskflow needs naive datetimes");
    let t = created.to_unix_micros();
    assert!(
        before <= t && t <= after,
        "created_on {t} not within server time [{before}, {after}]"
    );
    assert_eq!(
        encode_posting(&posting),
        bytes,
        "the Lua-built posting must be taskflow's exact bytes"
    );
    assert_eq!(bytes[0], 0x86);
    let seq: String = con.get(format!("{ns}:sequence")).await.unwrap();
    assert_eq!(seq, "1");

    // Claim: raw owner string with a TTL, last_modified a naive ext-1 datetime.
    board
        .claim(&[&q], "worker-1", Duration::from_secs(30), 1)
        .await
        .unwrap();
    let owner: Vec<u8> = con.get(format!("{ns}:{id}.owned")).await.unwrap();
    assert_eq!(owner, b"worker-1");
    let ttl: i64 = con.pttl(format!("{ns}:{id}.owned")).await.unwrap();
    assert!(ttl > 25_000 && ttl <= 30_000, "owner key ttl {ttl}");
    let lm: Vec<u8> = con.get(format!("{ns}:{id}.last_modified")).await.unwrap();
    assert_eq!(&lm[..1], [0xc7]);
    assert_eq!(lm[2], 1, "ext type 1");
    let dt = OsloDateTime::decode_ext_payload(&lm[3..]).unwrap();
    assert_eq!(dt.tz, None);
    assert_eq!(dt.encode_ext(), lm, "smallest int forms, as oslo writes them");
    let ttl_lm: i64 = con.pttl(format!("{ns}:{id}.last_modified")).await.unwrap();
    assert_eq!(ttl_lm, -1, "last_modified has no TTL");

    let taskflow_keys: BTreeSet<String> = keys_of(&mut con, &ns)
        .await
        .into_iter()
        .filter(|k| !k.contains(":jw."))
        .collect();
    let expected: BTreeSet<String> = [
        "listings",
        "sequence",
        &format!("{id}.owned"),
        &format!("{id}.last_modified"),
    ]
    .iter()
    .map(|p| format!("{ns}:{p}"))
    .collect();
    assert_eq!(taskflow_keys, expected);

    // Trash: the exact posting bytes move to the trash hash; last_modified stays.
    let lease = jobworker::Lease::new(q.clone(), id.into(), "worker-1", 1);
    board.trash(lease, "broken").await.unwrap();
    let trashed: Vec<u8> = con.hget(format!("{ns}:trash"), id).await.unwrap();
    assert_eq!(trashed, bytes);
    let listed: bool = con.hexists(format!("{ns}:listings"), id).await.unwrap();
    assert!(!listed);
    let owned: bool = con.exists(format!("{ns}:{id}.owned")).await.unwrap();
    assert!(!owned);
    let lm_stays: bool = con.exists(format!("{ns}:{id}.last_modified")).await.unwrap();
    assert!(lm_stays, "taskflow leaves last_modified behind on trash");
}

#[tokio::test]
async fn consume_removes_taskflow_keys() {
    let q = unique_queue("wire-consume");
    let ns = format!("wire-{q}");
    let board = board_on(&q, &ns).await;
    let mut con = board.connection();
    let id = board.post(&q, NewJob::new("c")).await.unwrap();
    let c = board
        .claim(&[&q], "w", Duration::from_secs(30), 1)
        .await
        .unwrap()
        .remove(0);
    board.consume(c.lease).await.unwrap();
    let left: BTreeSet<String> = keys_of(&mut con, &ns)
        .await
        .into_iter()
        .filter(|k| !k.contains(":jw."))
        .collect();
    assert_eq!(
        left,
        [format!("{ns}:sequence")].into_iter().collect(),
        "only the sequence remains (listings hash is empty)"
    );
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Completed);
}

/// jobworker's consume writes nothing into the job hash: the job's entry
/// in the history index says completed, and its score is the finish time.
/// Every reader goes by it: state, show, history, a dependency posted
/// later, cancel. A job hash that an older consume marked completed (or
/// that records taskflow's consume) still reads completed.
#[tokio::test]
async fn a_consumed_job_is_completed_by_its_history_entry_alone() {
    let q = unique_queue("wire-completed");
    let ns = format!("wire-{q}");
    let board = board_on(&q, &ns).await;
    let mut con = board.connection();
    let id = board.post(&q, NewJob::new("c")).await.unwrap();
    let job_key = format!("{ns}:jw.job.{id}");
    let c = board
        .claim(&[&q], "w", Duration::from_secs(30), 1)
        .await
        .unwrap()
        .remove(0);
    board.consume(c.lease).await.unwrap();
    let state: Option<String> = con.hget(&job_key, "state").await.unwrap();
    assert_eq!(state, None, "consume wrote a state into the job hash");
    let finished: Option<f64> = con
        .zscore(format!("{ns}:jw.completed"), id.as_str())
        .await
        .unwrap();
    let finished = finished.expect("the consumed job is in the history index") as i64;

    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Completed);
    assert_eq!(board.show(&q, &id).await.unwrap().state, JobState::Completed);
    let history = board.history(&q, &id).await.unwrap();
    let consumed: Vec<_> = history.iter().filter(|e| e["event"] == "consumed").collect();
    assert_eq!(consumed.len(), 1, "{history:?}");
    assert_eq!(consumed[0]["at"], finished, "{history:?}");
    assert_eq!(consumed[0]["worker"], "w", "{history:?}");
    // A dependency on it is met at once; cancelling it says it finished.
    let child = board
        .post(&q, NewJob::new("child").depends_on(id.clone()))
        .await
        .unwrap();
    assert_eq!(board.state(&q, &child).await.unwrap(), JobState::Ready);
    let e = board
        .cancel(&q, std::slice::from_ref(&id), false)
        .await
        .unwrap_err();
    assert!(e.is_finished(), "{e}");

    // The hash of an older consume: recorded state, no history entry.
    let old = board.post(&q, NewJob::new("old")).await.unwrap();
    let c = board.claim(&[&q], "w", Duration::from_secs(30), 2).await.unwrap();
    let c = c
        .into_iter()
        .find(|c| *c.lease.job() == old)
        .expect("claimed the old job");
    board.consume(c.lease).await.unwrap();
    let _: () = con
        .zrem(format!("{ns}:jw.completed"), old.as_str())
        .await
        .unwrap();
    let _: () = con
        .hset_multiple(
            format!("{ns}:jw.job.{old}"),
            &[("state", "completed"), ("finished", "1234")],
        )
        .await
        .unwrap();
    assert_eq!(board.state(&q, &old).await.unwrap(), JobState::Completed);
    let history = board.history(&q, &old).await.unwrap();
    assert!(
        history
            .iter()
            .any(|e| e["event"] == "consumed" && e["at"] == 1234),
        "{history:?}"
    );
    let e = board
        .cancel(&q, std::slice::from_ref(&old), false)
        .await
        .unwrap_err();
    assert!(e.is_finished(), "{e}");
}

#[tokio::test]
async fn reader_verdicts_accepted_decode_and_rejected_are_quarantined() {
    let path = fixtures_dir().join("redis_reader_verdicts.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let verdicts: serde_json::Value = serde_json::from_str(&text).unwrap();
    let q = unique_queue("verdicts");
    let ns = format!("verdicts-{q}");
    let board = board_on(&q, &ns).await;
    let mut con = board.connection();
    let mut accepted = BTreeSet::new();
    let mut rejected = Vec::new();
    for (case, v) in verdicts["cases"].as_object().unwrap() {
        let field = v["hash_field"].as_str().unwrap().to_owned();
        let bytes = hex::decode(v["value_hex"].as_str().unwrap()).unwrap();
        let _: () = con.hset(format!("{ns}:listings"), &field, &bytes).await.unwrap();
        match v["verdict"].as_str().unwrap() {
            "accepted" => {
                accepted.insert(field);
            }
            "rejected" => rejected.push((case.clone(), field, bytes)),
            other => panic!("unknown verdict {other}"),
        }
    }
    assert_eq!(accepted.len() + rejected.len(), 19);

    // Listing indexes the accepted postings and quarantines the rest.
    let live = board
        .list(
            &q,
            ListFilter::Live,
            Page {
                offset: 0,
                limit: 100,
            },
        )
        .await
        .unwrap();
    let live_ids: BTreeSet<String> = live.iter().map(|j| j.id.clone()).collect();
    assert_eq!(live_ids, accepted);
    for j in &live {
        let parsed = &verdicts["cases"]
            .as_object()
            .unwrap()
            .values()
            .find(|v| v["hash_field"] == j.id.as_str())
            .unwrap()["parsed"];
        assert_eq!(j.name, parsed["name"].as_str().unwrap(), "{}", j.id);
        assert_eq!(
            Priority(j.priority).taskflow_name(),
            parsed["priority"].as_str().unwrap(),
            "{}",
            j.id
        );
    }
    let quarantined = board
        .list(&q, ListFilter::State(JobState::Quarantined), Page::default())
        .await
        .unwrap();
    assert_eq!(quarantined.len(), rejected.len());
    for (case, field, bytes) in &rejected {
        let kept: Vec<u8> = con.hget(format!("{ns}:jw.quarantine"), field).await.unwrap();
        assert_eq!(&kept, bytes, "{case}: quarantined bytes must be kept exactly");
        let info = quarantined
            .iter()
            .find(|j| &j.id == field)
            .unwrap_or_else(|| panic!("{case} not listed as quarantined"));
        assert_eq!(info.state, JobState::Quarantined);
        assert!(
            info.reason.as_deref().is_some_and(|r| !r.is_empty()),
            "{case}: no reason"
        );
        let listed: bool = con.hexists(format!("{ns}:listings"), field).await.unwrap();
        assert!(
            !listed,
            "{case}: left in the listings, where taskflow would delete it"
        );
    }

    // Every accepted posting can be claimed and consumed.
    let claimed = board
        .claim(&[&q], "w", Duration::from_secs(60), 100)
        .await
        .unwrap();
    let claimed_ids: BTreeSet<String> = claimed
        .iter()
        .map(|c| c.lease.job().to_string().clone())
        .collect();
    assert_eq!(claimed_ids, accepted);
    for c in &claimed {
        board.consume(copy_of(&c.lease)).await.unwrap();
    }
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
}

#[tokio::test]
async fn claim_quarantines_a_posting_it_cannot_decode() {
    let q = unique_queue("claim-bad");
    let ns = format!("claimbad-{q}");
    let board = board_on(&q, &ns).await;
    let mut con = board.connection();
    let _: () = con
        .hset(format!("{ns}:listings"), "garbage", b"\xc1\xc1\xc1".as_slice())
        .await
        .unwrap();
    let good = board.post(&q, NewJob::new("ok")).await.unwrap();
    let claimed = board.claim(&[&q], "w", Duration::from_secs(60), 5).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(*claimed[0].lease.job(), good);
    // A claim that got jobs leaves indexing to maintenance; one that comes
    // up empty with no worker running indexes, and so quarantines.
    let none = board.claim(&[&q], "w", Duration::from_secs(60), 5).await.unwrap();
    assert!(none.is_empty(), "{none:?}");
    let kept: Vec<u8> = con.hget(format!("{ns}:jw.quarantine"), "garbage").await.unwrap();
    assert_eq!(kept, b"\xc1\xc1\xc1");
    let e = board
        .claim_job(&q, &"garbage".into(), "w", Some(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

/// A server of its own (a flush on the shared one would reorder the
/// pipelines of the other tests that flush) and a board on it that runs
/// its Lua as the Functions library or as scripts.
async fn flushable(functions: bool) -> (RedisServer, RedisBoard) {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let board = RedisBoard::with_options(RedisOptions::new(server.url()).functions(functions))
        .await
        .unwrap();
    (server, board)
}

/// Makes the server lose the board's Lua: FUNCTION FLUSH (a restart
/// without persistence) or SCRIPT FLUSH (any restart).
async fn flush(board: &RedisBoard, functions: bool) {
    let _: () = redis::cmd(if functions { "FUNCTION" } else { "SCRIPT" })
        .arg("FLUSH")
        .query_async(&mut board.connection())
        .await
        .unwrap();
}

/// Posts `jobs` with one `post_many`, each of which must be posted.
async fn post_all(board: &RedisBoard, q: &str, jobs: &[NewJob]) {
    for r in board.post_many(q, jobs).await.unwrap() {
        r.unwrap();
    }
}

#[tokio::test]
async fn post_many_posts_in_order_and_survives_a_flush() {
    for functions in [true, false] {
        post_many_posts_in_order_and_survives_a_flush_of(functions).await;
    }
}

async fn post_many_posts_in_order_and_survives_a_flush_of(functions: bool) {
    let q = unique_queue("bulk");
    let (_server, board) = flushable(functions).await;
    let jobs = vec![
        NewJob::new("a"),
        NewJob::new("b").id("bulk-fixed"),
        NewJob::new(""),
        NewJob::new("c").id("bulk-fixed"),
    ];
    let results = board.post_many(&q, &jobs).await.unwrap();
    assert!(results[0].is_ok() && results[1].is_ok());
    assert!(
        results[2].as_ref().unwrap_err().is_invalid(),
        "an invalid job is refused alone"
    );
    assert!(results[3]
        .as_ref()
        .unwrap_err()
        .message()
        .contains("already exists"));
    assert_eq!(board.job_count(&q).await.unwrap(), 2);
    // A bulk of several calls keeps its order.
    let first: Vec<NewJob> = (0..250).map(|i| NewJob::new(format!("m{i}"))).collect();
    post_all(&board, &q, &first).await;
    // A server that lost the Lua (restart, FLUSH) gets it again; the
    // calls it refused run again in order. An invalid job in the middle
    // of the bulk is refused alone.
    flush(&board, functions).await;
    let mut more: Vec<NewJob> = (0..500).map(|i| NewJob::new(format!("n{i}"))).collect();
    more[250] = NewJob::new("");
    let results = board.post_many(&q, &more).await.unwrap();
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.is_ok(), i != 250, "job {i} of the bulk: {r:?}");
    }
    let claimed = board
        .claim(&[&q], "w", Duration::from_secs(60), 1000)
        .await
        .unwrap();
    let names: Vec<&str> = claimed.iter().map(|c| c.name.as_str()).collect();
    let mut expected = vec!["a".to_string(), "b".to_string()];
    expected.extend((0..250).map(|i| format!("m{i}")));
    expected.extend((0..500).filter(|&i| i != 250).map(|i| format!("n{i}")));
    assert_eq!(
        names, expected,
        "FIFO across single posts and every call of the bulk"
    );
}

/// A bulk post of alike jobs sends their shared values once per call
/// (`post.lua`'s 'shared'): every job still gets all of them, across
/// calls, for jobs ready, scheduled, tagged, or posted under given ids.
#[tokio::test]
async fn alike_jobs_posted_in_bulk_keep_every_value() {
    for functions in [true, false] {
        let q = unique_queue("alike");
        let (_server, board) = flushable(functions).await;
        let alike: Vec<NewJob> = (0..150)
            .map(|_| {
                NewJob::new("alike")
                    .priority(Priority::HIGH)
                    .max_attempts(7)
                    .tag("t")
            })
            .collect();
        post_all(&board, &q, &alike).await;
        let later: Vec<NewJob> = (0..3)
            .map(|_| NewJob::new("later").delay(Duration::from_secs(3600)))
            .collect();
        let later: Vec<_> = board.post_many(&q, &later).await.unwrap();
        let given = [
            NewJob::new("given").id("alike-1"),
            NewJob::new("given").id("alike-2"),
        ];
        post_all(&board, &q, &given).await;
        let again = board.post_many(&q, &given).await.unwrap();
        assert!(
            again
                .iter()
                .all(|r| r.as_ref().is_err_and(|e| e.message().contains("already exists"))),
            "a given id posted again is refused, job by job"
        );
        for id in later {
            assert_eq!(board.state(&q, &id.unwrap()).await.unwrap(), JobState::Scheduled);
        }
        let page = Page {
            offset: 0,
            limit: 1000,
        };
        assert_eq!(board.tagged(&q, "t", page).await.unwrap().len(), 150);
        let claimed = board
            .claim(&[&q], "w", Duration::from_secs(60), 1000)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 152, "150 alike and 2 given, not the 3 scheduled");
        for c in &claimed[..150] {
            assert_eq!(
                (c.name.as_str(), c.priority, c.max_attempts),
                ("alike", Priority::HIGH, 7)
            );
        }
        let given: Vec<&str> = claimed[150..].iter().map(|c| c.lease.job().as_str()).collect();
        assert_eq!(given, ["alike-1", "alike-2"]);
    }
}

#[tokio::test]
async fn completed_history_stays_within_its_count() {
    let q = unique_queue("history");
    let mut opts = RedisOptions::new(shared_redis().url());
    opts.history_count = 10;
    let board = RedisBoard::with_options(opts).await.unwrap();
    let keys = board.keys(&q).unwrap();
    for _ in 0..60 {
        board.post(&q, NewJob::new("h")).await.unwrap();
        let c = board
            .claim(&[&q], "w", Duration::from_secs(60), 1)
            .await
            .unwrap()
            .remove(0);
        board.consume(c.lease).await.unwrap();
    }
    let mut con = board.connection();
    let kept: usize = con.zcard(keys.completed()).await.unwrap();
    assert!((10..=11).contains(&kept), "history holds {kept} jobs, limit 10");
    let job_keys: Vec<String> = con
        .keys(format!(
            "{}:jw.job.*",
            keys.namespace.replace('{', "\\{").replace('}', "\\}")
        ))
        .await
        .unwrap();
    assert_eq!(job_keys.len(), kept, "pruned jobs leave no state behind");
}

/// A listing removed behind jobworker's back (an operator, or a taskflow
/// reader deleting what it cannot decode) means the job is gone: every
/// lease verb says so, as taskflow does, and nothing is resurrected.
#[tokio::test]
async fn verbs_on_a_job_whose_listing_vanished_say_not_found() {
    let q = unique_queue("vanished");
    let board = RedisBoard::connect(shared_redis().url()).await.unwrap();
    let keys = board.keys(&q).unwrap();
    let id = board.post(&q, NewJob::new("v")).await.unwrap();
    let c = board
        .claim(&[&q], "w", Duration::from_secs(60), 1)
        .await
        .unwrap()
        .remove(0);
    let mut con = board.connection();
    let _: () = con.hdel(keys.listings(), id.as_str()).await.unwrap();
    assert!(board
        .extend(&c.lease, Duration::from_secs(60))
        .await
        .unwrap_err()
        .is_not_found());
    assert!(board
        .abandon(copy_of(&c.lease), jobworker::Abandon::Release)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(board
        .trash(copy_of(&c.lease), "x")
        .await
        .unwrap_err()
        .is_not_found());
    assert!(board.consume(c.lease).await.unwrap_err().is_not_found());
    let ready: usize = con.zcard(keys.ready()).await.unwrap();
    assert_eq!(ready, 0, "nothing went back to the ready index");
}

/// After the server lost the Lua, a worker's consume-then-claim step
/// consumes once and claims once: as the one call of a lease of the
/// claim's queue, and as the pipeline of a lease of another queue.
#[tokio::test]
async fn consume_then_claim_after_a_flush_claims_once() {
    for functions in [true, false] {
        for same_queue in [true, false] {
            consume_then_claim_after_a_flush_claims_once_with(functions, same_queue).await;
        }
    }
}

async fn consume_then_claim_after_a_flush_claims_once_with(functions: bool, same_queue: bool) {
    let q = unique_queue("flush");
    let done_q = if same_queue {
        q.clone()
    } else {
        unique_queue("flush-done")
    };
    let (_server, board) = flushable(functions).await;
    let keys = board.keys(&q).unwrap();
    for _ in 0..if same_queue { 4 } else { 3 } {
        board.post(&q, NewJob::new("f")).await.unwrap();
    }
    if !same_queue {
        board.post(&done_q, NewJob::new("f")).await.unwrap();
    }
    let a = board
        .claim(&[&done_q], "w", Duration::from_secs(60), 1)
        .await
        .unwrap()
        .remove(0);
    flush(&board, functions).await;
    // With scripts, this loads claim.lua alone: the step below then
    // finds its own scripts missing (the one call, or the pipeline's
    // consume), loads them and runs what did not run. The library loads
    // whole, so with it the whole step runs again.
    if !functions {
        board.claim(&[&q], "w", Duration::from_secs(60), 1).await.unwrap();
    }
    let (consumed, claimed) = board
        .consume_then_claim(
            vec![copy_of(&a.lease)],
            &ClaimRequest {
                queues: &[&q],
                who: "w",
                expiry: Duration::from_secs(60),
                count: 1,
                holding: 1,
                hand_off: None,
            },
        )
        .await;
    let claimed = claimed.unwrap();
    assert!(consumed[0].is_ok());
    assert_eq!(claimed.len(), 1);
    let leased: usize = board.connection().zcard(keys.leases()).await.unwrap();
    let in_flight = if functions { 1 } else { 2 };
    assert_eq!(leased, in_flight, "exactly the claims in flight hold leases");
    let mut left = board.job_count(&q).await.unwrap();
    if !same_queue {
        left += board.job_count(&done_q).await.unwrap();
    }
    assert_eq!(left, 3);
    assert_eq!(
        board.state(&done_q, a.lease.job()).await.unwrap(),
        JobState::Completed
    );
}

/// The number of calls of `command` the server counted since its
/// statistics were reset (INFO commandstats).
/// One settle-and-take step of worker "w" on `q`: consumes `done`, then
/// claims up to `count` jobs with 60 s leases.
async fn settle_and_take(
    board: &RedisBoard,
    q: &str,
    done: Vec<jobworker::board::Lease>,
    count: usize,
    hand_off: Option<Duration>,
) -> (
    Vec<jobworker::board::SettleResult>,
    jobworker::Result<Vec<jobworker::Claimed>>,
) {
    board
        .consume_then_claim(
            done,
            &ClaimRequest {
                queues: &[q],
                who: "w",
                expiry: Duration::from_secs(60),
                count,
                holding: 0,
                hand_off,
            },
        )
        .await
}

/// The UTC day (days since the epoch) of a time in µs.
fn day_of(micros: i64) -> i64 {
    micros.div_euclid(86_400_000_000)
}

async fn calls_of(board: &RedisBoard, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut board.connection())
        .await
        .unwrap();
    let line = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&line))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// A worker's settle-and-take step on one queue is one call (FCALL or
/// EVALSHA), which settles each lease on its own terms and then claims.
#[tokio::test]
async fn consume_then_claim_on_one_queue_is_one_call() {
    for functions in [true, false] {
        let q = unique_queue("one-call");
        let (_server, board) = flushable(functions).await;
        let mut ids = Vec::new();
        for _ in 0..4 {
            ids.push(board.post(&q, NewJob::new("f")).await.unwrap());
        }
        let mut two = board.claim(&[&q], "w", Duration::from_secs(60), 2).await.unwrap();
        let (a, b) = (two.remove(0), two.remove(0));
        // b's lease goes stale: released, and taken by another worker.
        board
            .abandon(copy_of(&b.lease), jobworker::Abandon::Release)
            .await
            .unwrap();
        let b2 = board
            .claim(&[&q], "w2", Duration::from_secs(60), 1)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(b2.lease.job(), b.lease.job());
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut board.connection())
            .await
            .unwrap();
        let (consumed, claimed) =
            settle_and_take(&board, &q, vec![copy_of(&a.lease), copy_of(&b.lease)], 2, None).await;
        let call = if functions { "fcall" } else { "evalsha" };
        assert_eq!(calls_of(&board, call).await, 1, "functions: {functions}");
        assert!(consumed[0].is_ok());
        let stale = consumed[1].as_ref().unwrap_err();
        assert!(stale.error().is_not_owner(), "{stale:?}");
        let claimed: Vec<_> = claimed
            .unwrap()
            .into_iter()
            .map(|c| c.lease.job().clone())
            .collect();
        assert_eq!(claimed, ids[2..].to_vec(), "the next jobs, in order");
        assert_eq!(board.state(&q, a.lease.job()).await.unwrap(), JobState::Completed);
        assert_eq!(board.state(&q, b.lease.job()).await.unwrap(), JobState::Claimed);
    }
}

/// The one call writes the run times of the jobs it settles and the wait
/// times of the jobs it claims to their own statistics (one update for
/// both kinds; with the library and with scripts).
#[tokio::test]
async fn consume_then_claim_counts_run_and_wait_times_apart() {
    for functions in [true, false] {
        let (_server, board) = flushable(functions).await;
        // The statistics are per UTC day: a run across midnight splits its
        // samples between two days, and is run again.
        let s = loop {
            let q = unique_queue("one-call-stats");
            let started = day_of(server_micros(&mut board.connection()).await);
            for _ in 0..5 {
                board.post(&q, NewJob::new("f")).await.unwrap();
            }
            // Every sample is at least 30 ms: none is a 0 ms sample, which
            // is only counted.
            tokio::time::sleep(Duration::from_millis(30)).await;
            let first = board.claim(&[&q], "w", Duration::from_secs(60), 2).await.unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            let done = first.iter().map(|c| copy_of(&c.lease)).collect();
            let (consumed, claimed) = settle_and_take(&board, &q, done, 3, None).await;
            assert!(consumed.iter().all(|c| c.is_ok()), "{consumed:?}");
            assert_eq!(claimed.unwrap().len(), 3);
            if day_of(server_micros(&mut board.connection()).await) == started {
                break board.stats(&q, Some(started)).await.unwrap();
            }
        };
        assert_eq!(
            (s.run.count, s.wait.count),
            (2, 5),
            "functions: {functions}: {s:?}"
        );
        let in_buckets = |h: &[(String, u64)]| h.iter().map(|(_, n)| n).sum::<u64>();
        assert_eq!(in_buckets(&s.run.histogram), 2, "{s:?}");
        assert_eq!(in_buckets(&s.wait.histogram), 5, "{s:?}");
        // The first two waited ≥ 30 ms, the next three ≥ 60 ms.
        assert!(s.wait.mean_ms >= (2.0 * 30.0 + 3.0 * 60.0) / 5.0, "{s:?}");
        assert!(s.run.mean_ms >= 30.0, "{s:?}");
        assert!(s.wait.std_dev_ms > 0.0, "{s:?}");
    }
}

/// A claim that fails in the one settle-and-take call comes after the
/// consumes, which Redis keeps: their run times are in the day's
/// statistics once, whether the claim failed before it wrote its own
/// (its ready index is not a sorted set), while writing them (the
/// per-minute counts' hash is not a hash) or after (its idle workers'
/// hash is not a hash, and it registers the claimer), and the error still
/// reaches the caller (with the library and with scripts).
#[tokio::test]
async fn consumes_before_a_failed_claim_keep_their_run_times() {
    for functions in [true, false] {
        for broken in ["ready", "minutes", "idle"] {
            let (_server, board) = flushable(functions).await;
            let q = unique_queue("claim-fails");
            let keys = board.keys(&q).unwrap();
            for _ in 0..3 {
                board.post(&q, NewJob::new("f")).await.unwrap();
            }
            let micros = server_micros(&mut board.connection()).await;
            let day = day_of(micros);
            let first = board.claim(&[&q], "w", Duration::from_secs(60), 2).await.unwrap();
            let mut con = board.connection();
            // This hour's per-minute counts, and the next hour's in case
            // the call runs past the hour.
            let hour = micros.div_euclid(3_600_000_000);
            let minutes = |h: i64| format!("{}:jw.minutes.{h}", keys.namespace);
            let broken_keys = match broken {
                "ready" => vec![keys.ready().to_owned()],
                "minutes" => vec![minutes(hour), minutes(hour + 1)],
                _ => vec![keys.idle().to_owned()],
            };
            for key in &broken_keys {
                let _: () = redis::pipe()
                    .del(key)
                    .set(key, "not a sorted set nor a hash")
                    .query_async(&mut con)
                    .await
                    .unwrap();
            }
            let done = first.iter().map(|c| copy_of(&c.lease)).collect();
            let (_, claimed) = settle_and_take(&board, &q, done, 1, Some(Duration::from_secs(1))).await;
            let case = format!("functions: {functions}, broken {broken}");
            let failed = match claimed {
                Err(e) => e.to_string(),
                Ok(c) => panic!("{case}: the claim did not fail: {c:?}"),
            };
            assert!(failed.contains("WRONGTYPE"), "{case}: {failed}");
            for c in &first {
                let listed: bool = con
                    .hexists(keys.listings(), c.lease.job().as_str())
                    .await
                    .unwrap();
                assert!(!listed, "{case}: {} was not consumed", c.lease.job());
            }
            // The consume's day, or the next one when the call ran past
            // midnight.
            let today = board.stats(&q, Some(day)).await.unwrap();
            let next = board.stats(&q, Some(day + 1)).await.unwrap();
            assert_eq!(today.run.count + next.run.count, 2, "{case}: {today:?} {next:?}");
        }
    }
}

/// The day's statistics when one kind of a call's samples is all 0 ms and
/// the other is not (a cycle whose jobs were handed off by their posts
/// and ran for a while, or the other way round): the zeros are only
/// counted, the others summed, and the reader's count, mean, standard
/// deviation and histogram of each kind are those of all its samples.
/// `add_stats` is run by itself (EVAL of the composed module), on a fixed
/// day.
#[tokio::test]
async fn stats_of_a_kind_all_zero_beside_one_with_times_are_kept_apart() {
    let q = unique_queue("zero-stats");
    let board = board_on(&q, &format!("zero-stats-{q}")).await;
    let script = jobworker::redis::lua::compose(
        "-- include: stats\n\
         local function list(text)\n\
           local out = {}\n\
           for x in text:gmatch('%d+') do out[#out + 1] = tonumber(x) end\n\
           return out\n\
         end\n\
         add_stats(list(ARGV[4]), list(ARGV[5]), tonumber(ARGV[6]))\n\
         return 1",
    );
    let day = 20_000_i64; // 2024-10-04
    let at = day * 86_400_000 + 43_200_000;
    let ns = format!("{}:", board.keys(&q).unwrap().namespace);
    let mut con = board.connection();
    // (runs, waits) of each call: zeros beside times, both ways round,
    // then times beside times.
    let calls: [(&[u64], &[u64]); 3] = [
        (&[0, 0], &[5, 1_500]),
        (&[2_000, 3_000], &[0, 0, 0]),
        (&[10], &[20]),
    ];
    let (mut runs, mut waits) = (Vec::new(), Vec::new());
    for (r, w) in calls {
        let text = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
        let _: i64 = redis::cmd("EVAL")
            .arg(&script)
            .arg(0)
            .arg(&ns)
            .arg(&q)
            .arg("jw")
            .arg(text(r))
            .arg(text(w))
            .arg(at)
            .query_async(&mut con)
            .await
            .unwrap();
        runs.extend_from_slice(r);
        waits.extend_from_slice(w);
    }
    let s = board.stats(&q, Some(day)).await.unwrap();
    for (kind, timing, samples) in [("run", &s.run, &runs), ("wait", &s.wait, &waits)] {
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<u64>() as f64 / n;
        let var = samples.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert_eq!(timing.count, samples.len() as u64, "{kind}: {s:?}");
        assert!((timing.mean_ms - mean).abs() < 1e-6, "{kind}: mean {mean}: {s:?}");
        assert!(
            (timing.std_dev_ms - var.sqrt()).abs() < 1e-6,
            "{kind}: std dev {}: {s:?}",
            var.sqrt()
        );
        let mut expected: Vec<(String, u64)> = Vec::new();
        for &x in samples.iter() {
            let bucket = format!("s{}", x / 1_000);
            match expected.iter_mut().find(|(b, _)| *b == bucket) {
                Some((_, n)) => *n += 1,
                None => expected.push((bucket, 1)),
            }
        }
        expected.sort_by_key(|(b, _)| b[1..].parse::<u32>().unwrap());
        assert_eq!(timing.histogram, expected, "{kind}");
    }
}

/// The sequence appended to a posting is msgpack's smallest form of the
/// number, byte for byte what taskflow's encoder writes, in every width
/// (with the library and with scripts).
#[tokio::test]
async fn sequences_of_every_width_are_encoded_as_taskflow_does() {
    for functions in [true, false] {
        let (_server, board) = flushable(functions).await;
        let q = unique_queue("seq");
        let keys = board.keys(&q).unwrap();
        let mut con = board.connection();
        for before in [
            0_i64,
            126,
            127,
            254,
            255,
            65_534,
            65_535,
            4_294_967_294,
            4_294_967_295,
            5_000_000_000,
        ] {
            let _: () = con.set(&keys.keys[1], before).await.unwrap();
            let id = board.post(&q, NewJob::new("s")).await.unwrap();
            let bytes: Vec<u8> = con.hget(keys.listings(), id.as_str()).await.unwrap();
            let posting = decode_posting(&bytes).unwrap();
            assert_eq!(posting.sequence, Some(before + 1), "functions: {functions}");
            assert_eq!(
                encode_posting(&posting),
                bytes,
                "sequence {}: not taskflow's bytes",
                before + 1
            );
        }
    }
}

/// A job with extras can fail its post call on a key outside the queue's
/// (here its tag's key holds a string); the ready jobs posted before it
/// in the same call are in the ready index all the same, and claimable,
/// with the library and with scripts.
#[tokio::test]
async fn a_post_call_that_fails_leaves_the_jobs_before_it_claimable() {
    for functions in [true, false] {
        let (_server, board) = flushable(functions).await;
        let q = unique_queue("strand");
        let keys = board.keys(&q).unwrap();
        let mut con = board.connection();
        let _: () = con
            .set(format!("{}jw.tag.clash", keys.prefix()), "not a zset")
            .await
            .unwrap();
        let jobs = [NewJob::new("a"), NewJob::new("b"), NewJob::new("c").tag("clash")];
        let posted = board.post_many(&q, &jobs).await;
        assert!(
            posted.map_or(true, |r| r[2].is_err()),
            "the clashing tag fails c's post"
        );
        let claimed = board
            .claim(&[&q], "w", Duration::from_secs(60), 10)
            .await
            .unwrap();
        let mut names: Vec<&str> = claimed.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        assert!(
            names.starts_with(&["a", "b"]),
            "functions: {functions}: {names:?}"
        );
    }
}

/// The Lua side's oslo datetime (`lib/msgpack.lua`, the `created_on` of
/// every posting and the `modified` of every claim) is byte for byte the
/// Rust encoder's (checked against taskflow's own bytes in `codec`), for
/// times from 1970 to 2199, every day of a leap year's February and
/// March, and microseconds of every msgpack width.
#[tokio::test]
async fn the_scripts_oslo_datetime_is_the_codecs_for_every_width_and_date() {
    let mut times: Vec<(i64, i64)> = Vec::new();
    for us in [0, 1, 127, 128, 255, 256, 65_535, 65_536, 999_999] {
        let mut s = 0_i64;
        while s < 7_258_118_400 {
            times.push((s, us));
            s += 86_399 * 37 + 3_601;
        }
    }
    let feb_2028 = 1_835_481_600; // 2028-03-01 00:00:00 UTC, after a 29 February
    for day in -40..40 {
        for s in [0, 59, 60, 3_599, 3_600, 86_399] {
            times.push((feb_2028 + day * 86_400 + s, day.unsigned_abs() as i64 * 24_999));
        }
    }
    // Every width of microseconds within one second: the map of the
    // second, kept from the time before, meets each of them.
    for s in [0, feb_2028 - 1, feb_2028, 7_258_118_399] {
        for us in [0, 127, 128, 255, 256, 65_535, 65_536, 999_999, 5] {
            times.push((s, us));
        }
    }
    let script = format!(
        "{}\nlocal out = {{}}\nfor i = 1, #ARGV, 2 do\n  out[#out + 1] = oslo_datetime(tonumber(ARGV[i]), tonumber(ARGV[i + 1]))\nend\nreturn out",
        jobworker::redis::lua::module("msgpack").unwrap()
    );
    let mut con = shared_redis()
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for chunk in times.chunks(2_000) {
        let args: Vec<i64> = chunk.iter().flat_map(|&(s, us)| [s, us]).collect();
        let encoded: Vec<Vec<u8>> = redis::cmd("EVAL")
            .arg(&script)
            .arg(0)
            .arg(&args)
            .query_async(&mut con)
            .await
            .unwrap();
        for (&(s, us), bytes) in chunk.iter().zip(&encoded) {
            let expected = OsloDateTime::from_unix_micros(s * 1_000_000 + us).encode_ext();
            assert_eq!(bytes, &expected, "oslo_datetime({s}, {us})");
        }
    }
    assert!(times.len() > 10_000, "{} times", times.len());
}
