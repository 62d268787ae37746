//! What the ZooKeeper board keeps for the statistics and the event stream,
//! against the test binary's shared server: the tally (`R/Q/.jw/tally`)
//! stays short while a board works, and a queue made before there was a
//! tally gets one without losing a count; events (`R/.jw/events`) are
//! written only while a stream listens.

use std::time::Duration;

use futures_util::StreamExt;
use jobworker::board::{Admin, Events};
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, NewJob};
use jobworker_tests::{shared_zookeeper, unique_queue, wait_until};

const LONG: Duration = Duration::from_secs(120);

/// A board under a root of its own, and that root.
async fn board() -> (ZooKeeperBoard, String) {
    let root = format!("/{}", unique_queue("zk-stats"));
    let o = ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()));
    let board = ZooKeeperBoard::connect(o)
        .await
        .expect("connect to the test ZooKeeper");
    (board, root)
}

/// Claims and consumes every job of `q`, `batch` at a time.
async fn drain(b: &ZooKeeperBoard, q: &str, batch: usize) {
    loop {
        let claimed = b.claim(&[q], "w-stats", LONG, batch).await.unwrap();
        if claimed.is_empty() {
            return;
        }
        for c in claimed {
            b.consume(c.lease).await.unwrap();
        }
    }
}

/// A board that only claims and consumes 1,200 jobs folds its tally as it
/// goes: few entries are left, and today's summary holds the rest.
#[tokio::test]
async fn a_working_board_keeps_the_tally_short() {
    const JOBS: usize = 1_200;
    let (b, root) = board().await;
    let q = unique_queue("fold");
    let jobs: Vec<NewJob> = (0..JOBS).map(|_| NewJob::new("t")).collect();
    b.post_many(&q, &jobs).await.unwrap();
    drain(&b, &q, 50).await;
    let client = shared_zookeeper().client().await;
    let tally = format!("{root}/{q}/.jw/tally");
    wait_until("the tally to be folded", Duration::from_secs(20), || {
        let (client, tally) = (client.clone(), tally.clone());
        async move { client.list_children(&tally).await.unwrap().len() < 500 }
    })
    .await;
    let days = client
        .list_children(&format!("{root}/{q}/.jw/stats"))
        .await
        .unwrap();
    assert_eq!(days.len(), 1, "today's summary: {days:?}");
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!((s.wait.count, s.run.count), (JOBS as u64, JOBS as u64));
}

/// A queue whose tally directory is missing (made by an older jobworker)
/// gets it back at the first ended claim, which is counted.
#[tokio::test]
async fn a_queue_without_a_tally_gets_one() {
    let (b, root) = board().await;
    let q = unique_queue("no-tally");
    for _ in 0..2 {
        b.post(&q, NewJob::new("t")).await.unwrap();
    }
    let client = shared_zookeeper().client().await;
    client
        .delete(&format!("{root}/{q}/.jw/tally"), None)
        .await
        .unwrap();
    drain(&b, &q, 1).await;
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!(s.run.count, 2, "{s:?}");
}

/// Event znodes under `root`.
async fn event_znodes(client: &zookeeper_client::Client, root: &str) -> usize {
    client
        .list_children(&format!("{root}/.jw/events"))
        .await
        .map_or(0, |c| c.len())
}

/// A board writes no event while nobody listens; a stream makes it write
/// them, and once the stream is dropped its listener goes and the board
/// stops again.
#[tokio::test]
async fn events_are_written_only_while_a_stream_listens() {
    let (b, root) = board().await;
    let q = unique_queue("quiet");
    b.post(&q, NewJob::new("unheard")).await.unwrap();
    drain(&b, &q, 1).await;
    let client = shared_zookeeper().client().await;
    assert_eq!(event_znodes(&client, &root).await, 0, "nobody listens");

    let connect = format!("{}{root}", shared_zookeeper().connect_string());
    let listener = ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
        .await
        .unwrap();
    let mut stream = listener.events(false).await.unwrap();
    // The board learns of the listener from a watch: post until heard.
    loop {
        b.post(&q, NewJob::new("heard")).await.unwrap();
        let next = tokio::time::timeout(Duration::from_millis(500), stream.next()).await;
        if let Ok(Some(e)) = next {
            assert_eq!((&e["event"], &e["queue"]), (&"posted".into(), &q.as_str().into()));
            break;
        }
    }
    assert!(event_znodes(&client, &root).await > 0);
    drop(stream);
    let listeners = format!("{root}/.jw/listeners");
    wait_until("the listener to go", Duration::from_secs(20), || {
        let (client, listeners) = (client.clone(), listeners.clone());
        async move { client.list_children(&listeners).await.unwrap().is_empty() }
    })
    .await;
    wait_until(
        "the board to stop writing events",
        Duration::from_secs(20),
        || {
            let (b, client, root, q) = (b.clone(), client.clone(), root.clone(), q.clone());
            async move {
                let before = event_znodes(&client, &root).await;
                b.post(&q, NewJob::new("unheard")).await.unwrap();
                // The board's own requests are answered in order: an event it
                // wrote for this post is there once this read returns.
                b.stats(&q, None).await.unwrap();
                event_znodes(&client, &root).await == before
            }
        },
    )
    .await;
}

/// A stream whose reader falls more than 10,000 events behind ends (its
/// reader misses events until it listens again, as a Redis subscriber past
/// its output buffer limit does) rather than hold ever more in memory.
#[tokio::test]
async fn a_stream_whose_reader_falls_far_behind_ends() {
    let (b, root) = board().await;
    let q = unique_queue("behind");
    let mut stream = b.events(false).await.unwrap();
    // The board learns of the listener from a watch: post until heard.
    loop {
        b.post(&q, NewJob::new("heard")).await.unwrap();
        if let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
            break;
        }
    }
    // Nothing read while events are written (each job its own post, its
    // own event znode) until the stream ends by itself: its listener goes.
    // (Posts go on past 10,000: a follower that lags more than 2,000
    // znodes behind loses the oldest to the trimming, not to its reader.)
    let client = shared_zookeeper().client().await;
    let listeners = format!("{root}/.jw/listeners");
    let deadline = std::time::Instant::now() + LONG;
    while !client.list_children(&listeners).await.unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the stream that fell behind did not end"
        );
        let batch = vec![NewJob::new("unread"); 1000];
        for r in b.post_many(&q, &batch).await.unwrap() {
            r.unwrap();
        }
    }
    let mut read = 0;
    loop {
        match tokio::time::timeout(LONG, stream.next()).await {
            Ok(Some(_)) => read += 1,
            Ok(None) => break,
            Err(_) => panic!("the stream neither ended nor yielded after {read} events"),
        }
    }
    assert!(read <= 10_000, "{read} events held");
}
