//! The board's Lua as a Redis Functions library (FCALL, Redis 7) and as
//! scripts (EVALSHA, Redis 6.2 and clusters): both run the same jobs on
//! one server, a server that refuses the library gets the scripts, and a
//! full server refuses a call whole, a durability short of replicas keeps
//! the library. (A flushed library loaded again is in
//! `redis_wire.rs`; that the library compiles, in `redis_scripts.rs`.)

use std::time::Duration;

use jobworker::board::ClaimRequest;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, JobState, NewJob};
use jobworker_tests::features::claimed_outside;

const LEASE: Duration = Duration::from_secs(60);

/// The sorted set of noted library loads (`runtime/src/redis/old_libraries.rs`).
const LOADS: &str = "jobworker:libraries";

async fn board(url: &str, functions: bool) -> RedisBoard {
    RedisBoard::with_options(RedisOptions::new(url).functions(functions))
        .await
        .unwrap()
}

/// Calls of `command` (`fcall`, `evalsha`) the server ran so far.
async fn calls(server: &RedisServer, command: &str) -> u64 {
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut con)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

async fn config_set(server: &RedisServer, name: &str, value: &str) {
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async(&mut con)
        .await
        .unwrap();
}

/// A board with the library and one with scripts (an old worker, or one
/// with `JOBWORKER_REDIS_FUNCTIONS=0`) share a queue: each takes up what
/// the other did.
#[tokio::test]
async fn the_library_and_the_scripts_share_jobs() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let library = board(&server.url(), true).await;
    let scripts = board(&server.url(), false).await;
    let q = "shared";
    let a = scripts.post(q, NewJob::new("a")).await.unwrap();
    let b = library.post(q, NewJob::new("b")).await.unwrap();
    let first = library.claim(&[q], "new", LEASE, 1).await.unwrap().remove(0);
    assert_eq!(
        first.lease.job(),
        &a,
        "the library claims what the scripts posted"
    );
    let second = scripts.claim(&[q], "old", LEASE, 1).await.unwrap().remove(0);
    assert_eq!(second.lease.job(), &b);
    scripts.extend(&first.lease, LEASE).await.unwrap();
    scripts.consume(first.lease).await.unwrap();
    library.consume(second.lease).await.unwrap();
    assert_eq!(library.state(q, &a).await.unwrap(), JobState::Completed);
    assert_eq!(scripts.state(q, &b).await.unwrap(), JobState::Completed);
    assert!(calls(&server, "fcall").await >= 3, "the library board used FCALL");
    assert!(
        calls(&server, "evalsha").await >= 4,
        "the scripts board used EVALSHA"
    );
}

/// A user whose ACL forbids FUNCTION (as some managed services do) gets a
/// board that sends scripts, not an error.
#[tokio::test]
async fn a_server_that_refuses_the_library_gets_scripts() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg(
            &[
                "SETUSER",
                "nofunctions",
                "on",
                ">pw",
                "~*",
                "&*",
                "+@all",
                "-function",
            ][..],
        )
        .query_async(&mut con)
        .await
        .unwrap();
    let port = server.port().expect("a TCP server");
    let board = board(&format!("redis://nofunctions:pw@127.0.0.1:{port}/0"), true).await;
    let q = "acl";
    let id = board.post(q, NewJob::new("a")).await.unwrap();
    let claimed = board.claim(&[q], "w", LEASE, 1).await.unwrap().remove(0);
    board.consume(claimed.lease).await.unwrap();
    assert_eq!(board.state(q, &id).await.unwrap(), JobState::Completed);
    assert_eq!(calls(&server, "fcall").await, 0, "no FCALL without a library");
    assert!(calls(&server, "evalsha").await >= 3);
}

