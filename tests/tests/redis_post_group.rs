//! Group commit of concurrent posts (`runtime/src/redis/post_group.rs`),
//! on a private redis-server: posts made at once share script calls, each
//! keeps its own reply, a failed call fails only its own posts, and a
//! caller that stops waiting strands nobody.

use std::time::Duration;

use futures_util::future::join_all;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, NewJob};

/// A private server, a board on it with queue `q` registered (one job
/// posted), and an admin connection.
async fn setup(q: &str) -> (RedisServer, RedisBoard, redis::aio::MultiplexedConnection) {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    board.post(q, job("first")).await.unwrap();
    (server, board, con)
}

async fn config_set(con: &mut redis::aio::MultiplexedConnection, key: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(key)
        .arg(value)
        .query_async(con)
        .await
        .unwrap();
}

/// Script calls the server ran so far (FCALL and EVALSHA in
/// commandstats).
async fn script_calls(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            l.strip_prefix("cmdstat_evalsha:")
                .or_else(|| l.strip_prefix("cmdstat_fcall:"))
        })
        .filter_map(|l| l.strip_prefix("calls=")?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

async fn listed(con: &mut redis::aio::MultiplexedConnection, queue: &str) -> usize {
    redis::cmd("HLEN")
        .arg(format!("jw:{{{queue}}}:listings"))
        .query_async(con)
        .await
        .unwrap()
}

fn job(id: &str) -> NewJob {
    NewJob::new("noop").id(JobId::from(id))
}

#[tokio::test]
async fn posts_made_at_once_share_calls_and_keep_their_own_replies() {
    let q = "grouped";
    let (_server, board, mut con) = setup(q).await;

    // One at a time: each post is its own call, sent at once.
    let before = script_calls(&mut con).await;
    for i in 0..10 {
        board.post(q, job(&format!("one-{i}"))).await.unwrap();
    }
    assert_eq!(
        script_calls(&mut con).await - before,
        10,
        "a lone post goes alone"
    );

    // 150 at once, two of them with the same id: the first goes alone,
    // the other 149 wait for it and go in two calls of at most 100.
    let before = script_calls(&mut con).await;
    let mut ids: Vec<String> = (0..148).map(|i| format!("many-{i}")).collect();
    ids.push("twin".into());
    ids.push("twin".into());
    let results = join_all(ids.iter().map(|id| board.post(q, job(id)))).await;
    assert_eq!(script_calls(&mut con).await - before, 3, "150 posts in 3 calls");
    for (id, r) in ids.iter().zip(&results).take(148) {
        assert_eq!(r.as_ref().unwrap().as_str(), id, "each post gets its own id back");
    }
    let twins = &results[148..];
    assert_eq!(twins.iter().filter(|r| r.is_ok()).count(), 1, "{twins:?}");
    assert!(
        twins.iter().any(|r| r.as_ref().is_err_and(|e| e.is_exists())),
        "{twins:?}"
    );
    assert_eq!(listed(&mut con, q).await, 1 + 10 + 149);

    // The jobs are claimable like any other.
    let claimed = board
        .claim(&[q], "w", Duration::from_secs(60), 1000)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 160);
}

#[tokio::test]
async fn a_failed_call_fails_its_own_posts_and_the_next_post_goes_through() {
    let q = "refused";
    let (_server, board, mut con) = setup(q).await;

    // Out of memory: the server refuses every write, so every post fails.
    config_set(&mut con, "maxmemory-policy", "noeviction").await;
    config_set(&mut con, "maxmemory", "1").await;
    let results = join_all((0..20).map(|i| board.post(q, job(&format!("oom-{i}"))))).await;
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");

    // Memory back: the queue is not left waiting for a call that failed.
    config_set(&mut con, "maxmemory", "0").await;
    let results = join_all((0..20).map(|i| board.post(q, job(&format!("ok-{i}"))))).await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(
        listed(&mut con, q).await,
        21,
        "nothing of the refused posts was written"
    );
}

#[tokio::test]
async fn a_caller_that_stops_waiting_strands_no_other_post() {
    let q = "dropped";
    let (_server, board, mut con) = setup(q).await;

    // The server holds scripts for a while: the lone post's caller gives
    // up on it while the others wait behind it.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("WRITE")
        .query_async(&mut con)
        .await
        .unwrap();
    let impatient = tokio::time::timeout(Duration::from_millis(100), board.post(q, job("impatient")));
    let patient = join_all((0..5).map(|i| board.post(q, job(&format!("patient-{i}")))));
    // Generous: the pause is 1.5 s; a stranded post would wait for ever.
    let patient = tokio::time::timeout(Duration::from_secs(60), patient);
    let (_, results) = tokio::join!(impatient, patient);
    let results = results.expect("the waiting posts were sent after the impatient caller left");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    // The impatient post had been sent: it is on the board all the same.
    assert_eq!(listed(&mut con, q).await, 1 + 1 + 5);
    board.post(q, job("after")).await.unwrap();
}
