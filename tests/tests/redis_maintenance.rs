//! Maintenance on Redis: one elected runner per queue does the side work
//! claims no longer do (indexing taskflow's postings, releasing
//! dependents owed to other queues, spawning due recurring slots), with
//! nobody claiming (the election itself is in the feature suite).

use std::time::Duration;

use jobworker::codec::{encode_posting, CreatedOn, OsloDateTime, Posting};
use jobworker::maintenance::Maintainer;
use jobworker::recurring::RecurringJob;
use jobworker::redis::RedisBoard;
use jobworker::schedule::Rule;
use jobworker::{Board, JobState, NewJob, Priority};
use jobworker_tests::features::board_url;
use jobworker_tests::{unique_queue, wait_until};
use redis::AsyncCommands;

/// Generous: the services run every 250 ms or less, elections every
/// ttl / 3; this only bounds a broken build.
const DEADLINE: Duration = Duration::from_secs(30);
/// A short leadership, so that a crashed leader's term ends soon.
const TTL: Duration = Duration::from_secs(2);

async fn board() -> RedisBoard {
    RedisBoard::connect(&board_url())
        .await
        .expect("connect to the test redis-server")
}

fn runner(board: &RedisBoard, q: &str, who: &str) -> Maintainer {
    Maintainer::with_ttl(board.clone(), vec![q.to_owned()], who.to_owned(), TTL)
}

#[tokio::test]
async fn a_taskflow_posting_is_indexed_without_a_claim() {
    let b = board().await;
    let q = unique_queue("index");
    let keys = b.keys(&q).unwrap();
    let mut con = b.connection();
    // What taskflow's post writes: the sequence, then the posting.
    let seq: i64 = con.incr(&keys.keys[1], 1).await.unwrap();
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(&mut con).await.unwrap();
    let id = "5f0c6a52-1d43-4b7e-9a55-0c1e2d3f4a5b";
    let posting = Posting {
        uuid: id.to_owned(),
        name: "from-taskflow".to_owned(),
        priority: Priority::NORMAL,
        created_on: CreatedOn::DateTime(OsloDateTime::from_unix_micros(s * 1_000_000 + us)),
        details: rmpv::Value::Map(vec![]),
        book: None,
        sequence: Some(seq),
    };
    let _: () = con
        .hset(keys.listings(), id, encode_posting(&posting))
        .await
        .unwrap();
    let _: () = con
        .hset(keys.listings(), "garbage", b"\xc1\xc1".as_slice())
        .await
        .unwrap();

    let maintenance = runner(&b, &q, "indexer");
    wait_until("the posting is indexed", DEADLINE, || {
        let mut con = con.clone();
        let ready = keys.ready().to_owned();
        async move {
            con.zscore::<_, _, Option<f64>>(ready, id)
                .await
                .unwrap()
                .is_some()
        }
    })
    .await;
    // Indexing quarantines what it cannot decode.
    let quarantined: bool = con.hexists(keys.quarantine(), "garbage").await.unwrap();
    assert!(quarantined, "the undecodable posting is quarantined");
    let owned: bool = con.exists(keys.owned(id)).await.unwrap();
    assert!(!owned, "nobody claimed it");
    maintenance.stop().await;
    let claimed = b.claim(&[&q], "w", TTL, 1).await.unwrap();
    assert_eq!(claimed[0].name, "from-taskflow");
}

#[tokio::test]
async fn a_due_recurring_slot_is_spawned_without_a_claim() {
    let b = board().await;
    let q = unique_queue("recur");
    let hourly = Rule::every(Duration::from_secs(3600)).unwrap();
    b.recur(&q, RecurringJob::new("hourly", hourly)).await.unwrap();
    let maintenance = runner(&b, &q, "spawner");
    wait_until("the due slot is posted", DEADLINE, || async {
        b.job_count(&q).await.unwrap() == 1
    })
    .await;
    maintenance.stop().await;
    let listed = b.recurring(&q).await.unwrap();
    assert_eq!(listed[0].runs, 1, "one slot was due: {listed:?}");
}

#[tokio::test]
async fn a_release_owed_to_another_queue_arrives_without_a_claim_there() {
    let b = board().await;
    let q1 = unique_queue("owes");
    let q2 = unique_queue("owed");
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let d = b
        .post(&q2, NewJob::new("d").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Waiting);
    // A consumer that died between consuming `a` (which leaves the release
    // in q1's outbox) and resolving it: the entry stays owed.
    let entry = format!("{q2}\n{d}\n{q1}\n{a}");
    let _: () = b
        .connection()
        .sadd(b.keys(&q1).unwrap().outbox(), entry)
        .await
        .unwrap();
    let maintenance = runner(&b, &q1, "releaser");
    wait_until("the dependent is released", DEADLINE, || async {
        b.state(&q2, &d).await.unwrap() == JobState::Ready
    })
    .await;
    maintenance.stop().await;
    let outbox: usize = b.connection().scard(b.keys(&q1).unwrap().outbox()).await.unwrap();
    assert_eq!(outbox, 0, "the release is settled");
}

/// The queue's leader drops the records of claim calls whose leases ran
/// out (`NS:jw.took`: an empty claim does too, but a queue that never runs
/// dry has none) and keeps the others.
#[tokio::test]
async fn the_leader_drops_claim_records_whose_leases_ran_out() {
    use jobworker::board::Maintenance;
    let b = board().await;
    let q = unique_queue("took");
    let key = b.keys(&q).unwrap().took();
    let mut con = b.connection();
    let now = b.server_ms().await.unwrap();
    let _: () = con
        .zadd_multiple(&key, &[(now - 1_000, "gone"), (now + 600_000, "live")])
        .await
        .unwrap();
    assert!(b.elect(&q, "leader", Duration::from_secs(5)).await.unwrap());
    let left: Vec<String> = con.zrange(&key, 0, -1).await.unwrap();
    assert_eq!(left, ["live"]);
    // And when it renews its leadership.
    let _: () = con.zadd(&key, "gone", now - 1_000).await.unwrap();
    assert!(b.elect(&q, "leader", Duration::from_secs(5)).await.unwrap());
    let left: Vec<String> = con.zrange(&key, 0, -1).await.unwrap();
    assert_eq!(left, ["live"]);
}
