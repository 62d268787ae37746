//! What the Redis board keeps, against a real server: the stored
//! configuration (history limits picked up by new boards) and bounded
//! memory over 200,000 jobs.

use std::time::Duration;

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, JobState, ListFilter, NewJob};
use jobworker_tests::features::*;
use jobworker_tests::unique_queue;

#[tokio::test]
async fn config_is_validated_stored_and_picked_up_by_new_boards() {
    let prefix = unique_queue("cfg");
    let b = private_prefix_board(&prefix).await;
    assert!(b.config().await.unwrap().is_empty());
    for (key, value) in [
        ("history-count", "3"),
        ("history-age", "3600"),
        ("expiry", "30"),
        ("grace", "2.5"),
    ] {
        b.set_config(key, Some(value)).await.unwrap();
    }
    for (key, value) in [
        ("bogus", "1"),
        ("history-count", "-1"),
        ("history-count", "lots"),
        ("history-age", "0"),
        ("history-age", "inf"),
        ("expiry", "abc"),
        ("grace", "-2"),
    ] {
        let e = b.set_config(key, Some(value)).await.unwrap_err();
        assert!(e.is_invalid(), "{key}={value}: {e}");
    }
    assert!(b
        .set_config("bogus", None)
        .await
        .unwrap_err()
        .message()
        .contains("history-count"));
    b.set_config("grace", None).await.unwrap();
    let expected: std::collections::HashMap<String, String> =
        [("history-count", "3"), ("history-age", "3600"), ("expiry", "30")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    assert_eq!(b.config().await.unwrap(), expected);

    // A new board reads the stored history limits...
    let fresh = private_prefix_board(&prefix).await;
    assert_eq!(fresh.options().history_count, 3);
    assert_eq!(fresh.options().history_age, Duration::from_secs(3600));
    // ...unless the caller chose its own.
    let mut opts = RedisOptions::new(board_url());
    opts.prefix = prefix.clone();
    opts.history_count = 10;
    let own = RedisBoard::with_options(opts).await.unwrap();
    assert_eq!(own.options().history_count, 10);
    assert_eq!(own.options().history_age, Duration::from_secs(3600));
    // Another prefix has its own configuration.
    assert_eq!(board().await.options().history_count, 50_000);

    // And the new board keeps that many completed jobs.
    let q = unique_queue("cfg-history");
    for _ in 0..12 {
        fresh.post(&q, NewJob::new("h")).await.unwrap();
        claim_and_consume(&fresh, &q).await;
    }
    let kept = fresh
        .list(&q, ListFilter::State(JobState::Completed), page(100))
        .await
        .unwrap()
        .len();
    assert!((3..=4).contains(&kept), "history holds {kept} jobs, configured 3");
}

async fn used_memory(con: &mut jobworker::redis::RedisConnection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in INFO memory: {info}"))
}

async fn dbsize(con: &mut jobworker::redis::RedisConnection) -> usize {
    redis::cmd("DBSIZE").query_async(con).await.unwrap()
}

/// 200,000 jobs through a board with `history_count` 1000 leave it about as
/// small as it started: nothing per job outlives the bounded history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_bounded_over_200k_jobs() {
    const JOBS: usize = 200_000;
    const ROUND: usize = 20_000;
    const POST_BATCH: usize = 2_000;
    const HISTORY: usize = 1000;
    let server = RedisServer::start(ServerOptions::default()).expect("start a private redis-server");
    let mut opts = RedisOptions::new(server.url());
    opts.history_count = HISTORY;
    let b = RedisBoard::with_options(opts).await.unwrap();
    let q = "bounded";
    let mut con = b.connection();
    // Load the scripts and create the queue's long-lived keys.
    b.post(q, NewJob::new("warm-up")).await.unwrap();
    claim_and_consume(&b, q).await;
    let empty = used_memory(&mut con).await;
    let empty_keys = dbsize(&mut con).await;

    let start = std::time::Instant::now();
    let (mut posted, mut consumed, mut peak) = (0, 0, 0);
    let mut drained = Vec::new();
    while posted < JOBS {
        // Post a round in batches, then drain it with claims of 1000.
        for _ in 0..ROUND / POST_BATCH {
            let jobs: Vec<NewJob> = (0..POST_BATCH)
                .map(|i| NewJob::new("m").args_value(rmpv::Value::from((posted + i) as u64)))
                .collect();
            let results = b.post_many(q, &jobs).await.unwrap();
            assert!(results.iter().all(|r| r.is_ok()));
            posted += POST_BATCH;
        }
        peak = peak.max(used_memory(&mut con).await);
        loop {
            let got = b.claim(&[q], "mem", LONG, 1000).await.unwrap();
            if got.is_empty() {
                break;
            }
            let leases: Vec<_> = got.into_iter().map(|c| c.lease).collect();
            let n = leases.len();
            let results = b.consume_many(leases).await;
            assert!(results.iter().all(|r| r.is_ok()));
            consumed += n;
        }
        drained.push(used_memory(&mut con).await);
    }
    let elapsed = start.elapsed();
    assert_eq!(consumed, JOBS);
    assert_eq!(b.job_count(q).await.unwrap(), 0);
    let end = used_memory(&mut con).await;
    let end_keys = dbsize(&mut con).await;
    let history = b
        .list(q, ListFilter::State(JobState::Completed), page(1_000_000))
        .await
        .unwrap()
        .len();
    println!(
        "bounded memory: empty board used_memory {empty} B ({empty_keys} keys); after {JOBS} jobs \
         {end} B ({end_keys} keys, {history} completed kept); drained after each {ROUND} jobs: \
         {drained:?} B; peak with {ROUND} queued {peak} B; {elapsed:.1?}"
    );
    assert!(
        history <= HISTORY + 10,
        "completed history holds {history} jobs, limit {HISTORY}"
    );
    assert!(
        end_keys <= empty_keys + 2 * (HISTORY + 10),
        "{end_keys} keys left (empty board: {empty_keys}): per-job keys leak"
    );
    // Measured: about 2.1 MB empty and 3.4-3.9 MB after (1000 completed
    // jobs kept, about 650 B each, plus up to 0.5 MB of client buffers); a
    // leak of even 16 B per job would add 3 MB.
    let bound = empty + 3 * 1024 * 1024;
    assert!(
        end < bound,
        "used_memory {end} B after {JOBS} jobs, empty {empty} B, bound {bound} B"
    );
    // Once the history is full, more jobs cost nothing more (client
    // buffers move used_memory by up to about 0.5 MB between rounds).
    let (first, last) = (drained[0], drained[drained.len() - 1]);
    assert!(
        last < first + 1024 * 1024,
        "used_memory grew from {first} B after {ROUND} jobs to {last} B after {JOBS}"
    );
}
