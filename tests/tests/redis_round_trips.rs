//! What one verb costs Redis, seen by the server itself: `MONITOR` on a
//! private redis-server (so no other client adds to what it shows) lists
//! each command a client sends, and the commands scripts run inside (as
//! `lua`), which are not round trips. In the steady state a claim is one
//! call of the board's Functions library (FCALL, Redis 7), whether it
//! finds a job or not, and whatever side work
//! (indexing, releases, recurring slots) is owed: that is maintenance's.

use std::time::Duration;

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;
use jobworker::{Board, NewJob};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const LONG: Duration = Duration::from_secs(300);

/// The commands clients sent while `call` ran (their names, in order), as
/// `MONITOR` shows them; commands run inside scripts are left out.
async fn commands_of<F, Fut>(server: &RedisServer, call: F) -> Vec<String>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let port = server.port().expect("a TCP server");
    let mut monitor = BufReader::new(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    monitor.get_mut().write_all(b"MONITOR\r\n").await.unwrap();
    let mut line = String::new();
    monitor.read_line(&mut line).await.unwrap();
    assert_eq!(line.trim_end(), "+OK", "MONITOR started");
    call().await;
    let marker = format!("end-of-call-{}", std::process::id());
    let mut con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: String = redis::cmd("ECHO")
        .arg(&marker)
        .query_async(&mut con)
        .await
        .unwrap();
    let mut sent = Vec::new();
    loop {
        line.clear();
        monitor.read_line(&mut line).await.unwrap();
        if line.contains(&marker) {
            return sent;
        }
        // `+<time> [<db> <client>] "<COMMAND>" "<arg>"…`
        let Some((client, command)) = line.split_once("] \"") else {
            continue;
        };
        if client.ends_with(" lua") {
            continue;
        }
        let name = command.split('"').next().unwrap_or_default();
        if name != "HELLO" && name != "CLIENT" {
            sent.push(name.to_owned());
        }
    }
}

#[tokio::test]
async fn a_steady_state_claim_is_one_round_trip() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let q = "steady";
    for i in 0..3 {
        board.post(q, NewJob::new(format!("j{i}"))).await.unwrap();
    }
    // The first claim of a board registers the queue (once per process).
    let first = board.claim(&[q], "w", LONG, 1).await.unwrap().remove(0);
    board.consume(first.lease).await.unwrap();

    let sent = commands_of(&server, || async {
        let claimed = board.claim(&[q], "w", LONG, 1).await.unwrap();
        assert_eq!(claimed.len(), 1, "the claim takes a job");
    })
    .await;
    assert_eq!(sent, ["FCALL"], "a claim that finds a job");

    let sent = commands_of(&server, || async {
        let claimed = board.claim(&[q], "w", LONG, 5).await.unwrap();
        assert_eq!(claimed.len(), 1, "the last job");
        let none = board.claim(&[q], "w", LONG, 5).await.unwrap();
        assert!(none.is_empty(), "the queue is empty");
    })
    .await;
    assert_eq!(sent, ["FCALL", "FCALL"], "two claims, the second finding nothing");
}

#[tokio::test]
async fn side_work_owed_leaves_a_claim_that_gets_jobs_at_one_round_trip() {
    use jobworker::codec::{encode_posting, CreatedOn, OsloDateTime, Posting};
    use jobworker::recurring::RecurringJob;
    use jobworker::schedule::Rule;
    use redis::AsyncCommands;

    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let (q, other) = ("busy", "downstream");
    for i in 0..3 {
        board.post(q, NewJob::new(format!("j{i}"))).await.unwrap();
    }
    let first = board.claim(&[q], "w", LONG, 1).await.unwrap().remove(0);
    board.consume(first.lease).await.unwrap();
    // A recurring slot due now, a release owed to another queue, and a job
    // taskflow posted that the index lacks: all maintenance's work.
    let hourly = Rule::every(Duration::from_secs(3600)).unwrap();
    board.recur(q, RecurringJob::new("hourly", hourly)).await.unwrap();
    let dep = board.post(q, NewJob::new("dep")).await.unwrap();
    let waiting = board
        .post(other, NewJob::new("waiting").depends_on_in(q, dep.clone()))
        .await
        .unwrap();
    let keys = board.keys(q).unwrap();
    let mut con = board.connection();
    let owed = format!("{other}\n{waiting}\n{q}\n{dep}");
    let _: () = con.sadd(keys.outbox(), owed).await.unwrap();
    let posting = Posting {
        uuid: "tf-1".into(),
        name: "from-taskflow".into(),
        priority: jobworker::Priority::NORMAL,
        created_on: CreatedOn::DateTime(OsloDateTime::from_unix_micros(0)),
        details: rmpv::Value::Map(vec![]),
        book: None,
        sequence: Some(99),
    };
    let _: () = con
        .hset(keys.listings(), "tf-1", encode_posting(&posting))
        .await
        .unwrap();

    let sent = commands_of(&server, || async {
        let claimed = board.claim(&[q], "w", LONG, 1).await.unwrap();
        assert_eq!(claimed.len(), 1, "the claim takes a job");
    })
    .await;
    assert_eq!(sent, ["FCALL"], "a claim that gets a job leaves the side work");
    assert_eq!(
        board.recurring(q).await.unwrap()[0].runs,
        0,
        "nothing was spawned"
    );
    let owed: usize = con.scard(keys.outbox()).await.unwrap();
    assert_eq!(owed, 1, "the release is still owed");
    let indexed: Option<f64> = con.zscore(keys.ready(), "tf-1").await.unwrap();
    assert_eq!(indexed, None, "taskflow's posting is not indexed yet");
}