/// Past `maxmemory` (no eviction), a post is refused with a clear error
/// and writes nothing, while a worker can still claim and consume, and
/// its claim of the empty queue registers it for a hand-off, with the
/// library as with scripts.
#[tokio::test]
async fn a_full_server_refuses_posts_and_still_drains() {
    for functions in [true, false] {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let board = board(&server.url(), functions).await;
        let q = "full";
        let first = board.post(q, NewJob::new("a")).await.unwrap();
        let second = board.post(q, NewJob::new("b")).await.unwrap();
        // A board's first claim of a queue registers it (not a script).
        let held = board.claim(&[q], "w", LEASE, 1).await.unwrap().remove(0);
        config_set(&server, "maxmemory", "1").await;
        let refused = board.post(q, NewJob::new("c")).await.unwrap_err();
        assert!(refused.to_string().contains("OOM"), "{refused}");
        assert_eq!(
            board.job_count(q).await.unwrap(),
            2,
            "the refused post wrote nothing"
        );
        let claimed = board.claim(&[q], "w", LEASE, 1).await.unwrap().remove(0);
        board.extend(&claimed.lease, LEASE).await.unwrap();
        board.consume(claimed.lease).await.unwrap();
        board.consume(held.lease).await.unwrap();
        let idle = board
            .claim_with(&ClaimRequest {
                queues: &[q],
                who: "idle",
                expiry: LEASE,
                count: 1,
                holding: 0,
                hand_off: Some(Duration::from_secs(1)),
            })
            .await
            .unwrap();
        assert!(idle.is_empty(), "functions: {functions}");
        // Reading a job's state is a MULTI, which a full server refuses.
        config_set(&server, "maxmemory", "0").await;
        for id in [first, second] {
            assert_eq!(
                board.state(q, &id).await.unwrap(),
                JobState::Completed,
                "functions: {functions}"
            );
        }
    }
}

/// Past `maxmemory`, jobs claimed outside jobworker (taskflow) that are
/// still lean (no job hash yet) can be given back and consumed through a
/// lease without a token, with the library as with scripts: those verbs
/// free before they add (a script without flags is refused only when its
/// first write adds data).
#[tokio::test]
async fn a_full_server_takes_back_and_consumes_jobs_claimed_outside() {
    for functions in [true, false] {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let board = board(&server.url(), functions).await;
        let q = "full-outside";
        let back = board.post(q, NewJob::new("back")).await.unwrap();
        let done = board.post(q, NewJob::new("done")).await.unwrap();
        let given_back = claimed_outside(&board, q, &back, "taskflow").await;
        let consumed = claimed_outside(&board, q, &done, "taskflow").await;
        config_set(&server, "maxmemory", "1").await;
        board
            .abandon(given_back, jobworker::Abandon::Release)
            .await
            .unwrap_or_else(|e| panic!("functions: {functions}: {e}"));
        board
            .consume(consumed)
            .await
            .unwrap_or_else(|e| panic!("functions: {functions}: {e}"));
        config_set(&server, "maxmemory", "0").await;
        let (back, done) = (
            board.show(q, &back).await.unwrap(),
            board.show(q, &done).await.unwrap(),
        );
        assert_eq!(
            (back.name.as_str(), back.state),
            ("back", JobState::Ready),
            "functions: {functions}"
        );
        assert_eq!(
            (done.name.as_str(), done.state),
            ("done", JobState::Completed),
            "functions: {functions}"
        );
    }
}

/// The library builds a queue's keys from its namespace and keeps them
/// for the next calls, up to 1,000 queues, then starts afresh: through
/// more queues than that, every job lands in its own queue's keys, and a
/// queue first seen before the reset still works after it.
#[tokio::test]
async fn the_library_keys_each_queue_by_its_own_namespace() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let library = board(&server.url(), true).await;
    let queues: Vec<String> = (0..1_100).map(|i| format!("q{i}")).collect();
    for q in &queues {
        library.post(q, NewJob::new(q.as_str())).await.unwrap();
    }
    let first = library.post("q0", NewJob::new("again")).await.unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    for (i, q) in queues.iter().enumerate() {
        let keys = library.keys(q).unwrap();
        let listed: usize = redis::cmd("HLEN")
            .arg(keys.listings())
            .query_async(&mut con)
            .await
            .unwrap();
        let ready: usize = redis::cmd("ZCARD")
            .arg(keys.ready())
            .query_async(&mut con)
            .await
            .unwrap();
        let want = if i == 0 { 2 } else { 1 };
        assert_eq!(
            (listed, ready),
            (want, want),
            "queue {q}'s own keys hold its jobs"
        );
    }
    let claimed = library.claim(&["q0"], "w", LEASE, 2).await.unwrap();
    assert_eq!(claimed.len(), 2);
    for c in claimed {
        assert_eq!(c.lease.queue(), "q0");
        library.consume(c.lease).await.unwrap();
    }
    assert_eq!(library.state("q0", &first).await.unwrap(), JobState::Completed);
    assert!(
        calls(&server, "fcall").await >= 1_103,
        "the board used the library"
    );
}

/// A worker that connects while the server is full (a worker the
/// supervisor started again, a deploy during an incident) finds the
/// library the other workers loaded and uses it: FUNCTION LOAD itself is
/// refused past `maxmemory`, and the scripts it fell back to before ran
/// slower and without the library's leave to drain a full server. With no
/// library there, it gets the scripts, which drain it too.
#[tokio::test]
async fn a_board_connecting_to_a_full_server_uses_the_library_there() {
    for loaded in [true, false] {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let first = board(&server.url(), loaded).await;
        let q = "full";
        let ids = [
            first.post(q, NewJob::new("a")).await.unwrap(),
            first.post(q, NewJob::new("b")).await.unwrap(),
        ];
        config_set(&server, "maxmemory", "1").await;
        let (fcalls, evalshas) = (calls(&server, "fcall").await, calls(&server, "evalsha").await);
        let late = board(&server.url(), true).await;
        for _ in &ids {
            let claimed = late.claim(&[q], "late", LEASE, 1).await.unwrap().remove(0);
            late.extend(&claimed.lease, LEASE).await.unwrap();
            late.consume(claimed.lease).await.unwrap();
        }
        let (fcalls, evalshas) = (
            calls(&server, "fcall").await - fcalls,
            calls(&server, "evalsha").await - evalshas,
        );
        if loaded {
            assert_eq!(evalshas, 0, "the late board fell back to scripts");
            assert!(fcalls >= 6, "{fcalls} FCALLs");
        } else {
            assert!(evalshas >= 6, "{evalshas} EVALSHAs");
        }
        config_set(&server, "maxmemory", "0").await;
        for id in &ids {
            assert_eq!(late.state(q, id).await.unwrap(), JobState::Completed);
        }
    }
}

/// With a durability no replica can meet, a board connects (its reads
/// wait for no replica) and uses the library it loaded (the load ran on
/// the master; only its acknowledgement fell short). A call is reported
/// as short of replicas but ran on the master, and a call the server
/// refuses reports the server's error (here OOM: nothing was written),
/// not the missing acknowledgement.
#[tokio::test]
async fn a_board_short_of_replicas_uses_its_library_and_reports_refusals_as_such() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let mut opts = RedisOptions::new(server.url());
    opts.durability = Some("wait:1:50".parse().unwrap());
    let short = RedisBoard::with_options(opts).await.unwrap();
    let plain = board(&server.url(), true).await;
    let q = "short";
    let id = plain.post(q, NewJob::new("a")).await.unwrap();
    let unacknowledged = short.claim(&[q], "w", LEASE, 1).await.unwrap_err();
    assert!(
        unacknowledged.to_string().contains("replicas"),
        "{unacknowledged}"
    );
    assert_eq!(
        plain.state(q, &id).await.unwrap(),
        JobState::Claimed,
        "the claim ran on the master"
    );
    let shown = short.show(q, &id).await.unwrap();
    assert_eq!(
        shown.state,
        JobState::Claimed,
        "a read answers while the replicas lag"
    );
    assert_eq!(
        calls(&server, "evalsha").await,
        0,
        "the board fell back to scripts"
    );
    config_set(&server, "maxmemory", "1").await;
    let refused = short.post(q, NewJob::new("b")).await.unwrap_err();
    assert!(refused.to_string().contains("OOM"), "{refused}");
    config_set(&server, "maxmemory", "0").await;
    assert_eq!(
        plain.job_count(q).await.unwrap(),
        1,
        "the refused post wrote nothing"
    );
}

/// The names of the Functions libraries on `server`, sorted.
async fn libraries(con: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let listed: Vec<std::collections::HashMap<String, redis::Value>> =
        redis::cmd("FUNCTION").arg("LIST").query_async(con).await.unwrap();
    let mut names: Vec<String> = listed
        .iter()
        .map(|l| redis::from_redis_value_ref(&l["library_name"]).unwrap())
        .collect();
    names.sort();
    names
}

/// Loads a one-function library named `name` (another build's, as far as
/// a board can tell).
async fn load_fake_library(con: &mut redis::aio::MultiplexedConnection, name: &str) {
    let text = format!("#!lua name={name}\nredis.register_function('{name}_f', function() return 1 end)");
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(text)
        .query_async(con)
        .await
        .unwrap();
}

/// Now, in ms since the epoch (the clock the notes use).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// At connect a board deletes the noted libraries of older builds but
/// the two noted last before its own (a rolling upgrade's other build)
/// and those noted within a day (builds running side by side), and leaves
/// alone libraries never noted and other libraries; a build
/// whose library was deleted loads it again at its next call and is noted
/// anew.
#[tokio::test]
async fn a_board_deletes_the_libraries_of_older_builds() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let running = board(&server.url(), true).await;
    let ours = libraries(&mut con).await.remove(0);
    let (old, unnoted) = (
        [
            "jobworker_old2",
            "jobworker_old3",
            "jobworker_old4",
            "jobworker_old5",
        ],
        "jobworker_old1",
    );
    for name in old.iter().chain([&unnoted, &"mine"]) {
        load_fake_library(&mut con, name).await;
    }
    // Noted a minute, an hour, two hours and two days ago: old4 is beyond
    // the three noted last but younger than a day.
    let now = now_ms();
    let mut note = redis::cmd("ZADD");
    note.arg(LOADS);
    for (name, ago) in old.iter().zip([60_000, 3_600_000, 7_200_000, 2 * 86_400_000]) {
        note.arg(now - ago).arg(name);
    }
    let _: () = note.query_async(&mut con).await.unwrap();
    let _late = board(&server.url(), true).await;
    let mut kept = vec![
        ours.clone(),
        unnoted.into(),
        "jobworker_old2".into(),
        "jobworker_old3".into(),
        "jobworker_old4".into(),
        "mine".into(),
    ];
    kept.sort();
    assert_eq!(libraries(&mut con).await, kept);
    let noted: Vec<String> = redis::cmd("ZRANGE")
        .arg(LOADS)
        .arg(0)
        .arg(-1)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(
        noted,
        ["jobworker_old4", "jobworker_old3", "jobworker_old2", &ours]
    );
    // Another build deletes ours: the running board loads it again.
    let _: String = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg(&ours)
        .query_async(&mut con)
        .await
        .unwrap();
    let _: () = redis::cmd("ZREM")
        .arg(LOADS)
        .arg(&ours)
        .query_async(&mut con)
        .await
        .unwrap();
    running.post("q", NewJob::new("a")).await.unwrap();
    assert!(libraries(&mut con).await.contains(&ours));
    let score: Option<u64> = redis::cmd("ZSCORE")
        .arg(LOADS)
        .arg(&ours)
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(score.is_some(), "the load again is noted");
}

/// Libraries are the server's, the notes each database's: a board on
/// database 1 deletes none of the libraries noted in database 0, and a
/// board on database 0 deletes the old one noted there.
#[tokio::test]
async fn a_board_deletes_only_the_libraries_noted_in_its_own_database() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let old = "jobworker_old_in_db0";
    load_fake_library(&mut con, old).await;
    let now = now_ms();
    // In database 0: the old library two days ago, three others since.
    let mut note = redis::cmd("ZADD");
    note.arg(LOADS).arg(now - 2 * 86_400_000).arg(old);
    for (i, name) in ["jobworker_a", "jobworker_b", "jobworker_c"].iter().enumerate() {
        note.arg(now - 60_000 * (i as u64 + 1)).arg(name);
    }
    let _: () = note.query_async(&mut con).await.unwrap();

    let url = server.url();
    let db1 = match url.strip_prefix("unix://") {
        Some(_) => format!("{url}?db=1"),
        None => format!("{}/1", url.trim_end_matches('/')),
    };
    let _db1 = board(&db1, true).await;
    assert!(libraries(&mut con).await.contains(&old.to_owned()));
    let _db0 = board(&url, true).await;
    assert!(!libraries(&mut con).await.contains(&old.to_owned()));
    let in_db1: Vec<String> = {
        let client = redis::Client::open(db1.as_str()).unwrap();
        let mut con1 = client.get_multiplexed_async_connection().await.unwrap();
        redis::cmd("ZRANGE")
            .arg(LOADS)
            .arg(0)
            .arg(-1)
            .query_async(&mut con1)
            .await
            .unwrap()
    };
    assert_eq!(
        in_db1.len(),
        1,
        "database 1 notes only its own board's: {in_db1:?}"
    );
}
